/* NUFFT plans: the kernel, grid and bin choices, deapodization, and the
 * dispatch to the CPU or CUDA backend. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "nufft_impl.h"
#include "nufft_kernel.h"

/* Image dimensions up to this keep every grid index well inside int. */
#define MAX_DIM 16384

/* Entries are at most 8 per sample: this keeps every index within int32. */
#define MAX_POINTS (((size_t)1 << 31) / 8)

/* Bin edges: a 2D bin of 32 x 32 cells and a 3D one of 16^3 hold a tile
 * for several coils in a GPU block's shared memory. */
#define BIN_2D 32
#define BIN_3D 16

/* Smallest even size >= target with no prime factor above 7 (fast for
 * FFTW and cuFFT alike; 7 gives 224, between 216 and 240, for the middle
 * upsampling of 128^3 at 1e-6). */
static int fft_size(int target) {
  for (int n = target + (target & 1);; n += 2) {
    int m = n;
    while (m % 2 == 0)
      m /= 2;
    while (m % 3 == 0)
      m /= 3;
    while (m % 5 == 0)
      m /= 5;
    while (m % 7 == 0)
      m /= 7;
    if (m == 1)
      return n;
  }
}

static int check_opts(const mr_nufft_opts *o, mr_err *err) {
  if (o->rank != 2 && o->rank != 3)
    return mr_err_set(err, MR_EINVAL, "nufft: rank %d (2 or 3)", o->rank);
  for (int d = 0; d < o->rank; d++)
    if (o->dims[d] < 1 || o->dims[d] > MAX_DIM)
      return mr_err_set(err, MR_EINVAL, "nufft: dimension %d is %zu (1 .. %d)", d, o->dims[d],
                        MAX_DIM);
  if (o->batch < 1)
    return mr_err_set(err, MR_EINVAL, "nufft: batch 0");
  if (!(o->tol >= 1e-6 && o->tol <= 0.1))
    return mr_err_set(err, MR_EINVAL, "nufft: tolerance %g (1e-6 .. 0.1)", o->tol);
  if (o->tune_for != 0 && o->tune_for != MR_NUFFT_ADJOINT && o->tune_for != MR_NUFFT_FORWARD)
    return mr_err_set(err, MR_EINVAL, "nufft: tune_for %d (0, or a direction)", o->tune_for);
  if (o->max_points > MAX_POINTS)
    return mr_err_set(err, MR_EINVAL, "nufft: max_points %zu (at most %zu)", o->max_points,
                      (size_t)MAX_POINTS);
  if (o->upsampling != 0 && o->upsampling != MR_NUFFT_UPSAMPLING_RULE &&
      !(o->upsampling >= 1.25 && o->upsampling <= 2.0))
    return mr_err_set(err, MR_EINVAL,
                      "nufft: upsampling %g (0 for automatic, -1 for the rule's, or 1.25 .. 2)",
                      o->upsampling);
  return 0;
}

/* Kernel, grid and bins for opts; origin 0 for a plain FFT (GPU), n/2 for
 * the centered one (CPU). */
static void make_geom(const mr_nufft_opts *o, double sigma, int centered, mr_nufft_geom *g) {
  int w;
  double beta;
  mr_nufft_kernel_choose(o->tol, sigma, &w, &beta);
  assert(w >= 2 && (o->rank == 2 || o->rank == 3)); /* checked options */
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
static int make_deapod(mr_nufft_plan *p, double scale, mr_err *err) {
  const mr_nufft_geom *g = &p->geom;
  size_t total = (size_t)g->n[0] + (size_t)g->n[1] + (size_t)g->n[2], at = 0;
  p->deapod = malloc(total * sizeof *p->deapod);
  double *xi = malloc(total * sizeof *xi), *ft = malloc(total * sizeof *ft);
  if (p->deapod == NULL || xi == NULL || ft == NULL) {
    free(xi);
    free(ft);
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory");
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
static int configure(mr_nufft_plan *p, const mr_nufft_opts *o, double sigma, mr_err *err) {
  int gpu = mr_device_is_gpu(p->dev);
  p->upsampling = sigma;
  make_geom(o, sigma, !gpu, &p->geom);
  free(p->deapod);
  p->deapod = NULL;
  /* The CPU's centered FFT is unitary: undo its 1/sqrt(grid size). */
  double grid = (double)p->geom.nf[0] * p->geom.nf[1] * p->geom.nf[2];
  return make_deapod(p, gpu ? 1.0 : sqrt(grid), err);
}

/* The automatic upsampling: of 1.25, 2 and the least upsampling that keeps
 * 2's kernel width (mr_nufft_kernel_least_sigma; the same spreading work on
 * a smaller grid: 3D 128^3 at 1e-4 is 1.5624, a 200^3 FFT instead of
 * 256^3), those that reach the tolerance in single
 * precision become the candidates (none: refused, rather than a plan that
 * misses its tolerance); then the GPU's remembered choice for this shape,
 * else, when several candidates qualify, a measurement of them on the GPU
 * (nufft_sigma.c), else (and always for MR_NUFFT_UPSAMPLING_RULE) the
 * rule by rank (or, where the rule's upsampling misses the tolerance, the
 * largest candidate). */
static int configure_automatic(mr_nufft_plan *p, const mr_nufft_opts *o, mr_err *err) {
  int width2;
  double beta2;
  mr_nufft_kernel_choose(o->tol, 2.0, &width2, &beta2);
  double middle = mr_nufft_kernel_least_sigma(o->tol, width2);
  double sigmas[3] = {1.25, middle, 2.0};
  p->ncandidates = 0;
  for (int i = 0; i < 3; i++) {
    if (i == 1 && !(middle > 1.25 && middle < 2.0))
      continue;
    int rc = configure(p, o, sigmas[i], err);
    if (rc < 0)
      return rc;
    if (p->float_floor <= o->tol)
      p->candidates[p->ncandidates++] = sigmas[i];
  }
  if (p->ncandidates == 0)
    return mr_err_set(err, MR_EINVAL,
                      "nufft: tolerance %g is below what single precision reaches at any "
                      "upsampling (about %.1e at 2); ask for a larger tolerance",
                      o->tol, p->float_floor);
  double sigma = mr_nufft_sigma_rule(o->rank);
  int rule_reaches = 0;
  for (int i = 0; i < p->ncandidates; i++)
    rule_reaches |= p->candidates[i] == sigma;
  if (!rule_reaches) /* the rule's choice cannot reach tol: the largest */
    sigma = p->candidates[p->ncandidates - 1];
  if (o->upsampling == 0 && mr_device_is_gpu(p->dev) && p->ncandidates > 1) {
    int rc = mr_nufft_sigma_choose(p->dev, o, p->candidates, p->ncandidates, &sigma, err);
    if (rc < 0)
      return rc;
  }
  return configure(p, o, sigma, err);
}

static int backend_create(mr_nufft_plan *p, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return mr_nufft_cuda_create(p, err);
#endif
  return mr_nufft_cpu_create(p, err);
}

static void backend_destroy(mr_nufft_plan *p) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev)) {
    mr_nufft_cuda_destroy(p);
    return;
  }
#endif
  mr_nufft_cpu_destroy(p);
}

int mr_nufft_plan_create(mr_device *dev, const mr_nufft_opts *opts, mr_nufft_plan **out,
                         mr_err *err) {
  int rc = check_opts(opts, err);
  if (rc < 0)
    return rc;
  mr_nufft_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory");
  p->dev = dev;
  p->batch = opts->batch;
  p->opts = *opts;
  if (opts->upsampling == 0 || opts->upsampling == MR_NUFFT_UPSAMPLING_RULE) {
    rc = configure_automatic(p, opts, err);
  } else {
    rc = configure(p, opts, opts->upsampling, err);
    if (rc == 0 && p->float_floor > opts->tol)
      rc = mr_err_set(err, MR_EINVAL,
                      "nufft: tolerance %g is below what single precision reaches at "
                      "upsampling %g (about %.1e); ask for a larger upsampling or tolerance",
                      opts->tol, opts->upsampling, p->float_floor);
  }
  if (rc == 0)
    rc = backend_create(p, err);
  if (rc < 0) {
    free(p->deapod);
    free(p);
    return rc;
  }
  *out = p;
  return 0;
}

/* Both set_points variants: k_on_host = 1 when k is host memory. */
static int set_points(mr_nufft_plan *p, size_t npoints, const float *k, int k_on_host,
                      mr_err *err) {
  /* refused before anything changes: the plan keeps its points */
  if (npoints > p->opts.max_points && p->opts.max_points > 0)
    return mr_err_set(err, MR_EINVAL, "nufft: %zu points; the plan was made for at most %zu",
                      npoints, p->opts.max_points);
  if (npoints > MAX_POINTS)
    return mr_err_set(err, MR_EINVAL, "nufft: %zu points; at most %zu", npoints,
                      (size_t)MAX_POINTS);
  mr_nufft_points_free(&p->points);
  p->have_points = 0;
  int rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    rc = mr_nufft_cuda_set_points(p, npoints, k, k_on_host, err);
  else
#endif
  {
    (void)k_on_host; /* the CPU's device memory is host memory */
    rc = mr_nufft_points_build(&p->geom, npoints, k, mr_nufft_sub_entries(&p->geom, npoints),
                               mr_device_threads(p->dev), &p->points, err);
  }
  if (rc < 0) {
    mr_nufft_points_free(&p->points);
    return rc;
  }
  p->have_points = 1;
  return 0;
}

int mr_nufft_set_points(mr_nufft_plan *p, size_t npoints, const float *k, mr_err *err) {
  return set_points(p, npoints, k, 1, err);
}

int mr_nufft_set_points_device(mr_nufft_plan *p, size_t npoints, const float *k, mr_err *err) {
  return set_points(p, npoints, k, 0, err);
}

static int check_execute(const mr_nufft_plan *p, mr_nufft_direction dir, mr_err *err) {
  if (dir != MR_NUFFT_ADJOINT && dir != MR_NUFFT_FORWARD)
    return mr_err_set(err, MR_EINVAL, "nufft: direction %d", (int)dir);
  if (!p->have_points)
    return mr_err_set(err, MR_EINVAL, "nufft: execute before mr_nufft_set_points");
  return 0;
}

/* Both execute variants: host = 1 when in and out are host memory. */
static int execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                   int host, mr_err *err) {
  int rc = check_execute(p, dir, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return host ? mr_nufft_cuda_execute_host(p, dir, in, out, err)
                : mr_nufft_cuda_execute(p, dir, in, out, err);
#endif
  (void)host; /* host memory is the CPU's own */
  return mr_nufft_cpu_execute(p, dir, in, out, err);
}

int mr_nufft_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                     mr_err *err) {
  return execute(p, dir, in, out, 0, err);
}

int mr_nufft_execute_host(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                          mr_cfloat *out, mr_err *err) {
  return execute(p, dir, in, out, 1, err);
}

void mr_nufft_plan_destroy(mr_nufft_plan *p) {
  if (p == NULL)
    return;
  backend_destroy(p);
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
