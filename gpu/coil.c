#include <stdint.h>

#include "coil_impl.h"
#include "error.h"
#include "fail.h"

static int check_sizes(size_t ncoils, size_t npixels) {
  if (ncoils < 1 || npixels < 1 || npixels > SIZE_MAX / 8 / ncoils)
    return mr_fail(MR_EINVAL, "coil: %zu coils of %zu pixels", ncoils, npixels);
  return 0;
}

/* host: the pointers are host memory whatever the device. */
static int rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
               float *out, int host) {
  int rc = check_sizes(ncoils, npixels);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return host ? mr_coil_cuda_rss_host(dev, x, ncoils, npixels, out)
                : mr_coil_cuda_rss(dev, x, ncoils, npixels, out);
#else
  (void)host;
#endif
  return mr_coil_cpu_rss(dev, x, ncoils, npixels, out);
}

static int combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                   size_t ncoils, size_t npixels, mr_cfloat *out, int host) {
  int rc = check_sizes(ncoils, npixels);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return host ? mr_coil_cuda_combine_host(dev, x, s, ncoils, npixels, out)
                : mr_coil_cuda_combine(dev, x, s, ncoils, npixels, out);
#else
  (void)host;
#endif
  return mr_coil_cpu_combine(dev, x, s, ncoils, npixels, out);
}

int mr_coil_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                size_t npixels, float *out) {
  return rss(dev, x, ncoils, npixels, out, 0);
}

int mr_coil_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                     size_t npixels, float *out) {
  return rss(dev, x, ncoils, npixels, out, 1);
}

int mr_coil_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                    size_t ncoils, size_t npixels, mr_cfloat *out) {
  return combine(dev, x, s, ncoils, npixels, out, 0);
}

int mr_coil_combine_host(mr_device *dev, const mr_cfloat *x,
                         const mr_cfloat *s, size_t ncoils, size_t npixels,
                         mr_cfloat *out) {
  return combine(dev, x, s, ncoils, npixels, out, 1);
}
