/* Total variation of 2D or 3D complex images: the finite differences
 * (periodic, along every axis longer than one sample) and the proximal
 * operator of t TV(x) = t sum_i sqrt(sum_axes |(D x)_axis[i]|^2)
 * (isotropic), computed on the dual as Chambolle's projection algorithm:
 * a warm-started dual, so that a solver that calls it every iteration on
 * a slowly changing image needs few inner steps. */
#ifndef MR_GPU_TV_H
#define MR_GPU_TV_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_tv mr_tv;

/* A TV operator for images of dims on dev (borrowed), holding the dual
 * (one image per differenced axis), zeroed. The caller takes *out. */
int mr_tv_create(mr_device *dev, const size_t dims[3], mr_tv **out);
void mr_tv_destroy(mr_tv *tv);

/* Axes differenced (those longer than one sample). */
int mr_tv_axes(const mr_tv *tv);

/* g = D x: g holds mr_tv_axes() images, one per differenced axis in
 * order, (D x)_a[i] = x[i + e_a] - x[i] (periodic). */
int mr_tv_forward(mr_tv *tv, const mr_cfloat *x, mr_cfloat *g);
/* x = D^H g. */
int mr_tv_adjoint(mr_tv *tv, const mr_cfloat *g, mr_cfloat *x);

/* x ~ argmin 1/2 ||x - u||^2 + t TV(x) by `steps` projected-gradient
 * steps on the dual, starting from the dual the last call left (zero after
 * mr_tv_reset). x must not overlap u. t > 0. */
int mr_tv_prox(mr_tv *tv, float t, int steps, const mr_cfloat *u, mr_cfloat *x);
/* Zeroes the dual (a new image). */
int mr_tv_reset(mr_tv *tv);

#ifdef __cplusplus
}
#endif

#endif
