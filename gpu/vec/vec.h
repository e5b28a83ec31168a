/* Elementwise operations and reductions on complex vectors of n samples on
 * a device (host memory for the CPU, mr_buf memory for a GPU). Results of
 * reductions are written to host memory. Every call borrows its pointers;
 * outputs may alias inputs exactly (in place), never partly. */
#ifndef MR_GPU_VEC_H
#define MR_GPU_VEC_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x = alpha x */
int mr_vec_scale(mr_device *dev, size_t n, mr_cfloat alpha, mr_cfloat *x, mr_err *err);

/* y = alpha x + y */
int mr_vec_axpy(mr_device *dev, size_t n, mr_cfloat alpha, const mr_cfloat *x, mr_cfloat *y,
                mr_err *err);

/* out = x * y */
int mr_vec_mul(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y, mr_cfloat *out,
               mr_err *err);

/* out = conj(x) * y */
int mr_vec_conj_mul(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y,
                    mr_cfloat *out, mr_err *err);

/* out = sum_c conj(s_c) x_c over `count` arrays of n samples (s and x
 * [count][n]: coil maps and coil images give SENSE's coil combination),
 * through tmp (n samples of scratch). tmp may be x's first array, which is
 * then overwritten; out must not be tmp. Borrows all. */
int mr_vec_conj_mul_sum(mr_device *dev, size_t count, size_t n, const mr_cfloat *s,
                        const mr_cfloat *x, mr_cfloat *tmp, mr_cfloat *out, mr_err *err);

/* out = |x| (float magnitudes) */
int mr_vec_abs(mr_device *dev, size_t n, const mr_cfloat *x, float *out, mr_err *err);

/* *result = sum |x|^2, into host memory. */
int mr_vec_sumsq(mr_device *dev, size_t n, const mr_cfloat *x, double *result, mr_err *err);

/* *result = sum conj(x) y, into host memory. */
int mr_vec_dot(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y, mr_cfloat *result,
               mr_err *err);

/* dst = src */
int mr_vec_copy(mr_device *dev, size_t n, const mr_cfloat *src, mr_cfloat *dst, mr_err *err);

/* x = 0 */
int mr_vec_zero(mr_device *dev, size_t n, mr_cfloat *x, mr_err *err);

/* Crops `batch` arrays of in_dims (x fastest) to out_dims: out[b][z][y][x] =
 * in[b][z + at[2]][y + at[1]][x + at[0]]; the box must lie inside in. */
int mr_vec_crop(mr_device *dev, size_t batch, const mr_cfloat *in, const size_t in_dims[3],
                const size_t at[3], mr_cfloat *out, const size_t out_dims[3], mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
