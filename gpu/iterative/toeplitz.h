/* The normal operator of non-Cartesian reconstruction,
 *   A = F^H W F + lambda R        (one image), or
 *   A = sum_c S_c^H F^H W F S_c + lambda R   (coil sensitivity maps S_c),
 * applied without a pass over the samples: F^H W F is a convolution with
 * the Q of fhd.h, (F^H W F x)(r) = sum_r' Q(r - r') x(r'), and r - r' of
 * an n-voxel image spans fewer than 2n voxels per axis, so the convolution
 * is exact as a circular one on the grid twice as large (Toeplitz
 * embedding): zero-pad x, FFT, multiply by the transform of Q, inverse FFT,
 * crop. Two FFTs of the doubled grid per image per apply; Q, computed once
 * per trajectory, is all the samples contribute.
 *
 * R, the book's W^H W: the identity (Tikhonov), or finite differences
 * sum_d D_d^H D_d with D_d x(r) = x(r + e_d) - x(r) and zeros outside the
 * image (a convolution too, so it joins Q's transform at no cost; with
 * maps it gets a transform of its own).
 *
 * Built on fft.h, block.h and vec.h, so it runs on the CPU and on a GPU
 * alike (a GPU does the per-coil steps in fused passes of its own,
 * toeplitz_cuda.cu); apply takes and gives memory on the operator's
 * device. */
#ifndef MR_GPU_TOEPLITZ_H
#define MR_GPU_TOEPLITZ_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_regularizer {
  MR_REG_IDENTITY,         /* R = I */
  MR_REG_FINITE_DIFFERENCE /* R = sum_d D_d^H D_d */
} mr_regularizer;

typedef struct mr_toeplitz_opts {
  int rank;              /* 2 or 3 */
  size_t n[3];           /* the image {nx, ny, nz}; nz = 1 for rank 2 */
  double lambda;         /* >= 0 */
  mr_regularizer reg;
  size_t coils;          /* maps given with mr_toeplitz_set_maps; 0: none */
} mr_toeplitz_opts;

typedef struct mr_toeplitz mr_toeplitz;

/* Builds the operator on dev (borrowed) from q (host memory, borrowed):
 * Q of the trajectory on the grid of 2n voxels per axis, as mr_fhd_adjoint
 * computes it with no data (with the weights W); q NULL: Q comes later, by
 * mr_toeplitz_set_q, before the first apply. The caller takes *out. */
int mr_toeplitz_create(mr_device *dev, const mr_toeplitz_opts *opts, const mr_cfloat *q,
                       mr_toeplitz **out, mr_err *err);

/* Gives the operator the Q of a new trajectory of the same shape, q in the
 * operator's device memory (mr_buf memory for a GPU, host memory for the
 * CPU), borrowed: the kernel is remade in place (no allocation, no
 * transfer; FFT plans and coil maps kept), for a stream whose trajectory
 * changes every frame. */
int mr_toeplitz_set_q(mr_toeplitz *t, const mr_cfloat *q, mr_err *err);

/* Sets the coil maps: maps[coils][voxels] in host memory (copied). Needed
 * before the first apply when opts.coils > 0. */
int mr_toeplitz_set_maps(mr_toeplitz *t, const mr_cfloat *maps, mr_err *err);

/* out = sum_c S_c^H x_c for coil images x [coils][voxels], with the maps
 * set: the right-hand side of SENSE from each coil's F^H D. x and out on
 * the operator's device, not overlapping; borrows both. */
int mr_toeplitz_combine(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *out, mr_err *err);

/* y = A x for one image; x and y on the operator's device, not
 * overlapping. Borrows both. */
int mr_toeplitz_apply(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *y, mr_err *err);

/* y_i = A x_i for `count` images x, y [count][voxels] on the operator's
 * device, of an operator made without coils (with coils count must be 1):
 * on a GPU in one pass of batched transforms, on the CPU one by one. */
int mr_toeplitz_apply_batch(mr_toeplitz *t, size_t count, const mr_cfloat *x, mr_cfloat *y,
                            mr_err *err);

/* Voxels of one image. */
size_t mr_toeplitz_voxels(const mr_toeplitz *t);
mr_device *mr_toeplitz_device(const mr_toeplitz *t);

void mr_toeplitz_destroy(mr_toeplitz *t);

/* The adapters mr_cg_solve and mr_cg_solve_batch (cg.h) take: op is an
 * mr_toeplitz. */
int mr_toeplitz_apply_op(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err);
int mr_toeplitz_apply_batch_op(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                               mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
