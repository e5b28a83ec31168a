#include <cblas.h>
#include <complex.h>

#include "blas_impl.h"
#include "device_impl.h"

static const enum CBLAS_TRANSPOSE trans[] = {
    [MR_BLAS_N] = CblasNoTrans, [MR_BLAS_T] = CblasTrans, [MR_BLAS_C] = CblasConjTrans};

int mr_blas_cpu_gemm(mr_device *dev, const mr_gemm_args *g) {
  (void)dev; /* OpenBLAS runs its own threads */
  for (int i = 0; i < g->batch; i++)
    cblas_cgemm(CblasColMajor, trans[g->op_a], trans[g->op_b], g->m, g->n, g->k,
                &g->alpha, g->a.data + i * g->a.stride, g->a.ld,
                g->b.data + i * g->b.stride, g->b.ld, &g->beta,
                g->c.data + i * g->c.stride, g->c.ld);
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
