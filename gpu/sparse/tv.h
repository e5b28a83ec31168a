/* Total variation of 2D or 3D complex images: the finite differences
 * (periodic, along every axis longer than one sample) and the proximal
 * operator of t TV(x) = t sum_i sqrt(sum_axes |(D x)_axis[i]|^2)
 * (isotropic), computed on the dual as Chambolle's projection algorithm:
 * a warm-started dual, so that a solver that calls it every iteration on
 * a slowly changing image needs few inner steps.
 *
 * A temporal term (mr_tv_create_time) joins the spatial one as a group of
 * its own, anisotropic as BART's `pics -R T` along time:
 *   t (TV_xy(x) + w ||T x - r||_1)
 * with T the differences along the frame axis of a series (MR_TV_FRAMES:
 * dims[2] counts frames; not periodic, the last frame has no successor)
 * or the identity against a reference image r (MR_TV_REFERENCE: the last
 * frame's image in a real-time stream, a causal prior). Chambolle's
 * projection takes the offset r in its dual step and projects each
 * group's dual apart. */
#ifndef MR_GPU_TV_H
#define MR_GPU_TV_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_tv mr_tv;

/* Which temporal term (above). */
typedef enum mr_tv_time {
  MR_TV_SPATIAL,   /* none: every axis longer than one sample in one isotropic group */
  MR_TV_FRAMES,    /* dims[2] is the frame axis: x, y spatial, differences along frames */
  MR_TV_REFERENCE  /* x - reference, pixel by pixel */
} mr_tv_time;

/* A TV operator for images of dims on dev (borrowed), holding the dual
 * (one image per differenced axis), zeroed. The caller takes *out. */
int mr_tv_create(mr_device *dev, const size_t dims[3], mr_tv **out, mr_err *err);
/* The same with a temporal term of the given kind, weight 0 until
 * mr_tv_set_time. */
int mr_tv_create_time(mr_device *dev, const size_t dims[3], mr_tv_time time, mr_tv **out,
                      mr_err *err);
void mr_tv_destroy(mr_tv *tv);

/* The temporal term's weight w >= 0 (relative to the spatial term's 1)
 * and, for MR_TV_REFERENCE, the reference image on the device (borrowed
 * until the next call; NULL: zero). MR_EINVAL without a temporal term. */
int mr_tv_set_time(mr_tv *tv, float weight, const mr_cfloat *reference, mr_err *err);

/* Images D x holds: one per differenced axis, one more for a temporal
 * term (FRAMES: its differences replace those along dims[2]). */
int mr_tv_axes(const mr_tv *tv);

/* g = K x: g holds mr_tv_axes() images, one per differenced axis in
 * order, (D x)_a[i] = x[i + e_a] - x[i] (periodic), then the temporal
 * term's w T x (the reference left out: K is linear). */
int mr_tv_forward(mr_tv *tv, const mr_cfloat *x, mr_cfloat *g, mr_err *err);
/* x = K^H g. */
int mr_tv_adjoint(mr_tv *tv, const mr_cfloat *g, mr_cfloat *x, mr_err *err);

/* x ~ argmin 1/2 ||x - u||^2 + t TV(x) by `steps` projected-gradient
 * steps on the dual, starting from the dual the last call left (zero after
 * mr_tv_reset). x must not overlap u. t > 0. */
int mr_tv_prox(mr_tv *tv, float t, int steps, const mr_cfloat *u, mr_cfloat *x, mr_err *err);
/* Zeroes the dual (a new image). */
int mr_tv_reset(mr_tv *tv, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
