/* Hermitian positive-definite solves with Tikhonov regularisation, batched
 * (LAPACKE potrf/potrs on the CPU, cuSOLVER on a GPU): the calibration step
 * of GRAPPA, (A^H A + lambda I) W = A^H B. */
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
 * MR_ENUMERIC when a + lambda I is not positive definite (the detail line
 * names the item and column). Borrows a and b. */
int mr_solve_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch);

#ifdef __cplusplus
}
#endif

#endif
