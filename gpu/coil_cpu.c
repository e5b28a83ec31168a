#include <complex.h>
#include <math.h>

#include "coil_impl.h"
#include "device_impl.h"

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
