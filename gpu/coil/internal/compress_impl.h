/* Internal: the per-readout-position product of GCC, CPU and CUDA:
 * out[v][l][x] = sum_c m[x](c, v) in[c][l][x]. */
#ifndef MR_GPU_COMPRESS_IMPL_H
#define MR_GPU_COMPRESS_IMPL_H

#include "compress.h"

#ifdef __cplusplus
extern "C" {
#endif

int mr_compress_cpu_per_x(mr_device *dev, const mr_cfloat *m, size_t ncoils, size_t nvirtual,
                          size_t nlines, size_t nro, const mr_cfloat *in, mr_cfloat *out);
int mr_compress_cuda_per_x(mr_device *dev, const mr_cfloat *m, size_t ncoils, size_t nvirtual,
                           size_t nlines, size_t nro, const mr_cfloat *in, mr_cfloat *out,
                           mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
