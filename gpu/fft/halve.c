/* Halving readouts on the CPU threads (halve.h): a line's channels are
 * one job, its odd samples gathered into scratch of the thread, two
 * batched transforms of M points (fft.h plans, which a line's few
 * channels leave on the calling thread), the even samples and the
 * result combined into the output. */
#include "halve.h"

#include <complex.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fft.h"

struct mr_fft_halve {
  mr_device *dev;
  size_t nro, nch;
  mr_fft_plan *plan;  /* M points, a line's nch channels */
  mr_cfloat *twist;   /* the factors g (halve.h), M of them */
};

int mr_fft_halve_create(mr_device *dev, size_t nro, size_t nch, mr_fft_halve **out, mr_err *err) {
  if (mr_device_is_gpu(dev))
    return mr_err_set(err, MR_EINVAL, "halve: readouts are halved on the CPU");
  if (nro < 4 || nro % 4 != 0 || nch == 0)
    return mr_err_set(err, MR_EINVAL, "halve: %zu samples (a multiple of 4) on %zu channels",
                      nro, nch);
  mr_fft_halve *h = calloc(1, sizeof *h);
  size_t m = nro / 2;
  if (h == NULL || (h->twist = malloc(m * sizeof *h->twist)) == NULL) {
    free(h);
    return mr_err_set(err, MR_ENOMEM, "halve: out of memory");
  }
  mr_fft_opts line = {.rank = 1, .dims = {m, 1, 1}, .batch = nch};
  int rc = mr_fft_plan_create(dev, &line, &h->plan, err);
  if (rc < 0) {
    free(h->twist);
    free(h);
    return rc;
  }
  for (size_t i = 0; i < m; i++) {
    double a = 2.0 * M_PI * (double)i / (double)nro, sign = i < m / 2 ? 1.0 : -1.0;
    h->twist[i] = (float)(sign * cos(a)) + I * (float)(sign * sin(a));
  }
  h->dev = dev;
  h->nro = nro;
  h->nch = nch;
  *out = h;
  return 0;
}

size_t mr_fft_halve_nro(const mr_fft_halve *h) { return h->nro; }
size_t mr_fft_halve_nch(const mr_fft_halve *h) { return h->nch; }

void mr_fft_halve_destroy(mr_fft_halve *h) {
  if (h == NULL)
    return;
  mr_fft_plan_destroy(h->plan);
  free(h->twist);
  free(h);
}

typedef struct halve_job {
  const mr_fft_halve *h;
  const mr_cfloat *const *in;
  mr_cfloat *const *out;
  size_t in_stride, out_stride;
  atomic_int failed; /* the first error code of a thread, 0: none */
} halve_job;

/* One line through `odd` (nch x M samples). */
static int halve_line(const halve_job *j, size_t b, mr_cfloat *odd, mr_err *err) {
  const mr_fft_halve *h = j->h;
  size_t m = h->nro / 2, nch = h->nch;
  if (j->in[b] == NULL) {
    for (size_t c = 0; c < nch; c++)
      memset(j->out[b] + c * j->out_stride, 0, m * sizeof *odd);
    return 0;
  }
  for (size_t c = 0; c < nch; c++) {
    const mr_cfloat *x = j->in[b] + c * j->in_stride;
    mr_cfloat *o = odd + c * m;
    for (size_t i = 0; i < m; i += 2) {
      o[i] = x[2 * i + 1];
      o[i + 1] = -x[2 * i + 3];
    }
  }
  int rc = mr_fft_execute(h->plan, MR_FFT_BACKWARD, odd, odd, err);
  if (rc < 0)
    return rc;
  const float *g = (const float *)h->twist;
  for (size_t c = 0; c < nch; c++) {
    /* as floats: C's complex product checks for infinities and does not
     * vectorise */
    float *v = (float *)(odd + c * m);
    for (size_t i = 0; i < 2 * m; i += 2) {
      float re = v[i] * g[i] - v[i + 1] * g[i + 1], im = v[i] * g[i + 1] + v[i + 1] * g[i];
      v[i] = re;
      v[i + 1] = im;
    }
  }
  if ((rc = mr_fft_execute(h->plan, MR_FFT_FORWARD, odd, odd, err)) < 0)
    return rc;
  const float half = (float)M_SQRT1_2;
  for (size_t c = 0; c < nch; c++) {
    const mr_cfloat *x = j->in[b] + c * j->in_stride, *d = odd + c * m;
    mr_cfloat *y = j->out[b] + c * j->out_stride;
    for (size_t i = 0; i < m; i += 2) {
      y[i] = half * (x[2 * i] + d[i]);
      y[i + 1] = half * (x[2 * i + 2] - d[i + 1]);
    }
  }
  return 0;
}

/* Scratch aligned as FFTW's own arrays (the plans' in-place transforms
 * run on it without a copy). */
enum { SCRATCH_ALIGN = 64 };

static void halve_lines(void *arg, size_t begin, size_t end) {
  halve_job *j = arg;
  size_t bytes = j->h->nch * (j->h->nro / 2) * sizeof(mr_cfloat);
  mr_cfloat *odd = aligned_alloc(SCRATCH_ALIGN, (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN *
                                                    SCRATCH_ALIGN);
  int rc = odd != NULL ? 0 : MR_ENOMEM;
  mr_err err = {0};
  for (size_t b = begin; rc == 0 && b < end; b++)
    rc = halve_line(j, b, odd, &err);
  if (rc < 0) {
    int none = 0;
    atomic_compare_exchange_strong(&j->failed, &none, rc);
  }
  free(odd);
}

int mr_fft_halve_host(mr_fft_halve *h, const mr_cfloat *const *in, size_t in_stride,
                      mr_cfloat *const *out, size_t out_stride, size_t nlines, mr_err *err) {
  halve_job j = {.h = h, .in = in, .out = out, .in_stride = in_stride, .out_stride = out_stride};
  atomic_init(&j.failed, 0);
  mr_cpu_parallel_for(mr_device_threads(h->dev), nlines, 1, halve_lines, &j);
  int rc = atomic_load(&j.failed);
  return rc < 0 ? mr_err_set(err, rc, "halve: %s", rc == MR_ENOMEM ? "out of memory" : "a transform failed")
                : 0;
}
