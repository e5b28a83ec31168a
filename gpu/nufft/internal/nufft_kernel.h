/* Internal: the NUFFT spreading kernel's parameters and Fourier transform
 * (host code, double precision). */
#ifndef MR_GPU_NUFFT_KERNEL_H
#define MR_GPU_NUFFT_KERNEL_H

#include <stddef.h>

/* Width (grid points) and beta of the "exponential of semicircle" kernel
 * for a relative error tol on a grid oversampled by sigma. The error falls
 * as exp(-pi w sqrt(1 - 1/sigma)) (Barnett, Magland and af Klinteberg, SIAM
 * J. Sci. Comput. 2019), beta about 0.97 pi (1 - 1/(2 sigma)) w; the widths
 * carry a margin measured against the exact DFT so that the error stays
 * under tol (nufft_kernel.c). Width is clamped to 2 .. MR_NUFFT_MAX_WIDTH. */
void mr_nufft_kernel_choose(double tol, double sigma, int *width, double *beta);

/* The least grid oversampling at which a kernel of `width` reaches half
 * of tol by the same error law (above 1 always; the caller keeps it within the
 * upsamplings it allows). With the width chosen at 2, this grid is the
 * smallest that keeps that width: a smaller FFT for the same spreading. */
double mr_nufft_kernel_least_sigma(double tol, int width);

/* phi_hat(xi[i]) = integral of phi(x) exp(-2 pi i xi x) dx over the
 * support |x| <= w/2, for n frequencies xi (cycles per grid step), by
 * Gauss-Legendre quadrature. phi is even, so the result is real. */
void mr_nufft_kernel_ft(int width, double beta, const double *xi, size_t n, double *out);

#endif
