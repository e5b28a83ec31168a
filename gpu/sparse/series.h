/* The SENSE operator of a series of frames (sense.h's A = M F S, frame by
 * frame): each frame its own image, k-space and sampling mask, the coil
 * maps shared, each frame's transform its own (a cine's phases or a
 * dynamic scan's repetitions: 2D frames, never a transform across time).
 * One frame is sense.h's operator on its shape (2D or 3D); F frames are F
 * 2D operators on one device, queued one after the other.
 *
 * Layout: images [frame][z][y][x], k-space [frame][coil][z][y][x], maps
 * [coil][z][y][x], the mask [frame][z][y] (host memory). */
#ifndef MR_GPU_SERIES_H
#define MR_GPU_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"

typedef struct mr_series mr_series;

/* frames images of dims each (dims[2] 1 when frames > 1), ncoils coils,
 * on dev (borrowed). MR_EINVAL for a bad shape. The caller takes *out. */
int mr_series_create(mr_device *dev, const size_t dims[3], size_t ncoils, size_t frames,
                     mr_series **out, mr_err *err);
void mr_series_destroy(mr_series *s);

/* Sets the maps (on dev, borrowed) and the masks (copied); *fewest gets
 * the fewest lines any frame sampled. */
int mr_series_set(mr_series *s, const mr_cfloat *maps, const uint8_t *mask, size_t *fewest,
                  mr_err *err);
/* x = A^H k, frame by frame. */
int mr_series_adjoint(mr_series *s, const mr_cfloat *k, mr_cfloat *x, mr_err *err);
/* y = A^H A x. */
int mr_series_normal(mr_series *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err);
/* u = z - step (A^H A z - ahb). */
int mr_series_step(mr_series *s, const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *u,
                   mr_err *err);
/* A bound on ||A^H A|| (the maps' peak sum of squares: the frames share
 * them). */
int mr_series_peak(mr_series *s, float *peak, mr_err *err);

#endif
