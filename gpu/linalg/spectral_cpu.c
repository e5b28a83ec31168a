/* spectral.c's steps on the CPU (spectral_impl.h): OpenBLAS and LAPACKE in
 * double precision, loops for the rest. */
#include <cblas.h>
#include <complex.h>
#include <lapacke.h>
#include <stdlib.h>

#include "error.h"
#include "spectral_impl.h"

static int widen(mr_device *dev, mr_cmat src, int batch, mr_cdouble *out, mr_err *err) {
  (void)dev;
  (void)err;
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < src.cols; j++)
      for (int i = 0; i < src.rows; i++)
        *out++ = src.data[b * src.stride + (size_t)j * (size_t)src.ld + (size_t)i];
  return 0;
}

static int narrow(mr_device *dev, const mr_cdouble *src, int n, int batch, mr_cmat dst,
                  mr_err *err) {
  (void)dev;
  (void)err;
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < n; i++)
        dst.data[b * dst.stride + (size_t)j * (size_t)dst.ld + (size_t)i] = (mr_cfloat)*src++;
  return 0;
}

static const enum CBLAS_TRANSPOSE trans[] = {
    [MR_BLAS_N] = CblasNoTrans, [MR_BLAS_T] = CblasTrans, [MR_BLAS_C] = CblasConjTrans};

static int gemm(mr_device *dev, mr_blas_op op_a, mr_blas_op op_b, int m, int n, int k, double alpha,
                const mr_cdouble *a, const mr_cdouble *b, double beta, mr_cdouble *c, int batch,
                mr_err *err) {
  (void)dev; /* OpenBLAS runs its own threads */
  (void)err;
  double complex al = alpha, be = beta;
  int lda = op_a == MR_BLAS_N ? m : k, ldb = op_b == MR_BLAS_N ? k : n;
  for (int i = 0; i < batch; i++)
    cblas_zgemm(CblasColMajor, trans[op_a], trans[op_b], m, n, k, &al,
                a + (size_t)i * (size_t)m * (size_t)k, lda, b + (size_t)i * (size_t)k * (size_t)n,
                ldb, &be, c + (size_t)i * (size_t)m * (size_t)n, m);
  return 0;
}

static int combine(mr_device *dev, int n, int batch, const double *p, const mr_cdouble *x,
                   const double *q, const mr_cdouble *y, const double *r, mr_cdouble *out,
                   mr_err *err) {
  (void)dev;
  (void)err;
  size_t nn = (size_t)n * (size_t)n;
  for (int b = 0; b < batch; b++)
    for (size_t e = 0; e < nn; e++) {
      size_t at = b * nn + e;
      double complex v = p[b] * x[at];
      if (y != NULL)
        v += q[b] * y[at];
      if (e % (size_t)n == e / (size_t)n)
        v += r[b];
      out[at] = v;
    }
  return 0;
}

static int dot(mr_device *dev, int n, int batch, const mr_cdouble *x, const mr_cdouble *y,
               double *d, mr_err *err) {
  (void)dev;
  (void)err;
  size_t nn = (size_t)n * (size_t)n;
  for (int b = 0; b < batch; b++) {
    double sum = 0;
    if (y == NULL)
      for (int i = 0; i < n; i++)
        sum += creal(x[b * nn + (size_t)i * (size_t)n + (size_t)i]);
    else
      for (size_t e = 0; e < nn; e++)
        sum += creal(x[b * nn + e] * conj(y[b * nn + e]));
    d[b] = sum;
  }
  return 0;
}

static int posv(mr_device *dev, int n, int batch, mr_cdouble *a, mr_cdouble *b, mr_err *err) {
  (void)dev;
  size_t nn = (size_t)n * (size_t)n;
  for (int i = 0; i < batch; i++) {
    lapack_int info = LAPACKE_zposv(LAPACK_COL_MAJOR, 'L', n, n, a + i * nn, n, b + i * nn, n);
    if (info > 0)
      return mr_err_set(err, MR_ENUMERIC, "spectral: item %d is not positive definite (column %d)",
                        i, (int)info);
    if (info < 0)
      return mr_err_set(err, MR_EINVAL, "spectral: LAPACK rejected argument %d", (int)-info);
  }
  return 0;
}

/* out = v diag(f) v^H for n x n v (columns the eigenvectors); y scratch. */
static void weighted(int n, const double complex *v, const double *f, double complex *y,
                     double complex *out) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++)
      y[(size_t)j * n + i] = v[(size_t)j * n + i] * f[j];
  double complex one = 1, zero = 0;
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasConjTrans, n, n, n, &one, y, n, v, n, &zero,
              out, n);
}

static int by_eigen(mr_device *dev, int n, int batch, mr_cdouble *g, double threshold, double *lmax,
                    mr_cdouble *proj, mr_cdouble *pinv, mr_err *err) {
  (void)dev;
  size_t nn = (size_t)n * (size_t)n;
  double *w = malloc(3 * (size_t)n * sizeof *w);
  double complex *y = malloc(nn * sizeof *y);
  int rc = w == NULL || y == NULL ? mr_err_set(err, MR_ENOMEM, "spectral: out of memory") : 0;
  for (int b = 0; rc == 0 && b < batch; b++) {
    double complex *v = g + b * nn;
    lapack_int info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'V', 'L', n, v, n, w);
    if (info != 0) {
      rc = mr_err_set(err, info > 0 ? MR_ENUMERIC : MR_EINVAL, "spectral: zheevd item %d (info %d)",
                      b, (int)info);
      break;
    }
    lmax[b] = mr_spectral_lmax(w, n);
    double *fp = w + n, *fi = w + 2 * (size_t)n;
    for (int i = 0; i < n; i++)
      mr_spectral_weights(w[i], lmax[b], threshold, fp + i, fi + i);
    weighted(n, v, fp, y, proj + b * nn);
    if (pinv != NULL)
      weighted(n, v, fi, y, pinv + b * nn);
  }
  free(w);
  free(y);
  return rc;
}

const mr_spectral_ops mr_spectral_cpu_ops = {widen, narrow, gemm, combine, dot, posv, by_eigen};
