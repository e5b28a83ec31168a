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
                      mr_cfloat *x, mr_err *err);
int mr_prox_cpu_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x,
                         mr_cfloat *prev, mr_cfloat *z);
int mr_prox_cuda_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x, mr_cfloat *prev,
                          mr_cfloat *z, mr_err *err);
/* FISTA's graph (core's graph.h): sets beta of a captured momentum node
 * on an instantiated graph exec. */
int mr_prox_cuda_set_beta(void *exec, void *node, float beta, mr_err *err);
int mr_prox_cpu_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite);
int mr_prox_cuda_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite,
                      mr_err *err);
/* One radix pass of mr_prox_select: counts[r * 256 + d] = how many samples
 * have a magnitude whose float bits above bit shift + 8 equal prefix[r]'s
 * and whose 8 bits from shift are d (every sample when shift is 24),
 * into host memory. */
int mr_prox_cpu_digits(mr_device *dev, size_t n, const mr_cfloat *x, int count,
                       const unsigned *prefix, int shift, unsigned *counts);
int mr_prox_cuda_digits(mr_device *dev, size_t n, const mr_cfloat *x, int count,
                        const unsigned *prefix, int shift, unsigned *counts, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
