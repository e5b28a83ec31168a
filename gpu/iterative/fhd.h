/* Direct non-uniform Fourier sums between voxels and k-space samples,
 * computed exactly (no gridding, no interpolation): the F^H D and Q of
 * Kirk & Hwu ch. 14 (Fig. 14.4), on the CPU (the pool's threads, single or
 * double precision) or a GPU.
 *
 * Conventions, shared with gadgets/data/kspace.h trajectories and fft.h:
 *   k_m  sample positions, `rank` components each, in cycles per pixel
 *        (the Nyquist band is [-0.5, 0.5));
 *   x_n  voxel positions in pixels. On a grid of {nx, ny, nz} voxels, voxel
 *        (ix, iy, iz) sits at (ix - nx/2, iy - ny/2, iz - nz/2): the origin
 *        of fft.h's centered transforms. Arbitrary positions may be given
 *        instead (mr_fhd_set_voxels).
 *   adjoint (F^H W D):  img[b][n] = sum_m w_m d[b][m] exp(+2 pi i k_m . x_n)
 *   forward (F):        d[b][m]   = sum_n img[b][n]   exp(-2 pi i k_m . x_n)
 *   Q (Fig. 14.4A):     q[n]      = sum_m w_m         exp(+2 pi i k_m . x_n)
 * w_m are real sample weights (the book's |phi_m|^2 for Q, or density or
 * noise weights); NULL means 1. Q on the grid twice as large as the image
 * is what the Toeplitz form of F^H W F needs (toeplitz.h).
 *
 * Samples stream through the GPU in chunks (opts.chunk), so k-space larger
 * than device memory is fine; voxel results stay on the device until the
 * end. All arrays of the execute calls are host memory whatever the
 * device. */
#ifndef MR_GPU_FHD_H
#define MR_GPU_FHD_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GPU kernels, in the order the book builds them (14.3 steps 1-4),
 * then past it. Every kernel computes the same sums; the CPU ignores this
 * choice (see mr_fhd_precision). Forward sums always use MR_FHD_TILED. */
typedef enum mr_fhd_kernel {
  MR_FHD_AUTO = 0,     /* RECURRENCE on a grid, TILED on arbitrary voxels */
  MR_FHD_SCATTER,      /* Fig. 14.5 after loop fission: a thread per sample,
                          atomic adds into every voxel */
  MR_FHD_GATHER,       /* Fig. 14.10, loop interchange: a thread per voxel,
                          k-space and sums in global memory */
  MR_FHD_REGISTERS,    /* Fig. 14.11: voxel and sums in registers */
  MR_FHD_CONSTANT,     /* Fig. 14.13: k-space chunks in constant memory */
  MR_FHD_CONSTANT_AOS, /* Fig. 14.16: ... as an array of structs */
  MR_FHD_HWTRIG,       /* Fig. 14.17: hardware sin/cos, after an exact
                          range reduction of the phase */
  MR_FHD_TILED,        /* past the book, any voxels: k-space tiles in shared
                          memory, several voxels per thread */
  MR_FHD_RECURRENCE,   /* past the book, grids: `voxels_per_thread` voxels
                          along x per thread; one hardware sin/cos per
                          sample, the rest by a three-term recurrence */
  MR_FHD_KERNEL_COUNT
} mr_fhd_kernel;

typedef enum mr_fhd_precision {
  MR_FHD_SINGLE = 0, /* float sums; on a grid the CPU uses the recurrence
                        of MR_FHD_RECURRENCE with libm sin/cos */
  MR_FHD_DOUBLE      /* CPU only: every phase, sin/cos and sum in double;
                        the reference the others are checked against */
} mr_fhd_precision;

typedef struct mr_fhd_opts {
  int rank;                 /* 2 or 3 */
  size_t grid[3];           /* {nx, ny, nz}; nz = 1 for rank 2. Ignored
                               once voxels are set as points */
  size_t batch;             /* arrays per execute (coils), >= 1 */
  mr_fhd_kernel kernel;
  mr_fhd_precision precision;
  int block;                /* GPU threads per block; 0: the kernel's own */
  int voxels_per_thread;    /* RECURRENCE: 4, 8, 16 or 32; 0: 32 */
  size_t chunk;             /* samples per pass through the GPU; 0: 2^20 */
} mr_fhd_opts;

typedef struct mr_fhd_plan mr_fhd_plan;

/* Makes a plan on dev (borrowed; it must outlive the plan). MR_EINVAL for
 * bad options or a kernel the device lacks (GPU-only kernels are accepted
 * on the CPU, which has one loop for all). The caller takes *out. */
int mr_fhd_plan_create(mr_device *dev, const mr_fhd_opts *opts, mr_fhd_plan **out, mr_err *err);

/* Uses n arbitrary voxel positions x[n][rank] (pixels) instead of the
 * grid. Copies x. */
int mr_fhd_set_voxels(mr_fhd_plan *plan, size_t n, const float *x, mr_err *err);

/* Sets the trajectory: m samples k[m][rank] in cycles per pixel. Copies k;
 * set it once per trajectory and execute as often as needed. */
int mr_fhd_set_points(mr_fhd_plan *plan, size_t m, const float *k, mr_err *err);

/* Voxels the plan sums over (grid size or points set). */
size_t mr_fhd_voxel_count(const mr_fhd_plan *plan);

/* F^H W D: data [batch][m] (NULL: every sample 1, and out has one array;
 * Q is this with the weights), weights [m] or NULL, out [batch][voxels].
 * Borrows every array. */
int mr_fhd_adjoint(mr_fhd_plan *plan, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                   mr_err *err);

/* F: image [batch][voxels] to samples out [batch][m]. Borrows both. */
int mr_fhd_forward(mr_fhd_plan *plan, const mr_cfloat *image, mr_cfloat *out, mr_err *err);

void mr_fhd_plan_destroy(mr_fhd_plan *plan);

/* "scatter", "gather", ... for benchmarks and messages ("auto" for AUTO). */
const char *mr_fhd_kernel_name(mr_fhd_kernel kernel);

#ifdef __cplusplus
}
#endif

#endif
