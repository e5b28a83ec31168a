/* GRAPPA on the CPU: equation powers, normalisation and power clipping,
 * the calibration in double precision (normal equations from lagged
 * products, ZPOTRF and ZPOTRS), and filling. The powers are
 * summed in double in a fixed order that the GPU backend repeats exactly,
 * so both clip the same equations.
 *
 * The normal equations without A. A source (coil k, kernel line pl,
 * readout tap j) at equation (i, c) is F_r(i, c + j), r = (k, pl), with
 * F_r(i, u) = psi_i acs_k(i + pl R, c0 + u): the taps are one row read at
 * kro shifts. So the block (j, j + d) of M = A A^H is
 *   G_d(j) = sum_i sum_{c < n} F(i, c + j) F(i, c + j + d)^H,
 * a (coils x lines)^2 matrix; each next tap j moves the window by one
 * readout position (plus one column, less one: two rank-npe products), so
 * only the G_d(0), d < kro, are sums over all equations. U^H = A B^H
 * likewise: its rows of tap j are C_j = sum_i sum_{c < n} F(i, c + j)
 * T(i, c)^H, T the psi-weighted targets.
 *
 * Those sums are correlations along the readout at lags 0..kro-1, taken
 * in blocks of GRAM_BLOCK positions: block b of row i has the sources and
 * the targets (zero from n on) at its positions on one side and the
 * sources at them and the next kro - 1 on the other. Along a block padded
 * to LB = GRAM_BLOCK + kro - 1 samples nothing wraps, so each lag is a sum
 * over LB frequencies of the two sides' spectra (DFTs of LB points as
 * small GEMMs; the second side's spectra are the first's sources plus
 * those kro - 1 samples'): per frequency one (sources + targets) x
 * sources product over all (row, block) pairs, then one small GEMM to the
 * kro lags. That is LB / GRAM_BLOCK products per position instead of kro
 * (1.25 against 5 at kro 5; the DFTs add a seventh), in double precision
 * throughout: the result is the direct sums' to rounding. The sources'
 * pairs that start at positions n and later come off G_d(0) afterwards
 * (F's edge columns). Power clipping zeroes equations: their terms are
 * subtracted afterwards (explicit columns for those few). */
#include <cblas.h>
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "clock.h"
#include "device_impl.h"
#include "error.h"
#include "fft.h"
#include "grappa_impl.h"

typedef struct ranked {
  double power;
  int q;
} ranked;

typedef struct cpu_scratch {
  double *line_power; /* [nacs][nro]: sum over coils of |acs|^2 */
  double *col_power;  /* [npe][nro_max] of the segment at hand */
  double *psi;        /* [nseg][npe] */
  uint8_t *discard;   /* [nseg][npe * nro_max] */
  ranked *order;      /* [npe * nro_max] */
  /* F's first and last kro - 1 columns of each row ([npe][2 (kro - 1)]
   * [nc kpe], the window's moves), a lag block per lag (kro x nc kpe x
   * nc kpe), M
   * (n_src^2), U^H (n_src x n_tgt), and the clipped equations' columns
   * (n_src and n_tgt x ndisc_max). */
  double complex *edge, *lag, *m, *x, *cut_a, *cut_b;
  /* The blocked correlations (see the top): a chunk of gram_pairs (row,
   * block) pairs, the first side in samples (GRAM_BLOCK) and in
   * frequencies (LB), the second side's kro - 1 further samples and its
   * frequencies (LB); the products per frequency summed over the chunks
   * (LB x (nc kpe + n_tgt) x nc kpe) and per lag (kro x the same); the
   * DFT (LB x LB) and frequencies -> lags (LB x kro). */
  double complex *blk_a, *spec_a, *tail_b, *spec_b, *cross, *lags, *dft, *to_lag;
  int gram_pairs;
  /* Filling (mr_grappa_cpu_fill), grown on demand and kept: the padded
   * pattern lines, the targets, one step's sources and products, H with
   * the weights and phases it is made from; the two transforms. */
  mr_cfloat *fill_in, *fill_out, *fill_src, *fill_prod, *fill_h;
  size_t fill_in_n, fill_out_n, fill_src_n, fill_prod_n, fill_h_n;
  mr_fft_plan *fft_lines, *fft_targets;
} cpu_scratch;

/* Positions per block of the correlations, and the chunk of (row, block)
 * pairs they are summed over at once: both sides, in samples and in
 * frequencies, in about GRAM_CHUNK_BYTES (the cross products per frequency
 * are GEMMs with that many pairs as their inner dimension). */
enum { GRAM_BLOCK = 16, GRAM_CHUNK_BYTES = 16 << 20 };

static int gram_len(const mr_grappa_geom *g) { return GRAM_BLOCK + g->kro - 1; }

/* The columns F keeps per row: the first and the last kro - 1. */
static int edge_width(const mr_grappa_geom *g) { return 2 * (g->kro - 1); }

/* ZGEMM on the device's threads (OpenBLAS runs single-threaded, see
 * gpu/core/cpu_threads.c): c in tiles of tile_m x tile_n (ZGEMM_TILE
 * square unless set), a call each; batch products (1 unless set) a, b and
 * c apart by sa, sb and sc values. Tiles are large: every OpenBLAS call
 * takes a process-wide mutex twice (its buffers), so many small calls from
 * 16 threads queue on it. */
enum { ZGEMM_TILE = 64 };

typedef struct zgemm_job {
  enum CBLAS_TRANSPOSE ta, tb;
  int m, n, k, tile_m, tile_n, batch;
  double complex alpha, beta;
  const double complex *a, *b;
  double complex *c;
  int lda, ldb, ldc;
  size_t sa, sb, sc;
} zgemm_job;

static int tiles_of(int n, int tile) { return (n + tile - 1) / tile; }

static void zgemm_tiles(void *arg, size_t begin, size_t end) {
  const zgemm_job *z = arg;
  size_t tiles_m = (size_t)tiles_of(z->m, z->tile_m), per = tiles_m * tiles_of(z->n, z->tile_n);
  for (size_t t = begin; t < end; t++) {
    size_t bi = t / per, r = t % per;
    int r0 = (int)(r % tiles_m) * z->tile_m, c0 = (int)(r / tiles_m) * z->tile_n;
    int rows = z->m - r0 < z->tile_m ? z->m - r0 : z->tile_m;
    int cols = z->n - c0 < z->tile_n ? z->n - c0 : z->tile_n;
    size_t ar = z->ta == CblasNoTrans ? (size_t)r0 : (size_t)r0 * z->lda;
    size_t bc = z->tb == CblasNoTrans ? (size_t)c0 * z->ldb : (size_t)c0;
    const double complex *a = z->a + bi * z->sa + ar, *b = z->b + bi * z->sb + bc;
    cblas_zgemm(CblasColMajor, z->ta, z->tb, rows, cols, z->k, &z->alpha, a, z->lda, b, z->ldb,
                &z->beta, z->c + bi * z->sc + (size_t)c0 * z->ldc + r0, z->ldc);
  }
}

static void zgemm_run(mr_device *dev, zgemm_job *z) {
  if (z->tile_m == 0)
    z->tile_m = ZGEMM_TILE;
  if (z->tile_n == 0)
    z->tile_n = ZGEMM_TILE;
  if (z->batch == 0)
    z->batch = 1;
  size_t tiles = (size_t)tiles_of(z->m, z->tile_m) * tiles_of(z->n, z->tile_n) * z->batch;
  mr_cpu_parallel_for(mr_device_threads(dev), tiles, 1, zgemm_tiles, z);
}

static void zgemm_on(mr_device *dev, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                     int n, int k, double complex alpha, const double complex *a, int lda,
                     const double complex *b, int ldb, double complex beta, double complex *c,
                     int ldc) {
  zgemm_job z = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
                 .a = a, .b = b, .c = c, .lda = lda, .ldb = ldb, .ldc = ldc};
  zgemm_run(dev, &z);
}

/* The calibration scratch of a plan, in bytes per buffer (see cpu_scratch),
 * and the (row, block) pairs of a chunk. */
typedef struct calib_sizes {
  size_t line_power, col_power, psi, discard, order, edge, lag, blk_a, spec_a, tail_b, spec_b,
      cross, lags, dft, to_lag, m, x, cut_a, cut_b;
  int gram_pairs;
} calib_sizes;

static calib_sizes calib_sizes_of(const mr_grappa_geom *g) {
  calib_sizes z;
  size_t per_seg = (size_t)g->npe * g->nro_max;
  size_t rows = (size_t)g->nb_src, ns = (size_t)g->n_src, nt = (size_t)g->n_tgt;
  size_t cut = (size_t)g->ndisc_max, na = rows + nt, lb = (size_t)gram_len(g);
  size_t edges = (size_t)g->npe * edge_width(g) * rows;
  const size_t zc = sizeof(double complex);
  z.line_power = (size_t)g->nacs * g->nro * sizeof(double);
  z.col_power = per_seg * sizeof(double);
  z.psi = (size_t)g->nseg * g->npe * sizeof(double);
  z.discard = (size_t)g->nseg * per_seg;
  z.order = per_seg * sizeof(ranked);
  z.edge = (edges > 0 ? edges : 1) * zc;
  z.lag = (size_t)g->kro * rows * rows * zc;
  /* (row, block) pairs: a chunk, at most all of the widest segment's */
  size_t per_pair = (GRAM_BLOCK * na + lb * na + (g->kro - 1 + lb) * rows) * zc;
  size_t all = (size_t)g->npe * tiles_of(g->nro_max + g->kro - 1, GRAM_BLOCK);
  size_t kc = GRAM_CHUNK_BYTES / per_pair;
  kc = kc < 1 ? 1 : kc > all ? all : kc;
  z.gram_pairs = (int)kc;
  z.blk_a = GRAM_BLOCK * kc * na * zc;
  z.spec_a = lb * kc * na * zc;
  z.tail_b = (size_t)g->kro * kc * rows * zc;
  z.spec_b = lb * kc * rows * zc;
  z.cross = lb * na * rows * zc;
  z.lags = (size_t)g->kro * na * rows * zc;
  z.dft = lb * lb * zc;
  z.to_lag = lb * g->kro * zc;
  z.m = ns * ns * zc;
  z.x = ns * nt * zc;
  z.cut_a = (cut > 0 ? ns * cut : 1) * zc;
  z.cut_b = (cut > 0 ? nt * cut : 1) * zc;
  return z;
}

int mr_grappa_cpu_create(mr_grappa_plan *p, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  cpu_scratch *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory");
  calib_sizes z = calib_sizes_of(g);
  c->line_power = malloc(z.line_power);
  c->col_power = malloc(z.col_power);
  c->psi = malloc(z.psi);
  c->discard = malloc(z.discard);
  c->order = malloc(z.order);
  c->edge = malloc(z.edge);
  c->lag = malloc(z.lag);
  c->gram_pairs = z.gram_pairs;
  c->blk_a = malloc(z.blk_a);
  c->spec_a = malloc(z.spec_a);
  c->tail_b = malloc(z.tail_b);
  c->spec_b = malloc(z.spec_b);
  c->cross = malloc(z.cross);
  c->lags = malloc(z.lags);
  c->dft = malloc(z.dft);
  c->to_lag = malloc(z.to_lag);
  c->m = malloc(z.m);
  c->x = malloc(z.x);
  c->cut_a = malloc(z.cut_a);
  c->cut_b = malloc(z.cut_b);
  size_t lb = (size_t)gram_len(g);
  p->backend = c;
  if (c->line_power == NULL || c->col_power == NULL || c->psi == NULL || c->discard == NULL ||
      c->order == NULL || c->edge == NULL || c->lag == NULL || c->blk_a == NULL ||
      c->spec_a == NULL || c->tail_b == NULL || c->spec_b == NULL || c->cross == NULL ||
      c->lags == NULL || c->dft == NULL || c->to_lag == NULL ||
      c->m == NULL || c->x == NULL || c->cut_a == NULL || c->cut_b == NULL) {
    mr_grappa_cpu_destroy(p);
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory for calibration scratch");
  }
  /* e^{-2 pi i f m / LB}: samples -> frequencies; the inverse over LB,
   * frequencies -> lags. The exponent reduced mod LB first. */
  for (size_t f = 0; f < lb; f++) {
    for (size_t m = 0; m < lb; m++) {
      double complex e = cexp(-2 * M_PI * I * (double)((f * m) % lb) / (double)lb);
      c->dft[f * lb + m] = e;
      if (m < (size_t)g->kro)
        c->to_lag[m * lb + f] = e / (double)lb;
    }
  }
  return 0;
}

void mr_grappa_cpu_destroy(mr_grappa_plan *p) {
  cpu_scratch *c = p->backend;
  if (c == NULL)
    return;
  free(c->line_power);
  free(c->col_power);
  free(c->psi);
  free(c->discard);
  free(c->order);
  free(c->edge);
  free(c->lag);
  free(c->blk_a);
  free(c->spec_a);
  free(c->tail_b);
  free(c->spec_b);
  free(c->cross);
  free(c->lags);
  free(c->dft);
  free(c->to_lag);
  free(c->m);
  free(c->x);
  free(c->cut_a);
  free(c->cut_b);
  free(c->fill_in);
  free(c->fill_out);
  free(c->fill_src);
  free(c->fill_prod);
  free(c->fill_h);
  mr_fft_plan_destroy(c->fft_lines);
  mr_fft_plan_destroy(c->fft_targets);
  free(c);
  p->backend = NULL;
}

/* Larger power first; among equals the earlier equation. */
static int by_power(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->power != y->power)
    return x->power > y->power ? -1 : 1;
  return (x->q > y->q) - (x->q < y->q);
}

/* Per segment and PE position the normalisation psi, and which equations
 * power clipping discards. */
static int prepare(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride) {
  const mr_grappa_geom *g = &p->g;
  cpu_scratch *c = p->backend;
  for (int l = 0; l < g->nacs; l++)
    for (int x = 0; x < g->nro; x++) {
      double sum = 0;
      for (int k = 0; k < g->nc; k++) {
        mr_cfloat v = acs[k * coil_stride + (size_t)l * g->nro + x];
        double re = crealf(v), im = cimagf(v);
        sum += re * re + im * im;
      }
      c->line_power[(size_t)l * g->nro + x] = sum;
    }
  size_t per_seg = (size_t)g->npe * g->nro_max;
  for (int s = 0; s < g->nseg; s++) {
    int c0 = g->c0[s], n = mr_grappa_seg_positions(g, s);
    uint8_t *discard = c->discard + s * per_seg;
    for (int i = 0; i < g->npe; i++) {
      double row = 0;
      for (int cc = 0; cc < n; cc++) {
        double pa = 0, pb = 0;
        for (int pl = 0; pl < g->kpe; pl++)
          for (int j = 0; j < g->kro; j++)
            pa += c->line_power[(size_t)(i + pl * g->accel) * g->nro + c0 + cc + j];
        for (int m = 1; m < g->accel; m++)
          pb += c->line_power[(size_t)(i + g->dpe + m) * g->nro + c0 + cc + g->dro];
        double pcol = pa * g->n_tgt + pb * g->n_src;
        c->col_power[(size_t)i * n + cc] = pcol;
        row += pcol;
        discard[(size_t)i * n + cc] = 0;
      }
      c->psi[s * g->npe + i] = row > 0 ? pow(row, -0.5 * p->opts.eta) : 0.0;
    }
    int total = g->npe * n;
    if (g->ndisc[s] == 0)
      continue;
    for (int q = 0; q < total; q++)
      c->order[q] = (ranked){c->col_power[q], q};
    qsort(c->order, (size_t)total, sizeof *c->order, by_power);
    for (int r = 0; r < g->ndisc[s]; r++)
      discard[c->order[r].q] = 1;
  }
  return 0;
}

/* F's edge columns of segment s (see the top): per PE position i the
 * first kro - 1 columns and the kro - 1 from n on, psi_i times every
 * kernel line's samples there. */
static int edge_column(const mr_grappa_geom *g, int n, int u) {
  return u < g->kro - 1 ? u : u - n + g->kro - 1;
}

static void build_edges(const mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int c0 = g->c0[s], n = mr_grappa_seg_positions(g, s), rows = g->nb_src, ew = edge_width(g);
  for (int i = 0; i < g->npe; i++) {
    double psi = c->psi[s * g->npe + i];
    for (int e = 0; e < ew; e++) {
      int u = e < g->kro - 1 ? e : n + e - (g->kro - 1);
      double complex *col = c->edge + ((size_t)i * ew + e) * rows;
      for (int k = 0; k < g->nc; k++)
        for (int pl = 0; pl < g->kpe; pl++)
          col[k * g->kpe + pl] =
              psi * (double complex)acs[k * coil_stride + (size_t)(i + pl * g->accel) * g->nro +
                                        c0 + u];
    }
  }
}

/* Rows [a0, a0 + len) of lag += alpha sum_i F(i, u) F(i, u + d)^H, u and
 * u + d edge columns of the same end. */
static void lag_columns(const mr_grappa_plan *p, int n, int u, int d, double alpha, int a0,
                        int len, double complex *lag) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int rows = g->nb_src, ld = rows * edge_width(g);
  const double complex a = alpha, one = 1;
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasConjTrans, len, rows, g->npe, &a,
              c->edge + (size_t)edge_column(g, n, u) * rows + a0, ld,
              c->edge + (size_t)edge_column(g, n, u + d) * rows, ld, &one, lag + a0, rows);
}

/* The spectra of one chunk of (row, block) pairs of segment s: pair
 * q = i nb + b, sample m of the block at position u = b GRAM_BLOCK + m.
 * The first side (GRAM_BLOCK samples into blk_a): the sources, then the
 * targets (zero from n on); the second side's further samples (m >=
 * GRAM_BLOCK, into tail_b): the sources. Sources past the taps' reach are
 * zero. Samples lie sample-major (sample m of every pair of the chunk,
 * then m + 1), so a thread's pairs go to frequencies in one product per
 * side, not two per pair (OpenBLAS's calls are few: see zgemm_job): into
 * spec_a, then spec_b (the first side's sources plus the further
 * samples'). */
typedef struct gram_chunk {
  const mr_grappa_plan *p;
  const mr_cfloat *acs;
  size_t coil_stride;
  int s, nb, q0, kc;
} gram_chunk;

static void pair_spectra(void *arg, size_t begin, size_t end) {
  const gram_chunk *h = arg;
  const mr_grappa_geom *g = &h->p->g;
  const cpu_scratch *c = h->p->backend;
  int c0 = g->c0[h->s], n = mr_grappa_seg_positions(g, h->s), rows = g->nb_src;
  int na = rows + g->n_tgt, lb = gram_len(g), tail = g->kro - 1;
  size_t lda = (size_t)h->kc * na, ldb = (size_t)h->kc * rows;
  const double complex one = 1, zero = 0;
  for (size_t pr = begin; pr < end; pr++) {
    int q = h->q0 + (int)pr, i = q / h->nb, b = q % h->nb;
    double psi = c->psi[h->s * g->npe + i];
    for (int m = 0; m < lb; m++) {
      int u = b * GRAM_BLOCK + m, x = c0 + u, reach = u < n + g->kro - 1, target = u < n;
      double complex *xs = m < GRAM_BLOCK ? c->blk_a + (size_t)m * lda + pr * na
                                          : c->tail_b + (size_t)(m - GRAM_BLOCK) * ldb + pr * rows;
      for (int k = 0; k < g->nc; k++) {
        const mr_cfloat *coil = h->acs + k * h->coil_stride;
        for (int pl = 0; pl < g->kpe; pl++)
          xs[k * g->kpe + pl] =
              reach ? psi * (double complex)coil[(size_t)(i + pl * g->accel) * g->nro + x] : 0.0;
        if (m < GRAM_BLOCK)
          for (int mm = 1; mm < g->accel; mm++)
            xs[rows + k * (g->accel - 1) + mm - 1] =
                target ? psi * (double complex)coil[(size_t)(i + g->dpe + mm) * g->nro + x + g->dro]
                       : 0.0;
      }
    }
  }
  /* (pairs' channels) x samples times the DFT's rows: columns of each
   * frequency */
  int count = (int)(end - begin);
  double complex *sa = c->spec_a + begin * na, *sb = c->spec_b + begin * rows;
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, count * na, lb, GRAM_BLOCK, &one,
              c->blk_a + begin * na, (int)lda, c->dft, lb, &zero, sa, (int)lda);
  for (int f = 0; f < lb; f++)
    for (int pr = 0; pr < count; pr++)
      memcpy(sb + f * ldb + (size_t)pr * rows, sa + f * lda + (size_t)pr * na,
             (size_t)rows * sizeof *sb);
  if (tail > 0)
    cblas_zgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, count * rows, lb, tail, &one,
                c->tail_b + begin * rows, (int)ldb, c->dft + GRAM_BLOCK, lb, &one, sb, (int)ldb);
}

/* Lag d into M and U^H: the blocks (j, j + d) of M, the window moved on
 * from G_d(0) a position per tap, and U^H's rows of tap d. On the device's
 * threads by (lag, piece of LAG_ROWS rows of its lag block): kro items
 * alone left most of a 16-thread pool idle. Every element of M is written
 * by one item: lag 0's blocks are Hermitian, so its items write each
 * (a, b) pair from the row a <= b (a == b: the conjugate last, as the
 * other lags' mirrored elements). */
enum { LAG_ROWS = 32 };

typedef struct lag_chain {
  const mr_grappa_plan *p;
  int n, pieces; /* the segment's positions; row pieces per lag */
} lag_chain;

static void place_lag(void *arg, size_t begin, size_t end) {
  const lag_chain *h = arg;
  const mr_grappa_geom *g = &h->p->g;
  const cpu_scratch *c = h->p->backend;
  int rows = g->nb_src, na = rows + g->n_tgt, kro = g->kro, ns = g->n_src, nt = g->n_tgt;
  for (size_t item = begin; item < end; item++) {
    int d = (int)item / h->pieces, a0 = (int)item % h->pieces * LAG_ROWS;
    int len = rows - a0 < LAG_ROWS ? rows - a0 : LAG_ROWS;
    const double complex *ld = c->lags + (size_t)d * na * rows;
    double complex *lag = c->lag + (size_t)d * rows * rows;
    for (int b = 0; b < rows; b++)
      memcpy(lag + (size_t)b * rows + a0, ld + (size_t)b * na + a0, (size_t)len * sizeof *lag);
    for (int u = h->n; u + d < h->n + kro - 1; u++) /* G_d(0): pairs from position n off */
      lag_columns(h->p, h->n, u, d, -1.0, a0, len, lag);
    for (int j = 0; j + d < kro; j++) {
      if (j > 0) { /* the window moves on by one position */
        lag_columns(h->p, h->n, h->n + j - 1, d, 1.0, a0, len, lag);
        lag_columns(h->p, h->n, j - 1, d, -1.0, a0, len, lag);
      }
      for (int a = a0; a < a0 + len; a++)
        for (int b = d == 0 ? a : 0; b < rows; b++) {
          double complex v = lag[(size_t)b * rows + a];
          size_t ra = (size_t)a * kro + j, rb = (size_t)b * kro + j + d;
          c->m[rb * ns + ra] = v;
          c->m[ra * ns + rb] = conj(v);
        }
    }
    /* U^H rows of tap d: the targets at c against source a at c + d */
    for (int t = 0; t < nt; t++)
      for (int a = a0; a < a0 + len; a++)
        c->x[(size_t)t * ns + (size_t)a * kro + d] = conj(ld[(size_t)a * na + rows + t]);
  }
}

/* M = A A^H and U^H = A B^H of segment s, both full (see the top). */
static void normal_equations(const mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                             int s) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int n = mr_grappa_seg_positions(g, s), rows = g->nb_src, kro = g->kro;
  int nt = g->n_tgt, na = rows + nt, lb = gram_len(g), nb = tiles_of(n + kro - 1, GRAM_BLOCK);
  int pairs = g->npe * nb;
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  for (int q0 = 0; q0 < pairs; q0 += c->gram_pairs) {
    int kc = pairs - q0 < c->gram_pairs ? pairs - q0 : c->gram_pairs;
    gram_chunk h = {.p = p, .acs = acs, .coil_stride = coil_stride, .s = s, .nb = nb, .q0 = q0,
                    .kc = kc};
    mr_cpu_parallel_for(threads, (size_t)kc, 4, pair_spectra, &h);
    /* per frequency: side a times side b^H over the chunk's pairs, summed
     * (two calls a frequency) */
    zgemm_job cr = {.ta = CblasNoTrans, .tb = CblasConjTrans, .m = na, .n = rows, .k = kc,
                    .alpha = 1, .beta = q0 == 0 ? 0 : 1, .a = c->spec_a, .lda = na,
                    .sa = (size_t)kc * na, .b = c->spec_b, .ldb = rows, .sb = (size_t)kc * rows,
                    .c = c->cross, .ldc = na, .sc = (size_t)na * rows, .batch = lb,
                    .tile_m = (na + 1) / 2, .tile_n = rows};
    zgemm_run(p->dev, &cr);
  }
  /* frequencies -> lags: lags_d(a, b) = sum over the equations of side a's
   * channel a at c times source b at c + d */
  zgemm_job tl = {.ta = CblasNoTrans, .tb = CblasNoTrans, .m = na * rows, .n = kro, .k = lb,
                  .alpha = 1, .a = c->cross, .lda = na * rows, .b = c->to_lag, .ldb = lb,
                  .c = c->lags, .ldc = na * rows, .tile_m = 1024, .tile_n = kro};
  zgemm_run(p->dev, &tl);
  build_edges(p, acs, coil_stride, s);
  lag_chain ch = {p, n, tiles_of(rows, LAG_ROWS)};
  mr_cpu_parallel_for(threads, (size_t)kro * ch.pieces, 1, place_lag, &ch);
}

/* The equations power clipping leaves out: their terms come off M and U^H
 * (the columns of A and B they were, psi-weighted). */
static void remove_clipped(const mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                           int s) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int c0 = g->c0[s], n = mr_grappa_seg_positions(g, s), ns = g->n_src, nt = g->n_tgt;
  const uint8_t *discard = c->discard + (size_t)s * g->npe * g->nro_max;
  int cut = 0;
  for (int q = 0; q < g->npe * n; q++) {
    if (!discard[q])
      continue;
    int i = q / n, cc = q % n;
    double psi = c->psi[s * g->npe + i];
    double complex *acol = c->cut_a + (size_t)cut * ns, *bcol = c->cut_b + (size_t)cut * nt;
    for (int k = 0; k < g->nc; k++) {
      const mr_cfloat *coil = acs + k * coil_stride;
      for (int pl = 0; pl < g->kpe; pl++) {
        const mr_cfloat *line = coil + (size_t)(i + pl * g->accel) * g->nro + c0 + cc;
        for (int j = 0; j < g->kro; j++)
          acol[(k * g->kpe + pl) * g->kro + j] = psi * (double complex)line[j];
      }
      for (int m = 1; m < g->accel; m++)
        bcol[k * (g->accel - 1) + m - 1] =
            psi * (double complex)coil[(size_t)(i + g->dpe + m) * g->nro + c0 + cc + g->dro];
    }
    cut++;
  }
  if (cut == 0)
    return;
  const double complex minus = -1, one = 1;
  zgemm_on(p->dev, CblasNoTrans, CblasConjTrans, ns, ns, cut, minus, c->cut_a, ns, c->cut_a, ns,
           one, c->m, ns);
  zgemm_on(p->dev, CblasNoTrans, CblasConjTrans, ns, nt, cut, minus, c->cut_a, ns, c->cut_b, nt,
           one, c->x, ns);
}

/* The monotonic clock in milliseconds, for the calibration's stage times. */
static double now_ms(void) { return (double)mr_now_ns() / 1e6; }

/* The Cholesky factor of M (lower, in place) on the device's threads,
 * right-looking in panels of CHOL_PANEL columns: each panel's diagonal
 * block factored (ZPOTRF), the rows below it solved against that block in
 * pieces of CHOL_ROWS rows (ZTRSM), the lower triangle of the rest updated
 * in blocks of CHOL_PANEL columns from their diagonal down, CHOL_ROWS rows
 * a call (ZGEMM; the diagonal blocks' upper parts too, never read).
 * Returns LAPACK's info: 0, or the column whose pivot was not positive.
 * The LAPACKE _work calls skip LAPACKE's NaN scans of the whole matrix.
 * Few calls, not 32 x 32 tiles: OpenBLAS takes one process-wide mutex
 * twice per call (its buffers), and 16 threads of 32 x 32 tiles (615
 * calls a factorisation at 640 unknowns, 25 here) queued on it. */
enum { CHOL_PANEL = 64, CHOL_ROWS = 128 };

typedef struct chol_job {
  double complex *a;
  int n, k0, kb; /* the panel [k0, k0 + kb) */
} chol_job;

/* Row pieces of the update's column block whose first column is c0 of
 * the rest's `rest` (it runs from its diagonal to the last row). */
static int block_pieces(int rest, int c0) { return (rest - c0 + CHOL_ROWS - 1) / CHOL_ROWS; }

static void chol_rows_below(void *arg, size_t begin, size_t end) {
  const chol_job *j = arg;
  const double complex one = 1;
  int below = j->k0 + j->kb, rows = j->n - below;
  double complex *diag = j->a + (size_t)j->k0 * j->n + j->k0;
  for (size_t piece = begin; piece < end; piece++) {
    int r0 = (int)piece * CHOL_ROWS, len = rows - r0 < CHOL_ROWS ? rows - r0 : CHOL_ROWS;
    cblas_ztrsm(CblasColMajor, CblasRight, CblasLower, CblasConjTrans, CblasNonUnit, len, j->kb,
                &one, diag, j->n, j->a + (size_t)j->k0 * j->n + below + r0, j->n);
  }
}

static void chol_update_blocks(void *arg, size_t begin, size_t end) {
  const chol_job *j = arg;
  const double complex minus = -1, one = 1;
  int below = j->k0 + j->kb, rest = j->n - below;
  const double complex *panel = j->a + (size_t)j->k0 * j->n + below;
  for (size_t t = begin; t < end; t++) {
    int c0 = 0, q = (int)t; /* piece q of the column block from c0 */
    while (q >= block_pieces(rest, c0)) {
      q -= block_pieces(rest, c0);
      c0 += CHOL_PANEL;
    }
    int i0 = c0 + q * CHOL_ROWS;
    int rows = rest - i0 < CHOL_ROWS ? rest - i0 : CHOL_ROWS;
    int cols = rest - c0 < CHOL_PANEL ? rest - c0 : CHOL_PANEL;
    cblas_zgemm(CblasColMajor, CblasNoTrans, CblasConjTrans, rows, cols, j->kb, &minus,
                panel + i0, j->n, panel + c0, j->n, &one,
                j->a + (size_t)(below + c0) * j->n + below + i0, j->n);
  }
}

static lapack_int cholesky_on(mr_device *dev, int n, double complex *a) {
  mr_cpu_threads *threads = mr_device_threads(dev);
  for (int k0 = 0; k0 < n; k0 += CHOL_PANEL) {
    chol_job j = {.a = a, .n = n, .k0 = k0, .kb = n - k0 < CHOL_PANEL ? n - k0 : CHOL_PANEL};
    lapack_int info = LAPACKE_zpotrf_work(LAPACK_COL_MAJOR, 'L', j.kb,
                                          (lapack_complex_double *)(a + (size_t)k0 * n + k0), n);
    if (info != 0)
      return info > 0 ? k0 + info : info;
    int rest = n - k0 - j.kb;
    if (rest == 0)
      break;
    size_t blocks = 0;
    for (int c0 = 0; c0 < rest; c0 += CHOL_PANEL)
      blocks += (size_t)block_pieces(rest, c0);
    mr_cpu_parallel_for(threads, (size_t)((rest + CHOL_ROWS - 1) / CHOL_ROWS), 1, chol_rows_below,
                        &j);
    mr_cpu_parallel_for(threads, blocks, 1, chol_update_blocks, &j);
  }
  return 0;
}

/* The right-hand sides apart: L L^H X = U^H by ZPOTRS on pieces of X's
 * columns, about one a thread and at least RHS_MIN wide (pieces of 16 left
 * 10 of 16 threads idle at 96 targets). */
enum { RHS_MIN = 4 };

typedef struct rhs_job {
  const double complex *m;
  double complex *x;
  int ns, nt, piece;
} rhs_job;

static void solve_rhs(void *arg, size_t begin, size_t end) {
  const rhs_job *r = arg;
  for (size_t piece = begin; piece < end; piece++) {
    int c0 = (int)piece * r->piece, cols = r->nt - c0 < r->piece ? r->nt - c0 : r->piece;
    /* cannot fail: the factor's diagonal is positive, the arguments valid */
    LAPACKE_zpotrs_work(LAPACK_COL_MAJOR, 'L', r->ns, cols, (const lapack_complex_double *)r->m, r->ns,
                   (lapack_complex_double *)(r->x + (size_t)c0 * r->ns), r->ns);
  }
}

/* One segment: M = A A^H and X = A B^H (X = U^H) by lagged products, then
 * (M + lambda I) X = U^H by a blocked Cholesky factorisation and ZPOTRS; the times of both steps add to *t. */
static int calibrate_segment(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s,
                             mr_cfloat *weights, double t[2], mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int ns = g->n_src, nt = g->n_tgt;
  double t0 = now_ms();
  normal_equations(p, acs, coil_stride, s);
  remove_clipped(p, acs, coil_stride, s);
  double trace = 0;
  for (int r = 0; r < ns; r++)
    trace += creal(c->m[(size_t)r * ns + r]);
  double t1 = now_ms();
  t[0] += t1 - t0;
  if (!(trace > 0))
    return mr_err_set(err, MR_ENUMERIC, "grappa: the ACS lines of segment %d carry no signal", s);
  double lambda = p->opts.chi * trace / ns;
  for (int r = 0; r < ns; r++)
    c->m[(size_t)r * ns + r] += lambda;
  lapack_int info = cholesky_on(p->dev, ns, c->m);
  if (info != 0)
    return mr_err_set(err, MR_ENUMERIC,
                      "grappa: the calibration system of segment %d is not positive definite "
                      "(Cholesky pivot %d; raise chi)",
                      s, (int)info);
  /* the targets' columns apart, on the device's threads */
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  int count = mr_cpu_threads_count(threads), piece = (nt + count - 1) / count;
  rhs_job r = {.m = c->m, .x = c->x, .ns = ns, .nt = nt, .piece = piece < RHS_MIN ? RHS_MIN : piece};
  mr_cpu_parallel_for(threads, (size_t)tiles_of(nt, r.piece), 1, solve_rhs, &r);
  mr_cfloat *out = weights + (size_t)s * ns * nt;
  for (size_t e = 0; e < (size_t)ns * nt; e++)
    out[e] = (mr_cfloat)c->x[e];
  t[1] += now_ms() - t1;
  return 0;
}

int mr_grappa_cpu_calibrate(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                            mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  double t[2] = {0, 0}, t0 = now_ms();
  int rc = prepare(p, acs, coil_stride);
  t[0] = now_ms() - t0;
  for (int s = 0; rc == 0 && s < g->nseg; s++)
    rc = calibrate_segment(p, acs, coil_stride, s, weights, t, err);
  if (build_ms != NULL)
    *build_ms = t[0];
  if (solve_ms != NULL)
    *solve_ms = t[1];
  return rc;
}

typedef struct fill_job {
  const mr_grappa_geom *g;
  const mr_cfloat *kspace_in;
  mr_cfloat *kspace;
  const int *lines;
  int nblk, x0, ne1;
  mr_cfloat *src;
  const mr_cfloat *tv;
  const uint8_t *sampled;
} fill_job;

static void gather_columns(void *arg, size_t begin, size_t end) {
  const fill_job *f = arg;
  const mr_grappa_geom *g = f->g;
  size_t per_coil = (size_t)f->ne1 * g->nro;
  for (size_t col = begin; col < end; col++) {
    int x = f->x0 + (int)(col / f->nblk), s = f->lines[col % f->nblk];
    mr_cfloat *out = f->src + col * g->n_src;
    for (int k = 0; k < g->nc; k++)
      for (int pl = 0; pl < g->kpe; pl++) {
        int y = s + (pl - g->kpe / 2 + 1) * g->accel;
        for (int j = 0; j < g->kro; j++) {
          int xx = x + j - g->dro;
          out[(k * g->kpe + pl) * g->kro + j] =
              y >= 0 && y < f->ne1 && xx >= 0 && xx < g->nro
                  ? f->kspace_in[k * per_coil + (size_t)y * g->nro + xx]
                  : 0.0f;
        }
      }
  }
}

int mr_grappa_cpu_im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1, const int *lines,
                         int nblk, int x0, int x1, mr_cfloat *src) {
  fill_job f = {.g = &p->g, .kspace_in = kspace, .lines = lines, .nblk = nblk, .x0 = x0,
                .ne1 = ne1, .src = src};
  mr_cpu_parallel_for(mr_device_threads(p->dev), (size_t)(x1 - x0) * nblk, 64, gather_columns,
                      &f);
  return 0;
}

static void scatter_columns(void *arg, size_t begin, size_t end) {
  const fill_job *f = arg;
  const mr_grappa_geom *g = f->g;
  size_t per_coil = (size_t)f->ne1 * g->nro;
  for (size_t col = begin; col < end; col++) {
    int x = f->x0 + (int)(col / f->nblk), s = f->lines[col % f->nblk];
    const mr_cfloat *in = f->tv + col * g->n_tgt;
    for (int m = 1; m < g->accel; m++) {
      int y = s + m;
      if (y < 0 || y >= f->ne1 || f->sampled[y])
        continue;
      for (int k = 0; k < g->nc; k++)
        f->kspace[k * per_coil + (size_t)y * g->nro + x] = in[k * (g->accel - 1) + m - 1];
    }
  }
}

int mr_grappa_cpu_scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk,
                          int x0, int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace) {
  fill_job f = {.g = &p->g, .kspace = kspace, .lines = lines, .nblk = nblk, .x0 = x0,
                .ne1 = ne1, .tv = tv, .sampled = sampled};
  mr_cpu_parallel_for(mr_device_threads(p->dev), (size_t)(x1 - x0) * nblk, 64,
                      scatter_columns, &f);
  return 0;
}

/* ---- filling in hybrid space (one segment) ----------------------------
 * A target t of block line s at sample x is
 *   sum_{r = (k, pl)} sum_j conj(W[r kro + j, t]) in_r(x + j - dro),
 * in_r the block's source line of kernel line pl in coil k: for each r a
 * kro-tap correlation along the readout. Along a readout padded with zeros
 * to L >= nro + kro - 1 samples (so that the transform's wrap-around meets
 * only zeros), a correlation is a product per frequency f:
 *   T_t(f) = sum_r H[t, r](f) IN_r(f),  H[t, r](f) = sum_j conj(W[r kro + j, t]) e^{2 pi i f (j - dro) / L}.
 * Per frequency that is one n_tgt x (nc kpe) times (nc kpe) x blocks
 * product: kro times fewer multiply-adds than the im2col product (all
 * n_src sources per target and sample), for two batched FFTs of length L
 * (the pattern lines forward, the targets back). The result is the same
 * up to rounding. */

/* The smallest length >= n whose only factors are 2, 3, 5 and 7. */
static int fft_length(int n) {
  for (int l = n;; l++) {
    int r = l;
    for (int f = 2; f <= 7; f++)
      while (r % f == 0)
        r /= f;
    if (r == 1)
      return l;
  }
}

/* Frequencies per step: the step's H, sources and products stay small
 * (about 3 MB at 32 coils, R 4) and warm across steps and slices. */
enum { FILL_FREQS = 32 };

typedef struct hybrid_fill {
  const mr_grappa_geom *g;
  mr_cfloat *kspace;
  const uint8_t *sampled;
  const int *lines;
  int nblk, ne1, phase, np, len, f0, nf;
  mr_cfloat *in;   /* [coil][pattern line][len]: the pattern lines, padded, then transformed */
  mr_cfloat *src;  /* [f - f0][block][r]: the step's sources */
  mr_cfloat *prod; /* [f - f0][block][target]: the step's products */
  mr_cfloat *out;  /* [block][target][len]: the targets' spectra, then the targets */
} hybrid_fill;

static void pad_lines(void *arg, size_t begin, size_t end) {
  const hybrid_fill *h = arg;
  const mr_grappa_geom *g = h->g;
  for (size_t row = begin; row < end; row++) {
    int k = (int)(row / h->np), q = (int)(row % h->np), y = h->phase + q * g->accel;
    const mr_cfloat *line = h->kspace + ((size_t)k * h->ne1 + y) * g->nro;
    mr_cfloat *dst = h->in + row * h->len;
    memcpy(dst, line, (size_t)g->nro * sizeof *dst);
    memset(dst + g->nro, 0, (size_t)(h->len - g->nro) * sizeof *dst);
  }
}

static void gather_sources(void *arg, size_t begin, size_t end) {
  const hybrid_fill *h = arg;
  const mr_grappa_geom *g = h->g;
  for (size_t item = begin; item < end; item++) {
    int fi = (int)(item / h->nblk), b = (int)(item % h->nblk), f = h->f0 + fi;
    mr_cfloat *col = h->src + item * g->nb_src;
    for (int k = 0; k < g->nc; k++)
      for (int pl = 0; pl < g->kpe; pl++) {
        int y = h->lines[b] + (pl - g->kpe / 2 + 1) * g->accel;
        col[k * g->kpe + pl] =
            y >= 0 && y < h->ne1
                ? h->in[((size_t)k * h->np + (y - h->phase) / g->accel) * h->len + f]
                : 0.0f;
      }
  }
}

static void spread_products(void *arg, size_t begin, size_t end) {
  const hybrid_fill *h = arg;
  int nt = h->g->n_tgt;
  for (size_t row = begin; row < end; row++) { /* row = block * n_tgt + target */
    mr_cfloat *dst = h->out + row * h->len + h->f0;
    for (int fi = 0; fi < h->nf; fi++)
      dst[fi] = h->prod[(size_t)fi * h->nblk * nt + row];
  }
}

static void write_targets(void *arg, size_t begin, size_t end) {
  const hybrid_fill *h = arg;
  const mr_grappa_geom *g = h->g;
  float scale = 1.0f / (float)h->len;
  for (size_t row = begin; row < end; row++) {
    int b = (int)(row / g->n_tgt), t = (int)(row % g->n_tgt);
    int k = t / (g->accel - 1), y = h->lines[b] + t % (g->accel - 1) + 1;
    if (y < 0 || y >= h->ne1 || h->sampled[y])
      continue;
    const mr_cfloat *spectrum = h->out + row * h->len;
    mr_cfloat *line = h->kspace + ((size_t)k * h->ne1 + y) * g->nro;
    for (int x = 0; x < g->nro; x++)
      line[x] = spectrum[x] * scale;
  }
}

/* The filling's scratch in values (see cpu_scratch) for np pattern lines
 * and nblk blocks: the padded lines, the targets, a step's sources and
 * products, H with its weights and phases. */
typedef struct fill_sizes {
  size_t in, out, src, prod, h;
} fill_sizes;

static fill_sizes fill_sizes_of(const mr_grappa_geom *g, int np, int nblk) {
  size_t len = (size_t)fft_length(g->nro + g->kro - 1), nt = (size_t)g->n_tgt;
  size_t nr = (size_t)g->nb_src, m = nt * nr;
  return (fill_sizes){.in = (size_t)g->nc * np * len, .out = (size_t)nblk * nt * len,
                      .src = (size_t)FILL_FREQS * nblk * nr,
                      .prod = (size_t)FILL_FREQS * nblk * nt,
                      .h = m * (FILL_FREQS + g->kro) + (size_t)g->kro * FILL_FREQS};
}

uint64_t mr_grappa_cpu_bytes(const mr_grappa_geom *g, int ne1) {
  calib_sizes z = calib_sizes_of(g);
  /* at most every R-th line a pattern line, and ne1 / R + 2 blocks
   * (grappa.c's fill_blocks) */
  fill_sizes f = fill_sizes_of(g, (ne1 - 1) / g->accel + 1, ne1 / g->accel + 2);
  return (uint64_t)z.line_power + z.col_power + z.psi + z.discard + z.order + z.edge + z.lag +
         z.blk_a + z.spec_a + z.tail_b + z.spec_b + z.cross + z.lags + z.dft + z.to_lag + z.m +
         z.x + z.cut_a + z.cut_b +
         (uint64_t)(f.in + f.out + f.src + f.prod + f.h) * sizeof(mr_cfloat);
}

/* Scratch of at least n values in *buf (kept across calls: warm pages). */
static int reserve(mr_cfloat **buf, size_t *have, size_t n, mr_err *err) {
  if (*have >= n)
    return 0;
  free(*buf);
  *buf = malloc(n * sizeof **buf);
  *have = *buf != NULL ? n : 0;
  return *buf != NULL ? 0 : mr_err_set(err, MR_ENOMEM, "grappa: out of memory for filling scratch");
}

int mr_grappa_cpu_fill(mr_grappa_plan *p, const mr_cfloat *weights, const int *lines, int nblk,
                       const uint8_t *sampled, int ne1, mr_cfloat *kspace, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  cpu_scratch *c = p->backend;
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  int len = fft_length(g->nro + g->kro - 1), R = g->accel, nt = g->n_tgt, nr = g->nb_src;
  int phase = ((lines[0] % R) + R) % R, np = (ne1 - 1 - phase) / R + 1;
  size_t m = (size_t)nt * nr; /* rows of H: (target, r) */
  hybrid_fill h = {.g = g, .kspace = kspace, .sampled = sampled,
                   .lines = lines, .nblk = nblk, .ne1 = ne1, .phase = phase, .np = np, .len = len};
  fill_sizes z = fill_sizes_of(g, np, nblk);
  int rc = reserve(&c->fill_in, &c->fill_in_n, z.in, err);
  if (rc == 0)
    rc = reserve(&c->fill_out, &c->fill_out_n, z.out, err);
  if (rc == 0)
    rc = reserve(&c->fill_src, &c->fill_src_n, z.src, err);
  if (rc == 0)
    rc = reserve(&c->fill_prod, &c->fill_prod_n, z.prod, err);
  if (rc == 0)
    rc = reserve(&c->fill_h, &c->fill_h_n, z.h, err);
  mr_fft_opts lines_fft = {.rank = 1, .dims = {(size_t)len, 1, 1},
                           .batch = (size_t)g->nc * np, .plain = 1};
  mr_fft_opts targets_fft = {.rank = 1, .dims = {(size_t)len, 1, 1},
                             .batch = (size_t)nblk * nt, .plain = 1};
  if (rc == 0)
    rc = mr_fft_plan_keep(p->dev, &lines_fft, &c->fft_lines, err);
  if (rc == 0)
    rc = mr_fft_plan_keep(p->dev, &targets_fft, &c->fft_targets, err);
  if (rc < 0)
    return rc;
  h.in = c->fill_in;
  h.out = c->fill_out;
  h.src = c->fill_src;
  h.prod = c->fill_prod;
  /* the weights as (target, r) x tap, conjugated; the taps' phases after */
  mr_cfloat *wc = c->fill_h + m * FILL_FREQS, *phases = wc + m * g->kro;
  for (int j = 0; j < g->kro; j++)
    for (int r = 0; r < nr; r++)
      for (int t = 0; t < nt; t++)
        wc[(size_t)j * m + (size_t)r * nt + t] = conjf(weights[(size_t)t * g->n_src + r * g->kro + j]);
  mr_cpu_parallel_for(threads, (size_t)g->nc * np, 16, pad_lines, &h);
  rc = mr_fft_execute(c->fft_lines, MR_FFT_FORWARD, h.in, h.in, err);
  for (int f0 = 0; rc == 0 && f0 < len; f0 += FILL_FREQS) {
    h.f0 = f0;
    h.nf = len - f0 < FILL_FREQS ? len - f0 : FILL_FREQS;
    for (int fi = 0; fi < h.nf; fi++)
      for (int j = 0; j < g->kro; j++) {
        double angle = 2 * M_PI * (double)(f0 + fi) * (j - g->dro) / len;
        phases[(size_t)fi * g->kro + j] = (mr_cfloat)cexp(I * angle);
      }
    /* H of the step's frequencies: (target, r) x tap times tap x frequency */
    mr_cmat wm = {wc, (int)m, g->kro, (int)m, 0}, em = {phases, g->kro, h.nf, g->kro, 0};
    mr_cmat hm = {c->fill_h, (int)m, h.nf, (int)m, 0};
    rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, 1.0f, wm, em, 0.0f, hm, 1, err);
    mr_cpu_parallel_for(threads, (size_t)h.nf * nblk, 16, gather_sources, &h);
    /* per frequency: H(f) (targets x r) times the sources (r x blocks) */
    mr_cmat hf = {c->fill_h, nt, nr, nt, m};
    mr_cmat sf = {h.src, nr, nblk, nr, (size_t)nr * nblk};
    mr_cmat pf = {h.prod, nt, nblk, nt, (size_t)nt * nblk};
    if (rc == 0)
      rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, 1.0f, hf, sf, 0.0f, pf, h.nf, err);
    if (rc == 0)
      mr_cpu_parallel_for(threads, (size_t)nblk * nt, 64, spread_products, &h);
  }
  if (rc == 0)
    rc = mr_fft_execute(c->fft_targets, MR_FFT_BACKWARD, h.out, h.out, err);
  if (rc == 0)
    mr_cpu_parallel_for(threads, (size_t)nblk * nt, 16, write_targets, &h);
  return rc;
}
