#include "blas_impl.h"
#include "error.h"
#include "solve_impl.h"

int mr_solve_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err) {
  if (batch < 1)
    return mr_err_set(err, MR_EINVAL, "solve: batch %d", batch);
  int rc;
  if ((rc = mr_cmat_check(&a, batch, 1, "solve a", err)) < 0 ||
      (rc = mr_cmat_check(&b, batch, 1, "solve b", err)) < 0)
    return rc;
  if (a.rows != a.cols || b.rows != a.rows)
    return mr_err_set(err, MR_EINVAL, "solve: a is %d x %d, b is %d x %d", a.rows, a.cols, b.rows,
                      b.cols);
  if (lambda < 0)
    return mr_err_set(err, MR_EINVAL, "solve: lambda %g < 0", lambda);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_solve_cuda_hpd(dev, a, lambda, b, batch, err);
#endif
  return mr_solve_cpu_hpd(dev, a, lambda, b, batch, err);
}

int mr_solve_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err) {
  if (batch < 1)
    return mr_err_set(err, MR_EINVAL, "eigh: batch %d", batch);
  int rc = mr_cmat_check(&a, batch, 1, "eigh a", err);
  if (rc < 0)
    return rc;
  if (a.rows != a.cols || w == NULL)
    return mr_err_set(err, MR_EINVAL, "eigh: a is %d x %d", a.rows, a.cols);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_solve_cuda_eigh(dev, a, w, batch, err);
#endif
  return mr_solve_cpu_eigh(dev, a, w, batch, err);
}

int mr_solve_cholesky_flags(const int *info, int batch, const char *what, mr_err *err) {
  for (int i = 0; i < batch; i++) {
    if (info[i] > 0)
      return mr_err_set(err, MR_ENUMERIC, "%s: item %d is not positive definite (column %d)", what,
                        i, info[i]);
    if (info[i] < 0 || info[batch + i] < 0)
      return mr_err_set(err, MR_EINVAL, "%s: cuSOLVER rejected item %d (info %d, %d)", what, i,
                        info[i], info[batch + i]);
  }
  return 0;
}
