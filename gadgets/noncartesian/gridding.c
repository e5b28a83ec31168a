/* gridding: non-Cartesian k-space buffers to coil images. The samples of
 * every acquired readout, at their trajectory positions (cycles per pixel
 * of the encoded matrix, in [-0.5, 0.5)), are density compensated and
 * gridded by the adjoint NUFFT (gpu/nufft/nufft.h) onto the encoded matrix, all
 * coils in one plan, then cropped to the recon matrix.
 *
 * Density weights ("density"): "trajectory" reads them from the trajectory's
 * component past the positions (the 3rd in 2D, the 4th in 3D); "radial"
 * computes them for spokes through the centre; "pipe_menon" iterates them
 * on the trajectory (density.h); "auto" takes the trajectory's when it has
 * them, radial ones for a radial or golden-angle header, Pipe-Menon else.
 * A buffer with the same positions as the last one reuses its weights.
 * 2D or 3D follows the encoded matrix (z > 1: 3D).
 *
 * Per buffer the gadget is cheap when only the trajectory changes (a
 * real-time stream: frames.c): the NUFFT plans are kept from buffer to
 * buffer and given only the new positions (mr_nufft_set_points; not even
 * that while the positions repeat; a plan is made for its buffer's sample
 * count, max_points, so its binning memory is made once, with it), the
 * sample, weight and image arrays are
 * kept and grown, and the coil images are gridded straight into the array
 * sent on when no crop is needed. On a GPU a buffer is one device task: the
 * positions (when new) and the weighted samples go up into kept device
 * buffers, the plans take the positions from there, and the coil images
 * stay on the GPU when the next gadget works on device data (coil_combine,
 * image_out: handoff.h); otherwise they come back once.
 *
 * Positions are checked first: a component outside [-0.75, 0.75] (1.5 times
 * the [-0.5, 0.5) that the encoded matrix covers) or not finite is refused,
 * naming the line, sample and value; gridding it would only make an image of
 * noise or NaN. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "buf.h"
#include "density.h"
#include "gadget.h"
#include "handoff.h"
#include "image_array.h"
#include "kspace.h"
#include "nufft.h"
#include "placement.h"
#include "positions.h"
#include "scratch.h"

enum density { DENSITY_AUTO, DENSITY_TRAJECTORY, DENSITY_RADIAL, DENSITY_PIPE_MENON, DENSITY_NONE };

/* Coils gridded together at most: their oversampled grids share this much. */
#define GRID_BYTES ((size_t)512 << 20)

/* A plan kept for the next buffers, and whether it has the current
 * positions. */
typedef struct kept_plan {
  mr_nufft_plan *plan;
  mr_device *dev;
  mr_nufft_opts opts;
  int has_points;
  uint64_t used; /* when last used (0: never); the least recent is replaced */
} kept_plan;

typedef struct gridding {
  double tolerance, upsampling;
  int density, iterations;
  int device, fallback;
  mr_placement place;
  /* Plans of all coils at once and of the last partial batch (coils past
   * GRID_BYTES' worth); the older is replaced when another shape comes. */
  kept_plan plans[2];
  uint64_t uses;
  /* The last buffer's positions ([n][rank]) and, when weights_valid, the
   * weights computed for them; gather fills `next` and swaps it in when
   * the positions changed. */
  mr_scratch pos, next, weights;
  size_t pos_n;
  int pos_rank, weights_valid, weights_method;
  mr_scratch data, image;
  int on_device; /* the next consumer takes device data */
  /* GPU: the kept positions (valid while dpos_valid), weighted samples and,
   * when a crop is needed, uncropped coil images on the device. */
  mr_buf *dpos, *dsamp, *dimage;
  int dpos_valid;
} gridding;

static const mr_param params[] = {
    MR_PARAM_DOUBLE(gridding, tolerance, "tolerance", "1e-4", 1e-6, 1e-1,
        "relative accuracy of the NUFFT against the exact sums"),
    MR_PARAM_ENUM(gridding, density, "density", "\"auto\"", "auto|trajectory|radial|pipe_menon|none",
        "density weights: from the trajectory's extra component, analytic radial, Pipe-Menon "
        "iteration, none; auto picks in that order (radial only for a radial header)"),
    MR_PARAM_INT(gridding, iterations, "iterations", "20", 1, 1000, "Pipe-Menon iterations"),
    MR_PARAM_DOUBLE(gridding, upsampling, "upsampling", "0", 0, 2,
        "NUFFT grid oversampling, 1.25 .. 2; 0 chooses by dimension and tolerance"),
    MR_PLACEMENT_PARAMS(gridding),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  gridding *s = state;
  if (s->upsampling != 0 && s->upsampling < 1.25)
    return mr_gadget_fail(ctx, MR_ECONFIG, "upsampling %g: 0 (automatic) or 1.25 .. 2",
                          s->upsampling);
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_IMAGE_ARRAY);
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
  size_t rs[3];     /* the recon matrix the images are cropped to */
  mr_image_array *out; /* the coil images, made by run_gridding */
} job;

static mr_nufft_opts plan_opts(const job *j, size_t batch) {
  return (mr_nufft_opts){.rank = j->rank, .dims = {j->dims[0], j->dims[1], j->dims[2]},
                         .batch = batch, .tol = j->s->tolerance, .upsampling = j->s->upsampling,
                         .max_points = j->n};
}

/* The job's density weights, on dev. */
static int run_density(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  if (j->density == DENSITY_RADIAL)
    return mr_density_radial(j->rank, j->n, j->k, j->spokes, j->dk, j->w, err);
  if (j->density == DENSITY_NONE) {
    for (size_t i = 0; i < j->n; i++)
      j->w[i] = 1.0f;
    return 0;
  }
  mr_nufft_opts o = plan_opts(j, 1);
  /* The weights follow the kernel (density.h): never a timed choice, or
   * the image would depend on the machine and the moment. */
  if (o.upsampling == 0)
    o.upsampling = MR_NUFFT_UPSAMPLING_RULE;
  mr_nufft_plan *plan = NULL;
  int rc = mr_nufft_plan_create(dev, &o, &plan, err);
  if (rc == 0)
    rc = mr_nufft_set_points(plan, j->n, j->k, err);
  if (rc == 0)
    rc = mr_density_pipe_menon(plan, j->s->iterations, j->w, err);
  mr_nufft_plan_destroy(plan);
  return rc;
}

/* A kept plan made with `kept` serves a buffer wanting `want`: the same
 * shape, made for at least its samples. */
static int plan_fits(const mr_nufft_opts *kept, const mr_nufft_opts *want) {
  return kept->rank == want->rank && kept->dims[0] == want->dims[0] &&
         kept->dims[1] == want->dims[1] && kept->dims[2] == want->dims[2] &&
         kept->batch == want->batch && kept->tol == want->tol &&
         kept->upsampling == want->upsampling && kept->max_points >= want->max_points;
}

/* A kept plan for opts on dev, made in place of the least recently used
 * one when none fits, holding the job's positions. */
static int plan_for(gridding *s, mr_device *dev, const mr_nufft_opts *o, const job *j,
                    const float *k, int k_on_device, mr_nufft_plan **out, mr_err *err) {
  kept_plan *kp = NULL;
  for (int i = 0; i < 2 && kp == NULL; i++)
    if (s->plans[i].plan != NULL && s->plans[i].dev == dev && plan_fits(&s->plans[i].opts, o))
      kp = &s->plans[i];
  if (kp == NULL) {
    kp = s->plans[0].used <= s->plans[1].used ? &s->plans[0] : &s->plans[1];
    mr_nufft_plan_destroy(kp->plan);
    memset(kp, 0, sizeof *kp);
    int rc = mr_nufft_plan_create(dev, o, &kp->plan, err);
    if (rc < 0)
      return rc;
    kp->dev = dev;
    kp->opts = *o;
  }
  if (!kp->has_points) {
    int rc = k_on_device ? mr_nufft_set_points_device(kp->plan, j->n, k, err)
                         : mr_nufft_set_points(kp->plan, j->n, k, err);
    if (rc < 0)
      return rc;
    kp->has_points = 1;
  }
  kp->used = ++s->uses;
  *out = kp->plan;
  return 0;
}

/* Coils per plan: as many as GRID_BYTES of oversampled grids allow. */
static size_t coil_batch(const job *j, size_t npix) {
  size_t grid = npix << j->rank; /* about: twice each dimension */
  size_t batch = GRID_BYTES / (grid * sizeof(mr_cfloat));
  return batch < 1 ? 1 : batch > j->nch ? j->nch : batch;
}

/* The centred n_out of n along one axis (the image origin is at n/2). */
static size_t crop_start(size_t n, size_t n_out) { return n / 2 - n_out / 2; }

static int is_cropped(const job *j) {
  return j->rs[0] != j->dims[0] || j->rs[1] != j->dims[1] || j->rs[2] != j->dims[2];
}

/* Copies the centred recon part of image (all coils of dims) into a. */
static void crop(const job *j, const mr_cfloat *image, mr_image_array *a) {
  size_t nx = a->nx, ny = a->ny, nz = a->nz;
  size_t x0 = crop_start(j->dims[0], nx), y0 = crop_start(j->dims[1], ny);
  size_t z0 = crop_start(j->dims[2], nz), npix = j->dims[0] * j->dims[1] * j->dims[2];
  for (size_t c = 0; c < j->nch; c++)
    for (size_t z = 0; z < nz; z++)
      for (size_t y = 0; y < ny; y++)
        memcpy(a->data + ((c * nz + z) * ny + y) * nx,
               image + c * npix + ((z + z0) * j->dims[1] + y + y0) * j->dims[0] + x0,
               nx * sizeof *a->data);
}

/* b holding at least `bytes` on dev, kept for the next buffers. */
static int keep_buf(mr_buf **b, mr_device *dev, size_t bytes, mr_err *err) {
  if (*b != NULL && mr_buf_device(*b) == dev && mr_buf_size(*b) >= bytes)
    return 0;
  mr_buf_destroy(*b);
  *b = NULL;
  return mr_buf_create(dev, bytes, b, err);
}

/* The GPU's gridding, one device task: the new positions and the weighted
 * samples up into the kept buffers, every batch of coils gridded there, the
 * images cropped into a device array (j->out). */
static int grid_task(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  gridding *s = j->s;
  size_t npix = j->dims[0] * j->dims[1] * j->dims[2], n1 = j->n > 0 ? j->n : 1;
  size_t batch = coil_batch(j, npix);
  int cropped = is_cropped(j);
  int rc = keep_buf(&s->dsamp, dev, n1 * j->nch * sizeof(mr_cfloat), err);
  if (rc == 0 && !s->dpos_valid) {
    rc = keep_buf(&s->dpos, dev, n1 * (size_t)j->rank * sizeof(float), err);
    if (rc == 0)
      rc = mr_buf_upload(s->dpos, 0, j->k, j->n * (size_t)j->rank * sizeof(float), err);
    s->dpos_valid = rc == 0;
  }
  if (rc == 0)
    rc = mr_buf_upload(s->dsamp, 0, j->data, j->n * j->nch * sizeof(mr_cfloat), err);
  if (rc == 0 && cropped)
    rc = keep_buf(&s->dimage, dev, npix * j->nch * sizeof(mr_cfloat), err);
  if (rc < 0)
    return rc;
  mr_err e = {0};
  mr_image_array *a = mr_image_array_new_on(dev, j->rs[0], j->rs[1], j->rs[2], j->nch, &e);
  mr_cfloat *img = a != NULL ? mr_image_array_on(a, dev, &e) : NULL;
  if (img == NULL) {
    mr_image_array_free(a);
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
  }
  const float *k = mr_buf_data(s->dpos);
  const mr_cfloat *samples = mr_buf_data(s->dsamp);
  mr_cfloat *image = cropped ? mr_buf_data(s->dimage) : img;
  for (size_t c0 = 0; rc == 0 && c0 < j->nch; c0 += batch) {
    size_t nb = j->nch - c0 < batch ? j->nch - c0 : batch;
    mr_nufft_opts o = plan_opts(j, nb);
    mr_nufft_plan *plan = NULL;
    rc = plan_for(s, dev, &o, j, k, 1, &plan, err);
    if (rc == 0)
      rc = mr_nufft_execute(plan, MR_NUFFT_ADJOINT, samples + c0 * j->n, image + c0 * npix, err);
  }
  if (rc == 0 && cropped)
    rc = mr_block_crop_center(dev, j->nch, image, j->dims, img, j->rs, err);
  if (rc < 0) {
    mr_image_array_free(a);
    return rc;
  }
  j->out = a;
  return 0;
}

/* The weighted samples of every coil gridded on dev, in plans of as many
 * coils as GRID_BYTES allows, into a new image array (j->out): on the CPU
 * straight into it when no crop is needed, else into the kept scratch. */
static int run_gridding(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  if (mr_device_is_gpu(dev))
    return mr_device_run(dev, grid_task, arg, err);
  gridding *s = j->s;
  size_t npix = j->dims[0] * j->dims[1] * j->dims[2];
  size_t batch = coil_batch(j, npix);
  int cropped = is_cropped(j);
  mr_err e = {0};
  mr_image_array *a = mr_image_array_new(j->rs[0], j->rs[1], j->rs[2], j->nch, &e);
  if (a == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
  int rc = cropped ? mr_scratch_grow(&s->image, npix * j->nch * sizeof(mr_cfloat),
                                     "the gridded coil images", &e)
                   : 0;
  if (rc < 0) {
    mr_image_array_free(a);
    return mr_err_set(err, rc, "%s", mr_err_text(&e, rc));
  }
  mr_cfloat *image = cropped ? s->image.p : (mr_cfloat *)a->data;
  for (size_t c0 = 0; rc == 0 && c0 < j->nch; c0 += batch) {
    size_t nb = j->nch - c0 < batch ? j->nch - c0 : batch;
    mr_nufft_opts o = plan_opts(j, nb);
    mr_nufft_plan *plan = NULL;
    rc = plan_for(s, dev, &o, j, j->k, 0, &plan, err);
    if (rc == 0)
      rc = mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, j->data + c0 * j->n, image + c0 * npix,
                                 err);
  }
  if (rc < 0) {
    mr_image_array_free(a);
    return rc;
  }
  if (cropped)
    crop(j, image, a);
  j->out = a;
  return 0;
}

/* Positions (and trajectory weights) of the acquired readouts into j, in
 * the gadget's kept arrays, once they are checked; room for the samples
 * (weigh_samples fills it). */
static int gather(gridding *s, mr_gadget_ctx *ctx, const mr_kspace *k, job *j) {
  int rc = mr_positions_check(ctx, k, j->rank, j->weights_known, j->dims, "encoded");
  if (rc < 0)
    return rc;
  size_t lines = 0, d = (size_t)k->traj_dims, ro = k->nro;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++)
    lines += k->sampled[l] != 0;
  j->n = lines * ro;
  j->spokes = lines;
  size_t n1 = j->n > 0 ? j->n : 1;
  mr_err e = {0};
  rc = mr_scratch_grow_pinned(&s->next, s->place.dev, n1 * (size_t)j->rank * sizeof *j->k,
                              "the positions", &e);
  if (rc == 0)
    rc = mr_scratch_grow(&s->weights, n1 * sizeof *j->w, "the density weights", &e);
  if (rc == 0)
    rc = mr_scratch_grow_pinned(&s->data, s->place.dev, n1 * j->nch * sizeof *j->data,
                                "the samples", &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "%zu samples: %s", j->n, mr_err_text(&e, rc));
  j->k = s->next.p;
  j->w = s->weights.p;
  j->data = s->data.p;
  size_t at = 0;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++) {
    if (!k->sampled[l])
      continue;
    const float *t = k->traj + l * ro * d;
    for (size_t i = 0; i < ro; i++, at++) {
      for (int a = 0; a < j->rank; a++)
        j->k[at * j->rank + a] = t[i * d + a];
      if (j->weights_known)
        j->w[at] = t[i * d + j->rank];
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

/* The acquired readouts' samples times their density weights into
 * j->data ([nch][n]), one pass: each channel's readout is contiguous on
 * both sides. */
static void weigh_samples(const mr_kspace *k, job *j) {
  size_t at = 0, per = mr_kspace_channel_size(k), ro = k->nro;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++) {
    if (!k->sampled[l])
      continue;
    const float *w = j->w + at;
    for (size_t c = 0; c < j->nch; c++) {
      const float complex *src = k->data + c * per + l * ro;
      mr_cfloat *dst = j->data + c * j->n + at;
      for (size_t i = 0; i < ro; i++)
        dst[i] = src[i] * w[i];
    }
    at += ro;
  }
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

/* Makes j's positions the kept ones: when they differ from the last
 * buffer's, the plans need them and the computed weights are stale. */
static void keep_positions(gridding *s, job *j) {
  size_t bytes = j->n * (size_t)j->rank * sizeof *j->k;
  if (s->pos.p != NULL && s->pos_n == j->n && s->pos_rank == j->rank &&
      (bytes == 0 || memcmp(s->pos.p, j->k, bytes) == 0)) { /* no positions: k may be NULL */
    j->k = s->pos.p;
    return;
  }
  mr_scratch t = s->pos;
  s->pos = s->next;
  s->next = t;
  s->pos_n = j->n;
  s->pos_rank = j->rank;
  s->weights_valid = 0;
  s->dpos_valid = 0;
  for (int i = 0; i < 2; i++)
    s->plans[i].has_points = 0;
  j->k = s->pos.p;
}

/* The recon matrix within the encoded one (dims), each axis capped. */
static void recon_size(const mr_kspace *k, const job *j, size_t out[3]) {
  const uint16_t r[3] = {k->recon.matrix.x, k->recon.matrix.y, k->recon.matrix.z};
  for (int d = 0; d < 3; d++)
    out[d] = r[d] > 0 && r[d] < j->dims[d] ? r[d] : j->dims[d];
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  gridding *s = state;
  const mr_kspace *k = msg->u.object.ptr;
  job j = {.s = s, .nch = k->nch};
  mr_image_array *a = NULL;
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
  if ((rc = resolve_density(s, ctx, k, &j)) < 0 || (rc = gather(s, ctx, k, &j)) < 0)
    goto done;
  keep_positions(s, &j);
  if (j.weights_known) {
    s->weights_valid = 0; /* the trajectory's own, in the kept array */
  } else if (s->weights_valid && s->weights_method == j.density) {
    j.weights_known = 1;
  } else {
    if ((rc = mr_placement_run(&s->place, ctx, run_density, &j)) < 0)
      goto done;
    s->weights_valid = 1;
    s->weights_method = j.density;
  }
  recon_size(k, &j, j.rs);
  weigh_samples(k, &j);
  if ((rc = mr_placement_run(&s->place, ctx, run_gridding, &j)) < 0)
    goto done;
  a = j.out;
  mr_err e = {0};
  if (!s->on_device && (rc = mr_image_array_to_host(a, &e)) < 0) {
    rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    goto done;
  }
  rc = mr_image_array_emit(a, k, ctx, out);
  a = NULL;
done:
  mr_image_array_free(a);
  return rc;
}

static void destroy(void *state) {
  gridding *s = state;
  for (int i = 0; i < 2; i++)
    mr_nufft_plan_destroy(s->plans[i].plan);
  mr_placement_release(&s->place);
  mr_scratch_free(&s->pos);
  mr_scratch_free(&s->next);
  mr_scratch_free(&s->weights);
  mr_scratch_free(&s->data);
  mr_scratch_free(&s->image);
  mr_buf_destroy(s->dpos);
  mr_buf_destroy(s->dsamp);
  mr_buf_destroy(s->dimage);
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
