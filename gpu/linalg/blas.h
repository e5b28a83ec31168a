/* Complex matrix products, batched: GEMM and HERK (OpenBLAS on the CPU,
 * cuBLAS on a GPU). Matrices are column-major mr_cmat views (cmat.h) on the
 * call's device; `batch` items are processed, each at its view's stride. */
#ifndef MR_GPU_BLAS_H
#define MR_GPU_BLAS_H

#include "cfloat.h"
#include "cmat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_blas_op {
  MR_BLAS_N, /* the matrix as stored */
  MR_BLAS_T, /* transposed */
  MR_BLAS_C  /* conjugate-transposed */
} mr_blas_op;

/* c = alpha op_a(a) op_b(b) + beta c, with op_a(a) m x k, op_b(b) k x n and
 * c m x n. MR_EINVAL when the shapes do not agree. Borrows a, b, c. */
int mr_blas_gemm(mr_device *dev, mr_blas_op op_a, mr_blas_op op_b, mr_cfloat alpha, mr_cmat a,
                 mr_cmat b, mr_cfloat beta, mr_cmat c, int batch, mr_err *err);

/* Hermitian rank-k update of the n x n matrix c:
 *   op MR_BLAS_N: c = alpha a a^H + beta c   (a is n x k)
 *   op MR_BLAS_C: c = alpha a^H a + beta c   (a is k x n; GRAPPA's A^H A)
 * Both triangles of c are written (c is Hermitian). Borrows a, c. */
int mr_blas_herk(mr_device *dev, mr_blas_op op, float alpha, mr_cmat a, float beta, mr_cmat c,
                 int batch, mr_err *err);

/* x = x b in place on runs of x's rows, b upper triangular (its strict
 * lower part is not read), in host memory whatever dev is: run i is the
 * rows [runs[2i], runs[2i + 1]) of every column, b is x.cols x x.cols (a
 * k-space buffer's sampled lines times a prewhitening matrix, where they
 * lie: x's columns are its channels, ld a channel's size). A triangular
 * product (TRMM) in place on dev's CPU threads, in pieces of at most
 * MR_BLAS_ROWS_PIECE rows of a run: no scratch, half a GEMM's
 * multiply-adds, the same result on any number of threads. MR_EINVAL for
 * a run outside x or a b of another size. Borrows x, b and runs. */
enum { MR_BLAS_ROWS_PIECE = 512 };
int mr_blas_trmm_rows_host(mr_device *dev, mr_cmat x, mr_cmat b, const size_t *runs, size_t nruns,
                           mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
