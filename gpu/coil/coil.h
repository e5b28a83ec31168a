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
int mr_coil_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                size_t npixels, float *out);
int mr_coil_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                     size_t npixels, float *out);

/* Sensitivity-weighted (Roemer) combination:
 * out[p] = sum_c conj(s[c][p]) x[c][p] / sum_c |s[c][p]|^2, and 0 where the
 * sensitivities are all zero. s has the layout of x. Borrows x, s, out. */
int mr_coil_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                    size_t ncoils, size_t npixels, mr_cfloat *out);
int mr_coil_combine_host(mr_device *dev, const mr_cfloat *x,
                         const mr_cfloat *s, size_t ncoils, size_t npixels,
                         mr_cfloat *out);

/* The same root sum of squares as complex pixels with zero phase
 * (out[p] = rss + 0i), the form image arrays carry. Borrows x, out. */
int mr_coil_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                        size_t npixels, mr_cfloat *out);

/* Steps of the sensitivity maps coil_combine estimates from coil images
 * (k-space centre, low-passed): */

/* Multiplies each of the ncoils arrays x[c] of dims[0] x dims[1] x dims[2]
 * samples (x fastest) in place by a separable Hann window: along axis d,
 * 0.5 (1 + cos(2 pi k / w)) at k = i - dims[d]/2 where 2|k| < w, 0 outside,
 * w = min(width[d], dims[d]) (an axis of one sample keeps its value).
 * Borrows x. */
int mr_coil_window(mr_device *dev, mr_cfloat *x, size_t ncoils,
                   const size_t dims[3], const int width[3]);

/* Normalises maps in place to unit root sum of squares over the coils at
 * every pixel; pixels whose root sum of squares is at most 1e-6 of its
 * largest value get zero maps (no signal to weight by). Borrows maps. */
int mr_coil_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils,
                      size_t npixels);

#ifdef __cplusplus
}
#endif

#endif
