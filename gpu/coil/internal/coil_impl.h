/* Internal: the two backends of coil.h. */
#ifndef MR_GPU_COIL_IMPL_H
#define MR_GPU_COIL_IMPL_H

#include "coil.h"

#ifdef __cplusplus
extern "C" {
#endif

int mr_coil_cpu_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                    size_t npixels, float *out);
int mr_coil_cpu_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                        size_t ncoils, size_t npixels, mr_cfloat *out);

int mr_coil_cuda_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                     mr_err *err);
int mr_coil_cuda_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                         size_t npixels, mr_cfloat *out, mr_err *err);
/* The _host variants: upload, combine, download in one worker call. */
int mr_coil_cuda_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                          float *out, mr_err *err);
int mr_coil_cuda_combine_host(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                              size_t npixels, mr_cfloat *out, mr_err *err);

/* out[p] = rss + 0i. */
int mr_coil_cpu_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                            size_t npixels, mr_cfloat *out);
int mr_coil_cuda_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                             mr_cfloat *out, mr_err *err);

/* win: the window factors of the three axes back to back (dims[0] of x,
 * then dims[1] of y, then dims[2] of z), in host memory. */
int mr_coil_cpu_window(mr_device *dev, mr_cfloat *x, size_t ncoils,
                       const size_t dims[3], const float *win);
int mr_coil_cuda_window(mr_device *dev, mr_cfloat *x, size_t ncoils, const size_t dims[3],
                        const float *win, mr_err *err);

int mr_coil_cpu_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels,
                          double floor, mr_err *err);
int mr_coil_cuda_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels,
                           double floor, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
