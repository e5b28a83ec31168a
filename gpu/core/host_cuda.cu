// Pinned host memory, allocated on the device's worker (where its CUDA
// context is current) and portable to every GPU of the process.
//
// Pinning is slow (cudaHostAlloc and cudaFreeHost take milliseconds for
// tens of MB, and the free synchronises the device), and k-space buffers
// come and go per slice: freed blocks are kept in a small process-wide
// cache and handed out again for a request they fit without wasting more
// than half of themselves. Each block carries its size in a header before
// the memory handed out. Cached blocks live until the process ends.
#include <mutex>

#include "cuda_internal.cuh"
#include "host_impl.h"

namespace {

constexpr size_t HEADER = 64;                 // keeps the memory 64-byte aligned
constexpr int CACHE_BLOCKS = 8;
constexpr size_t CACHE_BYTES = size_t(1) << 30; // at most 1 GiB kept

struct cached {
  char *base;
  size_t size; // usable bytes after the header
};

std::mutex cache_lock;
cached cache[CACHE_BLOCKS];
int ncached;
size_t cached_bytes;

// A cached block for `bytes`, or nullptr.
char *take_cached(size_t bytes) {
  std::lock_guard<std::mutex> g(cache_lock);
  int best = -1;
  for (int i = 0; i < ncached; i++)
    if (cache[i].size >= bytes && cache[i].size / 2 <= bytes &&
        (best < 0 || cache[i].size < cache[best].size))
      best = i;
  if (best < 0)
    return nullptr;
  char *base = cache[best].base;
  cached_bytes -= cache[best].size;
  cache[best] = cache[--ncached];
  return base;
}

// Keeps the block for later; false when the cache is full.
bool keep(char *base, size_t size) {
  std::lock_guard<std::mutex> g(cache_lock);
  if (ncached == CACHE_BLOCKS || cached_bytes + size > CACHE_BYTES)
    return false;
  cache[ncached++] = {base, size};
  cached_bytes += size;
  return true;
}

} // namespace

int mr_host_cuda_alloc(mr_device *dev, size_t bytes, void **out, mr_err *err) {
  char *base = take_cached(bytes);
  if (base != nullptr) {
    *out = base + HEADER;
    return 0;
  }
  return mr_on_worker(dev, err, [&] {
    void *p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, HEADER + (bytes > 0 ? bytes : 1), cudaHostAllocPortable);
    if (e != cudaSuccess) {
      *out = nullptr;
      mr_cuda_fail(e, "cudaHostAlloc", __FILE__, __LINE__, err);
      // Host memory, not device memory, ran out.
      return mr_err_set(err, MR_ENOMEM, "cannot pin %zu bytes of host memory: %s", bytes,
                        cudaGetErrorName(e));
    }
    *reinterpret_cast<size_t *>(p) = bytes > 0 ? bytes : 1;
    *out = static_cast<char *>(p) + HEADER;
    return 0;
  });
}

void mr_host_cuda_free(mr_device *dev, void *p) {
  char *base = static_cast<char *>(p) - HEADER;
  if (keep(base, *reinterpret_cast<size_t *>(base)))
    return;
  mr_on_worker(dev, nullptr, [&] {
    cudaFreeHost(base);
    return 0;
  });
}
