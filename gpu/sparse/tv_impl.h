/* Internal: the two backends of tv.h. */
#ifndef MR_GPU_TV_IMPL_H
#define MR_GPU_TV_IMPL_H

#include "tv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The differenced axes of an image of dims: their number and which. */
typedef struct mr_tv_shape {
  size_t dims[3];
  int naxes;
  int axis[3];
} mr_tv_shape;

/* x = u - t D^H p (u NULL: zero). */
int mr_tv_cpu_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                     const mr_cfloat *p, mr_cfloat *x);
int mr_tv_cuda_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                      const mr_cfloat *p, mr_cfloat *x);
/* p = p + tau D x, then (project) each pixel's p scaled to at most unit
 * norm over the axes. */
int mr_tv_cpu_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                   const mr_cfloat *x, mr_cfloat *p);
int mr_tv_cuda_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                    const mr_cfloat *x, mr_cfloat *p);

#ifdef __cplusplus
}
#endif

#endif
