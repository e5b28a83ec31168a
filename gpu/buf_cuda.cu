// Buffers on a GPU: memory from the worker's stream-ordered pool, copies
// through the pinned staging slots.
#include "buf_impl.h"
#include "cuda_internal.cuh"

int mr_buf_cuda_alloc(mr_buf *buf) {
  return mr_on_worker(buf->dev, [&] {
    return mr_cuda_alloc(mr_device_cuda(buf->dev), &buf->data, buf->bytes);
  });
}

void mr_buf_cuda_free(mr_buf *buf) {
  mr_on_worker(buf->dev, [&] {
    mr_cuda_free(mr_device_cuda(buf->dev), buf->data);
    return 0;
  });
}

int mr_buf_cuda_upload(mr_buf *buf, size_t at, const void *src, size_t bytes) {
  return mr_on_worker(buf->dev, [&] {
    return mr_cuda_upload(buf->dev, static_cast<char *>(buf->data) + at, src, bytes);
  });
}

int mr_buf_cuda_download(const mr_buf *buf, size_t at, void *dst, size_t bytes) {
  return mr_on_worker(buf->dev, [&] {
    return mr_cuda_download(buf->dev, dst, static_cast<const char *>(buf->data) + at,
                            bytes);
  });
}
