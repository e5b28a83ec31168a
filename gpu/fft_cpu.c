/* The CPU transform: a centering pass on the pool's CPU threads, then an
 * in-place FFTW plan (FFTW's own threads) over the whole batch. */
#include <complex.h>
#include <fftw3.h>
#include <pthread.h>
#include <stdlib.h>

#include "device_impl.h"
#include "error.h"
#include "fail.h"
#include "fft_impl.h"

/* FFTW's planner is one global state: plan making and destruction (and the
 * thread count they read) are serialised here. Executing plans is
 * thread-safe and needs no lock. */
static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int threads_ok;

static void init_fftw_threads(void) { threads_ok = fftwf_init_threads() != 0; }

/* Below this many samples one thread transforms faster than several. */
#define THREADED_MIN ((size_t)1 << 16)

typedef struct fft_cpu {
  /* [direction][aligned 0, unaligned 1], in place; unaligned ones are made
   * when first needed (callers' host arrays may be only 16-byte aligned). */
  fftwf_plan plan[2][2];
  pthread_mutex_t lock; /* making the unaligned plans */
} fft_cpu;

static int make_plan(const mr_fft_plan *p, mr_fft_direction dir, int unaligned,
                     fftwf_plan *out) {
  const mr_fft_shape *s = &p->shape;
  int n[3];
  for (int d = 0; d < s->rank; d++)
    n[d] = (int)s->n[s->rank - 1 - d]; /* FFTW wants the slowest first */
  size_t total = s->len * s->batch;
  /* Planning with FFTW_ESTIMATE never touches the array, so this memory is
   * only address space; it fixes the plan's alignment and in-placeness. */
  fftwf_complex *scratch = fftwf_malloc(total * sizeof *scratch);
  if (scratch == NULL)
    return mr_fail(MR_ENOMEM, "fft: out of memory");
  pthread_once(&threads_once, init_fftw_threads);
  pthread_mutex_lock(&planner);
  if (threads_ok)
    fftwf_plan_with_nthreads(total >= THREADED_MIN
                                 ? mr_cpu_threads_count(mr_device_threads(p->dev))
                                 : 1);
  unsigned flags = FFTW_ESTIMATE | (unaligned ? FFTW_UNALIGNED : 0);
  *out = fftwf_plan_many_dft(s->rank, n, (int)s->batch, scratch, NULL, 1,
                             (int)s->len, scratch, NULL, 1, (int)s->len, (int)dir,
                             flags);
  pthread_mutex_unlock(&planner);
  fftwf_free(scratch);
  if (*out == NULL)
    return mr_fail(MR_EINVAL, "fft: FFTW cannot plan rank %d, %zu x %zu x %zu, batch %zu",
                   s->rank, s->n[0], s->n[1], s->n[2], s->batch);
  return 0;
}

int mr_fft_cpu_create(mr_fft_plan *p) {
  fft_cpu *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_fail(MR_ENOMEM, "fft: out of memory");
  pthread_mutex_init(&c->lock, NULL);
  p->impl = c;
  int rc = make_plan(p, MR_FFT_FORWARD, 0, &c->plan[0][0]);
  if (rc == 0)
    rc = make_plan(p, MR_FFT_BACKWARD, 0, &c->plan[1][0]);
  if (rc < 0)
    mr_fft_cpu_destroy(p);
  return rc;
}

void mr_fft_cpu_destroy(mr_fft_plan *p) {
  fft_cpu *c = p->impl;
  pthread_mutex_lock(&planner);
  for (int d = 0; d < 2; d++)
    for (int u = 0; u < 2; u++)
      if (c->plan[d][u] != NULL)
        fftwf_destroy_plan(c->plan[d][u]);
  pthread_mutex_unlock(&planner);
  pthread_mutex_destroy(&c->lock);
  free(c);
  p->impl = NULL;
}

typedef struct pass {
  const mr_fft_shape *s;
  const float complex *in;
  float complex *out;
  const float complex *ramp; /* odd shapes: this stage's factors */
} pass;

/* Even shapes, one row (b, z, y) per item: the pairs (m, m + n/2) whose x
 * lies in the first half, swapped with their signs and scaled. Each element
 * belongs to exactly one pair, so in == out is safe. */
static void swap_rows(void *arg, size_t begin, size_t end) {
  const pass *a = arg;
  const mr_fft_shape *s = a->s;
  size_t nx = s->n[0], ny = s->n[1], nz = s->n[2];
  size_t hx = nx / 2, hy = ny / 2, hz = nz / 2; /* 0 past rank: n is 1 */
  for (size_t row = begin; row < end; row++) {
    size_t y = row % ny, z = row / ny % nz, b = row / (ny * nz);
    size_t y2 = (y + hy) % ny, z2 = (z + hz) % nz;
    size_t base = (b * nz + z) * ny * nx + y * nx;
    size_t base2 = (b * nz + z2) * ny * nx + y2 * nx + hx;
    float sign = (y + z) % 2 ? -s->scale : s->scale;
    float sign2 = (y2 + z2 + hx) % 2 ? -s->scale : s->scale;
    for (size_t x = 0; x < hx; x++) {
      float complex v = a->in[base + x], v2 = a->in[base2 + x];
      float flip = x % 2 ? -1.0f : 1.0f;
      a->out[base + x] = flip * sign * v2;
      a->out[base2 + x] = flip * sign2 * v;
    }
  }
}

/* Odd shapes, one row per item: out = ramp_x * ramp_y * ramp_z * in, with
 * the scale folded in on the pre stage (a->in != NULL). */
static void ramp_rows(void *arg, size_t begin, size_t end) {
  const pass *a = arg;
  const mr_fft_shape *s = a->s;
  size_t nx = s->n[0], ny = s->n[1], nz = s->n[2];
  const float complex *rx = a->ramp, *ry = rx + nx, *rz = ry + ny;
  const float complex *in = a->in != NULL ? a->in : a->out;
  float scale = a->in != NULL ? s->scale : 1.0f;
  for (size_t row = begin; row < end; row++) {
    size_t y = row % ny, z = row / ny % nz;
    float complex f = scale * ry[y] * rz[z];
    for (size_t x = 0, i = row * nx; x < nx; x++, i++)
      a->out[i] = f * rx[x] * in[i];
  }
}

/* Rows of at least this many samples go to a thread at a time. */
#define GRAIN_SAMPLES 16384

int mr_fft_cpu_execute(mr_fft_plan *p, mr_fft_direction dir,
                       const mr_cfloat *in, mr_cfloat *out) {
  fft_cpu *c = p->impl;
  const mr_fft_shape *s = &p->shape;
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  size_t rows = s->batch * s->n[1] * s->n[2];
  size_t grain = GRAIN_SAMPLES / s->n[0] + 1;
  pass a = {.s = s, .in = in, .out = out};
  if (s->even) {
    mr_cpu_parallel_for(threads, rows, grain, swap_rows, &a);
  } else {
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 0);
    mr_cpu_parallel_for(threads, rows, grain, ramp_rows, &a);
  }
  int d = dir == MR_FFT_FORWARD ? 0 : 1;
  int unaligned = fftwf_alignment_of((float *)out) != 0;
  if (unaligned) {
    pthread_mutex_lock(&c->lock);
    int rc = c->plan[d][1] != NULL ? 0 : make_plan(p, dir, 1, &c->plan[d][1]);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
      return rc;
  }
  fftwf_execute_dft(c->plan[d][unaligned], (fftwf_complex *)out,
                    (fftwf_complex *)out);
  if (!s->even) {
    a.in = NULL;
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 1);
    mr_cpu_parallel_for(threads, rows, grain, ramp_rows, &a);
  }
  return 0;
}
