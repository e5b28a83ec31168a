#include <cblas.h>
#include <complex.h>

#include "blas_impl.h"
#include "device_impl.h"

static const enum CBLAS_TRANSPOSE trans[] = {
    [MR_BLAS_N] = CblasNoTrans, [MR_BLAS_T] = CblasTrans, [MR_BLAS_C] = CblasConjTrans};

/* OpenBLAS runs single-threaded (gpu/core/cpu_threads.c: one pool for the
 * CPU): a product is cut into pieces along its longer outer side (rows or
 * columns of c), about four per thread over the batch, for the device's
 * threads. Narrower pieces than GEMM_MIN_PIECE pack too little per call;
 * and a piece has at least GEMM_MIN_WORK multiply-adds: every OpenBLAS
 * call takes a process-wide mutex twice (its buffers), and 16 threads'
 * calls of a few microseconds each (GRAPPA's filling: 1,150 a slice)
 * queued on it. */
#define GEMM_MIN_PIECE 32
#define GEMM_MIN_WORK ((size_t)1 << 18)

typedef struct gemm_job {
  const mr_gemm_args *g;
  int piece;   /* rows (split_m) or columns of c per piece */
  int split_m; /* pieces along m, else along n */
} gemm_job;

/* One item's product of rows/columns [r0, r0 + len) of c. */
static void gemm_piece(const mr_gemm_args *g, int item, int split_m, int r0, int len) {
  const mr_cfloat *a = g->a.data + (size_t)item * g->a.stride;
  const mr_cfloat *b = g->b.data + (size_t)item * g->b.stride;
  mr_cfloat *c = g->c.data + (size_t)item * g->c.stride;
  int m = g->m, n = g->n;
  if (split_m) { /* rows r0.. of op_a(a) and of c */
    a += g->op_a == MR_BLAS_N ? (size_t)r0 : (size_t)r0 * g->a.ld;
    c += r0;
    m = len;
  } else { /* columns r0.. of op_b(b) and of c */
    b += g->op_b == MR_BLAS_N ? (size_t)r0 * g->b.ld : (size_t)r0;
    c += (size_t)r0 * g->c.ld;
    n = len;
  }
  cblas_cgemm(CblasColMajor, trans[g->op_a], trans[g->op_b], m, n, g->k, &g->alpha, a, g->a.ld,
              b, g->b.ld, &g->beta, c, g->c.ld);
}

static void gemm_pieces(void *arg, size_t begin, size_t end) {
  const gemm_job *j = arg;
  int outer = j->split_m ? j->g->m : j->g->n;
  size_t per_item = (size_t)(outer + j->piece - 1) / j->piece;
  for (size_t p = begin; p < end; p++) {
    int r0 = (int)(p % per_item) * j->piece;
    int len = outer - r0 < j->piece ? outer - r0 : j->piece;
    gemm_piece(j->g, (int)(p / per_item), j->split_m, r0, len);
  }
}

int mr_blas_cpu_gemm(mr_device *dev, const mr_gemm_args *g) {
  mr_cpu_threads *threads = mr_device_threads(dev);
  int split_m = g->m >= g->n, outer = split_m ? g->m : g->n;
  if (outer < 1 || g->batch < 1)
    return 0;
  size_t want = (size_t)mr_cpu_threads_count(threads) * 4;
  size_t per_item = (want + (size_t)g->batch - 1) / (size_t)g->batch;
  size_t piece = ((size_t)outer + per_item - 1) / per_item;
  size_t per_line = (size_t)(split_m ? g->n : g->m) * (size_t)(g->k > 0 ? g->k : 1);
  size_t least = (GEMM_MIN_WORK + per_line - 1) / per_line;
  if (piece < least)
    piece = least;
  if (piece < GEMM_MIN_PIECE)
    piece = GEMM_MIN_PIECE;
  gemm_job j = {.g = g, .piece = piece < (size_t)outer ? (int)piece : outer, .split_m = split_m};
  size_t pieces = ((size_t)outer + j.piece - 1) / j.piece * (size_t)g->batch;
  mr_cpu_parallel_for(threads, pieces, 1, gemm_pieces, &j);
  return 0;
}

typedef struct mirror_job {
  float complex *c;
  int n, ld;
} mirror_job;

/* Columns [begin, end): the upper part of each from the lower triangle. */
static void mirror_columns(void *arg, size_t begin, size_t end) {
  const mirror_job *j = arg;
  for (size_t col = begin; col < end; col++)
    for (size_t row = 0; row < col; row++)
      j->c[col * j->ld + row] = conjf(j->c[row * j->ld + col]);
}

typedef struct herk_job {
  const mr_herk_args *h;
  int item, block;
} herk_job;

/* Columns [j0, j0 + block) of the lower triangle: the diagonal block by
 * HERK, the rows below it by GEMM. */
static void herk_columns(void *arg, size_t begin, size_t end) {
  const herk_job *j = arg;
  const mr_herk_args *h = j->h;
  const mr_cfloat *a = h->a.data + (size_t)j->item * h->a.stride;
  mr_cfloat *c = h->c.data + (size_t)j->item * h->c.stride;
  const mr_cfloat alpha = h->alpha, beta = h->beta;
  int plain = h->op == MR_BLAS_N; /* a is n x k; else k x n */
  for (size_t blk = begin; blk < end; blk++) {
    int j0 = (int)blk * j->block, w = h->n - j0 < j->block ? h->n - j0 : j->block;
    int below = h->n - j0 - w;
    const mr_cfloat *aj = plain ? a + j0 : a + (size_t)j0 * h->a.ld;
    const mr_cfloat *ab = plain ? a + j0 + w : a + (size_t)(j0 + w) * h->a.ld;
    mr_cfloat *cj = c + (size_t)j0 * h->c.ld + j0;
    cblas_cherk(CblasColMajor, CblasLower, plain ? CblasNoTrans : CblasConjTrans, w, h->k,
                h->alpha, aj, h->a.ld, h->beta, cj, h->c.ld);
    if (below > 0)
      cblas_cgemm(CblasColMajor, plain ? CblasNoTrans : CblasConjTrans,
                  plain ? CblasConjTrans : CblasNoTrans, below, w, h->k, &alpha, ab, h->a.ld,
                  aj, h->a.ld, &beta, cj + w, h->c.ld);
  }
}

int mr_blas_cpu_herk(mr_device *dev, const mr_herk_args *h) {
  mr_cpu_threads *threads = mr_device_threads(dev);
  int block = GEMM_MIN_PIECE;
  size_t blocks = ((size_t)h->n + block - 1) / block;
  for (int i = 0; i < h->batch; i++) {
    herk_job hj = {.h = h, .item = i, .block = block};
    mr_cpu_parallel_for(threads, blocks, 1, herk_columns, &hj);
    mirror_job j = {.c = h->c.data + i * h->c.stride, .n = h->n, .ld = h->c.ld};
    mr_cpu_parallel_for(threads, (size_t)h->n, 64, mirror_columns, &j);
  }
  return 0;
}

typedef struct rows_job {
  const mr_cmat *x, *b;
  const size_t *runs, *first_piece;
} rows_job;

/* Pieces [begin, end) of the runs, each one TRMM in place. */
static void rows_pieces(void *arg, size_t begin, size_t end) {
  const rows_job *j = arg;
  const mr_cmat *x = j->x, *b = j->b;
  const mr_cfloat one = 1;
  size_t run = 0;
  for (size_t p = begin; p < end; p++) {
    while (j->first_piece[run + 1] <= p)
      run++;
    size_t r0 = j->runs[2 * run] + (p - j->first_piece[run]) * MR_BLAS_ROWS_PIECE;
    size_t left = j->runs[2 * run + 1] - r0;
    int rows = left < MR_BLAS_ROWS_PIECE ? (int)left : MR_BLAS_ROWS_PIECE;
    cblas_ctrmm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, rows, x->cols,
                &one, b->data, b->ld, x->data + r0, x->ld);
  }
}

void mr_blas_cpu_trmm_rows(mr_device *dev, const mr_cmat *x, const mr_cmat *b, const size_t *runs,
                           const size_t *first_piece, size_t nruns) {
  rows_job j = {.x = x, .b = b, .runs = runs, .first_piece = first_piece};
  mr_cpu_parallel_for(mr_device_threads(dev), first_piece[nruns], 1, rows_pieces, &j);
}
