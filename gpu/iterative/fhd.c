#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fhd_impl.h"

static const char *const kernel_names[MR_FHD_KERNEL_COUNT] = {
    "auto",     "scatter",      "gather", "registers",  "constant",
    "constant_aos", "hwtrig", "tiled", "recurrence",
};

const char *mr_fhd_kernel_name(mr_fhd_kernel kernel) {
  return (unsigned)kernel < MR_FHD_KERNEL_COUNT ? kernel_names[kernel] : "unknown";
}

unsigned mr_fhd_fixed(double k) {
  double r = k - floor(k); /* [0, 1]: the phase only matters modulo 1 */
  return (unsigned)((uint64_t)llround(r * MR_FHD_FIXED_ONE) & 0xffffffffu);
}

static int check_opts(const mr_fhd_opts *o, mr_err *err) {
  if (o->rank != 2 && o->rank != 3)
    return mr_err_set(err, MR_EINVAL, "fhd: rank %d (2 or 3)", o->rank);
  size_t nz = o->rank == 3 ? o->grid[2] : 1;
  if (o->grid[0] < 1 || o->grid[1] < 1 || nz < 1 ||
      o->grid[0] * o->grid[1] > SIZE_MAX / 16 / nz)
    return mr_err_set(err, MR_EINVAL, "fhd: grid %zu x %zu x %zu", o->grid[0], o->grid[1], nz);
  /* The fixed-point phase of a grid voxel needs |x| < 2^31 / 2: generous. */
  if (o->grid[0] > (1u << 24) || o->grid[1] > (1u << 24) || nz > (1u << 24))
    return mr_err_set(err, MR_EINVAL, "fhd: grid axis over 2^24 voxels");
  if (o->batch < 1)
    return mr_err_set(err, MR_EINVAL, "fhd: batch %zu", o->batch);
  if ((unsigned)o->kernel >= MR_FHD_KERNEL_COUNT)
    return mr_err_set(err, MR_EINVAL, "fhd: kernel %d", (int)o->kernel);
  if (o->precision != MR_FHD_SINGLE && o->precision != MR_FHD_DOUBLE)
    return mr_err_set(err, MR_EINVAL, "fhd: precision %d", (int)o->precision);
  int v = o->voxels_per_thread;
  if (v != 0 && v != 4 && v != 8 && v != 16 && v != 32)
    return mr_err_set(err, MR_EINVAL, "fhd: voxels_per_thread %d (4, 8, 16 or 32)", v);
  if (o->block != 0 && (o->block < 32 || o->block > 1024 || o->block % 32 != 0))
    return mr_err_set(err, MR_EINVAL, "fhd: block %d (a multiple of 32 up to 1024)", o->block);
  return 0;
}

int mr_fhd_plan_create(mr_device *dev, const mr_fhd_opts *opts, mr_fhd_plan **out, mr_err *err) {
  int rc = check_opts(opts, err);
  if (rc < 0)
    return rc;
  if (opts->precision == MR_FHD_DOUBLE && mr_device_is_gpu(dev))
    return mr_err_set(err, MR_EINVAL, "fhd: double precision runs on the CPU only");
  mr_fhd_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "fhd: out of memory");
  p->dev = dev;
  p->opts = *opts;
  if (p->opts.rank == 2)
    p->opts.grid[2] = 1;
  if (p->opts.voxels_per_thread == 0) /* fastest on the H100 (mr-bench fhd tuning) */
    p->opts.voxels_per_thread = 32;
  if (p->opts.chunk == 0)
    p->opts.chunk = (size_t)1 << 20;
  p->nvox = p->opts.grid[0] * p->opts.grid[1] * p->opts.grid[2];
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev) && (rc = mr_fhd_cuda_create(p, err)) < 0) {
    free(p);
    return rc;
  }
#endif
  *out = p;
  return 0;
}

/* A copy of n points of rank floats each, checked finite. */
static int copy_points(const mr_fhd_plan *p, size_t n, const float *src, float **dst,
                       const char *what, mr_err *err) {
  size_t r = (size_t)p->opts.rank;
  if (n > SIZE_MAX / sizeof(float) / r)
    return mr_err_set(err, MR_EINVAL, "fhd: %zu %s", n, what);
  float *copy = malloc(n * r * sizeof *copy + 1);
  if (copy == NULL)
    return mr_err_set(err, MR_ENOMEM, "fhd: out of memory for %zu %s", n, what);
  for (size_t i = 0; i < n * r; i++) {
    if (!isfinite(src[i])) {
      free(copy);
      return mr_err_set(err, MR_EINVAL, "fhd: %s %zu is not finite", what, i / r);
    }
    copy[i] = src[i];
  }
  free(*dst);
  *dst = copy;
  return 0;
}

int mr_fhd_set_voxels(mr_fhd_plan *p, size_t n, const float *x, mr_err *err) {
  if (n < 1)
    return mr_err_set(err, MR_EINVAL, "fhd: no voxels");
  if (p->opts.kernel == MR_FHD_RECURRENCE)
    return mr_err_set(err, MR_EINVAL, "fhd: the recurrence kernel needs a grid");
  int rc = copy_points(p, n, x, &p->voxels, "voxels", err);
  if (rc < 0)
    return rc;
  p->nvox = n;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    mr_fhd_cuda_forget(p);
#endif
  return 0;
}

int mr_fhd_set_points(mr_fhd_plan *p, size_t m, const float *k, mr_err *err) {
  int rc = copy_points(p, m, k, &p->k, "samples", err);
  if (rc < 0)
    return rc;
  p->m = m;
  return 0;
}

size_t mr_fhd_voxel_count(const mr_fhd_plan *p) { return p->nvox; }

int mr_fhd_adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                   mr_err *err) {
  if (p->k == NULL)
    return mr_err_set(err, MR_EINVAL, "fhd: no trajectory set");
  if (data == NULL && p->opts.batch != 1)
    return mr_err_set(err, MR_EINVAL, "fhd: Q (no data) with batch %zu", p->opts.batch);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return mr_fhd_cuda_adjoint(p, data, weights, out, err);
#endif
  return mr_fhd_cpu_adjoint(p, data, weights, out, err);
}

int mr_fhd_forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err) {
  if (p->k == NULL)
    return mr_err_set(err, MR_EINVAL, "fhd: no trajectory set");
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return mr_fhd_cuda_forward(p, image, out, err);
#endif
  return mr_fhd_cpu_forward(p, image, out, err);
}

void mr_fhd_plan_destroy(mr_fhd_plan *p) {
  if (p == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    mr_fhd_cuda_destroy(p);
#endif
  free(p->voxels);
  free(p->k);
  free(p);
}
