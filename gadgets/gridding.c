/* gridding: non-Cartesian k-space buffers to coil images. The samples of
 * every acquired readout, at their trajectory positions (cycles per pixel
 * of the encoded matrix, in [-0.5, 0.5)), are density compensated and
 * gridded by the adjoint NUFFT (gpu/nufft.h) onto the encoded matrix, all
 * coils in one plan, then cropped to the recon matrix.
 *
 * Density weights ("density"): "trajectory" reads them from the trajectory's
 * component past the positions (the 3rd in 2D, the 4th in 3D); "radial"
 * computes them for spokes through the centre; "pipe_menon" iterates them
 * on the trajectory (density.h); "auto" takes the trajectory's when it has
 * them, radial ones for a radial or golden-angle header, Pipe-Menon else.
 * A buffer with the same positions as the last one reuses its weights.
 * 2D or 3D follows the encoded matrix (z > 1: 3D). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "density.h"
#include "gadget.h"
#include "image_array.h"
#include "kspace.h"
#include "nufft.h"
#include "placement.h"

enum density { DENSITY_AUTO, DENSITY_TRAJECTORY, DENSITY_RADIAL, DENSITY_PIPE_MENON, DENSITY_NONE };

/* Coils gridded together at most: their oversampled grids share this much. */
#define GRID_BYTES ((size_t)512 << 20)

typedef struct gridding {
  double tolerance, upsampling;
  int density, iterations;
  int device, fallback;
  mr_placement place;
  /* the last buffer's positions and weights, for the next one */
  float *last_k, *last_w;
  size_t last_n;
  int last_rank;
} gridding;

static const mr_param params[] = {
    {"tolerance", MR_PARAM_DOUBLE, offsetof(gridding, tolerance), "1e-4", 1e-6, 1e-1, NULL, 0,
     "relative accuracy of the NUFFT against the exact sums"},
    {"density", MR_PARAM_ENUM, offsetof(gridding, density), "\"auto\"", 0, 0,
     "auto|trajectory|radial|pipe_menon|none", 0,
     "density weights: from the trajectory's extra component, analytic radial, Pipe-Menon "
     "iteration, none; auto picks in that order (radial only for a radial header)"},
    {"iterations", MR_PARAM_INT, offsetof(gridding, iterations), "20", 1, 1000, NULL, 0,
     "Pipe-Menon iterations"},
    {"upsampling", MR_PARAM_DOUBLE, offsetof(gridding, upsampling), "0", 0, 2, NULL, 0,
     "NUFFT grid oversampling, 1.25 .. 2; 0 chooses by dimension and tolerance"},
    MR_PLACEMENT_PARAMS(gridding),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  gridding *s = state;
  if (s->upsampling != 0 && s->upsampling < 1.25)
    return mr_gadget_fail(ctx, MR_ECONFIG, "upsampling %g: 0 (automatic) or 1.25 .. 2",
                          s->upsampling);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* One buffer's samples, gathered from its acquired readouts. */
typedef struct job {
  gridding *s;
  int rank;
  size_t dims[3];   /* encoded matrix */
  size_t n, nch;    /* samples per coil, coils */
  float *k;         /* [n][rank] */
  float *w;         /* [n] density weights, filled by the job (or given) */
  int weights_known;
  int density;      /* the method resolved from "auto" */
  size_t spokes;    /* radial: readouts */
  double dk;        /* radial: sample spacing along a readout */
  mr_cfloat *data;  /* [nch][n]; weighted in place */
  mr_cfloat *image; /* [nch][nz][ny][nx] of dims, counted (budget.h) */
  size_t image_bytes;
} job;

static mr_nufft_opts plan_opts(const job *j, size_t batch) {
  return (mr_nufft_opts){.rank = j->rank, .dims = {j->dims[0], j->dims[1], j->dims[2]},
                         .batch = batch, .tol = j->s->tolerance, .upsampling = j->s->upsampling};
}

/* The job's density weights, on dev. */
static int run_density(mr_device *dev, void *arg) {
  job *j = arg;
  if (j->density == DENSITY_RADIAL)
    return mr_density_radial(j->rank, j->n, j->k, j->spokes, j->dk, j->w);
  if (j->density == DENSITY_NONE) {
    for (size_t i = 0; i < j->n; i++)
      j->w[i] = 1.0f;
    return 0;
  }
  mr_nufft_opts o = plan_opts(j, 1);
  mr_nufft_plan *plan = NULL;
  int rc = mr_nufft_plan_create(dev, &o, &plan);
  if (rc == 0)
    rc = mr_nufft_set_points(plan, j->n, j->k);
  if (rc == 0)
    rc = mr_density_pipe_menon(plan, j->s->iterations, j->w);
  mr_nufft_plan_destroy(plan);
  return rc;
}

/* The weighted samples of every coil gridded on dev, in plans of as many
 * coils as GRID_BYTES allows. */
static int run_gridding(mr_device *dev, void *arg) {
  job *j = arg;
  size_t npix = j->dims[0] * j->dims[1] * j->dims[2];
  size_t grid = npix << j->rank; /* about: twice each dimension */
  size_t batch = GRID_BYTES / (grid * sizeof(mr_cfloat));
  batch = batch < 1 ? 1 : batch > j->nch ? j->nch : batch;
  mr_nufft_plan *plan = NULL;
  size_t planned = 0;
  int rc = 0;
  for (size_t c0 = 0; rc == 0 && c0 < j->nch; c0 += batch) {
    size_t nb = j->nch - c0 < batch ? j->nch - c0 : batch;
    if (nb != planned) {
      mr_nufft_plan_destroy(plan);
      plan = NULL;
      mr_nufft_opts o = plan_opts(j, nb);
      rc = mr_nufft_plan_create(dev, &o, &plan);
      if (rc == 0)
        rc = mr_nufft_set_points(plan, j->n, j->k);
      planned = nb;
    }
    if (rc == 0)
      rc = mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, j->data + c0 * j->n,
                                 j->image + c0 * npix);
  }
  mr_nufft_plan_destroy(plan);
  return rc;
}

/* Positions (and trajectory weights) of the acquired readouts into j. */
static int gather(mr_gadget_ctx *ctx, const mr_kspace *k, job *j) {
  size_t lines = 0, d = (size_t)k->traj_dims, ro = k->nro;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++)
    lines += k->sampled[l] != 0;
  j->n = lines * ro;
  j->spokes = lines;
  j->k = malloc((j->n > 0 ? j->n : 1) * (size_t)j->rank * sizeof *j->k);
  j->w = malloc((j->n > 0 ? j->n : 1) * sizeof *j->w);
  j->data = malloc((j->n > 0 ? j->n : 1) * j->nch * sizeof *j->data);
  if (j->k == NULL || j->w == NULL || j->data == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for %zu samples", j->n);
  size_t at = 0, per = mr_kspace_channel_size(k);
  for (size_t l = 0; l < k->ne1 * k->ne2; l++) {
    if (!k->sampled[l])
      continue;
    const float *t = k->traj + l * ro * d;
    for (size_t i = 0; i < ro; i++, at++) {
      for (int a = 0; a < j->rank; a++)
        j->k[at * j->rank + a] = t[i * d + a];
      if (j->weights_known)
        j->w[at] = t[i * d + j->rank];
      for (size_t c = 0; c < j->nch; c++)
        j->data[c * j->n + at] = k->data[c * per + l * ro + i];
    }
    if (j->dk == 0 && ro > 1) {
      double s = 0;
      for (int a = 0; a < j->rank; a++)
        s += ((double)t[d + a] - t[a]) * ((double)t[d + a] - t[a]);
      j->dk = sqrt(s);
    }
  }
  return 0;
}

/* The method "auto" stands for, and whether the trajectory has weights. */
static int resolve_density(gridding *s, mr_gadget_ctx *ctx, const mr_kspace *k, job *j) {
  int has_weights = k->traj_dims > j->rank;
  int method = s->density;
  if (method == DENSITY_AUTO) {
    mr_trajectory t = ctx->hdr != NULL ? ctx->hdr->encoding[k->encoding].trajectory : MR_TRAJ_OTHER;
    method = has_weights                                            ? DENSITY_TRAJECTORY
             : t == MR_TRAJ_RADIAL || t == MR_TRAJ_GOLDENANGLE ? DENSITY_RADIAL
                                                                    : DENSITY_PIPE_MENON;
  }
  if (method == DENSITY_TRAJECTORY && !has_weights)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "density \"trajectory\": the trajectory has %d components, no weights "
                          "past the %d positions", k->traj_dims, j->rank);
  j->density = method;
  j->weights_known = method == DENSITY_TRAJECTORY;
  return 0;
}

/* The last buffer's weights, when this one has the same positions. */
static void reuse_weights(const gridding *s, job *j) {
  if (s->last_k != NULL && s->last_n == j->n && s->last_rank == j->rank &&
      memcmp(s->last_k, j->k, j->n * (size_t)j->rank * sizeof *j->k) == 0) {
    memcpy(j->w, s->last_w, j->n * sizeof *j->w);
    j->weights_known = 1;
  }
}

/* Keeps this buffer's positions and weights for the next (only a cache:
 * out of memory just skips it). */
static void keep_weights(gridding *s, const job *j) {
  size_t bytes = j->n * (size_t)j->rank * sizeof *j->k;
  float *k = malloc(bytes > 0 ? bytes : 1), *w = malloc((j->n > 0 ? j->n : 1) * sizeof *w);
  if (k == NULL || w == NULL) {
    free(k);
    free(w);
    return;
  }
  memcpy(k, j->k, bytes);
  memcpy(w, j->w, j->n * sizeof *w);
  free(s->last_k);
  free(s->last_w);
  s->last_k = k;
  s->last_w = w;
  s->last_n = j->n;
  s->last_rank = j->rank;
}

/* The centred n_out of n along one axis (the image origin is at n/2). */
static size_t crop_start(size_t n, size_t n_out) { return n / 2 - n_out / 2; }

static int emit_image(mr_gadget_ctx *ctx, const mr_kspace *k, const job *j, mr_emit *out) {
  size_t nx = k->recon.matrix.x > 0 && k->recon.matrix.x < j->dims[0] ? k->recon.matrix.x : j->dims[0];
  size_t ny = k->recon.matrix.y > 0 && k->recon.matrix.y < j->dims[1] ? k->recon.matrix.y : j->dims[1];
  size_t nz = k->recon.matrix.z > 0 && k->recon.matrix.z < j->dims[2] ? k->recon.matrix.z : j->dims[2];
  mr_err e = {0};
  mr_image_array *a = mr_image_array_new(nx, ny, nz, j->nch, &e);
  if (a == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", e.msg);
  size_t x0 = crop_start(j->dims[0], nx), y0 = crop_start(j->dims[1], ny);
  size_t z0 = crop_start(j->dims[2], nz), npix = j->dims[0] * j->dims[1] * j->dims[2];
  for (size_t c = 0; c < j->nch; c++)
    for (size_t z = 0; z < nz; z++)
      for (size_t y = 0; y < ny; y++)
        memcpy(a->data + ((c * nz + z) * ny + y) * nx,
               j->image + c * npix + ((z + z0) * j->dims[1] + y + y0) * j->dims[0] + x0,
               nx * sizeof *a->data);
  a->ref = k->ref;
  a->fov_mm = k->recon.fov_mm;
  mr_message *m = mr_image_array_message(a);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  gridding *s = state;
  const mr_kspace *k = msg->u.object.ptr;
  job j = {.s = s, .nch = k->nch};
  int rc = 0;
  if (k->traj == NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "got Cartesian k-space (no trajectory): use fft");
    goto done;
  }
  j.rank = k->encoded.matrix.z > 1 ? 3 : 2;
  if (k->traj_dims < j.rank) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "a %dD encoding needs %d trajectory components, the data has %d",
                        j.rank, j.rank, k->traj_dims);
    goto done;
  }
  j.dims[0] = k->encoded.matrix.x;
  j.dims[1] = k->encoded.matrix.y;
  j.dims[2] = j.rank == 3 ? k->encoded.matrix.z : 1;
  if (j.dims[0] == 0 || j.dims[1] == 0) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "the header's encoded matrix is empty");
    goto done;
  }
  if ((rc = resolve_density(s, ctx, k, &j)) < 0 || (rc = gather(ctx, k, &j)) < 0)
    goto done;
  if (!j.weights_known)
    reuse_weights(s, &j);
  int computed = !j.weights_known;
  size_t npix = j.dims[0] * j.dims[1] * j.dims[2];
  j.image_bytes = npix * j.nch * sizeof *j.image;
  mr_err ie = {0};
  if ((j.image = mr_budget_alloc(j.image_bytes, "the gridded coil images", &ie)) == NULL) {
    rc = mr_gadget_fail(ctx, ie.code, "%s", ie.msg);
    goto done;
  }
  if (computed && (rc = mr_placement_run(&s->place, ctx, run_density, &j)) < 0)
    goto done;
  if (computed)
    keep_weights(s, &j);
  for (size_t c = 0; c < j.nch; c++)
    for (size_t i = 0; i < j.n; i++)
      j.data[c * j.n + i] *= j.w[i];
  if ((rc = mr_placement_run(&s->place, ctx, run_gridding, &j)) < 0)
    goto done;
  rc = emit_image(ctx, k, &j, out);
done:
  free(j.k);
  free(j.w);
  free(j.data);
  mr_budget_free(j.image, j.image_bytes);
  mr_message_unref(msg);
  return rc;
}

static void destroy(void *state) {
  gridding *s = state;
  mr_placement_release(&s->place);
  free(s->last_k);
  free(s->last_w);
}

const mr_gadget_class mr_gadget_gridding = {
    .name = "gridding",
    .summary = "non-Cartesian k-space to coil images: density compensation and the adjoint NUFFT",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(gridding),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
