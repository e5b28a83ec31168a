/* Slice-GRAPPA on the CPU: im2col, the CAIPI phase ramp, and the
 * calibration's double-precision normal equations and their Cholesky
 * solves, spread over the CPU threads (OpenBLAS itself runs
 * single-threaded: gpu/core/cpu_threads.c). */
#include <complex.h>
#include <math.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "budget.h"
#include "cpu_threads.h"
#include "error.h"
#include "device_impl.h"
#include "slice_grappa_impl.h"

/* Columns (source taps) per thread hand-out. */
#define GRAIN 4

typedef struct im2col_job {
  const mr_sg_window *w;
  const mr_cfloat *k;
  mr_cfloat *out;
} im2col_job;

/* Column s: tap (i, j) of coil c, over every position of the box: per
 * row, the positions whose tap lies inside the line copied at once, the
 * rest zero. */
static void im2col_columns(void *arg, size_t begin, size_t end) {
  const im2col_job *job = arg;
  const mr_sg_window *w = job->w;
  size_t bx = (size_t)(w->x1 - w->x0), rows = bx * (size_t)(w->y1 - w->y0);
  size_t wi = (size_t)(w->i1 - w->i0), wj = (size_t)(w->j1 - w->j0);
  for (size_t s = begin; s < end; s++) {
    int i = w->i0 + (int)(s % wi), j = w->j0 + (int)(s / wi % wj), c = (int)(s / (wi * wj));
    int dx = i - w->kx / 2, dy = (j - w->ky / 2) * w->ystep;
    /* positions [xa, xb) have their tap x + dx in [0, nx) */
    int xa = -dx > w->x0 ? -dx : w->x0, xb = w->nx - dx < w->x1 ? w->nx - dx : w->x1;
    xa = xa < w->x1 ? xa : w->x1;
    xb = xb > xa ? xb : xa;
    size_t before = (size_t)(xa - w->x0), inside = (size_t)(xb - xa), after = bx - before - inside;
    mr_cfloat *col = job->out + s * rows;
    for (int y = w->y0; y < w->y1; y++) {
      mr_cfloat *row = col + (size_t)(y - w->y0) * bx;
      int ys = y + dy;
      if (ys < 0 || ys >= w->ny) {
        memset(row, 0, bx * sizeof *row);
        continue;
      }
      const mr_cfloat *line = job->k + ((size_t)c * w->ny + (size_t)ys) * w->nx;
      memset(row, 0, before * sizeof *row);
      memcpy(row + before, line + xa + dx, inside * sizeof *row);
      memset(row + before + inside, 0, after * sizeof *row);
    }
  }
}

int mr_sg_cpu_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                     mr_cfloat *out) {
  im2col_job job = {w, kspace, out};
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)(w->i1 - w->i0) * (w->j1 - w->j0) * w->nc,
                      GRAIN,
                      im2col_columns, &job);
  return 0;
}

typedef struct caipi_job {
  int nc, nx, ny, caipi, first, direction;
  mr_cfloat *k;
} caipi_job;

/* Row r = (b nc + c) ny + y of the k-spaces. */
static void caipi_rows(void *arg, size_t begin, size_t end) {
  const caipi_job *job = arg;
  for (size_t r = begin; r < end; r++) {
    int y = (int)(r % (size_t)job->ny);
    int slice = job->first + (int)(r / ((size_t)job->ny * job->nc));
    /* the phase's argument reduced modulo caipi first: exact for any y */
    long turns = ((long)(y - job->ny / 2) * slice) % job->caipi;
    double t = -job->direction * 2 * M_PI * (double)turns / job->caipi;
    mr_cfloat ph = (float)cos(t) + I * (float)sin(t);
    mr_cfloat *line = job->k + r * job->nx;
    for (int x = 0; x < job->nx; x++)
      line[x] *= ph;
  }
}

int mr_sg_cpu_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                    int direction, mr_cfloat *kspace) {
  caipi_job job = {nc, nx, ny, caipi, first, direction, kspace};
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)count * nc * ny, 64, caipi_rows, &job);
  return 0;
}

/* The double products are cut into pieces of this many columns (Gram)
 * or rows (right-hand sides) of the result, handed to the threads. */
#define PIECE 64
typedef struct widen_job {
  const mr_cfloat *from;
  mr_cdouble *to;
} widen_job;

static void widen_range(void *arg, size_t begin, size_t end) {
  const widen_job *j = arg;
  for (size_t i = begin; i < end; i++)
    j->to[i] = (mr_cdouble)j->from[i];
}

static void widen(mr_device *dev, size_t count, const mr_cfloat *from, mr_cdouble *to) {
  widen_job j = {from, to};
  mr_cpu_parallel_for(mr_device_threads(dev), count, 4096, widen_range, &j);
}

typedef struct gram_job {
  const mr_sg_window *w;
  int accumulate, wi, level;
  size_t rows, n, taps, strip, pieces;
  const mr_cdouble *a;
  mr_cdouble *base;  /* wi blocks of nc x n: X_(i, first row)^H A */
  mr_cdouble *first, *last; /* n x n, lower: the first / last strip's products */
  mr_cdouble *g;
} gram_job;

/* The products, in pieces of PIECE columns: [0, wi pieces) the base
 * blocks of tap (i, first row), then the first and the last strip's. */
static void gram_products(void *arg, size_t begin, size_t end) {
  const gram_job *j = arg;
  size_t nc = (size_t)j->w->nc, n = j->n, rows = j->rows;
  const mr_cdouble one = 1, zero = 0;
  for (size_t item = begin; item < end; item++) {
    size_t part = item / j->pieces, c0 = item % j->pieces * PIECE;
    int width = (int)(n - c0 < PIECE ? n - c0 : PIECE);
    if (part < (size_t)j->wi) { /* X_t: tap t's column of every coil, taps columns apart */
      cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, (int)nc, width, (int)rows, &one,
                  j->a + part * rows, (int)(j->taps * rows), j->a + c0 * rows, (int)rows, &zero,
                  j->base + part * nc * n + c0 * nc, (int)nc);
      continue;
    }
    size_t r0 = part == (size_t)j->wi ? 0 : rows - j->strip;
    mr_cdouble *out = (part == (size_t)j->wi ? j->first : j->last) + c0 * n + c0;
    const mr_cdouble *aj = j->a + c0 * rows + r0;
    int below = (int)(n - c0) - width;
    cblas_zherk(CblasColMajor, CblasLower, CblasConjTrans, width, (int)j->strip, 1.0, aj,
                (int)rows, 0.0, out, (int)n);
    if (below > 0)
      cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, below, width, (int)j->strip, &one,
                  aj + (size_t)width * rows, (int)rows, aj, (int)rows, &zero, out + width,
                  (int)n);
  }
}

/* Columns [begin, end) of the lower triangle, the rows whose tap lies on
 * tap row j->level: block (t, u) (taps t of row r, u of column col) is
 * a base block where t or u is in the first tap row, else block
 * (t - row, u - row) minus that one's first strip plus (t, u)'s last
 * strip, the level before's value kept in last. */
static void gram_level(void *arg, size_t begin, size_t end) {
  const gram_job *j = arg;
  size_t nc = (size_t)j->w->nc, n = j->n, taps = j->taps, wi = (size_t)j->wi;
  size_t level = (size_t)j->level;
  for (size_t col = begin; col < end; col++) {
    size_t c2 = col / taps, u = col % taps, iu = u % wi, ju = u / wi;
    for (size_t c = 0; c < nc; c++)
      for (size_t it = 0; it < wi; it++) {
        size_t r = c * taps + level * wi + it;
        if (r < col)
          continue;
        mr_cdouble m;
        if (level == 0)
          m = j->base[it * nc * n + col * nc + c];
        else if (ju == 0)
          m = conj(j->base[iu * nc * n + r * nc + c2]);
        else
          m = j->last[(col - wi) * n + r - wi] - j->first[(col - wi) * n + r - wi] +
              j->last[col * n + r];
        j->last[col * n + r] = m;
        mr_cdouble *at = j->g + col * n + r;
        *at = j->accumulate ? *at + m : m;
      }
  }
}

/* The Gram matrix of an im2col matrix repeats itself: a pair of taps one
 * tap row further on sums the same products over a box moved by ystep
 * lines. So only the pairs with a tap in the first tap row are summed over
 * the whole box (wi products nc x n), the others come from the pair a row
 * before by the box's first ystep lines leaving and its last entering (two
 * products n x n over those lines): for epi_sms's 5 x 5 kernel over 60 x
 * 60 positions 40% of a ZHERK's multiplications, and in shapes that run
 * better on the threads. */
int mr_sg_cpu_gram(mr_device *dev, const mr_sg_window *w, const mr_cfloat *a, int accumulate,
                   mr_cdouble *wide, mr_cdouble *g, mr_cdouble *own, int ldo, mr_err *err) {
  int wi = w->i1 - w->i0, wj = w->j1 - w->j0;
  size_t bx = (size_t)(w->x1 - w->x0), by = (size_t)(w->y1 - w->y0), rows = bx * by;
  size_t taps = (size_t)wi * wj, n = taps * w->nc;
  size_t bytes = ((size_t)wi * w->nc * n + 2 * n * n) * sizeof(mr_cdouble);
  mr_err e = {0};
  mr_cdouble *scratch = mr_budget_alloc(bytes, "slice-GRAPPA's Gram matrix", &e);
  if (scratch == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "slice-GRAPPA: %s", e.msg);
  widen(dev, rows * n, a, wide);
  gram_job j = {.w = w, .accumulate = accumulate, .wi = wi, .rows = rows, .n = n, .taps = taps,
                .strip = (by < (size_t)w->ystep ? by : (size_t)w->ystep) * bx,
                .pieces = (n + PIECE - 1) / PIECE, .a = wide, .base = scratch,
                .first = scratch + (size_t)wi * w->nc * n, .g = g};
  j.last = j.first + n * n;
  mr_cpu_threads *threads = mr_device_threads(dev);
  mr_cpu_parallel_for(threads, ((size_t)wi + 2) * j.pieces, 1, gram_products, &j);
  for (j.level = 0; j.level < wj; j.level++)
    mr_cpu_parallel_for(threads, n, 8, gram_level, &j);
  /* own: the centre tap's columns of this call's products (in last) */
  size_t centre = (size_t)(w->ky / 2 - w->j0) * wi + (size_t)(w->kx / 2 - w->i0);
  for (size_t c = 0; own != NULL && c < (size_t)w->nc; c++) {
    size_t col = c * taps + centre;
    for (size_t r = 0; r < n; r++)
      own[c * (size_t)ldo + r] = r >= col ? j.last[col * n + r] : conj(j.last[r * n + col]);
  }
  mr_budget_free(scratch, bytes);
  return 0;
}

typedef struct cross_job {
  int rows, n, nb, ldr;
  const mr_cdouble *a, *b;
  mr_cdouble *rhs;
} cross_job;

/* Rows [r0, r0 + PIECE) of rhs. */
static void cross_pieces(void *arg, size_t begin, size_t end) {
  const cross_job *j = arg;
  const mr_cdouble one = 1, zero = 0;
  for (size_t piece = begin; piece < end; piece++) {
    int r0 = (int)piece * PIECE, m = j->n - r0 < PIECE ? j->n - r0 : PIECE;
    cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, m, j->nb, j->rows, &one,
                j->a + (size_t)r0 * j->rows, j->rows, j->b, j->rows, &zero, j->rhs + r0, j->ldr);
  }
}

int mr_sg_cpu_cross(mr_device *dev, int rows, int n, const mr_cdouble *wide, int nb,
                    const mr_cfloat *b, mr_cdouble *bwide, mr_cdouble *rhs, int ldr) {
  widen(dev, (size_t)rows * nb, b, bwide);
  cross_job j = {rows, n, nb, ldr, wide, bwide, rhs};
  mr_cpu_parallel_for(mr_device_threads(dev), ((size_t)n + PIECE - 1) / PIECE, 1, cross_pieces,
                      &j);
  return 0;
}

/* Row r of class c's equations is tap (c->i0 + r % wi, c->j0 + r / wi % wj)
 * of coil r / (wi wj): its index among the full kernel's taps. */
static size_t full_tap(const mr_sg_system *s, const mr_sg_class *c, size_t r) {
  size_t wi = (size_t)(c->i1 - c->i0), wj = (size_t)(c->j1 - c->j0);
  size_t i = (size_t)c->i0 + r % wi, j = (size_t)c->j0 + r / wi % wj, coil = r / (wi * wj);
  return (coil * (size_t)s->ky + j) * (size_t)s->kx + i;
}

/* Class q's equations, the lower triangle of gq from g's (the taps' order
 * is kept, so it lies there): a class's taps come in runs of wi
 * consecutive ones, copied as runs. */
static void class_equations(const mr_sg_system *s, int q, const mr_cdouble *g,
                            const mr_cdouble *rhs, double lambda, mr_cdouble *gq,
                            mr_cdouble *rq) {
  const mr_sg_class *c = &s->cls[q];
  size_t nq = (size_t)c->n, n = (size_t)s->n, wi = (size_t)(c->i1 - c->i0);
  for (size_t col = 0; col < nq; col++) {
    const mr_cdouble *from = g + full_tap(s, c, col) * n;
    for (size_t run = col - col % wi; run < nq; run += wi) {
      size_t fr = full_tap(s, c, run);
      for (size_t row = run < col ? col : run; row < run + wi; row++)
        gq[col * nq + row] = from[fr + row - run];
    }
    gq[col * nq + col] += lambda;
  }
  for (size_t k = 0; k < (size_t)s->ntgt; k++)
    for (size_t run = 0; run < nq; run += wi) {
      const mr_cdouble *from = rhs + k * n + full_tap(s, c, run);
      for (size_t i = 0; i < wi; i++)
        rq[k * nq + run + i] = from[i];
    }
}

int mr_sg_cpu_class(mr_device *dev, const mr_sg_system *s, int q, const mr_cdouble *g,
                    const mr_cdouble *rhs, double lambda, mr_cdouble *gq, mr_cdouble *rq) {
  (void)dev;
  class_equations(s, q, g, rhs, lambda, gq, rq);
  return 0;
}

typedef struct solve_job {
  const mr_sg_system *s;
  const mr_cdouble *g, *rhs;
  double lambda;
  mr_cdouble *scratch;
  int slots;
  mr_cfloat *weights;
  int *failed;
} solve_job;

/* Slot t solves classes t, t + slots, ... in its own scratch. */
static void solve_slots(void *arg, size_t begin, size_t end) {
  const solve_job *j = arg;
  const mr_sg_system *s = j->s;
  size_t n = (size_t)s->n, ntgt = (size_t)s->ntgt;
  for (size_t t = begin; t < end; t++) {
    mr_cdouble *gq = j->scratch + t * (n * n + n * ntgt), *rq = gq + n * n;
    for (int q = (int)t; q < s->nclass; q += j->slots) {
      const mr_sg_class *c = &s->cls[q];
      class_equations(s, q, j->g, j->rhs, j->lambda, gq, rq);
      lapack_int info = LAPACKE_zposv(LAPACK_COL_MAJOR, 'L', c->n, (lapack_int)ntgt,
                                      (lapack_complex_double *)gq, c->n,
                                      (lapack_complex_double *)rq, c->n);
      j->failed[q] = info != 0;
      mr_cfloat *w = j->weights + c->offset;
      for (size_t i = 0; info == 0 && i < (size_t)c->n * ntgt; i++)
        w[i] = (mr_cfloat)rq[i];
    }
  }
}

int mr_sg_cpu_solve(mr_device *dev, const mr_sg_system *s, const mr_cdouble *g,
                    const mr_cdouble *rhs, double lambda, mr_cdouble *scratch, int slots,
                    mr_cfloat *weights, int *failed) {
  solve_job j = {s, g, rhs, lambda, scratch, slots, weights, failed};
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)slots, 1, solve_slots, &j);
  return 0;
}
