#include <complex.h>
#include <math.h>
#include <stdatomic.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "prox_impl.h"

#define GRAIN 4096

typedef struct soft_job {
  size_t dims[3], keep[3];
  float t;
  float complex *x;
} soft_job;

/* Rows over (y, z); a row inside the kept box skips its first keep[0]. */
static void soft_range(void *arg, size_t begin, size_t end) {
  const soft_job *j = arg;
  for (size_t r = begin; r < end; r++) {
    size_t y = r % j->dims[1], z = r / j->dims[1];
    size_t from = y < j->keep[1] && z < j->keep[2] ? j->keep[0] : 0;
    float complex *row = j->x + r * j->dims[0];
    for (size_t i = from; i < j->dims[0]; i++) {
      float a = cabsf(row[i]);
      row[i] = a > j->t ? row[i] * (1 - j->t / a) : 0;
    }
  }
}

int mr_prox_cpu_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t,
                     mr_cfloat *x) {
  soft_job j = {.dims = {dims[0], dims[1], dims[2]}, .keep = {keep[0], keep[1], keep[2]},
                .t = t, .x = x};
  mr_cpu_parallel_for(mr_device_threads(dev), dims[1] * dims[2], 8, soft_range, &j);
  return 0;
}

typedef struct momentum_job {
  float beta;
  const float complex *x;
  float complex *prev, *z;
} momentum_job;

static void momentum_range(void *arg, size_t begin, size_t end) {
  const momentum_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float complex x = j->x[i];
    j->z[i] = x + j->beta * (x - j->prev[i]);
    j->prev[i] = x;
  }
}

int mr_prox_cpu_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x,
                         mr_cfloat *prev, mr_cfloat *z) {
  momentum_job j = {beta, x, prev, z};
  mr_cpu_parallel_for(mr_device_threads(dev), n, GRAIN, momentum_range, &j);
  return 0;
}

typedef struct peak_job {
  const float complex *x;
  _Atomic unsigned peak; /* the float's bits: non-negative floats order like them */
  atomic_int nonfinite;
} peak_job;

static void peak_range(void *arg, size_t begin, size_t end) {
  peak_job *j = arg;
  float best = 0;
  int bad = 0;
  for (size_t i = begin; i < end; i++) {
    float re = crealf(j->x[i]), im = cimagf(j->x[i]);
    if (!isfinite(re) || !isfinite(im))
      bad = 1;
    else
      best = fmaxf(best, hypotf(re, im));
  }
  union {
    float f;
    unsigned u;
  } b = {.f = best};
  unsigned cur = atomic_load(&j->peak);
  while (b.u > cur && !atomic_compare_exchange_weak(&j->peak, &cur, b.u))
    ;
  if (bad)
    atomic_store(&j->nonfinite, 1);
}

int mr_prox_cpu_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite) {
  peak_job j = {.x = x};
  atomic_init(&j.peak, 0);
  atomic_init(&j.nonfinite, 0);
  mr_cpu_parallel_for(mr_device_threads(dev), n, GRAIN, peak_range, &j);
  union {
    unsigned u;
    float f;
  } b = {.u = atomic_load(&j.peak)};
  *peak = b.f;
  *finite = !atomic_load(&j.nonfinite);
  return 0;
}

typedef struct digits_job {
  const float complex *x;
  int count, shift;
  const unsigned *prefix;
  _Atomic unsigned *counts;
} digits_job;

/* The bits of |x| as a float: they order as the magnitudes do. */
static unsigned magnitude_bits(float complex v) {
  union {
    float f;
    unsigned u;
  } b = {.f = sqrtf(crealf(v) * crealf(v) + cimagf(v) * cimagf(v))};
  return b.u;
}

static void digits_range(void *arg, size_t begin, size_t end) {
  digits_job *j = arg;
  unsigned local[MR_PROX_MAX_RANKS * 256] = {0};
  for (size_t i = begin; i < end; i++) {
    unsigned key = magnitude_bits(j->x[i]);
    for (int r = 0; r < j->count; r++)
      if (j->shift == 24 || (key >> (j->shift + 8)) == (j->prefix[r] >> (j->shift + 8)))
        local[r * 256 + ((key >> j->shift) & 255)]++;
  }
  for (int b = 0; b < j->count * 256; b++)
    if (local[b] != 0)
      atomic_fetch_add(&j->counts[b], local[b]);
}

int mr_prox_cpu_digits(mr_device *dev, size_t n, const mr_cfloat *x, int count,
                       const unsigned *prefix, int shift, unsigned *counts) {
  _Atomic unsigned shared[MR_PROX_MAX_RANKS * 256];
  for (int b = 0; b < count * 256; b++)
    atomic_init(&shared[b], 0);
  digits_job j = {.x = x, .count = count, .shift = shift, .prefix = prefix, .counts = shared};
  mr_cpu_parallel_for(mr_device_threads(dev), n, 16 * GRAIN, digits_range, &j);
  for (int b = 0; b < count * 256; b++)
    counts[b] = atomic_load(&shared[b]);
  return 0;
}
