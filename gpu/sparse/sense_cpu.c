#include <complex.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "sense_impl.h"

/* Rows of x per hand-out. */
#define GRAIN 16

typedef struct sense_job {
  const mr_sense_pass *p;
  size_t n;
  const float complex *x, *z, *ahb;
  const float *mask;
  float scale, step;
  float complex *out;
} sense_job;

/* The sign of pixel (x, row) when p->sign, where row = y + ny z: (-1)^(x
 * + y + z). */
static float row_sign(const mr_sense_pass *p, size_t row) {
  return p->sign && (row % p->dims[1] + row / p->dims[1]) % 2 ? -1.0f : 1.0f;
}

/* The complex products below are written out in real arithmetic: C's
 * complex multiply carries a call for its NaN cases (__mulsc3) that keeps
 * GCC from vectorising the loop; they were a third of the CPU solve. */
static void expand_range(void *arg, size_t begin, size_t end) {
  const sense_job *j = arg;
  size_t nx = j->p->dims[0];
  for (size_t c = 0; c < j->p->ncoils; c++) {
    const float complex *m = j->p->maps + c * j->n;
    float complex *o = j->out + c * j->n;
    for (size_t r = begin; r < end; r++) {
      float sg = row_sign(j->p, r), odd = j->p->sign ? -sg : sg;
      for (size_t x = 0; x < nx; x++) {
        size_t i = r * nx + x;
        float s = x % 2 ? odd : sg, mr = crealf(m[i]), mi = cimagf(m[i]);
        float xr = crealf(j->x[i]), xi = cimagf(j->x[i]);
        o[i] = (mr * xr - mi * xi) * s + (mr * xi + mi * xr) * s * I;
      }
    }
  }
}

/* Rows over (coil, z, y). */
static void mask_range(void *arg, size_t begin, size_t end) {
  const sense_job *j = arg;
  size_t nx = j->p->dims[0], lines = j->p->dims[1] * j->p->dims[2];
  for (size_t r = begin; r < end; r++) {
    float f = j->mask[r % lines] * j->scale;
    for (size_t x = 0; x < nx; x++)
      j->out[r * nx + x] = j->x[r * nx + x] * f;
  }
}

/* Pixels summed over the coils at a time: the accumulators stay in cache
 * while each coil's run is read contiguously. */
#define CHUNK 256

static void combine_range(void *arg, size_t begin, size_t end) {
  const sense_job *j = arg;
  size_t nx = j->p->dims[0];
  for (size_t r = begin; r < end; r++) {
    float sg = row_sign(j->p, r), odd = j->p->sign ? -sg : sg;
    for (size_t x0 = 0; x0 < nx; x0 += CHUNK) {
      size_t len = nx - x0 < CHUNK ? nx - x0 : CHUNK, at = r * nx + x0;
      float yr[CHUNK] = {0}, yi[CHUNK] = {0};
      for (size_t c = 0; c < j->p->ncoils; c++) {
        const float complex *m = j->p->maps + c * j->n + at, *k = j->x + c * j->n + at;
        for (size_t i = 0; i < len; i++) { /* conj(m) k */
          float mr = crealf(m[i]), mi = cimagf(m[i]), kr = crealf(k[i]), ki = cimagf(k[i]);
          yr[i] += mr * kr + mi * ki;
          yi[i] += mr * ki - mi * kr;
        }
      }
      for (size_t i = 0; i < len; i++) {
        float s = (x0 + i) % 2 ? odd : sg;
        float complex v = yr[i] * s + yi[i] * s * I;
        j->out[at + i] = j->z != NULL ? j->z[at + i] - j->step * (v - j->ahb[at + i]) : v;
      }
    }
  }
}

static void power_range(void *arg, size_t begin, size_t end) {
  const sense_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float sum = 0;
    for (size_t c = 0; c < j->p->ncoils; c++) {
      float complex m = j->p->maps[c * j->n + i];
      sum += crealf(m) * crealf(m) + cimagf(m) * cimagf(m);
    }
    j->out[i] = sum;
  }
}

static size_t pixels(const mr_sense_pass *p) { return p->dims[0] * p->dims[1] * p->dims[2]; }

int mr_sense_cpu_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x,
                        mr_cfloat *out) {
  sense_job j = {.p = p, .n = pixels(p), .x = x, .out = out};
  mr_cpu_parallel_for(mr_device_threads(dev), p->dims[1] * p->dims[2], GRAIN, expand_range, &j);
  return 0;
}

int mr_sense_cpu_mask(mr_device *dev, const mr_sense_pass *p, const float *mask, float scale,
                      const mr_cfloat *in, mr_cfloat *out) {
  sense_job j = {.p = p, .n = pixels(p), .x = in, .mask = mask, .scale = scale, .out = out};
  mr_cpu_parallel_for(mr_device_threads(dev), p->dims[1] * p->dims[2] * p->ncoils, GRAIN,
                      mask_range, &j);
  return 0;
}

int mr_sense_cpu_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                         const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out) {
  sense_job j = {.p = p, .n = pixels(p), .x = k, .z = z, .ahb = ahb, .step = step, .out = out};
  mr_cpu_parallel_for(mr_device_threads(dev), p->dims[1] * p->dims[2], GRAIN, combine_range, &j);
  return 0;
}

int mr_sense_cpu_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out) {
  sense_job j = {.p = p, .n = pixels(p), .out = out};
  mr_cpu_parallel_for(mr_device_threads(dev), j.n, 4096, power_range, &j);
  return 0;
}
