/* Internal: the two backends of vec.h, one entry per operation kind. */
#ifndef MR_GPU_VEC_IMPL_H
#define MR_GPU_VEC_IMPL_H

#include "vec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_vec_kind {
  MR_VEC_SCALE,    /* x = alpha x */
  MR_VEC_AXPY,     /* y = alpha x + y */
  MR_VEC_MUL,      /* out = x y */
  MR_VEC_CONJ_MUL, /* out = conj(x) y */
  MR_VEC_ABS,      /* fout = |x| */
  MR_VEC_COPY,     /* out = x */
  MR_VEC_ZERO,     /* out = 0 */
  MR_VEC_SUMSQ,    /* *sum = sum |x|^2 */
  MR_VEC_DOT       /* *dot = sum conj(x) y */
} mr_vec_kind;

typedef struct mr_vec_args {
  mr_vec_kind kind;
  size_t n;
  mr_cfloat alpha;
  const mr_cfloat *x, *y;
  mr_cfloat *out;     /* y for AXPY, x for SCALE */
  float *fout;
  double *sum;        /* host */
  mr_cfloat *dot;     /* host */
} mr_vec_args;

int mr_vec_cpu_run(mr_device *dev, const mr_vec_args *v, mr_err *err);
int mr_vec_cuda_run(mr_device *dev, const mr_vec_args *v, mr_err *err);

int mr_vec_cpu_crop(mr_device *dev, size_t batch, const mr_cfloat *in,
                    const size_t in_dims[3], const size_t at[3], mr_cfloat *out,
                    const size_t out_dims[3]);
int mr_vec_cuda_crop(mr_device *dev, size_t batch, const mr_cfloat *in, const size_t in_dims[3],
                     const size_t at[3], mr_cfloat *out, const size_t out_dims[3], mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
