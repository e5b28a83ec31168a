#include <complex.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "error.h"
#include "wavelet_impl.h"

typedef struct pass_job {
  size_t stride[3], len[3];
  int axis, inverse;
  const mr_wavelet_taps *f;
  const float complex *src;
  float complex *dst;
  size_t other; /* len of the first axis that is not `axis` */
  atomic_int failed;
} pass_job;

/* The first sample of line i: lines run over the two other axes of the
 * region, the lower one fastest. */
static size_t line_start(const pass_job *j, size_t i) {
  int a = j->axis == 0 ? 1 : 0, b = j->axis == 2 ? 1 : 2;
  return (i % j->other) * j->stride[a] + (i / j->other) * j->stride[b];
}

/* Analysis: out[i] = sum_k h[k] in[(2i + k) mod n] (low half), and with g
 * the high half. Synthesis: the transpose. */
static void transform_line(const pass_job *j, const float complex *in, float complex *out,
                           size_t n) {
  const float *h = j->f->h;
  int taps = j->f->taps;
  size_t half = n / 2;
  if (!j->inverse) {
    for (size_t i = 0; i < half; i++) {
      float complex lo = 0, hi = 0;
      for (int k = 0; k < taps; k++) {
        float complex v = in[(2 * i + (size_t)k) % n];
        float g = (k & 1 ? -1.0f : 1.0f) * h[taps - 1 - k];
        lo += h[k] * v;
        hi += g * v;
      }
      out[i] = lo;
      out[half + i] = hi;
    }
    return;
  }
  for (size_t m = 0; m < n; m++) {
    float complex acc = 0;
    for (int k = 0; k < taps; k++) {
      size_t d = (m + n * (size_t)taps - (size_t)k) % n;
      if (d & 1)
        continue;
      float g = (k & 1 ? -1.0f : 1.0f) * h[taps - 1 - k];
      acc += h[k] * in[d / 2] + g * in[half + d / 2];
    }
    out[m] = acc;
  }
}

static void pass_range(void *arg, size_t begin, size_t end) {
  pass_job *j = arg;
  size_t n = j->len[j->axis], s = j->stride[j->axis];
  if (n < 2) /* wavelet.c halves only even lengths of at least twice the filter */
    return;
  float complex *buf = malloc(2 * n * sizeof *buf);
  if (buf == NULL) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (size_t i = begin; i < end; i++) {
    size_t at = line_start(j, i);
    for (size_t m = 0; m < n; m++)
      buf[m] = j->src[at + m * s];
    transform_line(j, buf, buf + n, n);
    for (size_t m = 0; m < n; m++)
      j->dst[at + m * s] = buf[n + m];
  }
  free(buf);
}

int mr_wavelet_cpu_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                        int inverse, const mr_wavelet_taps *f, const mr_cfloat *src, mr_cfloat *dst,
                        mr_err *err) {
  pass_job j = {.stride = {1, dims[0], dims[0] * dims[1]}, .len = {len[0], len[1], len[2]},
                .axis = axis, .inverse = inverse, .f = f, .src = src, .dst = dst};
  j.other = len[axis == 0 ? 1 : 0];
  size_t lines = len[0] * len[1] * len[2] / len[axis];
  mr_cpu_parallel_for(mr_device_threads(dev), lines, 16, pass_range, &j);
  return atomic_load(&j.failed) ? mr_err_set(err, MR_ENOMEM, "wavelet: out of memory") : 0;
}

typedef struct copy_job {
  size_t dims[3], len[3], shift[3];
  const float complex *src;
  float complex *dst;
} copy_job;

/* Rows of x over (y, z) of the region. */
static void copy_range(void *arg, size_t begin, size_t end) {
  const copy_job *j = arg;
  for (size_t r = begin; r < end; r++) {
    size_t y = r % j->len[1], z = r / j->len[1];
    size_t ty = (y + j->shift[1]) % j->dims[1], tz = (z + j->shift[2]) % j->dims[2];
    const float complex *in = j->src + (z * j->dims[1] + y) * j->dims[0];
    float complex *out = j->dst + (tz * j->dims[1] + ty) * j->dims[0];
    size_t s = j->shift[0] % j->dims[0], head = j->len[0] - s;
    for (size_t x = 0; x < head; x++)
      out[x + s] = in[x];
    for (size_t x = head; x < j->len[0]; x++)
      out[x - head] = in[x];
  }
}

int mr_wavelet_cpu_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                        const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst) {
  copy_job j = {.dims = {dims[0], dims[1], dims[2]}, .len = {len[0], len[1], len[2]},
                .shift = {shift[0], shift[1], shift[2]}, .src = src, .dst = dst};
  mr_cpu_parallel_for(mr_device_threads(dev), len[1] * len[2], 16, copy_range, &j);
  return 0;
}
