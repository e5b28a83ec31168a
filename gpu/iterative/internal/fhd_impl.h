/* Internal: the plan behind fhd.h and its two backends. */
#ifndef MR_GPU_FHD_IMPL_H
#define MR_GPU_FHD_IMPL_H

#include <stddef.h>

#include "fhd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phases in fixed point: k * 2^32 as a wrapping 32-bit integer. For
 * integer voxel coordinates the phase k . x in revolutions is then exact
 * modulo 1 (integer arithmetic wraps exactly), which is all sin and cos
 * need; the 2^-33 rounding of k is far below float precision. */
#define MR_FHD_FIXED_ONE 4294967296.0

struct mr_fhd_plan {
  mr_device *dev;
  mr_fhd_opts opts;  /* AUTO resolved; block, voxels_per_thread, chunk set */
  size_t nvox;       /* grid voxels, or points */
  float *voxels;     /* [nvox][rank] points; NULL on the grid */
  size_t m;
  float *k;          /* [m][rank] */
  void *impl;        /* the GPU backend's state */
};

/* Position of grid voxel i along one axis of n. */
static inline long mr_fhd_grid_coord(size_t i, size_t n) { return (long)i - (long)(n / 2); }

/* k * 2^32 wrapped to int32, as unsigned (see MR_FHD_FIXED_ONE). */
unsigned mr_fhd_fixed(double k);

int mr_fhd_cpu_adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                       mr_err *err);
int mr_fhd_cpu_forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err);

int mr_fhd_cuda_create(mr_fhd_plan *p, mr_err *err);
/* The voxels changed: the device's copies of their positions are stale. */
void mr_fhd_cuda_forget(mr_fhd_plan *p);
int mr_fhd_cuda_adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                        mr_err *err);
int mr_fhd_cuda_forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err);
void mr_fhd_cuda_destroy(mr_fhd_plan *p);

#ifdef __cplusplus
}
#endif

#endif
