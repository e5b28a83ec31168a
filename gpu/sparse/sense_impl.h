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
int mr_sense_cuda_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x,
                         mr_cfloat *out);
/* out[c][z][y][x] = in[c][z][y][x] mask[z][y] scale (out may be in). */
int mr_sense_cpu_mask(mr_device *dev, const mr_sense_pass *p, const float *mask, float scale,
                      const mr_cfloat *in, mr_cfloat *out);
int mr_sense_cuda_mask(mr_device *dev, const mr_sense_pass *p, const float *mask, float scale,
                       const mr_cfloat *in, mr_cfloat *out);
/* y = sum_c conj(maps[c]) k[c] (times the sign); with z (not NULL):
 * out = z - step (y - ahb), else out = y. */
int mr_sense_cpu_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                         const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out);
int mr_sense_cuda_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                          const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out);
/* out[i] = sum_c |maps[c][i]|^2 + 0i. */
int mr_sense_cpu_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out);
int mr_sense_cuda_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out);

#ifdef __cplusplus
}
#endif

#endif
