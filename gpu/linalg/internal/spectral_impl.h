/* Internal: the steps of spectral.c, CPU and CUDA. They work in double
 * precision on dense items back to back (element (i, j) of item b of an
 * r x c batch at x[b r c + j r + i]) in memory of the call's device;
 * coefficients are host arrays of batch values. */
#ifndef MR_GPU_SPECTRAL_IMPL_H
#define MR_GPU_SPECTRAL_IMPL_H

#include "blas.h"
#include "spectral.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_spectral_ops {
  /* out (dense) = src, widened (src a rows x cols float view) */
  int (*widen)(mr_device *dev, mr_cmat src, int batch, mr_cdouble *out, mr_err *err);
  /* dst (an n x n float view) = src (dense n x n), narrowed */
  int (*narrow)(mr_device *dev, const mr_cdouble *src, int n, int batch, mr_cmat dst, mr_err *err);
  /* c = alpha op_a(a) op_b(b) + beta c: op_a(a) m x k, op_b(b) k x n, all dense */
  int (*gemm)(mr_device *dev, mr_blas_op op_a, mr_blas_op op_b, int m, int n, int k, double alpha,
              const mr_cdouble *a, const mr_cdouble *b, double beta, mr_cdouble *c, int batch,
              mr_err *err);
  /* out = p[b] x + q[b] y + r[b] I per n x n item b (y NULL: no y term;
   * out may be x or y) */
  int (*combine)(mr_device *dev, int n, int batch, const double *p, const mr_cdouble *x,
                 const double *q, const mr_cdouble *y, const double *r, mr_cdouble *out,
                 mr_err *err);
  /* d[b] (host) = Re sum_ij x(i, j) conj(y(i, j)), trace(x y) for
   * Hermitian items; y NULL: trace(x) */
  int (*dot)(mr_device *dev, int n, int batch, const mr_cdouble *x, const mr_cdouble *y, double *d,
             mr_err *err);
  /* b = a^-1 b for Hermitian positive definite n x n a (overwritten by its
   * Cholesky factor); MR_ENUMERIC when an item is not positive definite */
  int (*posv)(mr_device *dev, int n, int batch, mr_cdouble *a, mr_cdouble *b, mr_err *err);
  /* Where not NULL, the whole spectral function through an eigen-
   * decomposition (fast on a CPU, where the matrix polynomials are not):
   * from the Gram matrices g (destroyed), lmax (host) and proj, and pinv
   * where not NULL, each eigenvalue weighted by mr_spectral_weights() */
  int (*by_eigen)(mr_device *dev, int n, int batch, mr_cdouble *g, double threshold, double *lmax,
                  mr_cdouble *proj, mr_cdouble *pinv, mr_err *err);
} mr_spectral_ops;

/* mr_spectral_truncate() through the given steps (a test runs the matrix
 * polynomials on the CPU, whose own steps take the eigen path). */
int mr_spectral_truncate_by(const mr_spectral_ops *ops, mr_device *dev, mr_cmat a, mr_blas_op side,
                            float threshold, mr_cmat proj, mr_cmat pinv, float *lambda_max,
                            int batch, mr_err *err);

/* What the matrix iteration of spectral.c does to one eigenvalue lambda of
 * a Gram matrix whose eigenvalues are w[0..n-1]: lmax (the estimate from
 * them, as the iteration makes it), and for lambda its projector weight
 * (0 to 1) and pseudo-inverse weight. */
double mr_spectral_lmax(const double *w, int n);
void mr_spectral_weights(double lambda, double lmax, double threshold, double *proj,
                         double *pinv);

extern const mr_spectral_ops mr_spectral_cpu_ops;
extern const mr_spectral_ops mr_spectral_cuda_ops;

#ifdef __cplusplus
}
#endif

#endif
