#include <math.h>

#include "error.h"
#include "fail.h"
#include "prox_impl.h"

int mr_prox_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t,
                 mr_cfloat *x) {
  if (!(t >= 0) || !isfinite(t))
    return mr_fail(MR_EINVAL, "soft threshold: threshold %g", (double)t);
  if (dims[0] * dims[1] * dims[2] == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_soft(dev, dims, keep, t, x);
#endif
  return mr_prox_cpu_soft(dev, dims, keep, t, x);
}

int mr_prox_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x, mr_cfloat *prev,
                     mr_cfloat *z) {
  if (n == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_momentum(dev, n, beta, x, prev, z);
#endif
  return mr_prox_cpu_momentum(dev, n, beta, x, prev, z);
}

int mr_prox_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite) {
  *peak = 0;
  *finite = 1;
  if (n == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_prox_cuda_peak(dev, n, x, peak, finite);
#endif
  return mr_prox_cpu_peak(dev, n, x, peak, finite);
}
