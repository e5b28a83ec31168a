/* Internal: the two backends of solve.h (arguments already checked). */
#ifndef MR_GPU_SOLVE_IMPL_H
#define MR_GPU_SOLVE_IMPL_H

#include "solve.h"

#ifdef __cplusplus
extern "C" {
#endif

int mr_solve_cpu_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err);
int mr_solve_cuda_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err);
/* cuSOLVER's flags of a batch of Cholesky solves (info[i]: item i's potrf,
 * info[batch + i]: its potrs) as one return code, the first bad item named
 * in err's line after what ("solve", "spectral"). */
int mr_solve_cholesky_flags(const int *info, int batch, const char *what, mr_err *err);

int mr_solve_cpu_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err);
int mr_solve_cuda_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
