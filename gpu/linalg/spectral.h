/* Truncated spectral functions of Hermitian positive semi-definite
 * matrices, batched, without an eigen-decomposition: the projector onto the
 * eigenvectors whose eigenvalue is above a threshold relative to the
 * largest, and the pseudo-inverse truncated there. ESPIRiT's signal
 * subspace (gpu/coil/espirit.c): BART keeps the calibration matrix's right
 * singular vectors with sigma^2 > t sigma_max^2, one LAPACK eigen-
 * decomposition; on a GPU a dense eigensolver (cuSOLVER heevd) is a long
 * chain of small dependent steps, while these are matrix products only.
 *
 * Method (GPU): the largest eigenvalue from the trace of the Gram matrix
 * g's 64th power (repeated squaring, each square normalised to trace 1;
 * low by at most 0.6% however close the next eigenvalues are); then the
 * sign of (g - tau I) / c, tau = threshold times the largest, by a matrix
 * polynomial iteration: 7 quintic steps that raise small eigenvalues
 * 3.4-fold each, then 5 Newton-Schulz steps that settle every eigenvalue
 * at -1 or +1; the pseudo-inverse by one Cholesky solve. Eigenvalues
 * within 5% of tau (|lambda - tau| < 5e-5 lambda_max at 1e-3) get a weight
 * between 0 and 1, where an eigen-decomposition would cut hard; 39 GEMMs
 * in all. The CPU computes the same function of the eigenvalues through
 * LAPACK's zheevd (fast there), each weighted by the same polynomial. */
#ifndef MR_GPU_SPECTRAL_H
#define MR_GPU_SPECTRAL_H

#include "blas.h"
#include "cmat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For each batch item's m x k matrix a: its Gram matrix g = a^H a (side
 * MR_BLAS_C, n = k) or a a^H (side MR_BLAS_N, n = m), and from g, with
 * lambda_max its largest eigenvalue: proj = sum of v v^H over g's
 * eigenvectors v whose eigenvalue lambda > threshold * lambda_max, and,
 * where pinv.data is not NULL, pinv = sum of v v^H / lambda over the same
 * (n x n each). All in double precision, in and out in single: a backend's
 * rounding then moves the weights near the threshold (steep there) far
 * less than single precision would (by 1e-2 on an ESPIRiT calibration).
 * lambda_max (host, batch floats; may be NULL) receives each item's; an
 * item without signal (g = 0) gets 0 and zero outputs. MR_EINVAL for bad
 * shapes or a threshold outside (0, 1). Borrows all. */
int mr_spectral_truncate(mr_device *dev, mr_cmat a, mr_blas_op side, float threshold, mr_cmat proj,
                         mr_cmat pinv, float *lambda_max, int batch, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
