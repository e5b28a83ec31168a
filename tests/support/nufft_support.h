/* Shared by the NUFFT and gridding tests: sample positions and the exact
 * non-uniform DFT in double precision, the reference every NUFFT result is
 * held against. */
#ifndef MR_TEST_NUFFT_SUPPORT_H
#define MR_TEST_NUFFT_SUPPORT_H

#include <complex.h>
#include <stddef.h>

/* n positions uniformly random in [-0.5, 0.5)^rank, reproducible per seed,
 * with the first ones on the edges (-0.5 exactly, just under +0.5). */
void nufft_test_random_points(float *k, size_t n, int rank, unsigned seed);

/* A 2D radial trajectory: spokes full diameters at evenly spread angles,
 * samples per spoke at (i - samples/2) / samples, so each spoke holds the
 * centre. k[spokes * samples][2]. */
void nufft_test_radial_points(float *k, size_t spokes, size_t samples);

/* The exact transforms of nufft.h in double: dims {nx, ny, nz} (nz = 1 for
 * rank 2), batch vectors.
 *   adjoint: image[b][m] = sum_j samples[b][j] exp(+2 pi i k_j.m)
 *   forward: samples[b][j] = sum_m image[b][m] exp(-2 pi i k_j.m) */
void nufft_test_dft_adjoint(int rank, const size_t dims[3], size_t batch, size_t n,
                            const float *k, const float complex *samples, double complex *image);
void nufft_test_dft_forward(int rank, const size_t dims[3], size_t batch, size_t n,
                            const float *k, const float complex *image, double complex *samples);

/* ||a - ref|| / ||ref|| with a in float and ref in double. */
double nufft_test_rel_error(const float complex *a, const double complex *ref, size_t n);

#endif
