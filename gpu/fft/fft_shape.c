#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "fft_impl.h"

/* Largest array we accept: index arithmetic in the kernels is 64-bit, but a
 * single transform must fit the libraries' 32-bit dimension arguments. */
#define MAX_DIM ((size_t)1 << 30)

/* exp(i 2 pi num / n) into c[0..1]; num reduced mod n beforehand keeps the
 * angle small, so sin/cos stay accurate for large arrays. */
static void unit_phase(float *c, size_t num, size_t n, int sign) {
  double angle = sign * 2.0 * M_PI * (double)(num % n) / (double)n;
  c[0] = (float)cos(angle);
  c[1] = (float)sin(angle);
}

int mr_fft_shape_init(mr_fft_shape *shape, const mr_fft_opts *opts, mr_err *err) {
  *shape = (mr_fft_shape){.rank = opts->rank, .n = {1, 1, 1}, .batch = opts->batch,
                          .len = 1, .even = 1, .plain = opts->plain != 0};
  if (opts->rank < 1 || opts->rank > 3)
    return mr_err_set(err, MR_EINVAL, "fft: rank %d (expected 1, 2 or 3)", opts->rank);
  if (opts->batch < 1 || opts->batch > MAX_DIM)
    return mr_err_set(err, MR_EINVAL, "fft: batch %zu", opts->batch);
  for (int d = 0; d < opts->rank; d++) {
    size_t n = opts->dims[d];
    if (n < 1 || n > MAX_DIM || shape->len > MAX_DIM / n)
      return mr_err_set(err, MR_EINVAL, "fft: dimension %d of size %zu", d, n);
    shape->n[d] = n;
    shape->len *= n;
    if (n % 2 != 0)
      shape->even = 0;
  }
  if (shape->len > SIZE_MAX / 8 / shape->batch)
    return mr_err_set(err, MR_EINVAL, "fft: %zu arrays of %zu", shape->batch, shape->len);
  shape->scale = shape->plain ? 1.0f : (float)(1.0 / sqrt((double)shape->len));
  if (shape->even || shape->plain)
    return 0;
  shape->ramp_len = shape->n[0] + shape->n[1] + shape->n[2];
  shape->ramp = malloc(4 * shape->ramp_len * 2 * sizeof(float));
  if (shape->ramp == NULL)
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  for (int dir = 0; dir < 2; dir++) {
    int s = dir == 0 ? -1 : +1;
    float *pre = shape->ramp + (size_t)(2 * dir) * shape->ramp_len * 2;
    float *post = pre + shape->ramp_len * 2;
    for (int d = 0, off = 0; d < 3; off += (int)shape->n[d], d++) {
      size_t n = shape->n[d], a = n / 2;
      for (size_t i = 0; i < n; i++) {
        unit_phase(pre + 2 * (off + i), a * i, n, -s);
        unit_phase(post + 2 * (off + i), a * (a + n - i), n, s);
      }
    }
  }
  return 0;
}

void mr_fft_shape_free(mr_fft_shape *shape) {
  free(shape->ramp);
  shape->ramp = NULL;
}

const float *mr_fft_shape_ramp(const mr_fft_shape *shape, mr_fft_direction dir,
                               int stage) {
  int d = dir == MR_FFT_FORWARD ? 0 : 1;
  return shape->ramp + (size_t)(2 * d + stage) * shape->ramp_len * 2;
}
