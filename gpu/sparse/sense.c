#include <stdint.h>
#include <stdlib.h>

#include "buf.h"
#include "error.h"
#include "fft.h"
#include "prox.h"
#include "sense_impl.h"

struct mr_sense {
  mr_device *dev;
  mr_sense_pass pass;
  size_t n;                    /* pixels */
  int plain;                   /* every transformed axis even: plain transforms (but a
                                  GPU's 2D normal operator: sense_impl.h) */
  mr_fft_plan *centred, *raw;  /* raw: the plain plan, when plain */
  mr_buf *scratch;             /* [coil][pixel] */
  mr_buf *mask;                /* [z][y] floats */
#ifdef MR_HAVE_CUDA
  mr_sense_lines *lines;       /* a GPU's normal operator (sense_impl.h) */
  mr_buf *mask_plain;          /* its mask, in plain order */
#endif
};

int mr_sense_create(mr_device *dev, const size_t dims[3], size_t ncoils, mr_sense **out,
                    mr_err *err) {
  *out = NULL;
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || ncoils < 1 ||
      dims[0] > SIZE_MAX / 8 / dims[1] / dims[2] / ncoils ||
      dims[0] * dims[1] * dims[2] > UINT32_MAX)
    return mr_err_set(err, MR_EINVAL, "sense: %zu x %zu x %zu x %zu coils", dims[0], dims[1],
                      dims[2], ncoils);
  mr_sense *s = calloc(1, sizeof *s);
  if (s == NULL)
    return mr_err_set(err, MR_ENOMEM, "sense: out of memory");
  s->dev = dev;
  for (int d = 0; d < 3; d++)
    s->pass.dims[d] = dims[d];
  s->pass.ncoils = ncoils;
  s->n = dims[0] * dims[1] * dims[2];
  int rank = dims[2] > 1 ? 3 : 2;
  int lines = mr_device_is_gpu(dev) && rank == 2; /* sense_impl.h */
  s->plain = !lines && dims[0] % 2 == 0 && dims[1] % 2 == 0 && (rank == 2 || dims[2] % 2 == 0);
  mr_fft_opts o = {.rank = rank, .dims = {dims[0], dims[1], dims[2]}, .batch = ncoils};
  int rc = mr_fft_plan_create(dev, &o, &s->centred, err);
  o.plain = 1;
  if (rc == 0 && s->plain)
    rc = mr_fft_plan_create(dev, &o, &s->raw, err);
  if (rc == 0)
    rc = mr_buf_create(dev, s->n * ncoils * sizeof(mr_cfloat), &s->scratch, err);
  if (rc == 0)
    rc = mr_buf_create(dev, dims[1] * dims[2] * sizeof(float), &s->mask, err);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && lines)
    rc = mr_sense_cuda_lines_create(dev, &s->pass, &s->lines, err);
  if (rc == 0 && s->lines != NULL)
    rc = mr_buf_create(dev, dims[1] * dims[2] * sizeof(float), &s->mask_plain, err);
#endif
  if (rc < 0) {
    mr_sense_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

void mr_sense_destroy(mr_sense *s) {
  if (s == NULL)
    return;
  mr_fft_plan_destroy(s->centred);
  mr_fft_plan_destroy(s->raw);
  mr_buf_destroy(s->scratch);
  mr_buf_destroy(s->mask);
#ifdef MR_HAVE_CUDA
  mr_sense_cuda_lines_destroy(s->dev, s->lines);
  mr_buf_destroy(s->mask_plain);
#endif
  free(s);
}

int mr_sense_set(mr_sense *s, const mr_cfloat *maps, const uint8_t *mask, size_t *lines,
                 mr_err *err) {
  size_t ny = s->pass.dims[1], nz = s->pass.dims[2], m = ny * nz, count = 0;
  float *f = malloc(2 * m * sizeof *f);
  if (f == NULL)
    return mr_err_set(err, MR_ENOMEM, "sense: out of memory");
  for (size_t i = 0; i < m; i++) {
    f[i] = mask[i] ? 1.0f : 0.0f;
    count += mask[i] != 0;
  }
  /* plain order (a GPU's 2D normal operator): the line at plain y is the
   * centred one at (y + ny/2) mod ny */
  for (size_t y = 0; nz == 1 && y < ny; y++)
    f[m + y] = f[(y + ny / 2) % ny];
  int rc = mr_buf_upload(s->mask, 0, f, m * sizeof *f, err);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && s->lines != NULL)
    rc = mr_buf_upload(s->mask_plain, 0, f + m, m * sizeof *f, err);
#endif
  free(f);
  s->pass.maps = maps;
  if (lines != NULL)
    *lines = count;
  return rc;
}

static int expand(mr_sense *s, int sign, const mr_cfloat *x, mr_cfloat *out, mr_err *err) {
  (void)err;
  mr_sense_pass p = s->pass;
  p.sign = sign;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(s->dev))
    return mr_sense_cuda_expand(s->dev, &p, x, out, err);
#endif
  return mr_sense_cpu_expand(s->dev, &p, x, out);
}

static int mask(mr_sense *s, float scale, const mr_cfloat *in, mr_cfloat *out, mr_err *err) {
  (void)err;
  const float *m = mr_buf_data(s->mask);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(s->dev))
    return mr_sense_cuda_mask(s->dev, &s->pass, m, scale, in, out, err);
#endif
  return mr_sense_cpu_mask(s->dev, &s->pass, m, scale, in, out);
}

static int combine(mr_sense *s, int sign, const mr_cfloat *k, const mr_cfloat *z,
                   const mr_cfloat *ahb, float step, mr_cfloat *out, mr_err *err) {
  (void)err;
  mr_sense_pass p = s->pass;
  p.sign = sign;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(s->dev))
    return mr_sense_cuda_combine(s->dev, &p, k, z, ahb, step, out, err);
#endif
  return mr_sense_cpu_combine(s->dev, &p, k, z, ahb, step, out);
}

static int need_maps(const mr_sense *s, mr_err *err) {
  return s->pass.maps != NULL ? 0 : mr_err_set(err, MR_EINVAL, "sense: no maps set");
}

int mr_sense_forward(mr_sense *s, const mr_cfloat *x, mr_cfloat *k, mr_err *err) {
  int rc = need_maps(s, err);
  if (rc == 0)
    rc = expand(s, 0, x, k, err);
  if (rc == 0)
    rc = mr_fft_execute(s->centred, MR_FFT_FORWARD, k, k, err);
  return rc == 0 ? mask(s, 1, k, k, err) : rc;
}

int mr_sense_adjoint(mr_sense *s, const mr_cfloat *k, mr_cfloat *x, mr_err *err) {
  mr_cfloat *t = mr_buf_data(s->scratch);
  int rc = need_maps(s, err);
  if (rc == 0)
    rc = mask(s, 1, k, t, err);
  if (rc == 0)
    rc = mr_fft_execute(s->centred, MR_FFT_BACKWARD, t, t, err);
  return rc == 0 ? combine(s, 0, t, NULL, NULL, 0, x, err) : rc;
}

/* Everything of A^H A z but the last pass, into the scratch k-space: on a
 * plain transform, the sign pattern before the first and after the last
 * transform does the centring, and the mask carries the 1/N of the two
 * unscaled transforms (fft.h). */
static int normal_k(mr_sense *s, const mr_cfloat *z, int *sign, mr_err *err) {
  mr_cfloat *t = mr_buf_data(s->scratch);
  mr_fft_plan *plan = s->plain ? s->raw : s->centred;
  *sign = s->plain;
  int rc = need_maps(s, err);
  if (rc == 0)
    rc = expand(s, *sign, z, t, err);
  if (rc == 0)
    rc = mr_fft_execute(plan, MR_FFT_FORWARD, t, t, err);
  if (rc == 0)
    rc = mask(s, s->plain ? 1.0f / (float)s->n : 1.0f, t, t, err);
  return rc == 0 ? mr_fft_execute(plan, MR_FFT_BACKWARD, t, t, err) : rc;
}

/* The GPU's path (sense_impl.h): 1 when it ran (*rc its result). */
static int normal_lines(mr_sense *s, const mr_cfloat *x, const mr_cfloat *z, const mr_cfloat *ahb,
                        float step, mr_cfloat *out, int *rc, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (s->lines != NULL) {
    *rc = need_maps(s, err);
    if (*rc == 0)
      *rc = mr_sense_cuda_lines_normal(s->dev, s->lines, &s->pass, mr_buf_data(s->mask_plain),
                                       mr_buf_data(s->scratch), x, z, ahb, step, out, err);
    return 1;
  }
#else
  (void)s, (void)x, (void)z, (void)ahb, (void)step, (void)out, (void)rc;
#endif
  return 0;
}

int mr_sense_normal(mr_sense *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  int sign, rc;
  if (normal_lines(s, x, NULL, NULL, 0, y, &rc, err))
    return rc;
  rc = normal_k(s, x, &sign, err);
  return rc == 0 ? combine(s, sign, mr_buf_data(s->scratch), NULL, NULL, 0, y, err) : rc;
}

int mr_sense_step(mr_sense *s, const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *u,
                  mr_err *err) {
  int sign, rc;
  if (normal_lines(s, z, z, ahb, step, u, &rc, err))
    return rc;
  rc = normal_k(s, z, &sign, err);
  return rc == 0 ? combine(s, sign, mr_buf_data(s->scratch), z, ahb, step, u, err) : rc;
}

int mr_sense_peak(mr_sense *s, float *peak, mr_err *err) {
  mr_cfloat *t = mr_buf_data(s->scratch);
  int finite, rc = need_maps(s, err);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && mr_device_is_gpu(s->dev))
    rc = mr_sense_cuda_power(s->dev, &s->pass, t, err);
  else
#endif
    if (rc == 0)
    rc = mr_sense_cpu_power(s->dev, &s->pass, t);
  if (rc == 0)
    rc = mr_prox_peak(s->dev, s->n, t, peak, &finite, err);
  if (rc == 0 && !finite)
    rc = mr_err_set(err, MR_EDATA, "sense: the coil maps hold non-finite values");
  return rc;
}
