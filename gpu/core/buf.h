/* Device-resident buffers: memory on a device that operations chain through
 * without a round trip to the host.
 *
 * On a GPU the memory comes from the worker's stream-ordered memory pool and
 * uploads/downloads go through pinned staging buffers on copy streams of
 * their own, so they overlap with the compute stream. On the CPU a buffer is
 * aligned host memory and transfers are memcpy. */
#ifndef MR_GPU_BUF_H
#define MR_GPU_BUF_H

#include <stddef.h>

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_buf mr_buf;

/* Allocates `bytes` (contents undefined) on dev. MR_EDEVMEM when the GPU is
 * out of memory, MR_ENOMEM for the host. The caller takes *out. */
int mr_buf_create(mr_device *dev, size_t bytes, mr_buf **out, mr_err *err);

/* Frees buf once the work already queued on it is done. NULL is ignored. */
void mr_buf_destroy(mr_buf *buf);

/* The memory, as a pointer on buf's device: pass it (or an offset into it)
 * to operations on that device. Never dereference a GPU pointer on the
 * host. Borrowed from buf. */
void *mr_buf_data(const mr_buf *buf);

size_t mr_buf_size(const mr_buf *buf);
mr_device *mr_buf_device(const mr_buf *buf);

/* Copies `bytes` from host memory src to buf at byte offset `at`. Returns
 * once src may be reused; the copy itself may still be under way, ordered
 * before every operation queued on the device afterwards. Borrows src. */
int mr_buf_upload(mr_buf *buf, size_t at, const void *src, size_t bytes, mr_err *err);

/* Copies `rows` rows of `width` bytes each from host memory src (rows
 * src_pitch bytes apart) to buf at byte offset `at` (rows `pitch` bytes
 * apart), e.g. a run of k-space lines of every channel. From pinned memory
 * (host.h) this is one copy-engine transfer. Returns once src may be
 * reused, ordered like mr_buf_upload. Borrows src. */
int mr_buf_upload_rows(mr_buf *buf, size_t at, size_t pitch, const void *src, size_t src_pitch,
                       size_t width, size_t rows, mr_err *err);

/* Copies `bytes` at byte offset `at` of buf to host memory dst, after the
 * work queued before it, and returns once dst holds them. Borrows dst. */
int mr_buf_download(const mr_buf *buf, size_t at, void *dst, size_t bytes, mr_err *err);

/* The same, returning once the copy is queued: from pinned memory the copy
 * engine may still be reading src, so src must stay allocated (what it
 * holds may change: the later of two copies to one place lands last) until
 * mr_buf_wait_uploads(). For a gatherer that uploads in batches and waits
 * once, when the whole array has gone up. From pageable memory it returns
 * once src may be reused, as mr_buf_upload_rows does. Borrows src. */
int mr_buf_upload_rows_async(mr_buf *buf, size_t at, size_t pitch, const void *src,
                             size_t src_pitch, size_t width, size_t rows, mr_err *err);

/* Waits until every upload queued to buf's device so far has read its
 * source. 0, or the device's error. */
int mr_buf_wait_uploads(const mr_buf *buf, mr_err *err);

/* The reverse of mr_buf_upload_rows: `rows` rows of `width` bytes from buf
 * at byte offset `at` (rows `pitch` bytes apart) to host memory dst (rows
 * dst_pitch bytes apart), after the work queued before it; returns once
 * dst holds them. Into pinned memory this is one copy-engine transfer.
 * Borrows dst. */
int mr_buf_download_rows(const mr_buf *buf, size_t at, size_t pitch, void *dst, size_t dst_pitch,
                         size_t width, size_t rows, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
