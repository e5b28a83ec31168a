#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "coil_impl.h"
#include "error.h"
#include "fft.h"

static int check_sizes(size_t ncoils, size_t npixels, mr_err *err) {
  if (ncoils < 1 || npixels < 1 || npixels > SIZE_MAX / 8 / ncoils)
    return mr_err_set(err, MR_EINVAL, "coil: %zu coils of %zu pixels", ncoils, npixels);
  return 0;
}

/* host: the pointers are host memory whatever the device. */
static int rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
               int host, mr_err *err) {
  int rc = check_sizes(ncoils, npixels, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return host ? mr_coil_cuda_rss_host(dev, x, ncoils, npixels, out, err)
                : mr_coil_cuda_rss(dev, x, ncoils, npixels, out, err);
#else
  (void)host;
#endif
  return mr_coil_cpu_rss(dev, x, ncoils, npixels, out);
}

static int combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                   size_t npixels, mr_cfloat *out, int host, mr_err *err) {
  int rc = check_sizes(ncoils, npixels, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return host ? mr_coil_cuda_combine_host(dev, x, s, ncoils, npixels, out, err)
                : mr_coil_cuda_combine(dev, x, s, ncoils, npixels, out, err);
#else
  (void)host;
#endif
  return mr_coil_cpu_combine(dev, x, s, ncoils, npixels, out);
}

int mr_coil_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                mr_err *err) {
  return rss(dev, x, ncoils, npixels, out, 0, err);
}

int mr_coil_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                     mr_err *err) {
  return rss(dev, x, ncoils, npixels, out, 1, err);
}

int mr_coil_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                    size_t npixels, mr_cfloat *out, mr_err *err) {
  return combine(dev, x, s, ncoils, npixels, out, 0, err);
}

int mr_coil_combine_host(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                         size_t npixels, mr_cfloat *out, mr_err *err) {
  return combine(dev, x, s, ncoils, npixels, out, 1, err);
}

int mr_coil_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                        mr_cfloat *out, mr_err *err) {
  int rc = check_sizes(ncoils, npixels, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_coil_cuda_rss_complex(dev, x, ncoils, npixels, out, err);
#endif
  return mr_coil_cpu_rss_complex(dev, x, ncoils, npixels, out);
}

/* The Hann factor of sample i of n for a window w samples wide. */
static float hann(size_t i, size_t n, int w) {
  double d = (double)i - (double)(n / 2);
  if (w >= (int)n)
    w = (int)n;
  return fabs(d) * 2 < w ? (float)(0.5 * (1 + cos(2 * M_PI * d / w))) : 0.0f;
}

int mr_coil_window(mr_device *dev, mr_cfloat *x, size_t ncoils, const size_t dims[3],
                   const int width[3], mr_err *err) {
  size_t total = dims[0] + dims[1] + dims[2];
  int rc = check_sizes(ncoils, dims[0] * dims[1] * dims[2], err);
  if (rc < 0)
    return rc;
  if (dims[0] > INT_MAX || dims[1] > INT_MAX || dims[2] > INT_MAX)
    return mr_err_set(err, MR_EINVAL, "coil window: %zu x %zu x %zu samples", dims[0], dims[1],
                      dims[2]);
  float *win = malloc(total * sizeof *win);
  if (win == NULL)
    return mr_err_set(err, MR_ENOMEM, "coil window: out of memory");
  for (int d = 0, at = 0; d < 3; at += (int)dims[d], d++)
    for (size_t i = 0; i < dims[d]; i++)
      win[at + (int)i] = hann(i, dims[d], width[d] > 0 ? width[d] : 1);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    rc = mr_coil_cuda_window(dev, x, ncoils, dims, win, err);
  else
#endif
    rc = mr_coil_cpu_window(dev, x, ncoils, dims, win);
  free(win);
  return rc;
}

int mr_coil_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels, double floor,
                      mr_err *err) {
  int rc = check_sizes(ncoils, npixels, err);
  if (rc < 0)
    return rc;
  if (!(floor >= 0 && floor < 1))
    return mr_err_set(err, MR_EINVAL, "coil normalise: floor %g", floor);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_coil_cuda_normalise(dev, maps, ncoils, npixels, floor, err);
#endif
  return mr_coil_cpu_normalise(dev, maps, ncoils, npixels, floor, err);
}

int mr_coil_maps_lowres(mr_device *dev, const mr_cfloat *images, size_t ncoils,
                        const size_t dims[3], const int width[3], double floor, mr_cfloat *maps,
                        mr_err *err) {
  size_t npixels = dims[0] * dims[1] * dims[2];
  int rc = check_sizes(ncoils, npixels, err);
  if (rc < 0)
    return rc;
  mr_fft_opts o = {.rank = dims[2] > 1 ? 3 : 2, .dims = {dims[0], dims[1], dims[2]},
                   .batch = ncoils};
  mr_fft_plan *plan = NULL;
  rc = mr_fft_plan_create(dev, &o, &plan, err);
  if (rc == 0)
    rc = mr_fft_execute(plan, MR_FFT_FORWARD, images, maps, err);
  if (rc == 0)
    rc = mr_coil_window(dev, maps, ncoils, dims, width, err);
  if (rc == 0)
    rc = mr_fft_execute(plan, MR_FFT_BACKWARD, maps, maps, err);
  mr_fft_plan_destroy(plan);
  return rc == 0 ? mr_coil_normalise(dev, maps, ncoils, npixels, floor, err) : rc;
}
