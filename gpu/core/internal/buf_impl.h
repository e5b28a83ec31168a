/* Internal: the buffer behind buf.h and its two backends. */
#ifndef MR_GPU_BUF_IMPL_H
#define MR_GPU_BUF_IMPL_H

#include <stddef.h>

#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_buf {
  mr_device *dev;
  void *data;
  size_t bytes;
  /* The first failure of an upload queued without waiting, its code and
   * line (written on the worker; read after a call that waited for it). */
  mr_err queued;
  /* The lane the last upload queued without waiting went to (NULL: none):
   * mr_buf_wait_uploads waits there, whichever lane the caller's thread
   * takes by then (real-time sessions coming and going move threads). */
  struct mr_gpu_lane *posted_lane;
};

int mr_buf_cpu_alloc(mr_buf *buf, mr_err *err);
void mr_buf_cpu_free(mr_buf *buf);

int mr_buf_cuda_alloc(mr_buf *buf, mr_err *err);
void mr_buf_cuda_free(mr_buf *buf);
int mr_buf_cuda_upload_rows(mr_buf *buf, size_t at, size_t pitch, const void *src, size_t src_pitch,
                            size_t width, size_t rows, int wait, mr_err *err);
int mr_buf_cuda_wait_uploads(const mr_buf *buf, mr_err *err);
int mr_buf_cuda_is_pinned(const void *p);
/* mr_device_upload / mr_device_download on a GPU (raw device pointers;
 * mr_buf_upload and mr_buf_download come through them too). */
int mr_buf_cuda_copy_up(mr_device *dev, void *dst, const void *host, size_t bytes, mr_err *err);
int mr_buf_cuda_copy_down(mr_device *dev, void *host, const void *src, size_t bytes, mr_err *err);
/* mr_device_copy_to between two GPUs (or two logical devices of one). */
int mr_buf_cuda_copy_peer(mr_device *src_dev, const void *src, mr_device *dst_dev, void *dst,
                          size_t bytes, mr_err *err);
int mr_buf_cuda_download_rows(const mr_buf *buf, size_t at, size_t pitch, void *dst,
                              size_t dst_pitch, size_t width, size_t rows, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
