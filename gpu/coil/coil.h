/* Coil combination of multi-coil images.
 *
 * Input layout: [coil][pixel], i.e. ncoils images of npixels each, back to
 * back (the layout a batched FFT over coils produces). The pointers live on
 * dev (see device.h); the _host variants take host memory on any device. */
#ifndef MR_GPU_COIL_H
#define MR_GPU_COIL_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Root sum of squares: out[p] = sqrt(sum_c |x[c][p]|^2). Borrows x, out. */
int mr_coil_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                mr_err *err);
int mr_coil_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                     mr_err *err);

/* Sensitivity-weighted (Roemer) combination:
 * out[p] = sum_c conj(s[c][p]) x[c][p] / sum_c |s[c][p]|^2, and 0 where the
 * sensitivities are all zero. s has the layout of x. Borrows x, s, out. */
int mr_coil_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                    size_t npixels, mr_cfloat *out, mr_err *err);
int mr_coil_combine_host(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                         size_t npixels, mr_cfloat *out, mr_err *err);

/* The same root sum of squares as complex pixels with zero phase
 * (out[p] = rss + 0i), the form image arrays carry. Borrows x, out. */
int mr_coil_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                        mr_cfloat *out, mr_err *err);

/* Low-resolution sensitivity maps, the estimator coil_combine and fhd_cg
 * share (beside ESPIRiT, espirit.h): each coil image of images
 * [coil][z][y][x] (dims, x fastest; 2D when dims[2] is 1) to k-space, the
 * Hann window of mr_coil_window() (width samples along each axis around the
 * centre), back to image space, normalised with mr_coil_normalise(floor).
 * images and maps on dev, maps may be images. Borrows both. */
int mr_coil_maps_lowres(mr_device *dev, const mr_cfloat *images, size_t ncoils,
                        const size_t dims[3], const int width[3], double floor, mr_cfloat *maps,
                        mr_err *err);

/* Its steps: */

/* Multiplies each of the ncoils arrays x[c] of dims[0] x dims[1] x dims[2]
 * samples (x fastest) in place by a separable Hann window: along axis d,
 * 0.5 (1 + cos(2 pi k / w)) at k = i - dims[d]/2 where 2|k| < w, 0 outside,
 * w = min(width[d], dims[d]) (an axis of one sample keeps its value).
 * Borrows x. */
int mr_coil_window(mr_device *dev, mr_cfloat *x, size_t ncoils, const size_t dims[3],
                   const int width[3], mr_err *err);

/* Normalises maps in place to unit root sum of squares over the coils at
 * every pixel; pixels whose root sum of squares is at most floor times its
 * largest value get zero maps (no signal to weight by: MR_COIL_MAP_FLOOR
 * where every pixel with signal counts; fhd_cg takes 0.05, the object's
 * support). Borrows maps. */
#define MR_COIL_MAP_FLOOR 1e-6
int mr_coil_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels, double floor,
                      mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
