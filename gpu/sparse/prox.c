#include <math.h>
#include <stdint.h>

#include "error.h"
#include "prox_impl.h"

int mr_prox_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t, mr_cfloat *x,
                 mr_err *err) {
  if (!(t >= 0) || !isfinite(t))
    return mr_err_set(err, MR_EINVAL, "soft threshold: threshold %g", (double)t);
  if (dims[0] * dims[1] * dims[2] == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_soft(dev, dims, keep, t, x, err);
#endif
  return mr_prox_cpu_soft(dev, dims, keep, t, x);
}

int mr_prox_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x, mr_cfloat *prev,
                     mr_cfloat *z, mr_err *err) {
  (void)err;
  if (n == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_momentum(dev, n, beta, x, prev, z, err);
#endif
  return mr_prox_cpu_momentum(dev, n, beta, x, prev, z);
}

int mr_prox_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite,
                 mr_err *err) {
  (void)err;
  *peak = 0;
  *finite = 1;
  if (n == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_peak(dev, n, x, peak, finite, err);
#endif
  return mr_prox_cpu_peak(dev, n, x, peak, finite);
}

static int digits(mr_device *dev, size_t n, const mr_cfloat *x, int count, const unsigned *prefix,
                  int shift, unsigned *counts, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_digits(dev, n, x, count, prefix, shift, counts, err);
#endif
  return mr_prox_cpu_digits(dev, n, x, count, prefix, shift, counts);
}

/* Non-negative floats order as their bits do: the selection finds the
 * bits of each ranked magnitude one byte at a time, from the top, among
 * the samples that share the bytes found so far. */
int mr_prox_select(mr_device *dev, size_t n, const mr_cfloat *x, int count, const size_t *ranks,
                   float *values, mr_err *err) {
  if (count < 1 || count > MR_PROX_MAX_RANKS || n > UINT32_MAX)
    return mr_err_set(err, MR_EINVAL, "select: %d ranks of %zu samples", count, n);
  unsigned prefix[MR_PROX_MAX_RANKS] = {0}, left[MR_PROX_MAX_RANKS] = {0};
  for (int r = 0; r < count; r++) {
    if (ranks[r] >= n)
      return mr_err_set(err, MR_EINVAL, "select: rank %zu of %zu samples", ranks[r], n);
    left[r] = (unsigned)ranks[r];
  }
  unsigned counts[MR_PROX_MAX_RANKS * 256];
  for (int shift = 24; shift >= 0; shift -= 8) {
    int rc = digits(dev, n, x, count, prefix, shift, counts, err);
    if (rc < 0)
      return rc;
    for (int r = 0; r < count; r++) {
      const unsigned *h = counts + r * 256;
      unsigned d = 0;
      while (d < 255 && left[r] >= h[d])
        left[r] -= h[d++];
      prefix[r] |= d << shift;
    }
  }
  for (int r = 0; r < count; r++) {
    union {
      unsigned u;
      float f;
    } b = {.u = prefix[r]};
    values[r] = b.f;
  }
  return 0;
}
