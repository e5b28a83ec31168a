#include <complex.h>
#include <lapacke.h>

#include "error.h"
#include "fail.h"
#include "solve_impl.h"

int mr_solve_cpu_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch) {
  (void)dev; /* OpenBLAS runs its own threads */
  for (int i = 0; i < batch; i++) {
    lapack_complex_float *ai = (lapack_complex_float *)(a.data + i * a.stride);
    lapack_complex_float *bi = (lapack_complex_float *)(b.data + i * b.stride);
    for (int d = 0; d < a.rows; d++)
      ai[(size_t)d * a.ld + d] += lambda;
    lapack_int info = LAPACKE_cpotrf(LAPACK_COL_MAJOR, 'L', a.rows, ai, a.ld);
    if (info > 0)
      return mr_fail(MR_ENUMERIC,
                     "solve: item %d is not positive definite (column %d)", i,
                     (int)info);
    if (info == 0)
      info = LAPACKE_cpotrs(LAPACK_COL_MAJOR, 'L', a.rows, b.cols, ai, a.ld, bi, b.ld);
    if (info < 0)
      return mr_fail(MR_EINVAL, "solve: LAPACK rejected argument %d", (int)-info);
  }
  return 0;
}

int mr_solve_cpu_eigh(mr_device *dev, mr_cmat a, float *w, int batch) {
  (void)dev;
  for (int i = 0; i < batch; i++) {
    lapack_complex_float *ai = (lapack_complex_float *)(a.data + i * a.stride);
    lapack_int info = LAPACKE_cheevd(LAPACK_COL_MAJOR, 'V', 'L', a.rows, ai, a.ld,
                                     w + (size_t)i * (size_t)a.rows);
    if (info > 0)
      return mr_fail(MR_ENUMERIC, "eigh: item %d did not converge (%d)", i, (int)info);
    if (info < 0)
      return mr_fail(MR_EINVAL, "eigh: LAPACK rejected argument %d", (int)-info);
  }
  return 0;
}
