#include <stdlib.h>

#include "buf_impl.h"
#include "error.h"

/* 64 bytes: a cache line, and enough for every SIMD width FFTW uses. */
#define ALIGNMENT 64

int mr_buf_cpu_alloc(mr_buf *buf, mr_err *err) {
  size_t rounded = (buf->bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
  buf->data = aligned_alloc(ALIGNMENT, rounded > 0 ? rounded : ALIGNMENT);
  if (buf->data == NULL)
    return mr_err_set(err, MR_ENOMEM, "buffer: cannot allocate %zu bytes", buf->bytes);
  return 0;
}

void mr_buf_cpu_free(mr_buf *buf) { free(buf->data); }
