/* Internal: the two backends of sense.h. */
#ifndef MR_GPU_SENSE_IMPL_H
#define MR_GPU_SENSE_IMPL_H

#include "sense.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the passes share. sign: multiply by (-1)^(x + y + z) (the centring
 * of a plain transform, fft.h). */
typedef struct mr_sense_pass {
  size_t dims[3], ncoils;
  int sign;
  const mr_cfloat *maps; /* [coil][pixel] */
} mr_sense_pass;

/* out[c] = maps[c] x (times the sign). */
int mr_sense_cpu_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x,
                        mr_cfloat *out);
int mr_sense_cuda_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x, mr_cfloat *out,
                         mr_err *err);
/* out[c][z][y][x] = in[c][z][y][x] mask[z][y] scale (out may be in). */
int mr_sense_cpu_mask(mr_device *dev, const mr_sense_pass *p, const float *mask, float scale,
                      const mr_cfloat *in, mr_cfloat *out);
int mr_sense_cuda_mask(mr_device *dev, const mr_sense_pass *p, const float *mask, float scale,
                       const mr_cfloat *in, mr_cfloat *out, mr_err *err);
/* y = sum_c conj(maps[c]) k[c] (times the sign); with z (not NULL):
 * out = z - step (y - ahb), else out = y. */
int mr_sense_cpu_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                         const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out);
int mr_sense_cuda_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                          const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out,
                          mr_err *err);
/* out[i] = sum_c |maps[c][i]|^2 + 0i. */
int mr_sense_cpu_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out);
int mr_sense_cuda_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out, mr_err *err);

/* A GPU's normal operator of a 2D image. The mask keeps whole readout
 * lines, so F^H M F is the identity along x: A^H A z = S^H F_y^H M F_y S z
 * with 1D transforms along y only, half the 2D transform's work. The coil
 * images go into the scratch as [y][coil][x], so that one batched cuFFT of
 * every (coil, x) column runs with unit distance between columns; and
 * since F_y^H M F_y is a convolution, the plain (uncentred, unscaled)
 * transforms need no centring: the mask is taken in plain order
 * (mask_plain[k] = mask[(k + ny/2) mod ny], mr_sense_set) and the 1 / ny of
 * the two unscaled transforms rides on the combine. Four launches and two
 * transforms for every coil together: maps multiply, forward, the
 * unsampled lines zeroed, backward, combine (with the gradient step when z
 * is given: out = z - step (y - ahb), else y). In 3D the same idea (2D
 * transforms over y and z) measured twice as slow as the 3D transform
 * (cuFFT's strided 2D batches; mr-sparse-timing on an H100), so 3D keeps
 * the five passes of sense.c's normal_k. */
typedef struct mr_sense_lines mr_sense_lines;
int mr_sense_cuda_lines_create(mr_device *dev, const mr_sense_pass *p, mr_sense_lines **out,
                               mr_err *err);
void mr_sense_cuda_lines_destroy(mr_device *dev, mr_sense_lines *l);
int mr_sense_cuda_lines_normal(mr_device *dev, mr_sense_lines *l, const mr_sense_pass *p,
                               const float *mask_plain, mr_cfloat *scratch, const mr_cfloat *x,
                               const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out,
                               mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
