#include <cblas.h>
#include <complex.h>

#include "blas_impl.h"
#include "device_impl.h"

static const enum CBLAS_TRANSPOSE trans[] = {
    [MR_BLAS_N] = CblasNoTrans, [MR_BLAS_T] = CblasTrans, [MR_BLAS_C] = CblasConjTrans};

/* OpenBLAS runs a GEMM of at most this many multiply-adds in the calling
 * thread (its SMP_THRESHOLD_MIN 65536 times GEMM_MULTITHREAD_THRESHOLD 4);
 * a bigger one goes to its own thread pool, which serves one call at a
 * time while the callers of others spin waiting (sched_yield): a server's
 * sessions and pipeline stages call at once, and each waited for the
 * others' products (prewhitening a slice took longer than calibrating
 * it). A product with a small side (prewhitening: points x 32 times
 * 32 x 32; a batch of small items: GRAPPA's per-frequency products) is
 * therefore cut into pieces of at most this size along its long outer
 * side, spread over the device's threads: the pieces run at once, in our
 * threads, and never wait for the pool. */
#define GEMM_SINGLE_THREAD_MNK ((size_t)1 << 18)
/* Fewer rows or columns than this per piece pack too little per call:
 * such a product keeps OpenBLAS's threads. */
#define GEMM_MIN_PIECE 16

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
  /* Pieces along the longer outer side, each small enough to stay in the
   * calling thread; products too wide for that keep OpenBLAS's threads. */
  int split_m = g->m >= g->n, outer = split_m ? g->m : g->n, inner = split_m ? g->n : g->m;
  size_t per_row = (size_t)inner * (size_t)(g->k > 0 ? g->k : 1);
  size_t piece = GEMM_SINGLE_THREAD_MNK / per_row;
  if (piece >= GEMM_MIN_PIECE && outer > 0 && (g->batch > 1 || piece < (size_t)outer)) {
    gemm_job j = {.g = g, .piece = piece < (size_t)outer ? (int)piece : outer,
                  .split_m = split_m};
    size_t per_item = ((size_t)outer + j.piece - 1) / j.piece;
    mr_cpu_parallel_for(mr_device_threads(dev), per_item * g->batch, 1, gemm_pieces, &j);
    return 0;
  }
  for (int i = 0; i < g->batch; i++)
    gemm_piece(g, i, 1, 0, g->m);
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

int mr_blas_cpu_herk(mr_device *dev, const mr_herk_args *h) {
  for (int i = 0; i < h->batch; i++) {
    float complex *c = h->c.data + i * h->c.stride;
    cblas_cherk(CblasColMajor, CblasLower,
                h->op == MR_BLAS_N ? CblasNoTrans : CblasConjTrans, h->n, h->k,
                h->alpha, h->a.data + i * h->a.stride, h->a.ld, h->beta, c, h->c.ld);
    mirror_job j = {.c = c, .n = h->n, .ld = h->c.ld};
    mr_cpu_parallel_for(mr_device_threads(dev), (size_t)h->n, 64, mirror_columns, &j);
  }
  return 0;
}
