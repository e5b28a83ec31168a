// Buffers on a GPU: memory from the worker's stream-ordered pool, copies
// through the pinned staging slots.
#include <atomic>

#include "buf_impl.h"
#include "cuda_internal.cuh"

int mr_buf_cuda_alloc(mr_buf *buf, mr_err *err) {
  return mr_on_worker(buf->dev, err, [&] {
    return mr_cuda_alloc(mr_device_cuda(buf->dev), &buf->data, buf->bytes, err);
  });
}

void mr_buf_cuda_free(mr_buf *buf) {
  mr_on_worker(buf->dev, nullptr, [&] {
    mr_cuda_free(mr_device_cuda(buf->dev), buf->data);
    return 0;
  });
}

int mr_buf_cuda_copy_up(mr_device *dev, void *dst, const void *host, size_t bytes, mr_err *err) {
  return mr_on_worker(dev, err, [&] { return mr_cuda_upload(dev, dst, host, bytes, err); });
}

int mr_buf_cuda_copy_down(mr_device *dev, void *host, const void *src, size_t bytes, mr_err *err) {
  return mr_on_worker(dev, err, [&] { return mr_cuda_download(dev, host, src, bytes, err); });
}

namespace {

constexpr int PEERS = 64; // CUDA device numbers with a peer state kept
// Per (from, to): 0 not tried yet, 1 from may reach to's pool, -1 not.
std::atomic<signed char> peer_state[PEERS][PEERS];

// Lets device `from` (current on this thread) reach the allocations of
// `to`'s memory pool, where the GPUs can (NVLink or PCIe peer to peer):
// pool memory follows cudaMemPoolSetAccess, not cudaDeviceEnablePeerAccess.
// Without it a copy between them still works, staged by the driver.
void reach_peer(int from, int to) {
  if (from == to || from >= PEERS || to >= PEERS || peer_state[from][to].load() != 0)
    return;
  int can = 0;
  cudaMemPool_t pool;
  bool ok = cudaDeviceCanAccessPeer(&can, from, to) == cudaSuccess && can &&
            cudaDeviceGetDefaultMemPool(&pool, to) == cudaSuccess;
  if (ok) {
    cudaMemAccessDesc d = {};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = from;
    d.flags = cudaMemAccessFlagsProtReadWrite;
    ok = cudaMemPoolSetAccess(pool, &d, 1) == cudaSuccess;
  }
  cudaGetLastError(); // a refusal is not an error of the copy
  peer_state[from][to].store(ok ? 1 : -1);
}

} // namespace

// On src's lane, after the work queued there; waited for.
int mr_buf_cuda_copy_peer(mr_device *src_dev, const void *src, mr_device *dst_dev, void *dst,
                          size_t bytes, mr_err *err) {
  return mr_on_worker(src_dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(src_dev);
    int from = mr_device_ordinal(src_dev), to = mr_device_ordinal(dst_dev);
    reach_peer(from, to);
    MR_CU(cudaMemcpyPeerAsync(dst, to, src, from, bytes, c->compute));
    MR_CU(cudaStreamSynchronize(c->compute));
    return 0;
  });
}

// Pinned rows go up as one 2D transfer; pageable ones row by row through
// the staging slots.
int mr_buf_cuda_upload_rows(mr_buf *buf, size_t at, size_t pitch, const void *src, size_t src_pitch,
                            size_t width, size_t rows, int wait, mr_err *err) {
  return mr_on_worker(buf->dev, err, [&] {
    char *dst = static_cast<char *>(buf->data) + at;
    if (!mr_cuda_is_pinned(src)) {
      int rc = 0;
      for (size_t r = 0; rc == 0 && r < rows; r++)
        rc = mr_cuda_upload(buf->dev, dst + r * pitch,
                            static_cast<const char *>(src) + r * src_pitch, width, err);
      return rc;
    }
    mr_cuda_ctx *c = mr_device_cuda(buf->dev);
    int rc = mr_cuda_after(c, c->upload, c->compute, err);
    if (rc < 0)
      return rc;
    MR_CU(cudaMemcpy2DAsync(dst, pitch, src, src_pitch, width, rows, cudaMemcpyHostToDevice,
                            c->upload));
    rc = mr_cuda_after(c, c->compute, c->upload, err);
    if (rc == 0 && wait) // the copy engine reads src: wait before the caller may change it
      MR_CU(cudaStreamSynchronize(c->upload));
    return rc;
  });
}

int mr_buf_cuda_is_pinned(const void *p) { return mr_cuda_is_pinned(p); }

int mr_buf_cuda_wait_uploads(const mr_buf *buf, mr_err *err) {
  return mr_on_worker(buf->dev, err, [&] {
    MR_CU(cudaStreamSynchronize(mr_device_cuda(buf->dev)->upload));
    return 0;
  });
}

// Into pinned memory as one 2D transfer; pageable row by row through the
// staging slots.
int mr_buf_cuda_download_rows(const mr_buf *buf, size_t at, size_t pitch, void *dst,
                              size_t dst_pitch, size_t width, size_t rows, mr_err *err) {
  return mr_on_worker(buf->dev, err, [&] {
    const char *src = static_cast<const char *>(buf->data) + at;
    if (!mr_cuda_is_pinned(dst)) {
      int rc = 0;
      for (size_t r = 0; rc == 0 && r < rows; r++)
        rc = mr_cuda_download(buf->dev, static_cast<char *>(dst) + r * dst_pitch, src + r * pitch,
                              width, err);
      return rc;
    }
    mr_cuda_ctx *c = mr_device_cuda(buf->dev);
    int rc = mr_cuda_after(c, c->download, c->compute, err);
    if (rc < 0)
      return rc;
    MR_CU(cudaMemcpy2DAsync(dst, dst_pitch, src, pitch, width, rows, cudaMemcpyDeviceToHost,
                            c->download));
    MR_CU(cudaStreamSynchronize(c->download));
    return 0;
  });
}
