#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "buf.h"
#include "error.h"
#include "tv_impl.h"
#include "vec.h"

struct mr_tv {
  mr_device *dev;
  mr_tv_shape shape;
  mr_buf *dual; /* [axis][pixel] */
};

static size_t pixels(const mr_tv *tv) {
  return tv->shape.dims[0] * tv->shape.dims[1] * tv->shape.dims[2];
}

/* Dual images: the spatial axes' and the temporal term's. */
static int duals(const mr_tv *tv) {
  return tv->shape.naxes + (tv->shape.time != MR_TV_SPATIAL);
}

int mr_tv_create(mr_device *dev, const size_t dims[3], mr_tv **out, mr_err *err) {
  return mr_tv_create_time(dev, dims, MR_TV_SPATIAL, out, err);
}

int mr_tv_create_time(mr_device *dev, const size_t dims[3], mr_tv_time time, mr_tv **out,
                      mr_err *err) {
  *out = NULL;
  if (time != MR_TV_SPATIAL && time != MR_TV_FRAMES && time != MR_TV_REFERENCE)
    return mr_err_set(err, MR_EINVAL, "tv: unknown temporal term %d", (int)time);
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[0] > SIZE_MAX / 24 / dims[1] / dims[2])
    return mr_err_set(err, MR_EINVAL, "tv: image of %zu x %zu x %zu", dims[0], dims[1], dims[2]);
  mr_tv *tv = calloc(1, sizeof *tv);
  if (tv == NULL)
    return mr_err_set(err, MR_ENOMEM, "tv: out of memory");
  tv->dev = dev;
  tv->shape.time = time;
  for (int d = 0; d < 3; d++) {
    tv->shape.dims[d] = dims[d];
    if (dims[d] > 1 && !(d == 2 && time == MR_TV_FRAMES))
      tv->shape.axis[tv->shape.naxes++] = d;
  }
  size_t n = pixels(tv) * (size_t)(duals(tv) > 0 ? duals(tv) : 1);
  int rc = mr_buf_create(dev, n * sizeof(mr_cfloat), &tv->dual, err);
  if (rc == 0)
    rc = mr_tv_reset(tv, err);
  if (rc < 0) {
    mr_tv_destroy(tv);
    return rc;
  }
  *out = tv;
  return 0;
}

void mr_tv_destroy(mr_tv *tv) {
  if (tv == NULL)
    return;
  mr_buf_destroy(tv->dual);
  free(tv);
}

int mr_tv_set_time(mr_tv *tv, float weight, const mr_cfloat *reference, mr_err *err) {
  if (tv->shape.time == MR_TV_SPATIAL)
    return mr_err_set(err, MR_EINVAL,
                      "tv: a temporal weight for an operator without a temporal term");
  if (!(weight >= 0) || !isfinite(weight))
    return mr_err_set(err, MR_EINVAL, "tv: temporal weight %g", (double)weight);
  tv->shape.weight = weight;
  tv->shape.reference = tv->shape.time == MR_TV_REFERENCE ? reference : NULL;
  return 0;
}

int mr_tv_axes(const mr_tv *tv) { return duals(tv); }

int mr_tv_reset(mr_tv *tv, mr_err *err) {
  return mr_vec_zero(tv->dev, mr_buf_size(tv->dual) / sizeof(mr_cfloat), mr_buf_data(tv->dual),
                     err);
}

static int primal(mr_tv *tv, float t, const mr_cfloat *u, const mr_cfloat *p, mr_cfloat *x,
                  mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(tv->dev))
    return mr_tv_cuda_primal(tv->dev, &tv->shape, t, u, p, x, err);
#endif
  return mr_tv_cpu_primal(tv->dev, &tv->shape, t, u, p, x);
}

static int dual(mr_tv *tv, float tau, int project, const mr_cfloat *x, mr_cfloat *p, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(tv->dev))
    return mr_tv_cuda_dual(tv->dev, &tv->shape, tau, project, x, p, err);
#endif
  return mr_tv_cpu_dual(tv->dev, &tv->shape, tau, project, x, p);
}

int mr_tv_forward(mr_tv *tv, const mr_cfloat *x, mr_cfloat *g, mr_err *err) {
  int rc = mr_vec_zero(tv->dev, pixels(tv) * (size_t)duals(tv), g, err);
  return rc == 0 ? dual(tv, 1, 0, x, g, err) : rc;
}

int mr_tv_adjoint(mr_tv *tv, const mr_cfloat *g, mr_cfloat *x, mr_err *err) {
  return primal(tv, -1, NULL, g, x, err);
}

int mr_tv_prox(mr_tv *tv, float t, int steps, const mr_cfloat *u, mr_cfloat *x, mr_err *err) {
  if (!(t > 0))
    return mr_err_set(err, MR_EINVAL, "tv: threshold %g", (double)t);
  /* ||D||^2 <= 4 per axis, the temporal term's ||w T||^2 <= 4 w^2 (frames)
   * or w^2 (reference): the dual's gradient step 1 / (t ||K||^2). */
  float w = tv->shape.time == MR_TV_SPATIAL ? 0 : tv->shape.weight,
        norm2 = 4.0f * (float)tv->shape.naxes + (tv->shape.time == MR_TV_FRAMES ? 4 : 1) * w * w;
  if (!(norm2 > 0))
    return mr_vec_copy(tv->dev, pixels(tv), u, x, err);
  float tau = 1.0f / (t * norm2);
  mr_cfloat *p = mr_buf_data(tv->dual);
  int rc = 0;
  for (int k = 0; k < steps && rc == 0; k++) {
    rc = primal(tv, t, u, p, x, err);
    if (rc == 0)
      rc = dual(tv, tau, 1, x, p, err);
  }
  return rc == 0 ? primal(tv, t, u, p, x, err) : rc;
}
