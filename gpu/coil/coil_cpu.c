#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "coil_impl.h"
#include "device_impl.h"
#include "error.h"

/* Pixels per thread hand-out: enough work to amortise the hand-out. */
#define GRAIN 4096

typedef struct job {
  const float complex *x, *s;
  size_t ncoils, npixels;
  float *rss;
  float complex *combined;
} job;

/* Coil-outer loops walk each coil's pixels contiguously; the accumulator
 * for a range of pixels stays in cache across coils. */
static void rss_range(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  for (size_t p = begin; p < end; p++)
    j->rss[p] = 0;
  for (size_t c = 0; c < j->ncoils; c++) {
    const float complex *xc = j->x + c * j->npixels;
    for (size_t p = begin; p < end; p++)
      j->rss[p] += crealf(xc[p]) * crealf(xc[p]) + cimagf(xc[p]) * cimagf(xc[p]);
  }
  for (size_t p = begin; p < end; p++)
    j->rss[p] = sqrtf(j->rss[p]);
}

/* Accumulates numerator and weight per pixel, one block at a time. */
#define BLOCK 256

static void combine_range(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  for (size_t p0 = begin; p0 < end; p0 += BLOCK) {
    size_t n = end - p0 < BLOCK ? end - p0 : BLOCK;
    float complex num[BLOCK] = {0};
    float den[BLOCK] = {0};
    for (size_t c = 0; c < j->ncoils; c++) {
      const float complex *xc = j->x + c * j->npixels + p0;
      const float complex *sc = j->s + c * j->npixels + p0;
      for (size_t i = 0; i < n; i++) {
        num[i] += conjf(sc[i]) * xc[i];
        den[i] += crealf(sc[i]) * crealf(sc[i]) + cimagf(sc[i]) * cimagf(sc[i]);
      }
    }
    for (size_t i = 0; i < n; i++)
      j->combined[p0 + i] = den[i] > 0 ? num[i] / den[i] : 0;
  }
}

int mr_coil_cpu_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                    size_t npixels, float *out) {
  job j = {.x = x, .ncoils = ncoils, .npixels = npixels, .rss = out};
  mr_cpu_parallel_for(mr_device_threads(dev), npixels, GRAIN, rss_range, &j);
  return 0;
}

int mr_coil_cpu_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                        size_t ncoils, size_t npixels, mr_cfloat *out) {
  job j = {.x = x, .s = s, .ncoils = ncoils, .npixels = npixels, .combined = out};
  mr_cpu_parallel_for(mr_device_threads(dev), npixels, GRAIN, combine_range, &j);
  return 0;
}

typedef struct cjob {
  const float complex *x;
  size_t ncoils, npixels;
  float complex *out;
} cjob;

static void rss_complex_range(void *arg, size_t begin, size_t end) {
  const cjob *j = arg;
  float acc[BLOCK];
  for (size_t p0 = begin; p0 < end; p0 += BLOCK) {
    size_t n = end - p0 < BLOCK ? end - p0 : BLOCK;
    for (size_t i = 0; i < n; i++)
      acc[i] = 0;
    for (size_t c = 0; c < j->ncoils; c++) {
      const float complex *xc = j->x + c * j->npixels + p0;
      for (size_t i = 0; i < n; i++)
        acc[i] += crealf(xc[i]) * crealf(xc[i]) + cimagf(xc[i]) * cimagf(xc[i]);
    }
    for (size_t i = 0; i < n; i++)
      j->out[p0 + i] = sqrtf(acc[i]);
  }
}

int mr_coil_cpu_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                            size_t npixels, mr_cfloat *out) {
  cjob j = {x, ncoils, npixels, out};
  mr_cpu_parallel_for(mr_device_threads(dev), npixels, GRAIN, rss_complex_range, &j);
  return 0;
}

typedef struct window_job {
  float complex *x;
  size_t nx, ny, nz;
  const float *win;
} window_job;

/* Items are rows (one y, z, coil each). */
static void window_range(void *arg, size_t begin, size_t end) {
  const window_job *j = arg;
  const float *wx = j->win, *wy = wx + j->nx, *wz = wy + j->ny;
  for (size_t row = begin; row < end; row++) {
    size_t y = row % j->ny, z = row / j->ny % j->nz;
    float f = wy[y] * wz[z];
    float complex *r = j->x + row * j->nx;
    for (size_t x = 0; x < j->nx; x++)
      r[x] *= wx[x] * f;
  }
}

int mr_coil_cpu_window(mr_device *dev, mr_cfloat *x, size_t ncoils, const size_t dims[3],
                       const float *win) {
  window_job j = {x, dims[0], dims[1], dims[2], win};
  mr_cpu_parallel_for(mr_device_threads(dev), ncoils * dims[1] * dims[2],
                      GRAIN / dims[0] + 1, window_range, &j);
  return 0;
}

typedef struct norm_job {
  float complex *maps;
  size_t ncoils, npixels;
  float *rss;
  float floor_;
} norm_job;

static void norm_rss_range(void *arg, size_t begin, size_t end) {
  const norm_job *j = arg;
  for (size_t p = begin; p < end; p++) {
    double ss = 0;
    for (size_t c = 0; c < j->ncoils; c++) {
      float complex v = j->maps[c * j->npixels + p];
      ss += crealf(v) * crealf(v) + cimagf(v) * cimagf(v);
    }
    j->rss[p] = (float)sqrt(ss);
  }
}

static void norm_scale_range(void *arg, size_t begin, size_t end) {
  const norm_job *j = arg;
  for (size_t c = 0; c < j->ncoils; c++) {
    float complex *m = j->maps + c * j->npixels;
    for (size_t p = begin; p < end; p++)
      m[p] *= j->rss[p] > j->floor_ ? 1.0f / j->rss[p] : 0.0f;
  }
}

int mr_coil_cpu_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels,
                          double floor, mr_err *err) {
  float *rss = malloc(npixels * sizeof *rss);
  if (rss == NULL)
    return mr_err_set(err, MR_ENOMEM, "coil maps: out of memory");
  norm_job j = {maps, ncoils, npixels, rss, 0};
  mr_cpu_parallel_for(mr_device_threads(dev), npixels, GRAIN, norm_rss_range, &j);
  float peak = 0;
  for (size_t p = 0; p < npixels; p++)
    peak = rss[p] > peak ? rss[p] : peak;
  j.floor_ = (float)(floor * peak);
  mr_cpu_parallel_for(mr_device_threads(dev), npixels, GRAIN, norm_scale_range, &j);
  free(rss);
  return 0;
}
