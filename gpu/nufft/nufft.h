/* Non-uniform FFT plans (gridding), 2D and 3D, in the cuFINUFFT shape: make
 * a plan for an image shape and a batch (e.g. coils) on a device, give it the
 * sample positions once per trajectory, execute it as often as needed in
 * either direction, destroy it.
 *
 * Conventions. A position k is in cycles per pixel, `rank` floats per sample
 * (x first); the transforms are periodic in k with period 1, so [-0.5, 0.5)
 * covers every position. Images are x fastest, then y, then z, with the
 * origin at index n/2 of each dimension, as the centered FFT of fft.h; pixel
 * index i stands for the signed position m = i - n/2.
 *   ADJOINT (type 1, gridding):  image[m]   = sum_j samples[j] exp(+2 pi i k_j.m)
 *   FORWARD (type 2):            samples[j] = sum_m image[m]   exp(-2 pi i k_j.m)
 * No scale factor either way, so ADJOINT is the exact adjoint of FORWARD and
 * density-weighted samples (density.h) grid to the image's own scale. A
 * batch is `batch` sample vectors of npoints back to back ([b][j]) and
 * `batch` images back to back.
 *
 * Method. Each sample is spread onto (or interpolated from) an oversampled
 * grid with an "exponential of semicircle" kernel exp(beta (sqrt(1 - z^2) -
 * 1)) whose width and beta follow from the tolerance; an FFT of the grid and
 * a division by the kernel's Fourier transform (deapodization) finish the
 * job. The relative L2 error is about tol, down to about 1e-6 where single
 * precision ends. */
#ifndef MR_GPU_NUFFT_H
#define MR_GPU_NUFFT_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_nufft_plan mr_nufft_plan;

typedef enum mr_nufft_direction {
  MR_NUFFT_ADJOINT = 1, /* type 1: samples -> image */
  MR_NUFFT_FORWARD = 2  /* type 2: image -> samples */
} mr_nufft_direction;

/* mr_nufft_opts.upsampling: 2 in 2D, 1.25 in 3D (2 where 1.25 misses the
 * tolerance), on a GPU as on the CPU, never timed: for results that must
 * not depend on a measurement of the machine (density weights, density.h). */
#define MR_NUFFT_UPSAMPLING_RULE (-1.0)

typedef struct mr_nufft_opts {
  int rank;          /* 2 or 3 */
  size_t dims[3];    /* image {nx, ny, nz}; dimensions past rank are ignored */
  size_t batch;      /* transforms per execute, >= 1 */
  double tol;        /* requested relative error, 1e-6 .. 1e-1 */
  double upsampling; /* grid oversampling, 1.25 .. 2.0; 0: the fastest of 1.25, 2
                        and the least that keeps 2's kernel width, of those
                        that reach tol (measured on a GPU, see plan_create);
                        MR_NUFFT_UPSAMPLING_RULE: the one a CPU plan takes
                        automatically, on every device */
  /* The type the automatic upsampling is made fast for: 0 (the default)
   * both together; MR_NUFFT_ADJOINT or MR_NUFFT_FORWARD for a plan that
   * runs that type alone (it still runs both). */
  int tune_for;
  /* The most positions one set_points will give. With it, plan creation
   * makes all the memory the binning needs (a GPU's arrays and scratch),
   * so that no set_points allocates, and set_points refuses more points
   * (MR_EINVAL). 0: not known; a GPU plan's binning memory is then made at
   * the first set_points and grown when a trajectory has more points than
   * any before. */
  size_t max_points;
} mr_nufft_opts;

/* Makes a plan for opts on dev (borrowed; it must outlive the plan): kernel,
 * grid, deapodization factors, the grid memory and (with max_points) the
 * binning's; on a GPU it also loads the binning's kernels, so that the
 * first set_points costs what later ones do. With automatic upsampling, a
 * GPU plan of a shape new to this process and GPU times the candidate
 * upsamplings here, once per shape, on uniformly spread points (max_points
 * of them, or as many as the image has pixels; about 0.15-0.3 s on the
 * H100, mostly cuFFT plans), and keeps the faster (mr_nufft_info_get tells
 * the choice). MR_EINVAL for bad options, among them a tolerance that
 * single precision cannot reach at the upsampling asked for (1.25 ends
 * near 1e-5); MR_EDEVMEM when the GPU is out of memory. The caller takes
 * *out. */
int mr_nufft_plan_create(mr_device *dev, const mr_nufft_opts *opts, mr_nufft_plan **out,
                         mr_err *err);

/* Gives the plan npoints sample positions k[npoints][rank] (host memory,
 * borrowed; npoints may be 0), replacing any earlier ones: they are placed
 * on the grid and sorted into bins once here, for every execute after (on
 * a GPU by the GPU: the positions are uploaded, nothing else crosses the
 * bus but three counts). MR_EINVAL for a position that is not finite, and
 * for more points than opts.max_points (when given). */
int mr_nufft_set_points(mr_nufft_plan *plan, size_t npoints, const float *k, mr_err *err);

/* Same, with k in the plan's device memory (mr_buf memory for a GPU, host
 * memory for the CPU): a trajectory computed on the GPU is binned there
 * without a round trip. */
int mr_nufft_set_points_device(mr_nufft_plan *plan, size_t npoints, const float *k, mr_err *err);

/* Transforms one batch. ADJOINT reads samples from in ([batch][npoints]) and
 * writes images to out; FORWARD reads images from in and writes samples to
 * out. Both pointers live on the plan's device (host memory for the CPU,
 * mr_buf memory for a GPU) and must not overlap. Borrows in and out. */
int mr_nufft_execute(mr_nufft_plan *plan, mr_nufft_direction dir, const mr_cfloat *in,
                     mr_cfloat *out, mr_err *err);

/* Same, with in and out in host memory whatever the device. */
int mr_nufft_execute_host(mr_nufft_plan *plan, mr_nufft_direction dir, const mr_cfloat *in,
                          mr_cfloat *out, mr_err *err);

/* Frees the plan and its device memory. NULL is ignored. */
void mr_nufft_plan_destroy(mr_nufft_plan *plan);

/* What a plan chose, for logs and benchmarks. */
typedef struct mr_nufft_info {
  size_t grid[3];    /* oversampled grid, 1 past rank */
  int width;         /* kernel width in grid points */
  double beta;       /* kernel shape */
  double upsampling; /* asked for, or chosen */
  double float_floor; /* estimated least relative error in single precision */
  size_t npoints;    /* positions set */
  size_t entries;    /* (sample, bin) pairs the spreading visits */
} mr_nufft_info;

void mr_nufft_info_get(const mr_nufft_plan *plan, mr_nufft_info *info);

#ifdef __cplusplus
}
#endif

#endif
