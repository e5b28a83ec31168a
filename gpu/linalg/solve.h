/* Hermitian positive-definite solves with Tikhonov regularisation, batched
 * (LAPACKE potrf/potrs on the CPU, cuSOLVER on a GPU): the calibration step
 * of GRAPPA, (A^H A + lambda I) W = A^H B. And the Hermitian eigenvalue
 * decomposition (LAPACKE heevd, cuSOLVER heevd) of calibration Gram
 * matrices: ESPIRiT's kernels, coil compression. */
#ifndef MR_GPU_SOLVE_H
#define MR_GPU_SOLVE_H

#include "cmat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Solves (a + lambda I) x = b for each batch item: a is n x n Hermitian
 * positive definite (its lower triangle is read), b is n x nrhs. On return
 * a holds the lower Cholesky factor of a + lambda I and b holds x. lambda is
 * absolute; a caller wanting a relative one scales it, e.g. by trace(a)/n.
 * MR_ENUMERIC when a + lambda I is not positive definite (the line in err
 * names the item and column). Borrows a and b. */
int mr_solve_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err);

/* Eigenvalues and eigenvectors of each batch item's n x n Hermitian a (its
 * lower triangle is read): on return a's columns are orthonormal
 * eigenvectors and w[b * n + i] (n floats per item, on the call's device)
 * their eigenvalues, ascending. MR_ENUMERIC when the solver does not
 * converge. Borrows a and w. */
int mr_solve_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
