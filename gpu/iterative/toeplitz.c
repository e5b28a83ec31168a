/* The Toeplitz-embedded normal operator (toeplitz.h).
 *
 * Both grids centre at n/2 (block.h pads and crops around the centres),
 * which is where fhd.h puts the origin: lag s of q sits at index s + n of
 * the doubled grid (2n per axis, P voxels), so padding and cropping keep
 * every voxel's position and the operator is the circular convolution of
 * the padded image with q'[s] = q[s + n] (indices mod 2n). With fft.h's
 * plain transforms F and F^-1 (unscaled: F^-1 F = P),
 *   x (*) q' = F^-1(F x . F q') / P,
 * so the stored kernel is K = F(q') / P = (-1)^(kx + ky + kz) F(q) / P
 * (a shift by half the grid is that checkerboard sign on the spectrum) and
 * an apply is pad, F, times K, F^-1, crop: the centred transforms' shift
 * passes and scales drop out (a product of two spectra does not care where
 * the zero frequency sits), leaving cuFFT and the passes the operator
 * needs anyway. The doubled grid is always even. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "block.h"
#include "buf.h"
#include "error.h"
#include "fft.h"
#include "toeplitz.h"
#include "toeplitz_impl.h"
#include "vec.h"

struct mr_toeplitz {
  mr_device *dev;
  mr_toeplitz_opts o;
  size_t dims[3], big[3]; /* image, doubled grid (z stays 1 in 2D) */
  size_t nvox, nbig, images; /* images per transform: coils, or 1 */
  mr_buf *kernel;  /* K of Q, with lambda R folded in when there are no maps */
  mr_buf *reg;     /* K of lambda R alone: maps with finite differences */
  mr_buf *stencil; /* {lambda, 2 lambda}: R's stencil values, added on the device */
  mr_buf *work;    /* [images][nbig] */
  mr_buf *maps;    /* [coils][nvox] */
  mr_buf *tmp;     /* [coils][nvox] */
  mr_fft_plan *fft;  /* doubled grid, `images` per execute */
  mr_fft_plan *fft1; /* doubled grid, one per execute */
  /* Batched applies without maps on a GPU: batch_count per transform. */
  mr_fft_plan *fft_batch;
  mr_buf *work_batch; /* [batch_count or more][nbig] */
  size_t batch_count;
  int have_q, have_maps;
};

static mr_cfloat *ptr(const mr_buf *b) { return mr_buf_data(b); }

/* Whether lambda R joins Q's kernel (no maps), or has one of its own. */
static int folds(const mr_toeplitz *t) { return t->o.coils == 0 && t->o.lambda > 0; }

/* Adds lambda R's convolution kernel (a stencil at the origin) to q on the
 * device, one value at a time in the order a host loop would add them. */
static int add_stencil(const mr_toeplitz *t, mr_cfloat *q, mr_err *err) {
  size_t cx = t->big[0] / 2, cy = t->big[1] / 2, cz = t->big[2] / 2;
  size_t o = (cz * t->big[1] + cy) * t->big[0] + cx;
  const mr_cfloat *lambda = ptr(t->stencil), *twice = lambda + 1;
  if (t->o.reg == MR_REG_IDENTITY)
    return mr_vec_axpy(t->dev, 1, 1.0f, lambda, q + o, err);
  size_t step[3] = {1, t->big[0], t->big[0] * t->big[1]};
  assert(t->o.rank >= 1 && t->o.rank <= 3);
  int rc = 0;
  for (int d = 0; rc == 0 && d < t->o.rank; d++) {
    rc = mr_vec_axpy(t->dev, 1, 1.0f, twice, q + o, err);
    if (rc == 0)
      rc = mr_vec_axpy(t->dev, 1, -1.0f, lambda, q + o - step[d], err);
    if (rc == 0)
      rc = mr_vec_axpy(t->dev, 1, -1.0f, lambda, q + o + step[d], err);
  }
  return rc;
}

/* k[j] *= scale (-1)^(jx + jy + jz) over the doubled grid: the GPU in one
 * launch, the CPU (k in host memory) in a loop. */
static int checkerboard(const mr_toeplitz *t, float scale, mr_cfloat *k, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(t->dev))
    return mr_toeplitz_cuda_checkerboard(t->dev, t->big, scale, k, err);
#endif
  const size_t *b = t->big;
  for (size_t z = 0, j = 0; z < b[2]; z++)
    for (size_t y = 0; y < b[1]; y++)
      for (size_t x = 0; x < b[0]; x++, j++)
        k[j] *= (x + y + z) % 2 ? -scale : scale;
  return 0;
}

/* K = (-1)^(kx + ky + kz) F(q + stencil) / P into kernel, q on the
 * device (it may be the kernel's own memory; NULL: the stencil alone). */
static int load_kernel(mr_toeplitz *t, const mr_cfloat *q, int stencil, mr_buf *kernel,
                       mr_err *err) {
  mr_cfloat *k = ptr(kernel);
  int rc = 0;
  if (q == NULL)
    rc = mr_vec_zero(t->dev, t->nbig, k, err);
  else if (q != k)
    rc = mr_vec_copy(t->dev, t->nbig, q, k, err);
  if (rc == 0 && stencil)
    rc = add_stencil(t, k, err);
  if (rc == 0)
    rc = mr_fft_execute(t->fft1, MR_FFT_FORWARD, k, k, err);
  if (rc == 0)
    rc = checkerboard(t, 1.0f / (float)t->nbig, k, err);
  return rc;
}

static int build(mr_toeplitz *t, const mr_cfloat *q, mr_err *err) {
  mr_fft_opts fo = {.rank = t->o.rank, .dims = {t->big[0], t->big[1], t->big[2]}, .batch = 1,
                    .plain = 1};
  int rc = mr_fft_plan_create(t->dev, &fo, &t->fft1, err);
  fo.batch = t->images;
  if (rc == 0)
    rc = mr_fft_plan_create(t->dev, &fo, &t->fft, err);
  if (rc == 0)
    rc = mr_buf_create(t->dev, t->images * t->nbig * sizeof(mr_cfloat), &t->work, err);
  if (rc == 0)
    rc = mr_buf_create(t->dev, t->nbig * sizeof(mr_cfloat), &t->kernel, err);
  if (rc == 0 && t->o.lambda > 0) {
    mr_cfloat values[2] = {(float)t->o.lambda, (float)(2 * t->o.lambda)};
    rc = mr_buf_create(t->dev, sizeof values, &t->stencil, err);
    if (rc == 0)
      rc = mr_buf_upload(t->stencil, 0, values, sizeof values, err);
  }
  if (rc == 0 && q != NULL)
    rc = mr_buf_upload(t->kernel, 0, q, t->nbig * sizeof(mr_cfloat), err);
  if (rc == 0 && q != NULL)
    rc = load_kernel(t, ptr(t->kernel), folds(t), t->kernel, err);
  t->have_q = rc == 0 && q != NULL;
  if (rc == 0 && t->o.coils > 0 && t->o.lambda > 0 && t->o.reg == MR_REG_FINITE_DIFFERENCE) {
    rc = mr_buf_create(t->dev, t->nbig * sizeof(mr_cfloat), &t->reg, err);
    if (rc == 0)
      rc = load_kernel(t, NULL, 1, t->reg, err);
  }
  if (rc == 0 && t->o.coils > 0) {
    size_t bytes = t->o.coils * t->nvox * sizeof(mr_cfloat);
    rc = mr_buf_create(t->dev, bytes, &t->maps, err);
    if (rc == 0)
      rc = mr_buf_create(t->dev, bytes, &t->tmp, err);
  }
  return rc;
}

typedef struct build_job {
  mr_toeplitz *t;
  const mr_cfloat *q;
} build_job;

static int build_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  build_job *j = arg;
  return build(j->t, j->q, err);
}

int mr_toeplitz_create(mr_device *dev, const mr_toeplitz_opts *opts, const mr_cfloat *q,
                       mr_toeplitz **out, mr_err *err) {
  if (opts->rank != 2 && opts->rank != 3)
    return mr_err_set(err, MR_EINVAL, "toeplitz: rank %d", opts->rank);
  if (!(opts->lambda >= 0) || !isfinite(opts->lambda))
    return mr_err_set(err, MR_EINVAL, "toeplitz: lambda %g", opts->lambda);
  if (opts->reg != MR_REG_IDENTITY && opts->reg != MR_REG_FINITE_DIFFERENCE)
    return mr_err_set(err, MR_EINVAL, "toeplitz: regularizer %d", (int)opts->reg);
  mr_toeplitz *t = calloc(1, sizeof *t);
  if (t == NULL)
    return mr_err_set(err, MR_ENOMEM, "toeplitz: out of memory");
  t->dev = dev;
  t->o = *opts;
  t->nvox = t->nbig = 1;
  for (int d = 0; d < 3; d++) {
    t->dims[d] = d < opts->rank ? opts->n[d] : 1;
    t->big[d] = d < opts->rank ? 2 * opts->n[d] : 1;
    if (t->dims[d] < 1) {
      free(t);
      return mr_err_set(err, MR_EINVAL, "toeplitz: image axis %d of size 0", d);
    }
    t->nvox *= t->dims[d];
    t->nbig *= t->big[d];
  }
  t->images = opts->coils > 0 ? opts->coils : 1;
  build_job j = {t, q};
  int rc = mr_device_run(dev, build_task, &j, err);
  if (rc < 0) {
    mr_toeplitz_destroy(t);
    return rc;
  }
  *out = t;
  return 0;
}

typedef struct q_job {
  mr_toeplitz *t;
  const mr_cfloat *q;
} q_job;

static int set_q_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  q_job *j = arg;
  return load_kernel(j->t, j->q, folds(j->t), j->t->kernel, err);
}

int mr_toeplitz_set_q(mr_toeplitz *t, const mr_cfloat *q, mr_err *err) {
  q_job j = {t, q};
  int rc = mr_device_run(t->dev, set_q_task, &j, err);
  t->have_q = rc == 0;
  return rc;
}

int mr_toeplitz_set_maps(mr_toeplitz *t, const mr_cfloat *maps, mr_err *err) {
  if (t->o.coils == 0)
    return mr_err_set(err, MR_EINVAL, "toeplitz: maps for an operator made without coils");
  int rc = mr_buf_upload(t->maps, 0, maps, t->o.coils * t->nvox * sizeof(mr_cfloat), err);
  t->have_maps = rc == 0;
  return rc;
}

/* crop(F^-1(K F(pad(src)))) for `count` images, through work. */
static int convolve(mr_toeplitz *t, mr_fft_plan *fft, size_t count, const mr_cfloat *src,
                    const mr_buf *kernel, mr_cfloat *dst, mr_err *err) {
  mr_cfloat *w = ptr(t->work);
  int rc = mr_block_pad_center(t->dev, count, src, t->dims, w, t->big, err);
  if (rc == 0)
    rc = mr_fft_execute(fft, MR_FFT_FORWARD, w, w, err);
  for (size_t c = 0; rc == 0 && c < count; c++)
    rc = mr_vec_mul(t->dev, t->nbig, w + c * t->nbig, ptr(kernel), w + c * t->nbig, err);
  if (rc == 0)
    rc = mr_fft_execute(fft, MR_FFT_BACKWARD, w, w, err);
  if (rc == 0)
    rc = mr_block_crop_center(t->dev, count, w, t->big, dst, t->dims, err);
  return rc;
}

/* out = sum_c conj(S_c) img_c, through t->tmp (img may be t->tmp itself;
 * out may not). */
static int combine_cpu(mr_toeplitz *t, const mr_cfloat *img, mr_cfloat *out, mr_err *err) {
  return mr_vec_conj_mul_sum(t->dev, t->o.coils, t->nvox, ptr(t->maps), img, ptr(t->tmp), out, err);
}

/* The finite-difference term with maps: y += lambda R x by its own kernel. */
static int add_differences(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  mr_cfloat *tmp = ptr(t->tmp);
  int rc = convolve(t, t->fft1, 1, x, t->reg, tmp, err);
  return rc == 0 ? mr_vec_axpy(t->dev, t->nvox, 1.0f, tmp, y, err) : rc;
}

/* sum_c S_c^H T (S_c x) + lambda R x, a vec.h call per coil (the CPU). */
static int apply_maps(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  mr_cfloat *s = ptr(t->maps), *tmp = ptr(t->tmp);
  size_t n = t->nvox, coils = t->o.coils;
  int rc = 0;
  for (size_t c = 0; rc == 0 && c < coils; c++)
    rc = mr_vec_mul(t->dev, n, s + c * n, x, tmp + c * n, err);
  if (rc == 0)
    rc = convolve(t, t->fft, coils, tmp, t->kernel, tmp, err);
  if (rc == 0)
    rc = combine_cpu(t, tmp, y, err);
  if (rc < 0 || t->o.lambda == 0)
    return rc;
  if (t->o.reg == MR_REG_IDENTITY)
    return mr_vec_axpy(t->dev, n, (mr_cfloat)(float)t->o.lambda, x, y, err);
  return add_differences(t, x, y, err);
}

#ifdef MR_HAVE_CUDA
/* The transform and work area for `count` images without maps, made (or
 * grown) when first needed and kept. */
static int batch_for(mr_toeplitz *t, size_t count, mr_err *err) {
  if (t->batch_count == count)
    return 0;
  t->batch_count = 0;
  size_t bytes = count * t->nbig * sizeof(mr_cfloat);
  mr_fft_opts fo = {.rank = t->o.rank, .dims = {t->big[0], t->big[1], t->big[2]}, .batch = count,
                    .plain = 1};
  int rc = mr_fft_plan_keep(t->dev, &fo, &t->fft_batch, err);
  if (rc == 0 && (t->work_batch == NULL || mr_buf_size(t->work_batch) < bytes)) {
    mr_buf_destroy(t->work_batch);
    t->work_batch = NULL;
    rc = mr_buf_create(t->dev, bytes, &t->work_batch, err);
  }
  t->batch_count = rc == 0 ? count : 0;
  return rc;
}

/* The same on a GPU, every coil (or every image of a batch) in each
 * launch: expand (S_c x, padded), transform, times K, transform back,
 * gather (crop, conj(S_c), sum). */
static int apply_fused(mr_toeplitz *t, size_t count, const mr_cfloat *x, mr_cfloat *y,
                       mr_err *err) {
  mr_cfloat *w = ptr(t->work);
  const mr_cfloat *maps = t->o.coils > 0 ? ptr(t->maps) : NULL;
  mr_fft_plan *fft = t->o.coils > 0 ? t->fft : t->fft1;
  size_t images = maps != NULL ? t->images : count;
  int identity = maps != NULL && t->o.lambda > 0 && t->o.reg == MR_REG_IDENTITY;
  int rc = 0;
  if (maps == NULL && count > 1 && (rc = batch_for(t, count, err)) == 0) {
    w = ptr(t->work_batch);
    fft = t->fft_batch;
  }
  if (rc == 0)
    rc = mr_toeplitz_cuda_expand(t->dev, images, maps, x, t->dims, t->big, w, err);
  if (rc == 0)
    rc = mr_fft_execute(fft, MR_FFT_FORWARD, w, w, err);
  if (rc == 0)
    rc = mr_toeplitz_cuda_kernel_mul(t->dev, images, t->nbig, ptr(t->kernel), w, err);
  if (rc == 0)
    rc = mr_fft_execute(fft, MR_FFT_BACKWARD, w, w, err);
  if (rc == 0)
    rc = mr_toeplitz_cuda_gather(t->dev, images, maps, w, t->dims, t->big, identity ? x : NULL,
                                 (float)t->o.lambda, y, err);
  if (rc == 0 && maps != NULL && t->o.lambda > 0 && !identity)
    rc = add_differences(t, x, y, err);
  return rc;
}
#endif

typedef struct apply_job {
  mr_toeplitz *t;
  size_t count;
  const mr_cfloat *x;
  mr_cfloat *y;
} apply_job;

static int apply_task(mr_device *dev, void *arg, mr_err *err) {
  apply_job *j = arg;
  mr_toeplitz *t = j->t;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return apply_fused(t, j->count, j->x, j->y, err);
#else
  (void)dev;
#endif
  if (t->o.coils > 0)
    return apply_maps(t, j->x, j->y, err);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < j->count; i++)
    rc = convolve(t, t->fft1, 1, j->x + i * t->nvox, t->kernel, j->y + i * t->nvox, err);
  return rc;
}

int mr_toeplitz_apply_batch(mr_toeplitz *t, size_t count, const mr_cfloat *x, mr_cfloat *y,
                            mr_err *err) {
  if (t->o.coils > 0 && !t->have_maps)
    return mr_err_set(err, MR_EINVAL, "toeplitz: no coil maps set");
  if (!t->have_q)
    return mr_err_set(err, MR_EINVAL, "toeplitz: no Q set");
  if (count < 1 || (t->o.coils > 0 && count != 1))
    return mr_err_set(err, MR_EINVAL, "toeplitz: a batch of %zu images (%zu coils)", count,
                      t->o.coils);
  apply_job j = {t, count, x, y};
  return mr_device_run(t->dev, apply_task, &j, err);
}

int mr_toeplitz_apply(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  return mr_toeplitz_apply_batch(t, 1, x, y, err);
}

int mr_toeplitz_apply_batch_op(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                               mr_err *err) {
  return mr_toeplitz_apply_batch(op, count, x, y, err);
}

static int combine_task(mr_device *dev, void *arg, mr_err *err) {
  apply_job *j = arg;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_toeplitz_cuda_gather(dev, j->t->o.coils, ptr(j->t->maps), j->x, j->t->dims,
                                   j->t->dims, NULL, 0, j->y, err);
#else
  (void)dev;
#endif
  return combine_cpu(j->t, j->x, j->y, err);
}

int mr_toeplitz_combine(mr_toeplitz *t, const mr_cfloat *x, mr_cfloat *out, mr_err *err) {
  if (t->o.coils == 0 || !t->have_maps)
    return mr_err_set(err, MR_EINVAL, "toeplitz: combining coils needs maps");
  apply_job j = {t, 1, x, out};
  return mr_device_run(t->dev, combine_task, &j, err);
}

int mr_toeplitz_apply_op(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  return mr_toeplitz_apply(op, x, y, err);
}

size_t mr_toeplitz_voxels(const mr_toeplitz *t) { return t->nvox; }

mr_device *mr_toeplitz_device(const mr_toeplitz *t) { return t->dev; }

void mr_toeplitz_destroy(mr_toeplitz *t) {
  if (t == NULL)
    return;
  mr_fft_plan_destroy(t->fft);
  mr_fft_plan_destroy(t->fft1);
  mr_fft_plan_destroy(t->fft_batch);
  mr_buf_destroy(t->work_batch);
  mr_buf_destroy(t->kernel);
  mr_buf_destroy(t->reg);
  mr_buf_destroy(t->stencil);
  mr_buf_destroy(t->work);
  mr_buf_destroy(t->maps);
  mr_buf_destroy(t->tmp);
  free(t);
}
