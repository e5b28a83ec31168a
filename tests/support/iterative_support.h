/* Shared by the iterative-reconstruction tests: trajectories, the exact
 * normal operator (direct sums in double precision) and image metrics. */
#ifndef MR_TEST_ITERATIVE_SUPPORT_H
#define MR_TEST_ITERATIVE_SUPPORT_H

#include <complex.h>
#include <stddef.h>

#include "cfloat.h"
#include "device.h"
#include "toeplitz.h"

/* Radial spokes through the centre, `samples` each over [-0.5, 0.5)
 * cycles/pixel; 2D angles evenly over pi, 3D directions on a Fibonacci
 * sphere. k holds spokes * samples * rank floats. */
void iter_radial(int rank, int spokes, int samples, float *k);

/* Archimedean spiral interleaves of `turns` turns out to 0.5 cycles/pixel
 * (2D), or a stack of them over kz (3D, `partitions` planes). Arms of all
 * interleaves are 0.5 / (turns * interleaves) apart: Nyquist for an N-pixel
 * image needs turns * interleaves >= N / 2. */
void iter_spiral(int rank, int interleaves, int samples, double turns, int partitions, float *k);

/* y = F^H W F x + lambda R x (+ coil maps when given: sum_c S_c^H ...),
 * with F and F^H as double-precision direct sums on the CPU: the exact
 * operator the Toeplitz one must reproduce. w may be NULL. */
void iter_exact_normal(mr_device *cpu, int rank, const size_t n[3], size_t m, const float *k,
                       const float *w, double lambda, mr_regularizer reg, size_t coils,
                       const mr_cfloat *maps, const mr_cfloat *x, mr_cfloat *y);

/* The book's baseline (Fig. 14.19's "gridding/iFFT"): each Cartesian
 * k-space point of an n-voxel image is the bilinear-interpolation weighted
 * mean of the samples around it (data [batch][m]), then a centered inverse
 * FFT on dev; out [batch][voxels]. */
void iter_bilinear_gridding(mr_device *dev, int rank, const size_t n[3], size_t batch, size_t m,
                            const float *k, const mr_cfloat *data, mr_cfloat *out);

/* The modified Shepp-Logan phantom (Toft's intensities) sampled at the
 * voxel centres of an nx x ny image, x fastest; the ellipses span the
 * image's width. */
void iter_shepp_logan(size_t nx, size_t ny, float *img);

/* Analytic multi-coil k-space of the modified Shepp-Logan phantom (2D:
 * ellipses; 3D: ellipsoids; spanning the image's width) at m positions k
 * (cycles per pixel) for an image of n voxels per axis: the exact Fourier
 * transform of the continuous object, never a sum over voxels (no inverse
 * crime). Coil c sees it through a smooth sensitivity peaking on a ring
 * around the object, a sum of 3^rank plane waves, so its k-space is exact
 * too. data [coils][m]. */
void iter_analytic_kspace(int rank, const size_t n[3], size_t coils, size_t m, const float *k,
                          mr_cfloat *data);

/* What an exact reconstruction combined by root sum of squares shows: the
 * phantom at the voxel centres times sqrt(sum_c |S_c|^2). img [voxels]. */
void iter_analytic_rss(int rank, const size_t n[3], size_t coils, float *img);

/* PSNR in dB (Kirk & Hwu Fig. 14.18): 20 log10(max|ref| / rms(img - ref)). */
double iter_psnr(const float *img, const float *ref, size_t n);

#endif
