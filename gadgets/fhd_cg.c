/* fhd_cg: non-Cartesian k-space buffers to images by iterative
 * reconstruction (Kirk & Hwu ch. 14; Stone et al. 2008): conjugate
 * gradient on the normal equations (F^H F + lambda W^H W) rho = F^H D, with
 * F^H D from direct sums (gpu/fhd.h) and F^H F applied through Q on the
 * doubled grid (gpu/toeplitz.h), so no iteration passes over the samples.
 *
 * The trajectory comes with the buffer (kspace.h: cycles per pixel of the
 * recon matrix); its first 2 (2D) or 3 (3D) components are used, a further
 * one (density weights, say) is ignored: the solve needs none. Only lines
 * marked sampled count, so undersampled buffers need no special case.
 *
 * Coils: "none" solves every coil apart and emits coil images (a
 * coil_combine rss after it makes one image); "estimate" estimates
 * sensitivity maps from the scan itself (each coil's image from a few
 * iterations alone, low-passed, over their root sum of squares) and solves
 * once for one image through them (SENSE): the coils' differing views then
 * undo undersampling that each coil alone cannot.
 *
 * F^H D and Q come from direct sums ("fhd": "direct", exact to float
 * rounding) or from the NUFFT (gpu/nufft.h, "nufft", to nufft_tolerance):
 * the same sums, the second far faster on large problems.
 *
 * Q depends on the trajectory alone (the book's point): the operator built
 * from it is kept and reused while later buffers bring the same trajectory
 * (and matrix, coil count, lambda and device); F^H D is per scan. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cg.h"
#include "fft.h"
#include "fhd.h"
#include "gadget.h"
#include "image_array.h"
#include "kspace.h"
#include "nufft.h"
#include "placement.h"
#include "toeplitz.h"

enum { MAPS_NONE, MAPS_ESTIMATE };
enum { SUMS_DIRECT, SUMS_NUFFT };

/* The operators of the last trajectory. */
typedef struct op_cache {
  mr_device *dev;
  int sums;
  int rank;
  size_t n[3], m, coils;
  float *k;           /* [m][rank] */
  mr_toeplitz *op;    /* one coil's */
  mr_toeplitz *sense; /* through maps ("estimate"), for `coils` coils */
} op_cache;

/* Per-coil iterations behind the coil images that maps are estimated
 * from: enough for a low-pass view, which converges first. */
#define MAP_ITERATIONS 10

typedef struct fhd_cg {
  int iterations;
  double tolerance, lambda;
  int regularizer, maps;
  int sums;
  double nufft_tolerance;
  int device, fallback;
  mr_placement place;
  op_cache cache;
} fhd_cg;

static const mr_param params[] = {
    {"iterations", MR_PARAM_INT, offsetof(fhd_cg, iterations), "20", 1, 10000, NULL, 0,
     "most conjugate-gradient iterations"},
    {"tolerance", MR_PARAM_DOUBLE, offsetof(fhd_cg, tolerance), "1e-4", 0, 1, NULL, 0,
     "stop once ||b - A x|| <= tolerance ||b|| (0: always run every iteration)"},
    {"lambda", MR_PARAM_DOUBLE, offsetof(fhd_cg, lambda), "0", 0, 1e6, NULL, 0,
     "regularization weight, relative to F^H F's mean eigenvalue (the number of samples)"},
    {"regularizer", MR_PARAM_ENUM, offsetof(fhd_cg, regularizer), "\"identity\"", 0, 0,
     "identity|differences", 0,
     "W: identity (Tikhonov) or finite differences along each axis"},
    {"sensitivities", MR_PARAM_ENUM, offsetof(fhd_cg, maps), "\"none\"", 0, 0, "none|estimate", 0,
     "none: a solve per coil, coil images out; estimate: maps from the scan, one image out"},
    {"fhd", MR_PARAM_ENUM, offsetof(fhd_cg, sums), "\"direct\"", 0, 0, "direct|nufft", 0,
     "F^H D and Q by direct sums (exact) or by the NUFFT (fast, to nufft_tolerance)"},
    {"nufft_tolerance", MR_PARAM_DOUBLE, offsetof(fhd_cg, nufft_tolerance), "1e-6", 1e-6, 1e-1,
     NULL, 0, "relative accuracy of the NUFFT's F^H D and Q"},
    MR_PLACEMENT_PARAMS(fhd_cg),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  fhd_cg *s = state;
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

static void cache_clear(op_cache *c) {
  mr_toeplitz_destroy(c->op);
  mr_toeplitz_destroy(c->sense);
  free(c->k);
  memset(c, 0, sizeof *c);
}

/* One buffer's problem: its sampled lines gathered. */
typedef struct problem {
  int rank;
  size_t n[3], nvox, m, coils;
  float *k;          /* [m][rank] */
  mr_cfloat *data;   /* [coils][m] */
} problem;

typedef struct job {
  fhd_cg *s;
  const problem *p;
  mr_cfloat *out;    /* [coils or 1][nvox], host */
} job;

/* out[b][voxels] = sum_j data[b][j] exp(+2 pi i k_j . x) on an n grid, by
 * direct sums or the NUFFT; data NULL: all ones (Q). */
static int adjoint_sums(const fhd_cg *s, mr_device *dev, int rank, const size_t n[3], size_t m,
                        const float *k, size_t batch, const mr_cfloat *data, mr_cfloat *out) {
  int rc;
  if (s->sums == SUMS_DIRECT) {
    mr_fhd_opts fo = {.rank = rank, .grid = {n[0], n[1], n[2]}, .batch = batch};
    mr_fhd_plan *plan = NULL;
    rc = mr_fhd_plan_create(dev, &fo, &plan);
    if (rc == 0)
      rc = mr_fhd_set_points(plan, m, k);
    if (rc == 0)
      rc = mr_fhd_adjoint(plan, data, NULL, out);
    mr_fhd_plan_destroy(plan);
    return rc;
  }
  mr_cfloat *ones = NULL;
  if (data == NULL) {
    if ((ones = malloc(m * sizeof *ones + 1)) == NULL)
      return MR_ENOMEM;
    for (size_t j = 0; j < m; j++)
      ones[j] = 1;
    data = ones;
  }
  mr_nufft_opts no = {.rank = rank, .dims = {n[0], n[1], n[2]}, .batch = batch,
                      .tol = s->nufft_tolerance};
  mr_nufft_plan *plan = NULL;
  rc = mr_nufft_plan_create(dev, &no, &plan);
  if (rc == 0)
    rc = mr_nufft_set_points(plan, m, k);
  if (rc == 0)
    rc = mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, data, out);
  mr_nufft_plan_destroy(plan);
  free(ones);
  return rc;
}

/* The operators for p on dev: the cached ones, or ones built from a fresh
 * Q. */
static int operators_for(fhd_cg *s, mr_device *dev, const problem *p, op_cache **out) {
  op_cache *c = &s->cache;
  size_t coils = s->maps == MAPS_ESTIMATE ? p->coils : 0;
  if (c->op != NULL && c->dev == dev && c->sums == s->sums && c->rank == p->rank && c->m == p->m &&
      c->coils == coils && memcmp(c->n, p->n, sizeof c->n) == 0 &&
      memcmp(c->k, p->k, p->m * p->rank * sizeof *p->k) == 0) {
    *out = c;
    return 0;
  }
  cache_clear(c);
  size_t big[3] = {2 * p->n[0], 2 * p->n[1], p->rank == 3 ? 2 * p->n[2] : 1};
  mr_cfloat *q = malloc(big[0] * big[1] * big[2] * sizeof *q);
  int rc = q != NULL ? adjoint_sums(s, dev, p->rank, big, p->m, p->k, 1, NULL, q) : MR_ENOMEM;
  mr_toeplitz_opts to = {.rank = p->rank,
                         .n = {p->n[0], p->n[1], p->n[2]},
                         .lambda = s->lambda * (double)p->m, /* Q(0): F^H F's trace / N */
                         .reg = s->regularizer ? MR_REG_FINITE_DIFFERENCE : MR_REG_IDENTITY};
  if (rc == 0)
    rc = mr_toeplitz_create(dev, &to, q, &c->op);
  to.coils = coils;
  if (rc == 0 && coils > 0)
    rc = mr_toeplitz_create(dev, &to, q, &c->sense);
  free(q);
  if (rc < 0)
    return rc;
  c->k = malloc(p->m * p->rank * sizeof *c->k + 1);
  if (c->k == NULL) {
    cache_clear(c);
    return MR_ENOMEM;
  }
  memcpy(c->k, p->k, p->m * p->rank * sizeof *c->k);
  c->dev = dev;
  c->sums = s->sums;
  c->rank = p->rank;
  memcpy(c->n, p->n, sizeof c->n);
  c->m = p->m;
  c->coils = coils;
  *out = c;
  return 0;
}

/* Sensitivity maps from coil images (img [coils][nvox]): each low-passed
 * (a Hann window over the central quarter of k-space), then divided by
 * their root sum of squares, so sum_c |S_c|^2 = 1 where the object is;
 * zero where that sum is under 5% of its peak (outside the object, where
 * a ratio of small numbers means nothing: the solve then keeps those
 * voxels at zero). */
static int estimate_maps(mr_device *dev, const problem *p, const mr_cfloat *img,
                         mr_cfloat *maps) {
  mr_fft_opts fo = {.rank = p->rank, .dims = {p->n[0], p->n[1], p->n[2]}, .batch = p->coils};
  mr_fft_plan *plan = NULL;
  int rc = mr_fft_plan_create(dev, &fo, &plan);
  if (rc == 0)
    rc = mr_fft_execute_host(plan, MR_FFT_FORWARD, img, maps);
  if (rc < 0) {
    mr_fft_plan_destroy(plan);
    return rc;
  }
  const double cutoff = 0.125; /* cycles per pixel */
  for (size_t i = 0; i < p->nvox; i++) {
    double r2 = 0;
    size_t pos[3] = {i % p->n[0], i / p->n[0] % p->n[1], i / p->n[0] / p->n[1]};
    for (int d = 0; d < p->rank; d++) {
      double f = ((double)pos[d] - (double)(p->n[d] / 2)) / (double)p->n[d];
      r2 += f * f;
    }
    double r = sqrt(r2), w = r < cutoff ? pow(cos(M_PI * r / (2 * cutoff)), 2) : 0;
    for (size_t c = 0; c < p->coils; c++)
      maps[c * p->nvox + i] *= (float)w;
  }
  rc = mr_fft_execute_host(plan, MR_FFT_BACKWARD, maps, maps);
  mr_fft_plan_destroy(plan);
  if (rc < 0)
    return rc;
  double peak = 0;
  for (size_t i = 0; i < p->nvox; i++) {
    double ss = 0;
    for (size_t c = 0; c < p->coils; c++)
      ss += pow(cabsf(maps[c * p->nvox + i]), 2);
    peak = fmax(peak, ss);
  }
  for (size_t i = 0; i < p->nvox; i++) {
    double ss = 0;
    for (size_t c = 0; c < p->coils; c++)
      ss += pow(cabsf(maps[c * p->nvox + i]), 2);
    float inv = ss > 0.05 * 0.05 * peak ? (float)(1 / sqrt(ss)) : 0;
    for (size_t c = 0; c < p->coils; c++)
      maps[c * p->nvox + i] *= inv;
  }
  return 0;
}

/* x = A^-1 b (`iterations` at most) for each of `count` right-hand sides
 * in host memory. */
static int solve_all(const fhd_cg *s, mr_device *dev, mr_toeplitz *op, int iterations,
                     size_t nvox, size_t count, const mr_cfloat *b, mr_cfloat *x) {
  size_t bytes = nvox * sizeof(mr_cfloat);
  mr_buf *bb = NULL, *bx = NULL;
  int rc = mr_buf_create(dev, bytes, &bb);
  if (rc == 0)
    rc = mr_buf_create(dev, bytes, &bx);
  mr_cg_opts co = {.max_iterations = iterations, .tolerance = s->tolerance};
  for (size_t i = 0; rc == 0 && i < count; i++) {
    rc = mr_buf_upload(bb, 0, b + i * nvox, bytes);
    if (rc == 0)
      rc = mr_cg_solve(dev, nvox, mr_toeplitz_apply_op, op, mr_buf_data(bb), mr_buf_data(bx),
                       &co, NULL);
    if (rc == 0)
      rc = mr_buf_download(bx, 0, x + i * nvox, bytes);
  }
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  return rc;
}

static int reconstruct(mr_device *dev, void *arg) {
  job *j = arg;
  fhd_cg *s = j->s;
  const problem *p = j->p;
  op_cache *ops;
  int rc = operators_for(s, dev, p, &ops);
  if (rc < 0)
    return rc;
  mr_cfloat *fhd = malloc(p->coils * p->nvox * sizeof *fhd);
  if (fhd == NULL)
    return MR_ENOMEM;
  rc = adjoint_sums(s, dev, p->rank, p->n, p->m, p->k, p->coils, p->data, fhd);
  if (rc == 0 && s->maps == MAPS_NONE) {
    rc = solve_all(s, dev, ops->op, s->iterations, p->nvox, p->coils, fhd, j->out);
  } else if (rc == 0) {
    mr_cfloat *maps = malloc(p->coils * p->nvox * sizeof *maps);
    mr_cfloat *img = malloc(p->coils * p->nvox * sizeof *img);
    if (maps == NULL || img == NULL)
      rc = MR_ENOMEM;
    if (rc == 0)
      rc = solve_all(s, dev, ops->op, MAP_ITERATIONS, p->nvox, p->coils, fhd, img);
    if (rc == 0)
      rc = estimate_maps(dev, p, img, maps);
    if (rc == 0)
      rc = mr_toeplitz_set_maps(ops->sense, maps);
    if (rc == 0) { /* b = sum_c S_c^H F^H D_c, into the first coil's place */
      for (size_t i = 0; i < p->nvox; i++) {
        float complex b = 0;
        for (size_t c = 0; c < p->coils; c++)
          b += conjf(maps[c * p->nvox + i]) * fhd[c * p->nvox + i];
        fhd[i] = b;
      }
      rc = solve_all(s, dev, ops->sense, s->iterations, p->nvox, 1, fhd, j->out);
    }
    free(maps);
    free(img);
  }
  free(fhd);
  return rc;
}

/* Gathers the sampled lines of k into p (rank from the recon matrix). */
static int gather(mr_gadget_ctx *ctx, const mr_kspace *k, problem *p) {
  p->rank = k->recon.matrix.z > 1 ? 3 : 2;
  if (k->traj_dims < p->rank)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "a %dD recon matrix needs %d trajectory components, the data has %d",
                          p->rank, p->rank, k->traj_dims);
  p->n[0] = k->recon.matrix.x;
  p->n[1] = k->recon.matrix.y;
  p->n[2] = p->rank == 3 ? k->recon.matrix.z : 1;
  p->nvox = p->n[0] * p->n[1] * p->n[2];
  if (p->nvox == 0)
    return mr_gadget_fail(ctx, MR_EDATA, "recon matrix %zu x %zu x %zu", p->n[0], p->n[1],
                          p->n[2]);
  size_t lines = 0, nlines = k->ne1 * k->ne2;
  for (size_t l = 0; l < nlines; l++)
    lines += k->sampled[l] != 0;
  p->coils = k->nch;
  p->m = lines * k->nro;
  p->k = malloc(p->m * p->rank * sizeof *p->k + 1);
  p->data = malloc(p->m * p->coils * sizeof *p->data + 1);
  if (p->k == NULL || p->data == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for %zu samples", p->m);
  size_t at = 0, per = mr_kspace_channel_size(k);
  for (size_t l = 0; l < nlines; l++) {
    if (!k->sampled[l])
      continue;
    for (size_t r = 0; r < k->nro; r++, at++) {
      const float *t = k->traj + (l * k->nro + r) * (size_t)k->traj_dims;
      memcpy(p->k + at * p->rank, t, (size_t)p->rank * sizeof *t);
      for (size_t c = 0; c < p->coils; c++)
        p->data[c * p->m + at] = k->data[c * per + l * k->nro + r];
    }
  }
  return 0;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  fhd_cg *s = state;
  const mr_kspace *k = msg->u.object.ptr;
  problem p = {0};
  mr_image_array *a = NULL;
  int rc;
  if (k->traj == NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "got Cartesian k-space (no trajectory): use fft");
    goto done;
  }
  if ((rc = gather(ctx, k, &p)) < 0)
    goto done;
  mr_err e = {0};
  a = mr_image_array_new(p.n[0], p.n[1], p.n[2], s->maps == MAPS_ESTIMATE ? 1 : p.coils, &e);
  if (a == NULL) {
    rc = mr_gadget_fail(ctx, e.code, "%s", e.msg);
    goto done;
  }
  if (p.m > 0) {
    job j = {s, &p, (mr_cfloat *)a->data};
    if ((rc = mr_placement_run(&s->place, ctx, reconstruct, &j)) < 0)
      goto done;
  }
  a->ref = k->ref;
  a->fov_mm = k->recon.fov_mm;
  mr_message *m = mr_image_array_message(a);
  a = NULL;
  rc = m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
done:
  mr_image_array_free(a);
  free(p.k);
  free(p.data);
  mr_message_unref(msg);
  return rc;
}

static void destroy(void *state) {
  fhd_cg *s = state;
  cache_clear(&s->cache);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_fhd_cg = {
    .name = "fhd_cg",
    .summary = "non-Cartesian k-space to images: conjugate gradient on F^H F + lambda W^H W "
               "(F^H D by direct sums or NUFFT, Toeplitz Q reused per trajectory)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(fhd_cg),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
