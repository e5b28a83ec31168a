/* The CPU transform: one pass per dimension on the pool's CPU threads,
 * each transforming its lines a block at a time with a small FFTW plan
 * made once per shape (FFTW_ESTIMATE, one FFTW thread): contiguous rows
 * where they lie, strided columns gathered side by side into a scratch
 * block, transformed and scattered back. Even shapes are centred on the
 * way in (rows as they are copied, columns as they are gathered: no pass
 * of its own); odd ones by phase ramps before and after. For a batch of
 * planes, each plane's rows and columns are done together while the plane
 * is in the cache.
 *
 * FFTW's own plan for a batched 2-D or 3-D shape is not used:
 * FFTW_ESTIMATE picks one that walks the strided dimensions a line at a
 * time (a 256x256 x 32 batch took 51 ms on a 2-core machine, ten times
 * what FFTW_MEASURE finds), and FFTW_MEASURE picks by timing, so the
 * result could vary from run to run. */
#include <complex.h>
#include <fftw3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fft_impl.h"

/* FFTW's planner is one global state: plan making and destruction are
 * serialised here. Executing plans is thread-safe and needs no lock. */
static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

/* Lines per block: at most MAX_WIDTH, fewer for long lines so that a block
 * stays near BLOCK_SAMPLES samples (64 KiB). */
#define MAX_WIDTH 16
#define BLOCK_SAMPLES 8192
/* Gathered lines lie this many samples (a cache line) further apart than
 * their length: lines of a power-of-two length would otherwise fall into
 * the same few cache sets, and the gather would evict what it just wrote. */
#define LINE_PAD 8
/* Items of at least this many samples go to a thread at a time. */
#define GRAIN_SAMPLES 16384

/* The lines along one dimension: n long (1: nothing to do), neighbouring
 * samples `stride` apart, transformed `width` at a time with their starts
 * `dist` apart (rows where they lie: n; gathered columns: padded). */
typedef struct axis {
  size_t n, stride, width, dist;
  fftwf_plan plan[2]; /* [forward 0, backward 1], in place on aligned memory */
} axis;

typedef struct fft_cpu {
  axis axes[3]; /* x, y, z */
} fft_cpu;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static int make_plans(axis *a, mr_err *err) {
  int n = (int)a->n, dist = (int)a->dist;
  fftwf_complex *scratch = fftwf_malloc(a->width * a->dist * sizeof *scratch);
  if (scratch == NULL)
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  pthread_mutex_lock(&planner);
  /* FFTW_ESTIMATE never touches the array: it only fixes alignment. */
  for (int d = 0; d < 2; d++)
    a->plan[d] = fftwf_plan_many_dft(1, &n, (int)a->width, scratch, NULL, 1, dist, scratch, NULL,
                                     1, dist, d == 0 ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
  pthread_mutex_unlock(&planner);
  fftwf_free(scratch);
  if (a->plan[0] == NULL || a->plan[1] == NULL)
    return mr_err_set(err, MR_EINVAL, "fft: FFTW cannot plan %zu transforms of %zu", a->width,
                      a->n);
  return 0;
}

int mr_fft_cpu_create(mr_fft_plan *p, mr_err *err) {
  fft_cpu *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  p->impl = c;
  const mr_fft_shape *s = &p->shape;
  size_t stride = 1, rows = s->len * s->batch / s->n[0];
  int rc = 0;
  for (int d = 0; d < 3 && rc == 0; d++) {
    axis *a = &c->axes[d];
    a->n = s->n[d];
    a->stride = stride;
    stride *= a->n;
    if (a->n == 1)
      continue;
    /* A block: consecutive rows, or neighbouring columns. */
    a->width = min_size(min_size(MAX_WIDTH, d == 0 ? rows : a->stride),
                        BLOCK_SAMPLES / a->n > 1 ? BLOCK_SAMPLES / a->n : 1);
    a->dist = d == 0 ? a->n : a->n + LINE_PAD;
    rc = make_plans(a, err);
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
  const fft_cpu *c;
  int d;                     /* 0 forward, 1 backward */
  const float complex *in;   /* what the x pass reads */
  float complex *out;
  const float complex *ramp; /* odd shapes: this stage's factors */
  int centre;                /* even shapes: the passes centre their dimension */
  int axis;                  /* the dimension of a column pass */
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

/* Rows [first, first + count) of the x axis, count <= width: from p->in
 * into p->out, centred and scaled for an even shape, transformed: in place
 * where the block is aligned as the plan's memory was, else in scratch
 * (odd row lengths; a partial block, whose other lines are zeroed). */
static void row_block(const pass *p, float complex *scratch, size_t first, size_t count) {
  const axis *a = &p->c->axes[0];
  const float complex *from = p->in + first * a->n;
  float complex *rows = p->out + first * a->n, *t = rows;
  if (count < a->width || fftwf_alignment_of((float *)rows) != 0) {
    t = scratch;
    memset(t + count * a->n, 0, (a->width - count) * a->n * sizeof *t);
  }
  for (size_t r = 0; r < count; r++) {
    if (p->centre)
      centre_row(from + r * a->n, t + r * a->n, a->n, p->s->scale);
    else if (from != t)
      memcpy(t + r * a->n, from + r * a->n, a->n * sizeof *t);
  }
  fftwf_execute_dft(a->plan[p->d], (fftwf_complex *)t, (fftwf_complex *)t);
  if (t != rows)
    memcpy(rows, t, count * a->n * sizeof *t);
}

/* The lines along dimension `dim` that start at base + [0, count) (count
 * <= width) in p->out: gathered into scratch a line after another (centred
 * for an even shape: sample m from m + n/2, negated for odd m; lines past
 * count zeroed), transformed, scattered back. */
static void column_block(const pass *p, int dim, float complex *scratch, float complex *base,
                         size_t count) {
  const axis *a = &p->c->axes[dim];
  size_t n = a->n, dist = a->dist, shift = p->centre ? n / 2 : 0;
  if (count < a->width)
    memset(scratch + count * dist, 0, (a->width - count) * dist * sizeof *scratch);
  for (size_t j = 0; j < n; j++) {
    const float complex *src = base + (j + shift) % n * a->stride;
    float sign = p->centre && j % 2 ? -1.0f : 1.0f;
    for (size_t t = 0; t < count; t++)
      scratch[t * dist + j] = sign * src[t];
  }
  fftwf_execute_dft(a->plan[p->d], (fftwf_complex *)scratch, (fftwf_complex *)scratch);
  for (size_t j = 0; j < n; j++)
    for (size_t t = 0; t < count; t++)
      base[j * a->stride + t] = scratch[t * dist + j];
}

static float complex *scratch_for(pass *p, size_t samples) {
  float complex *scratch = fftwf_malloc(samples * sizeof *scratch);
  if (scratch == NULL)
    atomic_store(&p->failed, 1);
  return scratch;
}

/* Items: blocks of `width` rows. */
static void row_items(void *arg, size_t begin, size_t end) {
  pass *p = arg;
  const axis *a = &p->c->axes[0];
  size_t rows = p->s->len * p->s->batch / a->n;
  float complex *scratch = scratch_for(p, a->width * a->dist);
  for (size_t blk = begin; scratch != NULL && blk < end; blk++)
    row_block(p, scratch, blk * a->width, min_size(a->width, rows - blk * a->width));
  fftwf_free(scratch);
}

/* Blocks of a group of lines along `dim` (stride lines side by side). */
static size_t blocks_per_group(const axis *a) { return (a->stride + a->width - 1) / a->width; }

/* Items: blocks of `width` lines along p->axis, group after group. */
static void column_items(void *arg, size_t begin, size_t end) {
  pass *p = arg;
  const axis *a = &p->c->axes[p->axis];
  size_t per_group = blocks_per_group(a);
  float complex *scratch = scratch_for(p, a->width * a->dist);
  for (size_t b = begin; scratch != NULL && b < end; b++) {
    size_t first = b % per_group * a->width;
    column_block(p, p->axis, scratch, p->out + b / per_group * a->n * a->stride + first,
                 min_size(a->width, a->stride - first));
  }
  fftwf_free(scratch);
}

/* Items: planes (nx x ny), rows and then columns, while in the cache. */
static void plane_items(void *arg, size_t begin, size_t end) {
  pass *p = arg;
  const axis *x = &p->c->axes[0], *y = &p->c->axes[1];
  size_t rows_scratch = x->n > 1 ? x->width * x->dist : 0;
  float complex *scratch = scratch_for(p, rows_scratch > y->width * y->dist
                                              ? rows_scratch : y->width * y->dist);
  for (size_t q = begin; scratch != NULL && q < end; q++) {
    for (size_t r = 0; x->n > 1 && r < y->n; r += x->width)
      row_block(p, scratch, q * y->n + r, min_size(x->width, y->n - r));
    for (size_t first = 0; first < x->n; first += y->width)
      column_block(p, 1, scratch, p->out + q * x->n * y->n + first,
                   min_size(y->width, x->n - first));
  }
  fftwf_free(scratch);
}

/* The pass along dimension `dim` (not x) over `groups` groups of lines. */
static void columns(mr_cpu_threads *threads, pass *p, int dim, size_t groups) {
  const axis *a = &p->c->axes[dim];
  p->axis = dim;
  mr_cpu_parallel_for(threads, groups * blocks_per_group(a), GRAIN_SAMPLES / (a->width * a->n) + 1,
                      column_items, p);
}

int mr_fft_cpu_execute(mr_fft_plan *p, mr_fft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                       mr_err *err) {
  fft_cpu *c = p->impl;
  const mr_fft_shape *s = &p->shape;
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  size_t nx = s->n[0], ny = s->n[1], rows = s->len * s->batch / nx, planes = rows / ny;
  pass a = {.s = s, .c = c, .d = dir == MR_FFT_FORWARD ? 0 : 1, .in = in, .out = out,
            .centre = s->even && !s->plain};
  if (s->plain && nx == 1 && in != out) /* no row pass to bring in over */
    memcpy(out, in, s->len * s->batch * sizeof *out);
  if (s->ramp != NULL) { /* centring by phase ramps around the passes */
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 0);
    mr_cpu_parallel_for(threads, rows, GRAIN_SAMPLES / nx + 1, ramp_rows, &a);
    a.in = out;
  }
  if (ny > 1 && planes >= 2 * (size_t)mr_cpu_threads_count(threads)) {
    mr_cpu_parallel_for(threads, planes, GRAIN_SAMPLES / (nx * ny) + 1, plane_items, &a);
  } else {
    const axis *x = &c->axes[0];
    if (nx > 1)
      mr_cpu_parallel_for(threads, (rows + x->width - 1) / x->width,
                          GRAIN_SAMPLES / (x->width * nx) + 1, row_items, &a);
    if (ny > 1)
      columns(threads, &a, 1, planes);
  }
  if (s->n[2] > 1)
    columns(threads, &a, 2, s->batch);
  if (atomic_load(&a.failed))
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  if (s->ramp != NULL) {
    a.in = NULL;
    a.ramp = (const float complex *)mr_fft_shape_ramp(s, dir, 1);
    mr_cpu_parallel_for(threads, rows, GRAIN_SAMPLES / nx + 1, ramp_rows, &a);
  }
  return 0;
}
