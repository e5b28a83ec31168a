/* Internal: the two backends of prox.h. */
#ifndef MR_GPU_PROX_IMPL_H
#define MR_GPU_PROX_IMPL_H

#include "prox.h"

#ifdef __cplusplus
extern "C" {
#endif

int mr_prox_cpu_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t,
                     mr_cfloat *x);
int mr_prox_cuda_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t,
                      mr_cfloat *x);
int mr_prox_cpu_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x,
                         mr_cfloat *prev, mr_cfloat *z);
int mr_prox_cuda_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x,
                          mr_cfloat *prev, mr_cfloat *z);
int mr_prox_cpu_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite);
int mr_prox_cuda_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite);

#ifdef __cplusplus
}
#endif

#endif
