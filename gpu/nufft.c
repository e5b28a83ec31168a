/* NUFFT plans: the kernel, grid and bin choices, deapodization, and the
 * dispatch to the CPU or CUDA backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fail.h"
#include "nufft_impl.h"
#include "nufft_kernel.h"

/* Image dimensions up to this keep every grid index well inside int. */
#define MAX_DIM 16384

/* Bin edges: a 2D bin of 32 x 32 cells and a 3D one of 16^3 hold a tile
 * for several coils in a GPU block's shared memory. */
#define BIN_2D 32
#define BIN_3D 16

/* The automatic grid oversampling, from mr-bench nufft on an H100: in 2D
 * the grid of sigma 2 costs little (a 512^2 x 8 FFT took 0.02 ms) and its
 * narrower kernel spreads faster; in 3D the 256^3 FFT of sigma 2 took 0.32
 * ms, and 1.25 (160^3) halved the forward transform at 1e-4 while the
 * adjoint stayed within 10%. Where 1.25 cannot reach the tolerance in
 * single precision, plan creation moves to 2. */
static double choose_upsampling(int rank) { return rank == 3 ? 1.25 : 2.0; }

/* Smallest even size >= target with no prime factor above 5 (fast for
 * FFTW and cuFFT alike). */
static int fft_size(int target) {
  for (int n = target + (target & 1);; n += 2) {
    int m = n;
    while (m % 2 == 0)
      m /= 2;
    while (m % 3 == 0)
      m /= 3;
    while (m % 5 == 0)
      m /= 5;
    if (m == 1)
      return n;
  }
}

static int check_opts(const mr_nufft_opts *o) {
  if (o->rank != 2 && o->rank != 3)
    return mr_fail(MR_EINVAL, "nufft: rank %d (2 or 3)", o->rank);
  for (int d = 0; d < o->rank; d++)
    if (o->dims[d] < 1 || o->dims[d] > MAX_DIM)
      return mr_fail(MR_EINVAL, "nufft: dimension %d is %zu (1 .. %d)", d, o->dims[d], MAX_DIM);
  if (o->batch < 1)
    return mr_fail(MR_EINVAL, "nufft: batch 0");
  if (!(o->tol >= 1e-6 && o->tol <= 0.1))
    return mr_fail(MR_EINVAL, "nufft: tolerance %g (1e-6 .. 0.1)", o->tol);
  if (o->upsampling != 0 && !(o->upsampling >= 1.25 && o->upsampling <= 2.0))
    return mr_fail(MR_EINVAL, "nufft: upsampling %g (0 for automatic, or 1.25 .. 2)",
                   o->upsampling);
  return 0;
}

/* Kernel, grid and bins for opts; origin 0 for a plain FFT (GPU), n/2 for
 * the centered one (CPU). */
static void make_geom(const mr_nufft_opts *o, double sigma, int centered, mr_nufft_geom *g) {
  int w;
  double beta;
  mr_nufft_kernel_choose(o->tol, sigma, &w, &beta);
  memset(g, 0, sizeof *g);
  g->rank = o->rank;
  g->width = w;
  g->beta = (float)beta;
  g->inv_half_width = 2.0f / (float)w;
  int edge = o->rank == 2 ? BIN_2D : BIN_3D;
  for (int d = 0; d < 3; d++) {
    if (d >= o->rank) {
      g->n[d] = g->nf[d] = g->bin[d] = g->nbins[d] = 1;
      continue;
    }
    g->n[d] = (int)o->dims[d];
    int want = (int)ceil(sigma * (double)o->dims[d]);
    g->nf[d] = fft_size(want > 2 * w ? want : 2 * w);
    g->origin[d] = centered ? g->nf[d] / 2 : 0;
    int bin = edge < g->nf[d] / 2 ? edge : g->nf[d] / 2;
    g->bin[d] = bin > w ? bin : w;
    g->nbins[d] = (g->nf[d] + g->bin[d] - 1) / g->bin[d];
  }
}

/* 1 / phi_hat at every image index, with scale folded into x's factors. */
static int make_deapod(mr_nufft_plan *p, double scale) {
  const mr_nufft_geom *g = &p->geom;
  size_t total = (size_t)g->n[0] + (size_t)g->n[1] + (size_t)g->n[2], at = 0;
  p->deapod = malloc(total * sizeof *p->deapod);
  double *xi = malloc(total * sizeof *xi), *ft = malloc(total * sizeof *ft);
  if (p->deapod == NULL || xi == NULL || ft == NULL) {
    free(xi);
    free(ft);
    return mr_fail(MR_ENOMEM, "nufft: out of memory");
  }
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < g->n[d]; i++)
      xi[at++] = d < g->rank ? (double)(i - g->n[d] / 2) / g->nf[d] : 0.0;
  mr_nufft_kernel_ft(g->width, g->beta, xi, total, ft);
  at = 0;
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < g->n[d]; i++, at++)
      p->deapod[at] = d < g->rank ? (float)((d == 0 ? scale : 1.0) / ft[at]) : 1.0f;
  double zero = 0;
  mr_nufft_kernel_ft(g->width, g->beta, &zero, 1, &p->kernel_integral);
  /* Deapodization amplifies the grid's single-precision rounding most at
   * the image's highest frequencies: about 2e-7 times the largest factor
   * (measured against the exact transform). */
  double amplification = 1;
  at = 0;
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < g->n[d]; i++, at++)
      if (d < g->rank && p->kernel_integral / ft[at] > amplification)
        amplification = p->kernel_integral / ft[at];
  p->float_floor = 2e-7 * amplification;
  free(xi);
  free(ft);
  return 0;
}

/* Geometry and deapodization for grid oversampling sigma. */
static int configure(mr_nufft_plan *p, const mr_nufft_opts *o, double sigma) {
  int gpu = mr_device_is_gpu(p->dev);
  p->upsampling = sigma;
  make_geom(o, sigma, !gpu, &p->geom);
  free(p->deapod);
  p->deapod = NULL;
  /* The CPU's centered FFT is unitary: undo its 1/sqrt(grid size). */
  double grid = (double)p->geom.nf[0] * p->geom.nf[1] * p->geom.nf[2];
  return make_deapod(p, gpu ? 1.0 : sqrt(grid));
}

int mr_nufft_plan_create(mr_device *dev, const mr_nufft_opts *opts, mr_nufft_plan **out) {
  int rc = check_opts(opts);
  if (rc < 0)
    return rc;
  mr_nufft_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_fail(MR_ENOMEM, "nufft: out of memory");
  p->dev = dev;
  p->batch = opts->batch;
  double sigma = opts->upsampling != 0 ? opts->upsampling : choose_upsampling(opts->rank);
  rc = configure(p, opts, sigma);
  if (rc == 0 && p->float_floor > opts->tol) {
    if (opts->upsampling == 0 && sigma != 2.0)
      rc = configure(p, opts, 2.0);
    else
      rc = mr_fail(MR_EINVAL,
                   "nufft: tolerance %g is below what single precision reaches at "
                   "upsampling %g (about %.1e); ask for a larger upsampling or tolerance",
                   opts->tol, sigma, p->float_floor);
  }
  if (rc == 0) {
#ifdef MR_HAVE_CUDA
    if (mr_device_is_gpu(dev))
      rc = mr_nufft_cuda_create(p);
    else
#endif
      rc = mr_nufft_cpu_create(p);
  }
  if (rc < 0) {
    free(p->deapod);
    free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int mr_nufft_set_points(mr_nufft_plan *p, size_t npoints, const float *k) {
  mr_nufft_points_free(&p->points);
  p->have_points = 0;
  int rc = mr_nufft_points_build(&p->geom, npoints, k, MR_NUFFT_MAX_SUB_ENTRIES,
                                 mr_device_threads(p->dev), &p->points);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && mr_device_is_gpu(p->dev))
    rc = mr_nufft_cuda_upload(p);
#endif
  if (rc < 0) {
    mr_nufft_points_free(&p->points);
    return rc;
  }
  p->have_points = 1;
  return 0;
}

static int check_execute(const mr_nufft_plan *p, mr_nufft_direction dir) {
  if (dir != MR_NUFFT_ADJOINT && dir != MR_NUFFT_FORWARD)
    return mr_fail(MR_EINVAL, "nufft: direction %d", (int)dir);
  if (!p->have_points)
    return mr_fail(MR_EINVAL, "nufft: execute before mr_nufft_set_points");
  return 0;
}

/* Both execute variants: host = 1 when in and out are host memory. */
static int execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                   mr_cfloat *out, int host) {
  int rc = check_execute(p, dir);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return host ? mr_nufft_cuda_execute_host(p, dir, in, out)
                : mr_nufft_cuda_execute(p, dir, in, out);
#endif
  (void)host; /* host memory is the CPU's own */
  return mr_nufft_cpu_execute(p, dir, in, out);
}

int mr_nufft_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                     mr_cfloat *out) {
  return execute(p, dir, in, out, 0);
}

int mr_nufft_execute_host(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                          mr_cfloat *out) {
  return execute(p, dir, in, out, 1);
}

void mr_nufft_plan_destroy(mr_nufft_plan *p) {
  if (p == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    mr_nufft_cuda_destroy(p);
  else
#endif
    mr_nufft_cpu_destroy(p);
  mr_nufft_points_free(&p->points);
  free(p->deapod);
  free(p);
}

void mr_nufft_info_get(const mr_nufft_plan *p, mr_nufft_info *info) {
  const mr_nufft_geom *g = &p->geom;
  for (int d = 0; d < 3; d++)
    info->grid[d] = (size_t)g->nf[d];
  info->width = g->width;
  info->beta = g->beta;
  info->upsampling = p->upsampling;
  info->float_floor = p->float_floor;
  info->npoints = p->points.npoints;
  info->entries = p->points.nentries;
}
