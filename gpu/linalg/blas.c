#include <stdlib.h>

#include "blas_impl.h"
#include "error.h"

int mr_cmat_check(const mr_cmat *m, int batch, int is_output, const char *what, mr_err *err) {
  if (m->rows < 0 || m->cols < 0 || m->ld < (m->rows > 1 ? m->rows : 1))
    return mr_err_set(err, MR_EINVAL, "%s: %d x %d with leading dimension %d", what, m->rows,
                      m->cols, m->ld);
  if (m->data == NULL && m->rows > 0 && m->cols > 0)
    return mr_err_set(err, MR_EINVAL, "%s: no data", what);
  if (is_output && batch > 1 && m->stride < (size_t)m->ld * (size_t)m->cols)
    return mr_err_set(err, MR_EINVAL, "%s: batch stride %zu overlaps %d x %d items", what,
                      m->stride, m->ld, m->cols);
  return 0;
}

static int rows_of(const mr_cmat *m, mr_blas_op op) {
  return op == MR_BLAS_N ? m->rows : m->cols;
}

static int cols_of(const mr_cmat *m, mr_blas_op op) {
  return op == MR_BLAS_N ? m->cols : m->rows;
}

static int check_op(mr_blas_op op, const char *what, mr_err *err) {
  if (op != MR_BLAS_N && op != MR_BLAS_T && op != MR_BLAS_C)
    return mr_err_set(err, MR_EINVAL, "%s: operation %d", what, (int)op);
  return 0;
}

int mr_blas_gemm(mr_device *dev, mr_blas_op op_a, mr_blas_op op_b, mr_cfloat alpha, mr_cmat a,
                 mr_cmat b, mr_cfloat beta, mr_cmat c, int batch, mr_err *err) {
  int rc;
  if ((rc = check_op(op_a, "gemm a", err)) < 0 || (rc = check_op(op_b, "gemm b", err)) < 0)
    return rc;
  if (batch < 1)
    return mr_err_set(err, MR_EINVAL, "gemm: batch %d", batch);
  if ((rc = mr_cmat_check(&a, batch, 0, "gemm a", err)) < 0 ||
      (rc = mr_cmat_check(&b, batch, 0, "gemm b", err)) < 0 ||
      (rc = mr_cmat_check(&c, batch, 1, "gemm c", err)) < 0)
    return rc;
  mr_gemm_args g = {.op_a = op_a, .op_b = op_b, .m = rows_of(&a, op_a),
                    .n = cols_of(&b, op_b), .k = cols_of(&a, op_a),
                    .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c,
                    .batch = batch};
  if (rows_of(&b, op_b) != g.k || c.rows != g.m || c.cols != g.n)
    return mr_err_set(err, MR_EINVAL, "gemm: (%d x %d)(%d x %d) into %d x %d", g.m, g.k,
                      rows_of(&b, op_b), g.n, c.rows, c.cols);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_blas_cuda_gemm(dev, &g, err);
#endif
  return mr_blas_cpu_gemm(dev, &g);
}

int mr_blas_herk(mr_device *dev, mr_blas_op op, float alpha, mr_cmat a, float beta, mr_cmat c,
                 int batch, mr_err *err) {
  if (op != MR_BLAS_N && op != MR_BLAS_C)
    return mr_err_set(err, MR_EINVAL, "herk: operation %d (N or C)", (int)op);
  if (batch < 1)
    return mr_err_set(err, MR_EINVAL, "herk: batch %d", batch);
  int rc;
  if ((rc = mr_cmat_check(&a, batch, 0, "herk a", err)) < 0 ||
      (rc = mr_cmat_check(&c, batch, 1, "herk c", err)) < 0)
    return rc;
  mr_herk_args h = {.op = op, .n = rows_of(&a, op), .k = cols_of(&a, op),
                    .alpha = alpha, .beta = beta, .a = a, .c = c, .batch = batch};
  if (c.rows != h.n || c.cols != h.n)
    return mr_err_set(err, MR_EINVAL, "herk: %d x %d result into %d x %d", h.n, h.n, c.rows,
                      c.cols);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_blas_cuda_herk(dev, &h, err);
#endif
  return mr_blas_cpu_herk(dev, &h);
}

int mr_blas_trmm_rows_host(mr_device *dev, mr_cmat x, mr_cmat b, const size_t *runs, size_t nruns,
                           mr_err *err) {
  int rc;
  if ((rc = mr_cmat_check(&x, 1, 1, "trmm rows x", err)) < 0 ||
      (rc = mr_cmat_check(&b, 1, 0, "trmm rows b", err)) < 0)
    return rc;
  if (b.rows != x.cols || b.cols != x.cols)
    return mr_err_set(err, MR_EINVAL, "trmm rows: %d columns times %d x %d", x.cols, b.rows,
                      b.cols);
  size_t *first = malloc((nruns + 1) * sizeof *first);
  if (first == NULL)
    return mr_err_set(err, MR_ENOMEM, "trmm rows: out of memory");
  first[0] = 0;
  for (size_t i = 0; i < nruns; i++) {
    size_t r0 = runs[2 * i], r1 = runs[2 * i + 1];
    if (r0 > r1 || r1 > (size_t)x.rows) {
      free(first);
      return mr_err_set(err, MR_EINVAL, "trmm rows: run [%zu, %zu) of %d rows", r0, r1, x.rows);
    }
    first[i + 1] = first[i] + (r1 - r0 + MR_BLAS_ROWS_PIECE - 1) / MR_BLAS_ROWS_PIECE;
  }
  mr_blas_cpu_trmm_rows(dev, &x, &b, runs, first, nruns);
  free(first);
  return 0;
}
