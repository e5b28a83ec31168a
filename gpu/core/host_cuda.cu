// Pinned host memory, allocated on the device's worker (where its CUDA
// context is current) and portable to every GPU of the process.
//
// Pinning is slow, and it stalls every lane of every GPU: cudaHostAlloc
// took 20 ms for a 32-coil slice buffer and holds a driver lock meanwhile,
// and cudaFreeHost synchronises the device. K-space buffers come and go
// per slice, many sessions at once (16 GRAPPA series on one H100: 159
// pinnings in 4 s, a third of the lanes' time, and every other lane's
// event records and pointer queries waiting behind them at 28-56 us a
// call; docs/benchmarks.md). So freed blocks are kept in a process-wide
// cache and handed out again for a request they fit without wasting more
// than half of themselves. A kept block is spare memory of the server's
// budget (budget.h): kept only while it fits beside what the sessions
// hold, and freed when a reservation needs the room; at most CACHE_BLOCKS
// blocks and CACHE_BYTES. Each block carries its size in a header before
// the memory handed out.
#include <mutex>

#include "budget.h"
#include "cuda_internal.cuh"
#include "host_impl.h"

namespace {

constexpr size_t HEADER = 64;                   // keeps the memory 64-byte aligned
// 64 were too few: 16 GRAPPA series on 2 H100s still spent a fifth of the
// server's CPU samples pinning and unpinning (issue 25), each session's
// stages holding several slices' buffers at once. The bytes and the budget
// bound what is kept; the count only the cache's array.
constexpr int CACHE_BLOCKS = 512;
constexpr size_t CACHE_BYTES = size_t(8) << 30; // at most 8 GiB kept

struct cached {
  char *base;
  size_t size; // usable bytes after the header
  mr_device *dev; // whose worker frees it
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
  mr_budget_drop_spare(cache[best].size); // its new user's reservation counts it now
  cache[best] = cache[--ncached];
  return base;
}

void free_pinned(mr_device *dev, char *base) {
  mr_on_worker(dev, nullptr, [&] {
    cudaFreeHost(base);
    return 0;
  });
}

// Frees every kept block: the budget's reclaim function for this cache.
void reclaim() {
  cached taken[CACHE_BLOCKS];
  int n;
  {
    std::lock_guard<std::mutex> g(cache_lock);
    n = ncached;
    for (int i = 0; i < n; i++)
      taken[i] = cache[i];
    ncached = 0;
    cached_bytes = 0;
  }
  for (int i = 0; i < n; i++) {
    free_pinned(taken[i].dev, taken[i].base);
    mr_budget_drop_spare(taken[i].size);
  }
}

// Keeps the block for later; false when the cache or the budget is full.
bool keep(mr_device *dev, char *base, size_t size) {
  std::lock_guard<std::mutex> g(cache_lock);
  if (ncached == CACHE_BLOCKS || cached_bytes + size > CACHE_BYTES ||
      mr_budget_keep_spare(size) != 0)
    return false;
  mr_budget_add_reclaim(reclaim);
  cache[ncached++] = {base, size, dev};
  cached_bytes += size;
  return true;
}

} // namespace

int mr_host_cuda_kept(size_t *bytes) {
  std::lock_guard<std::mutex> g(cache_lock);
  if (bytes != nullptr)
    *bytes = cached_bytes;
  return ncached;
}

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
  if (!keep(dev, base, *reinterpret_cast<size_t *>(base)))
    free_pinned(dev, base);
}
