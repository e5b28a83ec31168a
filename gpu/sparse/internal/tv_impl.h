/* Internal: the two backends of tv.h. */
#ifndef MR_GPU_TV_IMPL_H
#define MR_GPU_TV_IMPL_H

#include "tv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The spatially differenced axes of an image of dims (their number and
 * which), and the temporal term: its kind, weight and reference; its dual
 * image follows the spatial ones'. */
typedef struct mr_tv_shape {
  size_t dims[3];
  int naxes;
  int axis[3];
  mr_tv_time time;
  float weight;
  const mr_cfloat *reference; /* MR_TV_REFERENCE; NULL: zero */
} mr_tv_shape;

/* x = u - t K^H p (u NULL: zero). */
int mr_tv_cpu_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                     const mr_cfloat *p, mr_cfloat *x);
int mr_tv_cuda_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                      const mr_cfloat *p, mr_cfloat *x, mr_err *err);
/* p = p + tau (K x - c) (c the reference term's offset, with project
 * only: K stays linear for mr_tv_forward), then (project) each pixel's
 * spatial dual scaled to at most unit norm over the axes, its temporal
 * one to at most unit magnitude. */
int mr_tv_cpu_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                   const mr_cfloat *x, mr_cfloat *p);
int mr_tv_cuda_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                    const mr_cfloat *x, mr_cfloat *p, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
