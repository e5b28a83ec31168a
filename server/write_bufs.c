#include "write_bufs.h"

#include "error.h"

int mr_write_bufs(const mr_encoded *enc, uv_buf_t *bufs, int cap) {
  int n = 0;
  for (int i = 0; i < enc->npieces; i++) {
    const char *base = enc->piece[i].base;
    size_t left = enc->piece[i].len;
    while (left > 0) {
      if (n == cap)
        return MR_ELIMIT;
      size_t len = left < MR_WRITE_BUF_MAX ? left : MR_WRITE_BUF_MAX;
      bufs[n++] = uv_buf_init((char *)base, (unsigned)len);
      base += len;
      left -= len;
    }
  }
  return n;
}
