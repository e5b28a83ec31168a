#include "buf_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "device_impl.h"
#include "error.h"

int mr_buf_create(mr_device *dev, size_t bytes, mr_buf **out, mr_err *err) {
  /* A CPU buffer is host memory: the server's memory budget counts it
   * (GPU memory has its own bound, MR_EDEVMEM). */
  int host = !mr_device_is_gpu(dev);
  /* A fake GPU's buffer is host memory too, counted against both its own
   * memory (MR_EDEVMEM, as a GPU's would be) and the budget. */
  int rc = mr_device_fake_fault(dev, "buffer", err);
  if (rc < 0 || (rc = mr_device_fake_take(dev, bytes, err)) < 0)
    return rc;
  mr_err e = {0};
  if (host && mr_budget_take(bytes, "a compute buffer on the CPU", &e) < 0) {
    mr_device_fake_give(dev, bytes);
    return mr_err_set(err, e.code, "%s", e.msg);
  }
  mr_buf *buf = malloc(sizeof *buf);
  if (buf == NULL) {
    if (host)
      mr_budget_give(bytes);
    mr_device_fake_give(dev, bytes);
    return mr_err_set(err, MR_ENOMEM, "buffer: out of memory");
  }
  *buf = (mr_buf){.dev = dev, .bytes = bytes};
#ifdef MR_HAVE_CUDA
  if (!host)
    rc = mr_buf_cuda_alloc(buf, err);
  else
#endif
    rc = mr_buf_cpu_alloc(buf, err);
  if (rc < 0) {
    if (host)
      mr_budget_give(bytes);
    mr_device_fake_give(dev, bytes);
    free(buf);
    return rc;
  }
  *out = buf;
  return 0;
}

void mr_buf_destroy(mr_buf *buf) {
  if (buf == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(buf->dev))
    mr_buf_cuda_free(buf);
  else
#endif
  {
    mr_buf_cpu_free(buf);
    mr_budget_give(buf->bytes);
    mr_device_fake_give(buf->dev, buf->bytes);
  }
  free(buf);
}

void *mr_buf_data(const mr_buf *buf) { return buf->data; }

size_t mr_buf_size(const mr_buf *buf) { return buf->bytes; }

mr_device *mr_buf_device(const mr_buf *buf) { return buf->dev; }

static int check_range(const mr_buf *buf, size_t at, size_t bytes, const char *what, mr_err *err) {
  if (at > buf->bytes || bytes > buf->bytes - at)
    return mr_err_set(err, MR_EINVAL, "buffer %s: %zu bytes at %zu past its %zu bytes", what, bytes,
                      at, buf->bytes);
  return 0;
}

/* Rows of `width` bytes, `pitch` apart in buf from `at` and `other_pitch`
 * apart on the host, fit both. */
static int check_rows(const mr_buf *buf, size_t at, size_t pitch, size_t other_pitch, size_t width,
                      size_t rows, const char *what, mr_err *err) {
  if (width > pitch || width > other_pitch || pitch > (SIZE_MAX - width) / rows)
    return mr_err_set(err, MR_EINVAL, "buffer %s: %zu rows of %zu bytes, pitches %zu and %zu", what,
                      rows, width, pitch, other_pitch);
  return check_range(buf, at, (rows - 1) * pitch + width, what, err);
}

int mr_buf_upload(mr_buf *buf, size_t at, const void *src, size_t bytes, mr_err *err) {
  int rc = check_range(buf, at, bytes, "upload", err);
  return rc < 0 ? rc : mr_device_upload(buf->dev, (char *)buf->data + at, src, bytes, err);
}

#ifdef MR_HAVE_CUDA
typedef struct rows_call {
  mr_buf *buf;
  size_t at, pitch, src_pitch, width, rows;
  const void *src;
} rows_call;

static int queue_rows(void *arg, mr_err *err) {
  rows_call *c = arg;
  return mr_buf_cuda_upload_rows(c->buf, c->at, c->pitch, c->src, c->src_pitch, c->width, c->rows,
                                 0, err);
}

/* Posted: nobody waits for the result (err is NULL); its line goes to the
 * buffer, and mr_buf_wait_uploads() reports it. */
static int queue_rows_posted(void *arg, mr_err *err) {
  (void)err;
  rows_call *c = arg;
  return queue_rows(c, &c->buf->queued);
}

/* On the lane the uploads were posted to, after them in its queue. */
static int wait_posted(void *arg, mr_err *err) { return mr_buf_cuda_wait_uploads(arg, err); }

static int wait_on_posted_lane(const mr_buf *buf, mr_err *err) {
  mr_worker *w = buf->posted_lane->worker;
  return mr_worker_is_current(w) ? wait_posted((void *)buf, err)
                                 : mr_worker_call(w, wait_posted, (void *)buf, err);
}
#endif

static int upload_rows(mr_buf *buf, size_t at, size_t pitch, const void *src, size_t src_pitch,
                       size_t width, size_t rows, int wait, mr_err *err) {
  if (rows == 0 || width == 0)
    return 0;
  int rc = check_rows(buf, at, pitch, src_pitch, width, rows, "upload", err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(buf->dev)) {
    if (wait)
      return mr_buf_cuda_upload_rows(buf, at, pitch, src, src_pitch, width, rows, 1, err);
    /* Straight to the worker: a task from mr_device_run() would end by
     * synchronising every stream, the copy included. From pinned memory
     * the caller does not even wait for its turn on the worker (a long
     * task of another gadget may be running there): the copy engine reads
     * src later anyway. Pageable rows go through the staging slots while
     * the caller waits, so that src may be reused on return. */
    rows_call c = {buf, at, pitch, src_pitch, width, rows, src};
    mr_gpu_lane *lane = mr_device_lane(buf->dev);
    if (!mr_buf_cuda_is_pinned(src))
      return mr_worker_call(lane->worker, queue_rows, &c, err);
    /* The thread moved lanes since its last post: those copies first. */
    if (buf->posted_lane != NULL && buf->posted_lane != lane &&
        (rc = wait_on_posted_lane(buf, err)) < 0)
      return rc;
    buf->posted_lane = lane;
    return mr_worker_post(lane->worker, queue_rows_posted, &c, sizeof c, err);
  }
#else
  (void)wait;
#endif
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)buf->data + at + r * pitch, (const char *)src + r * src_pitch, width);
  return 0;
}

int mr_buf_upload_rows(mr_buf *buf, size_t at, size_t pitch, const void *src, size_t src_pitch,
                       size_t width, size_t rows, mr_err *err) {
  return upload_rows(buf, at, pitch, src, src_pitch, width, rows, 1, err);
}

int mr_buf_upload_rows_async(mr_buf *buf, size_t at, size_t pitch, const void *src,
                             size_t src_pitch, size_t width, size_t rows, mr_err *err) {
  return upload_rows(buf, at, pitch, src, src_pitch, width, rows, 0, err);
}

int mr_buf_wait_uploads(const mr_buf *buf, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(buf->dev)) {
    int rc = buf->posted_lane != NULL ? wait_on_posted_lane(buf, err)
                                      : mr_buf_cuda_wait_uploads(buf, err);
    if (rc == 0 && buf->queued.code < 0)
      rc = mr_err_set(err, buf->queued.code, "an upload queued earlier failed: %s",
                      buf->queued.msg);
    return rc;
  }
#endif
  (void)buf;
  (void)err;
  return 0;
}

int mr_buf_download(const mr_buf *buf, size_t at, void *dst, size_t bytes, mr_err *err) {
  int rc = check_range(buf, at, bytes, "download", err);
  return rc < 0 ? rc : mr_device_download(buf->dev, dst, (const char *)buf->data + at, bytes, err);
}

int mr_buf_download_rows(const mr_buf *buf, size_t at, size_t pitch, void *dst, size_t dst_pitch,
                         size_t width, size_t rows, mr_err *err) {
  if (rows == 0 || width == 0)
    return 0;
  int rc = check_rows(buf, at, pitch, dst_pitch, width, rows, "download", err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(buf->dev))
    return mr_buf_cuda_download_rows(buf, at, pitch, dst, dst_pitch, width, rows, err);
#endif
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)dst + r * dst_pitch, (const char *)buf->data + at + r * pitch, width);
  return 0;
}
