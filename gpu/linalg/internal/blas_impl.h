/* Internal: checked arguments of blas.h and its two backends. */
#ifndef MR_GPU_BLAS_IMPL_H
#define MR_GPU_BLAS_IMPL_H

#include "blas.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_gemm_args {
  mr_blas_op op_a, op_b;
  int m, n, k;
  mr_cfloat alpha, beta;
  mr_cmat a, b, c;
  int batch;
} mr_gemm_args;

typedef struct mr_herk_args {
  mr_blas_op op; /* MR_BLAS_N or MR_BLAS_C */
  int n, k;
  float alpha, beta;
  mr_cmat a, c;
  int batch;
} mr_herk_args;

/* Checks a view for `batch` items: ld, and for outputs a stride that keeps
 * items apart. Shared with solve.c. */
int mr_cmat_check(const mr_cmat *m, int batch, int is_output, const char *what, mr_err *err);

int mr_blas_cpu_gemm(mr_device *dev, const mr_gemm_args *g);
int mr_blas_cpu_herk(mr_device *dev, const mr_herk_args *h);
/* mr_blas_trmm_rows_host with checked arguments; *first_piece: nruns + 1
 * prefix counts of the runs' pieces, filled by the caller. */
void mr_blas_cpu_trmm_rows(mr_device *dev, const mr_cmat *x, const mr_cmat *b, const size_t *runs,
                           const size_t *first_piece, size_t nruns);
int mr_blas_cuda_gemm(mr_device *dev, const mr_gemm_args *g, mr_err *err);
int mr_blas_cuda_herk(mr_device *dev, const mr_herk_args *h, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
