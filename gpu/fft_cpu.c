/* The CPU transform: a centering pass, then one pass per dimension, each
 * on the pool's CPU threads. A pass transforms its lines a block at a time
 * with a small FFTW plan made once per shape (FFTW_ESTIMATE, one FFTW
 * thread): contiguous rows in place, strided columns gathered side by side
 * into a per-call scratch block, transformed, scattered back. FFTW's own
 * plan for a batched 2-D or 3-D shape is not used: FFTW_ESTIMATE picks one
 * that walks the strided dimensions a line at a time (a 256x256 x 32 batch
 * took 51 ms, ten times what FFTW_MEASURE finds), and FFTW_MEASURE picks
 * by timing, so the result would vary from run to run. Blocks keep every
 * transform within the cache and give the threads independent work. */
#include <complex.h>
#include <fftw3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fail.h"
#include "fft_impl.h"

/* FFTW's planner is one global state: plan making and destruction are
 * serialised here. Executing plans is thread-safe and needs no lock. */
static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

/* Lines per block: at most MAX_WIDTH, fewer for long lines so that a block
 * stays near BLOCK_SAMPLES samples (64 KiB). */
#define MAX_WIDTH 16
#define BLOCK_SAMPLES 8192

/* The lines of one dimension, each n long with its samples `stride` apart,
 * transformed `width` at a time. */
typedef struct axis {
  size_t n, stride, width;
  size_t outer;        /* rows (stride 1), else groups of n * stride samples */
  fftwf_plan plan[2];  /* [forward 0, backward 1]: width contiguous lines in place */
} axis;

typedef struct fft_cpu {
  int naxes;
  axis axes[3];
} fft_cpu;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Plans `width` contiguous transforms of n in place on aligned memory. */
static int make_plans(axis *a) {
  int n = (int)a->n;
  fftwf_complex *scratch = fftwf_malloc(a->width * a->n * sizeof *scratch);
  if (scratch == NULL)
    return mr_fail(MR_ENOMEM, "fft: out of memory");
  pthread_mutex_lock(&planner);
  /* FFTW_ESTIMATE never touches the array: it only fixes alignment. */
  for (int d = 0; d < 2; d++)
    a->plan[d] = fftwf_plan_many_dft(1, &n, (int)a->width, scratch, NULL, 1, n, scratch, NULL,
                                     1, n, d == 0 ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
  pthread_mutex_unlock(&planner);
  fftwf_free(scratch);
  if (a->plan[0] == NULL || a->plan[1] == NULL)
    return mr_fail(MR_EINVAL, "fft: FFTW cannot plan %zu transforms of %zu", a->width, a->n);
  return 0;
}

int mr_fft_cpu_create(mr_fft_plan *p) {
  fft_cpu *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_fail(MR_ENOMEM, "fft: out of memory");
  p->impl = c;
  const mr_fft_shape *s = &p->shape;
  size_t total = s->len * s->batch, stride = 1;
  int rc = 0;
  for (int d = 0; d < s->rank && rc == 0; d++) {
    size_t n = s->n[d];
    if (n > 1) {
      axis *a = &c->axes[c->naxes++];
      a->n = n;
      a->stride = stride;
      a->outer = total / (n * stride);
      /* Lines of a block: neighbouring columns, or consecutive rows. */
      size_t across = stride > 1 ? stride : a->outer;
      a->width = min_size(min_size(MAX_WIDTH, across), BLOCK_SAMPLES / n > 1 ? BLOCK_SAMPLES / n : 1);
      rc = make_plans(a);
    }
    stride *= n;
  }
  if (rc < 0)
    mr_fft_cpu_destroy(p);
  return rc;
}

void mr_fft_cpu_destroy(mr_fft_plan *p) {
  fft_cpu *c = p->impl;
  pthread_mutex_lock(&planner);
  for (int i = 0; i < 3; i++)
    for (int d = 0; d < 2; d++)
      if (c->axes[i].plan[d] != NULL)
        fftwf_destroy_plan(c->axes[i].plan[d]);
  pthread_mutex_unlock(&planner);
  free(c);
  p->impl = NULL;
}

typedef struct pass {
  const mr_fft_shape *s;
  const float complex *in;
  float complex *out;
  const float complex *ramp; /* odd shapes: this stage's factors */
  const axis *axis;          /* a dimension's pass */
  fftwf_plan plan;
  int centre;                /* even shapes: the pass centres its dimension */
  float scale;               /* applied by the first pass */
  atomic_int failed;         /* a thread found no memory for its scratch */
} pass;

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

/* Row `from` (n samples) into `to`, centred for an even n (fft_impl.h:
 * to[m] = (-1)^m from[m + n/2]) and scaled; from == to is allowed. */
static void centre_row(const float complex *from, float complex *to, size_t n, float scale) {
  size_t h = n / 2;
  float lo = scale, hi = h % 2 ? -scale : scale; /* the signs at m and m + h, m even */
  for (size_t m = 0; m + 1 < h; m += 2) {
    float complex a0 = from[m], a1 = from[m + 1], b0 = from[m + h], b1 = from[m + h + 1];
    to[m] = lo * b0;
    to[m + 1] = -lo * b1;
    to[m + h] = hi * a0;
    to[m + h + 1] = -hi * a1;
  }
  if (h % 2) { /* h odd: the pair (h - 1, n - 1) is left */
    float complex a = from[h - 1], b = from[n - 1];
    to[h - 1] = lo * b;
    to[n - 1] = hi * a;
  }
}

/* Contiguous rows, one block of `width` rows per item, from p->in (the
 * first pass; p->out after) to p->out: in place where the block is aligned
 * as the plan's memory was, else through scratch (odd row lengths; the
 * last, partial block, whose other lines are zeroed). */
static void row_blocks(const pass *p, fftwf_complex *scratch, size_t begin, size_t end) {
  const axis *a = p->axis;
  for (size_t blk = begin; blk < end; blk++) {
    size_t first = blk * a->width, count = min_size(a->width, a->outer - first);
    const float complex *from = p->in + first * a->n;
    float complex *rows = p->out + first * a->n, *t = rows;
    if (count < a->width || fftwf_alignment_of((float *)rows) != 0) {
      t = (float complex *)scratch;
      memset(t + count * a->n, 0, (a->width - count) * a->n * sizeof *t);
    }
    for (size_t r = 0; r < count; r++) {
      if (p->centre)
        centre_row(from + r * a->n, t + r * a->n, a->n, p->scale);
      else if (from != t)
        memcpy(t + r * a->n, from + r * a->n, a->n * sizeof *t);
    }
    fftwf_execute_dft(p->plan, (fftwf_complex *)t, (fftwf_complex *)t);
    if (t != rows)
      memcpy(rows, t, count * a->n * sizeof *t);
  }
}

/* Strided lines of p->out, one block of `width` neighbouring lines per
 * item: gathered into scratch a line after another (centred for an even
 * n: line sample m from m + n/2, negated for odd m), transformed,
 * scattered back. Lines past a partial block are zeroed. */
static void column_blocks(const pass *p, fftwf_complex *scratch, size_t begin, size_t end) {
  const axis *a = p->axis;
  size_t n = a->n, shift = p->centre ? n / 2 : 0, per_group = (a->stride + a->width - 1) / a->width;
  float complex *buf = (float complex *)scratch;
  for (size_t blk = begin; blk < end; blk++) {
    size_t first = blk % per_group * a->width, count = min_size(a->width, a->stride - first);
    float complex *base = p->out + blk / per_group * n * a->stride + first;
    if (count < a->width)
      memset(buf + count * n, 0, (a->width - count) * n * sizeof *buf);
    for (size_t j = 0; j < n; j++) {
      const float complex *src = base + (j + shift) % n * a->stride;
      float sign = p->centre && j % 2 ? -1.0f : 1.0f;
      for (size_t t = 0; t < count; t++)
        buf[t * n + j] = sign * src[t];
    }
    fftwf_execute_dft(p->plan, scratch, scratch);
    for (size_t j = 0; j < n; j++)
      for (size_t t = 0; t < count; t++)
        base[j * a->stride + t] = buf[t * n + j];
  }
}

static void axis_blocks(void *arg, size_t begin, size_t end) {
  pass *p = arg;
  fftwf_complex *scratch = fftwf_malloc(p->axis->width * p->axis->n * sizeof *scratch);
  if (scratch == NULL) {
    atomic_store(&p->failed, 1);
    return;
  }
  if (p->axis->stride == 1)
    row_blocks(p, scratch, begin, end);
  else
    column_blocks(p, scratch, begin, end);
  fftwf_free(scratch);
}

/* Lines of at least this many samples go to a thread at a time. */
#define GRAIN_SAMPLES 16384

int mr_fft_cpu_execute(mr_fft_plan *p, mr_fft_direction dir, const mr_cfloat *in,
                       mr_cfloat *out) {
  fft_cpu *c = p->impl;
  const mr_fft_shape *s = &p->shape;
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  size_t rows = s->batch * s->n[1] * s->n[2];
  pass a = {.s = s, .in = in, .out = out, .centre = s->even, .scale = s->scale};
  if (!s->even) { /* centring by phase ramps around the passes */
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 0);
    mr_cpu_parallel_for(threads, rows, GRAIN_SAMPLES / s->n[0] + 1, ramp_rows, &a);
    a.in = out;
  }
  for (int i = 0; i < c->naxes; i++) {
    const axis *x = &c->axes[i];
    size_t blocks = x->stride == 1 ? (x->outer + x->width - 1) / x->width
                                   : x->outer * ((x->stride + x->width - 1) / x->width);
    a.axis = x;
    a.plan = x->plan[dir == MR_FFT_FORWARD ? 0 : 1];
    mr_cpu_parallel_for(threads, blocks, GRAIN_SAMPLES / (x->width * x->n) + 1, axis_blocks, &a);
  }
  if (atomic_load(&a.failed))
    return mr_fail(MR_ENOMEM, "fft: out of memory");
  if (!s->even) {
    a.in = NULL;
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 1);
    mr_cpu_parallel_for(threads, rows, GRAIN_SAMPLES / s->n[0] + 1, ramp_rows, &a);
  }
  return 0;
}
