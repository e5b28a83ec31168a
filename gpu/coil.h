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

#ifdef __cplusplus
}
#endif

#endif
