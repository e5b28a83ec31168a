/* Internal: the GPU's fused passes of the Toeplitz operator (toeplitz.c).
 * The CPU runs the same steps as separate vec.h and block.h calls; these
 * do each in one launch over every coil. Dimensions are the image's n and
 * the doubled grid's big, the image centred in it as block.h pads. */
#ifndef MR_GPU_TOEPLITZ_IMPL_H
#define MR_GPU_TOEPLITZ_IMPL_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* work[c] = pad(S_c x) for c < count (maps NULL: pad(x_c), x [count][n]),
 * zeros around. */
int mr_toeplitz_cuda_expand(mr_device *dev, size_t count, const mr_cfloat *maps, const mr_cfloat *x,
                            const size_t n[3], const size_t big[3], mr_cfloat *work, mr_err *err);

/* work[c] *= kernel for c < count, nbig values each. */
int mr_toeplitz_cuda_kernel_mul(mr_device *dev, size_t count, size_t nbig, const mr_cfloat *kernel,
                                mr_cfloat *work, mr_err *err);

/* k[j] *= scale (-1)^(jx + jy + jz) over the grid big: the shift by half
 * the grid that makes the kernel's spectrum one for plain transforms
 * (toeplitz.c). */
int mr_toeplitz_cuda_checkerboard(mr_device *dev, const size_t big[3], float scale, mr_cfloat *k,
                                  mr_err *err);

/* y = sum_c conj(S_c) crop(in_c) + lambda x, one image (maps NULL:
 * y_c = crop(in_c) + lambda x_c for each of count images; x NULL: no
 * lambda term). big == n: no crop. */
int mr_toeplitz_cuda_gather(mr_device *dev, size_t count, const mr_cfloat *maps,
                            const mr_cfloat *in, const size_t n[3], const size_t big[3],
                            const mr_cfloat *x, float lambda, mr_cfloat *y, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
