/* A multi-level orthogonal wavelet transform of 2D or 3D complex images
 * (Daubechies filters, periodic boundaries), the sparsifying transform of
 * L1-wavelet compressed sensing.
 *
 * Layout: one image of dims[0] x dims[1] x dims[2] samples (x fastest; a
 * 2D image has dims[2] = 1). Each level halves every axis whose current
 * length is even and at least twice the filter's length, and stores the
 * low-pass half first (Mallat's layout, in the image's own shape); levels
 * go on while some axis can be halved. The transform is orthogonal, so
 * its adjoint is its inverse. A cyclic shift of the image before the
 * transform (and back after the adjoint) moves the block boundaries: a
 * solver shifts by a new random amount every iteration so that no block
 * structure shows (BART does the same). */
#ifndef MR_GPU_WAVELET_H
#define MR_GPU_WAVELET_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_wavelet_filter {
  MR_WAVELET_DB2 = 2, /* Daubechies, 4 taps (BART's pics) */
  MR_WAVELET_DB4 = 4  /* Daubechies, 8 taps */
} mr_wavelet_filter;

typedef struct mr_wavelet mr_wavelet;

/* A transform of dims on dev (borrowed; it must outlive the plan), with
 * its own scratch image. MR_EINVAL for a bad shape or filter. The caller
 * takes *out. */
int mr_wavelet_create(mr_device *dev, const size_t dims[3], mr_wavelet_filter filter,
                      mr_wavelet **out, mr_err *err);
void mr_wavelet_destroy(mr_wavelet *w);

/* Levels of the transform (0 when no axis can be halved). */
int mr_wavelet_levels(const mr_wavelet *w);
/* The coarse (low-pass) band's extent: the box [0, box) of every axis. */
void mr_wavelet_coarse(const mr_wavelet *w, size_t box[3]);

/* c = W (x shifted cyclically by shift[d] samples along axis d: the sample
 * at i goes to (i + shift) mod dims). x and c on the plan's device, not
 * overlapping; x is unchanged. */
int mr_wavelet_forward(mr_wavelet *w, const size_t shift[3], const mr_cfloat *x, mr_cfloat *c,
                       mr_err *err);

/* x = shifted back (W^H c): the adjoint, and the inverse, of
 * mr_wavelet_forward with the same shift. c is overwritten (scratch); x
 * must not overlap it. */
int mr_wavelet_adjoint(mr_wavelet *w, const size_t shift[3], mr_cfloat *c, mr_cfloat *x,
                       mr_err *err);

/* x = shifted back (W^H soft_t(c)), soft_t the complex soft threshold of
 * every coefficient outside the coarse band (prox.h's mr_prox_soft with
 * the box of mr_wavelet_coarse): with c = mr_wavelet_forward of u, the
 * proximal step of t ||W x||_1 at u. On a GPU, for a 2D image, the
 * threshold is applied as the inverse reads each coefficient, one launch
 * per level (wavelet_impl.h); elsewhere the threshold, then the adjoint.
 * t >= 0; c is overwritten; x must not overlap it. */
int mr_wavelet_adjoint_soft(mr_wavelet *w, const size_t shift[3], float t, mr_cfloat *c,
                            mr_cfloat *x, mr_err *err);

/* mr_wavelet_adjoint_soft and FISTA's momentum after it (prox.h's
 * mr_prox_momentum): with x the image that call gives, z = x + beta (x -
 * prev), then prev = x. x: an image of scratch (its content is not kept).
 * Where mr_wavelet_momentum_fused says so, in the transform's last launch
 * (x untouched); elsewhere the two calls. */
int mr_wavelet_adjoint_soft_momentum(mr_wavelet *w, const size_t shift[3], float t, mr_cfloat *c,
                                     float beta, mr_cfloat *prev, mr_cfloat *z, mr_cfloat *x,
                                     mr_err *err);
/* 1 when mr_wavelet_adjoint_soft_momentum is one transform whose last
 * launch does the momentum (a GPU's 2D image), else 0. */
int mr_wavelet_momentum_fused(const mr_wavelet *w);

#ifdef __cplusplus
}
#endif

#endif
