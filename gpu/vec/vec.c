#include "error.h"
#include "vec_impl.h"

static int run(mr_device *dev, const mr_vec_args *v, mr_err *err) {
  if (v->n == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_vec_cuda_run(dev, v, err);
#endif
  return mr_vec_cpu_run(dev, v, err);
}

int mr_vec_scale(mr_device *dev, size_t n, mr_cfloat alpha, mr_cfloat *x, mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_SCALE, .n = n, .alpha = alpha, .x = x, .out = x};
  return run(dev, &v, err);
}

int mr_vec_axpy(mr_device *dev, size_t n, mr_cfloat alpha, const mr_cfloat *x, mr_cfloat *y,
                mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_AXPY, .n = n, .alpha = alpha, .x = x, .y = y,
                   .out = y};
  return run(dev, &v, err);
}

int mr_vec_mul(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y, mr_cfloat *out,
               mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_MUL, .n = n, .x = x, .y = y, .out = out};
  return run(dev, &v, err);
}

int mr_vec_conj_mul(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y,
                    mr_cfloat *out, mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_CONJ_MUL, .n = n, .x = x, .y = y, .out = out};
  return run(dev, &v, err);
}

int mr_vec_conj_mul_sum(mr_device *dev, size_t count, size_t n, const mr_cfloat *s,
                        const mr_cfloat *x, mr_cfloat *tmp, mr_cfloat *out, mr_err *err) {
  int rc = mr_vec_conj_mul(dev, n, s, x, out, err);
  for (size_t c = 1; rc == 0 && c < count; c++) {
    rc = mr_vec_conj_mul(dev, n, s + c * n, x + c * n, tmp, err);
    if (rc == 0)
      rc = mr_vec_axpy(dev, n, 1.0f, tmp, out, err);
  }
  return rc;
}

int mr_vec_abs(mr_device *dev, size_t n, const mr_cfloat *x, float *out, mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_ABS, .n = n, .x = x, .fout = out};
  return run(dev, &v, err);
}

int mr_vec_sumsq(mr_device *dev, size_t n, const mr_cfloat *x, double *result, mr_err *err) {
  *result = 0;
  mr_vec_args v = {.kind = MR_VEC_SUMSQ, .n = n, .x = x, .sum = result};
  return run(dev, &v, err);
}

int mr_vec_dot(mr_device *dev, size_t n, const mr_cfloat *x, const mr_cfloat *y, mr_cfloat *result,
               mr_err *err) {
  *result = 0;
  mr_vec_args v = {.kind = MR_VEC_DOT, .n = n, .x = x, .y = y, .dot = result};
  return run(dev, &v, err);
}

int mr_vec_copy(mr_device *dev, size_t n, const mr_cfloat *src, mr_cfloat *dst, mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_COPY, .n = n, .x = src, .out = dst};
  return run(dev, &v, err);
}

int mr_vec_zero(mr_device *dev, size_t n, mr_cfloat *x, mr_err *err) {
  mr_vec_args v = {.kind = MR_VEC_ZERO, .n = n, .out = x};
  return run(dev, &v, err);
}

int mr_vec_crop(mr_device *dev, size_t batch, const mr_cfloat *in, const size_t in_dims[3],
                const size_t at[3], mr_cfloat *out, const size_t out_dims[3], mr_err *err) {
  for (int d = 0; d < 3; d++)
    if (at[d] > in_dims[d] || out_dims[d] > in_dims[d] - at[d])
      return mr_err_set(err, MR_EINVAL, "vec crop: %zu samples at %zu of %zu along axis %d",
                        out_dims[d], at[d], in_dims[d], d);
  if (batch == 0 || out_dims[0] * out_dims[1] * out_dims[2] == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_vec_cuda_crop(dev, batch, in, in_dims, at, out, out_dims, err);
#endif
  return mr_vec_cpu_crop(dev, batch, in, in_dims, at, out, out_dims);
}
