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

int mr_coil_cuda_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                     size_t npixels, float *out);
int mr_coil_cuda_combine(mr_device *dev, const mr_cfloat *x,
                         const mr_cfloat *s, size_t ncoils, size_t npixels,
                         mr_cfloat *out);
/* The _host variants: upload, combine, download in one worker call. */
int mr_coil_cuda_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                          size_t npixels, float *out);
int mr_coil_cuda_combine_host(mr_device *dev, const mr_cfloat *x,
                              const mr_cfloat *s, size_t ncoils,
                              size_t npixels, mr_cfloat *out);

#ifdef __cplusplus
}
#endif

#endif
