/* fhd_cg: non-Cartesian k-space buffers to images by iterative
 * reconstruction (Kirk & Hwu ch. 14; Stone et al. 2008): conjugate
 * gradient on the normal equations (F^H F + lambda W^H W) rho = F^H D, with
 * F^H D from direct sums (gpu/iterative/fhd.h) and F^H F applied through Q on the
 * doubled grid (gpu/iterative/toeplitz.h), so no iteration passes over the samples.
 *
 * The trajectory comes with the buffer (kspace.h: cycles per pixel of the
 * recon matrix); its first 2 (2D) or 3 (3D) components are used, a further
 * one (density weights, say) is ignored: the solve needs none. Only lines
 * marked sampled count, so undersampled buffers need no special case.
 *
 * Coils: "none" solves every coil apart and emits coil images (a
 * coil_combine rss after it makes one image); "estimate" estimates
 * sensitivity maps from the scan itself and solves once for one image
 * through them (SENSE): the coils' differing views then undo undersampling
 * that each coil alone cannot. The maps come from gpu/coil's estimators
 * ("maps"): "lowres" (mr_coil_maps_lowres: the coil images low-passed by a
 * Hann window over the central quarter of k-space, over their root sum of
 * squares, zero under 5% of its peak: outside the object, where the solve
 * then keeps the voxels at zero) or "espirit" (espirit.h, from the coil
 * images' k-space: the gridded centre). The coil images are each coil's
 * solve of a few iterations alone, from zero; or, with "maps_tracking" N >
 * 0 (real time), every buffer continues the last buffer's coil images by N
 * iterations on its own data (a warm start): a running estimate in which
 * each frame's data pull the images to where the object is now and older
 * frames fade, so the maps, made every buffer, follow a moving object
 * where maps made every maps_every frames lag behind it.
 *
 * F^H D and Q come from direct sums ("fhd": "direct", exact to float
 * rounding) or from the NUFFT (gpu/nufft/nufft.h, "nufft", to nufft_tolerance):
 * the same sums, the second far faster on large problems.
 *
 * Q depends on the trajectory alone (the book's point): it is kept while
 * later buffers bring the same trajectory (and matrix, coil count and
 * device); F^H D is per scan. The operators built from it (when first
 * needed) are kept while the shape stays, and a new trajectory only remakes
 * their kernels in place from the new Q (mr_toeplitz_set_q). The NUFFT
 * plans are kept from buffer to buffer too, and given only new positions.
 * On a GPU a buffer's samples go up once; Q, F^H D, the right-hand side,
 * the solves and the map estimate stay on the device, and only the
 * finished images come back (and new maps, once every maps_every buffers,
 * which go up again to the SENSE operator).
 *
 * "gpus": N > 1 splits the SENSE solve ("estimate") by coils across the
 * session's GPU and the N - 1 least loaded others of the pool
 * (gpu/iterative/toeplitz_split.h; taken at the first such solve, kept to
 * the end), for one large 3D scan on several GPUs; the same image as one
 * GPU's to float rounding. Fewer when the pool has fewer; on the CPU (and
 * after a fallback to it) the solve is not split.
 *
 * Maps ("estimate") come from every "maps_every"-th buffer and are reused
 * for the buffers between while the matrix and coils stay: a real-time
 * stream (frames.c) with a new trajectory per frame then pays for the
 * per-coil solves behind the maps once every N frames, and otherwise only
 * for Q, F^H D and the one solve.
 *
 * "regularizer" wavelet or tv (with sensitivities "estimate", one GPU)
 * turns the SENSE solve into compressed sensing: the same data term
 * through the same operator, an L1-wavelet or total-variation prior,
 * solved by gpu/sparse's FISTA (mr_sparse_solve_normal), lambda relative
 * to the zero-filled image's scale as the cs step's: the config
 * cs_radial. In real time (frames.c's stream) "temporal_lambda" adds a
 * causal temporal prior to tv, needing no future frame: the L1 norm of
 * the frame's image minus the last frame's (tv.h's MR_TV_REFERENCE:
 * total variation over (dx, dy) plus |x - x_last| pixel by pixel,
 * Chambolle's projection taking the last image as a fixed offset), so
 * that what the frame's few spokes cannot tell comes from the frame
 * before while what they show moves with them; "warm_start" starts FISTA
 * from the last frame's image: the config realtime_cs.
 *
 * Positions are checked first: a component outside [-0.75, 0.75] (1.5
 * times the [-0.5, 0.5) of the recon matrix's k-space) or not finite is
 * refused, naming the line, sample and value. */
#include <assert.h>
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cg.h"
#include "coil.h"
#include "espirit.h"
#include "fft.h"
#include "fhd.h"
#include "gadget.h"
#include "image_array.h"
#include "kspace.h"
#include "nufft.h"
#include "placement.h"
#include "pool.h"
#include "positions.h"
#include "scratch.h"
#include "sparse.h"
#include "toeplitz.h"
#include "toeplitz_split.h"
#include "vec.h"

enum { MAPS_NONE, MAPS_ESTIMATE };
enum { ESTIMATE_LOWRES, ESTIMATE_ESPIRIT };
enum { SUMS_DIRECT, SUMS_NUFFT };
enum { REG_IDENTITY, REG_DIFFERENCES, REG_WAVELET, REG_TV };

/* Q of the last trajectory, and the operators made for its shape (device,
 * sums, rank, matrix and sample count: lambda scales with the count). */
typedef struct op_cache {
  mr_device *dev;
  int sums;
  int rank;
  size_t n[3], m;
  int valid;          /* k and q hold a trajectory's */
  mr_scratch k;       /* [m][rank], host: to recognise the trajectory */
  mr_buf *q;          /* on the doubled grid, on dev */
  mr_toeplitz *op;    /* one coil's, or NULL until needed */
  mr_toeplitz *sense; /* through maps ("estimate"), for sense_coils coils */
  size_t sense_coils;
  unsigned op_q, sense_q; /* the positions generation each kernel holds */
  unsigned sense_maps; /* the maps generation sense holds (0: none) */
} op_cache;

/* A NUFFT plan kept for the next buffers, and the positions generation it
 * holds. */
typedef struct kept_plan {
  mr_nufft_plan *plan;
  mr_device *dev;
  mr_nufft_opts opts;
  unsigned points;
} kept_plan;

/* Most GPUs one SENSE solve is split across. */
#define MAX_SPLIT 16

/* Per-coil iterations behind the coil images that maps are estimated
 * from: enough for a low-pass view, which converges first. */
#define MAP_ITERATIONS 10

/* The low-resolution maps' floor, relative to the largest root sum of
 * squares: the object's support. */
#define MAP_FLOOR 0.05

typedef struct fhd_cg {
  int iterations;
  double tolerance, lambda, temporal_lambda;
  int regularizer, maps, warm_start, tv_steps;
  int estimator;
  int maps_tracking;
  int sums;
  double nufft_tolerance;
  int maps_every;
  int device, fallback;
  mr_placement place;
  mr_cancel cancel; /* the chain's, asked every CG iteration */
  op_cache cache;
  unsigned positions; /* generation of cache.k, from 1 */
  kept_plan q_plan, fhd_plan;
  mr_scratch k, data; /* a buffer's positions and samples */
  mr_scratch sums_out; /* direct sums' host output, before it goes to the device */
  /* On the solve's device, kept: [ones_n] ones (Q's samples), the samples,
   * F^H D and coil images [coils][nvox]. */
  mr_buf *ones, *data_dev, *fhd, *img;
  size_t ones_n;
  /* The last estimated maps [coils][nvox] (generation sens_gen, 0: none),
   * and the buffers since they were made. */
  mr_cfloat *sens;
  size_t sens_coils, sens_n[3];
  unsigned sens_gen, sens_made;
  int since_maps;
  mr_buf *cg_b, *cg_x; /* one right-hand side and solution on the device, kept */
  /* The map estimate on the device: maps, and for ESPIRiT the coil
   * images' transform and k-space, kept. */
  mr_buf *maps_dev, *maps_k;
  mr_fft_plan *maps_fft;
  /* maps_tracking > 0: the shape and device whose coil images img holds
   * (track_coils 0: none), the warm start of the next buffer's. */
  size_t track_n[3], track_coils;
  mr_device *track_dev;
  /* "gpus" > 1: the other GPUs (taken once) and the split SENSE operator,
   * made on split_dev for the positions generation split_q, with the maps
   * of generation split_maps; Q goes through q_host to it. */
  int gpus;
  mr_device *others[MAX_SPLIT - 1];
  size_t nothers;
  int others_taken;
  mr_toeplitz_split *split;
  mr_device *split_dev;
  unsigned split_q, split_maps;
  mr_scratch q_host;
  mr_sparse_plan *sparse; /* regularizer wavelet or tv: the solver, for the last shape */
  /* The sparse solve's last image (in cg_x) was of last_n on last_dev
   * (NULL: none): the next frame's temporal reference (copied to
   * reference) and warm start. */
  mr_device *last_dev;
  size_t last_n[3];
  mr_buf *reference;
  /* Its bound of ||A^H A|| and sample count: a frame of as many samples
   * (the next golden-angle frame) reuses the bound, sparing the power
   * method's 20 operator applications. */
  float last_bound;
  size_t last_m;
} fhd_cg;

static const mr_param params[] = {
    MR_PARAM_INT(fhd_cg, iterations, "iterations", "20", 1, 10000,
        "most conjugate-gradient iterations"),
    MR_PARAM_DOUBLE(fhd_cg, tolerance, "tolerance", "1e-4", 0, 1,
        "stop once ||b - A x|| <= tolerance ||b|| (0: always run every iteration)"),
    MR_PARAM_DOUBLE(fhd_cg, lambda, "lambda", "0", 0, 1e6,
        "regularization weight: identity, differences: relative to F^H F's mean eigenvalue (the "
        "number of samples); wavelet, tv: relative to the zero-filled image's scale (as cs), "
        "above 0"),
    MR_PARAM_ENUM(fhd_cg, regularizer, "regularizer", "\"identity\"",
        "identity|differences|wavelet|tv",
        "W: identity (Tikhonov) or finite differences along each axis, solved by CG; or, with "
        "sensitivities \"estimate\" on one GPU, compressed sensing by FISTA: wavelet (L1 of a "
        "Daubechies wavelet) or tv (total variation)"),
    MR_PARAM_DOUBLE(fhd_cg, temporal_lambda, "temporal_lambda", "0", 0, 1e6,
        "regularizer tv, real time: a causal temporal prior, the L1 norm of this frame's image "
        "minus the last frame's, weighted relative to the zero-filled image's scale as lambda "
        "(0: none; the first frame and a new shape have none)"),
    MR_PARAM_INT(fhd_cg, tv_steps, "tv_steps", "10", 1, 100,
        "regularizer tv: dual steps of total variation's proximal operator per FISTA "
        "iteration (the dual is warm-started from the last iteration's; fewer steps, fewer "
        "kernel launches a frame)"),
    MR_PARAM_BOOL(fhd_cg, warm_start, "warm_start", "false",
        "regularizer wavelet or tv: FISTA starts from the last frame's image (of the same "
        "shape) instead of zero, so that fewer iterations reach the same image"),
    MR_PARAM_ENUM(fhd_cg, maps, "sensitivities", "\"none\"", "none|estimate",
        "none: a solve per coil, coil images out; estimate: maps from the scan, one image out"),
    MR_PARAM_ENUM(fhd_cg, sums, "fhd", "\"direct\"", "direct|nufft",
        "F^H D and Q by direct sums (exact) or by the NUFFT (fast, to nufft_tolerance)"),
    MR_PARAM_DOUBLE(fhd_cg, nufft_tolerance, "nufft_tolerance", "1e-6", 1e-6, 1e-1,
        "relative accuracy of the NUFFT's F^H D and Q"),
    MR_PARAM_INT(fhd_cg, maps_every, "maps_every", "1", 1, 1000000,
        "sensitivities \"estimate\": estimate the maps from every N-th buffer (frame) and reuse "
        "them for those between"),
    MR_PARAM_ENUM(fhd_cg, estimator, "maps", "\"lowres\"", "lowres|espirit",
        "sensitivities \"estimate\": maps from the low-passed coil images over their root sum "
        "of squares, or ESPIRiT's eigenvector maps of their k-space centre"),
    MR_PARAM_INT(fhd_cg, maps_tracking, "maps_tracking", "0", 0, 100,
        "sensitivities \"estimate\", real time: new maps every buffer from coil images that "
        "continue the last buffer's by this many iterations (0: maps_every decides, from "
        "solves that start from zero)"),
    MR_PARAM_INT(fhd_cg, gpus, "gpus", "1", 1, MAX_SPLIT,
        "sensitivities \"estimate\": split the SENSE solve by coils across this many GPUs (the "
        "session's and the least loaded others; fewer when the pool has fewer)"),
    MR_PLACEMENT_PARAMS(fhd_cg),
};

/* Whether the SENSE solve is compressed sensing (FISTA) rather than CG. */
static int sparse_prior(const fhd_cg *s) {
  return s->regularizer == REG_WAVELET || s->regularizer == REG_TV;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  fhd_cg *s = state;
  s->cancel = mr_gadget_cancel(ctx);
  if (sparse_prior(s) && (s->maps != MAPS_ESTIMATE || s->gpus > 1 || !(s->lambda > 0)))
    return mr_gadget_fail(ctx, MR_ECONFIG,
                          "regularizer %s needs sensitivities \"estimate\", gpus 1 and a lambda "
                          "above 0 (0.005 is BART's usual)",
                          s->regularizer == REG_TV ? "tv" : "wavelet");
  if (s->temporal_lambda > 0 && s->regularizer != REG_TV)
    return mr_gadget_fail(ctx, MR_ECONFIG,
                          "temporal_lambda %g needs regularizer \"tv\" (the temporal term is "
                          "total variation's)",
                          s->temporal_lambda);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* Drops the operators and Q; keeps the positions array. */
static void cache_reset(op_cache *c) {
  mr_toeplitz_destroy(c->op);
  mr_toeplitz_destroy(c->sense);
  mr_buf_destroy(c->q);
  mr_scratch k = c->k;
  memset(c, 0, sizeof *c);
  c->k = k;
}

static void cache_clear(op_cache *c) {
  cache_reset(c);
  mr_scratch_free(&c->k);
}

static void plan_clear(kept_plan *kp) {
  mr_nufft_plan_destroy(kp->plan);
  memset(kp, 0, sizeof *kp);
}

/* One buffer's problem: its sampled lines gathered. */
typedef struct problem {
  int rank;
  size_t n[3], nvox, m, coils;
  float *k;          /* [m][rank] */
  const mr_cfloat *data; /* [coils][m]: gathered, or the buffer's own */
} problem;

typedef struct job {
  fhd_cg *s;
  const problem *p;
  mr_cfloat *out;    /* [coils or 1][nvox], host */
} job;

/* b holding at least `bytes` on dev, kept for the next buffers. */
static int keep_buf(mr_buf **b, mr_device *dev, size_t bytes, mr_err *err) {
  if (*b != NULL && mr_buf_device(*b) == dev && mr_buf_size(*b) >= bytes)
    return 0;
  mr_buf_destroy(*b);
  *b = NULL;
  return mr_buf_create(dev, bytes, b, err);
}

/* At least m ones on dev, in s->ones. */
static int keep_ones(fhd_cg *s, mr_device *dev, size_t m, mr_err *err) {
  if (s->ones != NULL && mr_buf_device(s->ones) == dev && s->ones_n >= m)
    return 0;
  s->ones_n = 0;
  int rc = keep_buf(&s->ones, dev, m * sizeof(mr_cfloat), err);
  mr_cfloat *ones = rc == 0 ? malloc(m * sizeof *ones) : NULL;
  if (rc == 0 && ones == NULL)
    rc = MR_ENOMEM;
  for (size_t j = 0; rc == 0 && j < m; j++)
    ones[j] = 1;
  if (rc == 0)
    rc = mr_buf_upload(s->ones, 0, ones, m * sizeof *ones, err);
  free(ones);
  s->ones_n = rc == 0 ? m : 0;
  return rc;
}

/* out[b][voxels] = sum_j data[b][j] exp(+2 pi i k_j . x) on an n grid, by
 * direct sums or the NUFFT (the plan kept in kp, given the positions k of
 * generation s->positions once); data (host) NULL: all ones (Q). out is a
 * buffer on dev. */
static int adjoint_sums(fhd_cg *s, kept_plan *kp, mr_device *dev, int rank, const size_t n[3],
                        size_t m, const float *k, size_t batch, const mr_cfloat *data, mr_buf *out,
                        mr_err *err) {
  int rc;
  if (s->sums == SUMS_DIRECT) {
    size_t out_bytes = batch * n[0] * n[1] * n[2] * sizeof(mr_cfloat);
    mr_fhd_opts fo = {.rank = rank, .grid = {n[0], n[1], n[2]}, .batch = batch};
    mr_fhd_plan *plan = NULL;
    rc = mr_scratch_grow(&s->sums_out, out_bytes, "the direct sums", NULL);
    if (rc == 0)
      rc = mr_fhd_plan_create(dev, &fo, &plan, err);
    if (rc == 0)
      rc = mr_fhd_set_points(plan, m, k, err);
    if (rc == 0)
      rc = mr_fhd_adjoint(plan, data, NULL, s->sums_out.p, err);
    mr_fhd_plan_destroy(plan);
    return rc == 0 ? mr_buf_upload(out, 0, s->sums_out.p, out_bytes, err) : rc;
  }
  const mr_cfloat *in;
  if (data == NULL) {
    rc = keep_ones(s, dev, m, err);
    in = rc == 0 ? mr_buf_data(s->ones) : NULL;
  } else {
    rc = keep_buf(&s->data_dev, dev, batch * m * sizeof *data, err);
    if (rc == 0)
      rc = mr_buf_upload(s->data_dev, 0, data, batch * m * sizeof *data, err);
    in = rc == 0 ? mr_buf_data(s->data_dev) : NULL;
  }
  if (rc < 0)
    return rc;
  /* this plan only ever runs the adjoint: tune its upsampling for that (as mr-bench fhd does) */
  mr_nufft_opts no = {.rank = rank, .dims = {n[0], n[1], n[2]}, .batch = batch,
                      .tol = s->nufft_tolerance, .tune_for = MR_NUFFT_ADJOINT, .max_points = m};
  if (kp->plan == NULL || kp->dev != dev || kp->opts.rank != rank ||
      memcmp(kp->opts.dims, no.dims, sizeof no.dims) != 0 || kp->opts.batch != batch ||
      kp->opts.max_points < m) {
    plan_clear(kp);
    if ((rc = mr_nufft_plan_create(dev, &no, &kp->plan, err)) < 0)
      return rc;
    kp->dev = dev;
    kp->opts = no;
  }
  if (kp->points != s->positions) {
    kp->points = 0;
    if ((rc = mr_nufft_set_points(kp->plan, m, k, err)) < 0)
      return rc;
    kp->points = s->positions;
  }
  return mr_nufft_execute(kp->plan, MR_NUFFT_ADJOINT, in, mr_buf_data(out), err);
}

/* Q for p's trajectory on dev: the kept one, or a fresh one (a new
 * positions generation); a new shape drops the operators too. */
static int q_for(fhd_cg *s, mr_device *dev, const problem *p, mr_err *err) {
  op_cache *c = &s->cache;
  size_t kbytes = p->m * p->rank * sizeof *p->k;
  int same_shape = c->valid && c->dev == dev && c->sums == s->sums && c->rank == p->rank &&
                   c->m == p->m && memcmp(c->n, p->n, sizeof c->n) == 0;
  if (same_shape && memcmp(c->k.p, p->k, kbytes) == 0)
    return 0;
  if (!same_shape)
    cache_reset(c);
  c->valid = 0;
  s->positions++;
  size_t big[3] = {2 * p->n[0], 2 * p->n[1], p->rank == 3 ? 2 * p->n[2] : 1};
  int rc = c->q != NULL
               ? 0
               : mr_buf_create(dev, big[0] * big[1] * big[2] * sizeof(mr_cfloat), &c->q, err);
  if (rc == 0)
    rc = mr_scratch_grow(&c->k, kbytes, "Q's positions", NULL);
  if (rc == 0) {
    memcpy(c->k.p, p->k, kbytes);
    rc = adjoint_sums(s, &s->q_plan, dev, p->rank, big, p->m, p->k, 1, NULL, c->q, err);
  }
  if (rc < 0)
    return rc;
  c->valid = 1;
  c->dev = dev;
  c->sums = s->sums;
  c->rank = p->rank;
  memcpy(c->n, p->n, sizeof c->n);
  c->m = p->m;
  return 0;
}

static mr_toeplitz_opts operator_opts(const fhd_cg *s, const problem *p, size_t coils) {
  return (mr_toeplitz_opts){.rank = p->rank,
                            .n = {p->n[0], p->n[1], p->n[2]},
                            /* Q(0): F^H F's trace / N; a sparse prior is FISTA's */
                            .lambda = sparse_prior(s) ? 0 : s->lambda * (double)p->m,
                            .reg = s->regularizer == REG_DIFFERENCES ? MR_REG_FINITE_DIFFERENCE
                                                                     : MR_REG_IDENTITY,
                            .coils = coils};
}

/* The operator for p (coils 0: one coil's; else through maps for that
 * many coils), made for the shape when first needed and given the current
 * trajectory's Q when it holds an older one. */
static int operator_for(fhd_cg *s, mr_device *dev, const problem *p, size_t coils,
                        mr_toeplitz **out, mr_err *err) {
  op_cache *c = &s->cache;
  int rc = q_for(s, dev, p, err);
  if (rc < 0)
    return rc;
  mr_toeplitz **t = coils == 0 ? &c->op : &c->sense;
  unsigned *held = coils == 0 ? &c->op_q : &c->sense_q;
  if (coils > 0 && c->sense != NULL && c->sense_coils != coils) {
    mr_toeplitz_destroy(c->sense);
    c->sense = NULL;
  }
  if (*t == NULL) {
    mr_toeplitz_opts to = operator_opts(s, p, coils);
    *held = 0;
    if ((rc = mr_toeplitz_create(dev, &to, NULL, t, err)) < 0)
      return rc;
    if (coils > 0) {
      c->sense_coils = coils;
      c->sense_maps = 0;
    }
  }
  if (*held != s->positions) {
    *held = 0;
    if ((rc = mr_toeplitz_set_q(*t, mr_buf_data(c->q), err)) < 0)
      return rc;
    *held = s->positions;
  }
  *out = *t;
  return 0;
}

/* Maps from the coil images img [coils][nvox] on dev into maps (host), by
 * the gadget's estimator. */
static int estimate_maps(fhd_cg *s, mr_device *dev, const problem *p, const mr_cfloat *img,
                         mr_cfloat *maps, mr_err *err) {
  size_t bytes = p->coils * p->nvox * sizeof(mr_cfloat);
  int rc = keep_buf(&s->maps_dev, dev, bytes, err);
  mr_cfloat *m = rc == 0 ? mr_buf_data(s->maps_dev) : NULL;
  if (rc == 0 && s->estimator == ESTIMATE_LOWRES) {
    int width[3];
    for (int d = 0; d < 3; d++) /* the central quarter; one sample on an axis of one */
      width[d] = p->n[d] >= 8 ? (int)(p->n[d] / 4) : 2;
    rc = mr_coil_maps_lowres(dev, img, p->coils, p->n, width, MAP_FLOOR, m, err);
  } else if (rc == 0) {
    mr_fft_opts fo = {.rank = p->rank, .dims = {p->n[0], p->n[1], p->n[2]}, .batch = p->coils};
    mr_espirit_opts o;
    mr_espirit_opts_default(&o);
    rc = keep_buf(&s->maps_k, dev, bytes, err);
    if (rc == 0)
      rc = mr_fft_plan_keep(dev, &fo, &s->maps_fft, err);
    if (rc == 0)
      rc = mr_fft_execute(s->maps_fft, MR_FFT_FORWARD, img, mr_buf_data(s->maps_k), err);
    if (rc == 0)
      rc = mr_espirit_maps(dev, mr_buf_data(s->maps_k), p->n, p->coils, &o, m, err);
  }
  return rc == 0 ? mr_buf_download(s->maps_dev, 0, maps, bytes, err) : rc;
}

/* x = A^-1 b (`iterations` at most) for each of `count` right-hand sides
 * [count][nvox], b and x on dev: on a GPU in one batched solve (the coils'
 * solves behind maps: one loop, not one per coil). */
static int solve_all(fhd_cg *s, mr_device *dev, mr_toeplitz *op, int iterations, int warm,
                     size_t nvox, size_t count, const mr_cfloat *b, mr_cfloat *x, mr_err *err) {
  /* The Toeplitz operator is device launches alone: the GPU replays it. */
  mr_cg_opts co = {.max_iterations = iterations, .tolerance = s->tolerance, .warm_start = warm,
                   .cancel = &s->cancel, .replay = 1};
  return mr_cg_solve_batch(dev, nvox, count, mr_toeplitz_apply_batch_op, op, b, x, &co, NULL, err);
}

/* Whether this buffer estimates new maps: none yet, another shape, or
 * maps_every buffers since the last. */
static int maps_due(const fhd_cg *s, const problem *p) {
  return s->sens_gen == 0 || s->sens_coils != p->coils ||
         memcmp(s->sens_n, p->n, sizeof s->sens_n) != 0 || s->since_maps >= s->maps_every;
}

/* New maps from the coils' own solves (fhd: their F^H D on dev), into
 * s->sens (host). */
static int refresh_maps(fhd_cg *s, mr_device *dev, const problem *p, const mr_cfloat *fhd,
                        mr_err *err) {
  size_t bytes = p->coils * p->nvox * sizeof(mr_cfloat);
  if (s->sens_coils * s->sens_n[0] * s->sens_n[1] * s->sens_n[2] != p->coils * p->nvox) {
    free(s->sens);
    s->sens = malloc(bytes);
    s->sens_gen = 0;
  }
  if (s->sens == NULL) {
    s->sens_gen = 0;
    s->sens_coils = 0;
    return MR_ENOMEM;
  }
  s->sens_coils = p->coils;
  memcpy(s->sens_n, p->n, sizeof s->sens_n);
  s->sens_gen = 0; /* until estimated */
  /* tracking: the last buffer's coil images, when they are of this shape,
   * continued by maps_tracking iterations */
  int warm = s->maps_tracking > 0 && s->track_dev == dev && s->track_coils == p->coils &&
             memcmp(s->track_n, p->n, sizeof s->track_n) == 0;
  s->track_coils = 0;
  mr_toeplitz *op;
  int rc = operator_for(s, dev, p, 0, &op, err);
  if (rc == 0)
    rc = solve_all(s, dev, op, warm ? s->maps_tracking : MAP_ITERATIONS, warm, p->nvox, p->coils,
                   fhd, mr_buf_data(s->img), err);
  if (rc == 0 && s->maps_tracking > 0) {
    s->track_dev = dev;
    s->track_coils = p->coils;
    memcpy(s->track_n, p->n, sizeof s->track_n);
  }
  if (rc == 0)
    rc = estimate_maps(s, dev, p, mr_buf_data(s->img), s->sens, err);
  if (rc < 0)
    return rc;
  s->sens_gen = ++s->sens_made;
  s->since_maps = 0;
  return 0;
}

/* dev and the other GPUs a split solve runs on (taken from the pool at
 * the first, the least loaded; one may be dev itself after a fallback:
 * left out). Returns how many. */
static size_t split_devices(fhd_cg *s, struct mr_pool *pool, mr_device *dev,
                            mr_device **devs) {
  if (!s->others_taken) {
    s->others_taken = 1;
    mr_device *held[MAX_SPLIT] = {dev};
    for (size_t n = 1; n < (size_t)s->gpus; n++) {
      if (mr_pool_acquire_other(pool, held, n, &held[n], NULL) < 0)
        break; /* no more GPUs */
      s->others[s->nothers++] = held[n];
    }
  }
  size_t n = 0;
  devs[n++] = dev;
  for (size_t i = 0; i < s->nothers; i++)
    if (s->others[i] != dev)
      devs[n++] = s->others[i];
  return n;
}

/* The split SENSE operator for p on dev and the other GPUs: remade from
 * Q (through the host) for a new trajectory, given new maps when there
 * are. */
static int split_for(fhd_cg *s, mr_device *dev, const problem *p, mr_err *err) {
  int rc = q_for(s, dev, p, err);
  if (rc == 0 && (s->split == NULL || s->split_dev != dev || s->split_q != s->positions)) {
    mr_toeplitz_split_destroy(s->split);
    s->split = NULL;
    s->split_maps = 0;
    size_t qbytes = 2 * p->n[0] * 2 * p->n[1] * (p->rank == 3 ? 2 * p->n[2] : 1) *
                    sizeof(mr_cfloat);
    rc = mr_scratch_grow(&s->q_host, qbytes, "Q for the split solve", NULL);
    if (rc == 0)
      rc = mr_buf_download(s->cache.q, 0, s->q_host.p, qbytes, err);
    mr_device *devs[MAX_SPLIT];
    size_t ndev = split_devices(s, s->place.pool, dev, devs);
    mr_toeplitz_opts to = operator_opts(s, p, p->coils);
    if (rc == 0)
      rc = mr_toeplitz_split_create(devs, ndev, &to, s->q_host.p, &s->split, err);
    s->split_dev = dev;
    s->split_q = s->positions;
  }
  if (rc == 0 && s->split_maps != s->sens_gen) {
    rc = mr_toeplitz_split_set_maps(s->split, s->sens, err);
    s->split_maps = rc == 0 ? s->sens_gen : 0;
  }
  return rc;
}

/* solve_sense across GPUs. */
static int solve_sense_split(fhd_cg *s, mr_device *dev, const problem *p, const mr_cfloat *fhd,
                             mr_cfloat *out, mr_err *err) {
  size_t bytes = p->nvox * sizeof(mr_cfloat);
  int rc = split_for(s, dev, p, err);
  if (rc == 0)
    rc = keep_buf(&s->cg_b, dev, bytes, err);
  if (rc == 0)
    rc = keep_buf(&s->cg_x, dev, bytes, err);
  if (rc == 0)
    rc = mr_toeplitz_split_combine(s->split, fhd, mr_buf_data(s->cg_b), err);
  mr_cg_opts co = {.max_iterations = s->iterations, .tolerance = s->tolerance,
                   .cancel = &s->cancel};
  if (rc == 0)
    rc = mr_cg_solve_batch(dev, p->nvox, 1, mr_toeplitz_split_apply_op, s->split,
                           mr_buf_data(s->cg_b), mr_buf_data(s->cg_x), &co, NULL, err);
  if (rc == 0)
    rc = mr_buf_download(s->cg_x, 0, out, bytes, err);
  return rc;
}

/* x from b = A^H D by FISTA with the wavelet or TV prior on op's normal
 * operator (its bound by the power method, or the last frame's when it
 * had as many samples: the spokes of golden-angle frames differ in angle
 * only, and the estimate carries a 5% margin). x holds the last frame's
 * image when it has this shape: with temporal_lambda its copy is the
 * temporal term's reference, with warm_start FISTA's start (else zero). */
static int solve_sparse(fhd_cg *s, mr_device *dev, const problem *p, mr_toeplitz *op,
                        const mr_cfloat *b, mr_cfloat *x, mr_err *err) {
  mr_sparse_opts o;
  mr_sparse_opts_default(&o);
  memcpy(o.dims, p->n, sizeof o.dims);
  o.regularizer = s->regularizer == REG_TV ? MR_SPARSE_TV : MR_SPARSE_WAVELET;
  o.lambda = s->lambda;
  o.iterations = s->iterations;
  o.tolerance = s->tolerance;
  o.time = s->temporal_lambda > 0 ? MR_TV_REFERENCE : MR_TV_SPATIAL;
  o.temporal_lambda = s->temporal_lambda;
  o.warm_start = s->warm_start;
  o.tv_steps = s->tv_steps;
  int last = s->last_dev == dev && memcmp(s->last_n, p->n, sizeof s->last_n) == 0;
  s->last_dev = NULL; /* until this solve succeeds */
  int rc = mr_sparse_plan_keep(dev, &o, &s->sparse, err);
  if (rc == 0 && s->warm_start && !last)
    rc = mr_vec_zero(dev, p->nvox, x, err);
  if (rc == 0 && o.time == MR_TV_REFERENCE && last) {
    rc = keep_buf(&s->reference, dev, p->nvox * sizeof(mr_cfloat), err);
    if (rc == 0)
      rc = mr_vec_copy(dev, p->nvox, x, mr_buf_data(s->reference), err);
  }
  if (rc == 0 && o.time == MR_TV_REFERENCE)
    rc = mr_sparse_set_reference(s->sparse, last ? mr_buf_data(s->reference) : NULL, err);
  mr_sparse_report r = {0};
  float bound = last && s->last_m == p->m ? s->last_bound : 0;
  if (rc == 0)
    rc = mr_sparse_solve_normal(s->sparse, mr_toeplitz_apply_op, op, bound, b, x, &s->cancel, &r,
                                err);
  if (rc == 0) {
    s->last_dev = dev;
    memcpy(s->last_n, p->n, sizeof s->last_n);
    s->last_bound = r.bound;
    s->last_m = p->m;
  }
  return rc;
}

/* One image through the maps: b = sum_c S_c^H F^H D_c, solved, into out
 * (host). */
static int solve_sense(fhd_cg *s, mr_device *dev, const problem *p, const mr_cfloat *fhd,
                       mr_cfloat *out, mr_err *err) {
  if (s->gpus > 1 && mr_device_gpu_index(dev) >= 0)
    return solve_sense_split(s, dev, p, fhd, out, err);
  mr_toeplitz *op;
  size_t bytes = p->nvox * sizeof(mr_cfloat);
  int rc = operator_for(s, dev, p, p->coils, &op, err);
  if (rc == 0 && s->cache.sense_maps != s->sens_gen) {
    rc = mr_toeplitz_set_maps(op, s->sens, err);
    s->cache.sense_maps = rc == 0 ? s->sens_gen : 0;
  }
  if (rc == 0)
    rc = keep_buf(&s->cg_b, dev, bytes, err);
  if (rc == 0)
    rc = keep_buf(&s->cg_x, dev, bytes, err);
  if (rc == 0)
    rc = mr_toeplitz_combine(op, fhd, mr_buf_data(s->cg_b), err);
  if (rc == 0 && sparse_prior(s))
    rc = solve_sparse(s, dev, p, op, mr_buf_data(s->cg_b), mr_buf_data(s->cg_x), err);
  else if (rc == 0)
    rc = solve_all(s, dev, op, s->iterations, 0, p->nvox, 1, mr_buf_data(s->cg_b),
                   mr_buf_data(s->cg_x), err);
  if (rc == 0)
    rc = mr_buf_download(s->cg_x, 0, out, bytes, err);
  return rc;
}

/* One buffer's reconstruction, as one device task: its operations queue
 * on the worker without a hand-off each. */
static int reconstruct_task(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  fhd_cg *s = j->s;
  const problem *p = j->p;
  size_t bytes = p->coils * p->nvox * sizeof(mr_cfloat);
  int rc = q_for(s, dev, p, err);
  if (rc == 0)
    rc = keep_buf(&s->fhd, dev, bytes, err);
  if (rc == 0)
    rc = keep_buf(&s->img, dev, bytes, err);
  if (rc == 0)
    rc = adjoint_sums(s, &s->fhd_plan, dev, p->rank, p->n, p->m, p->k, p->coils, p->data, s->fhd,
                      err);
  if (rc < 0)
    return rc;
  const mr_cfloat *fhd = mr_buf_data(s->fhd);
  if (s->maps == MAPS_NONE) {
    mr_toeplitz *op;
    rc = operator_for(s, dev, p, 0, &op, err);
    if (rc == 0)
      rc =
          solve_all(s, dev, op, s->iterations, 0, p->nvox, p->coils, fhd, mr_buf_data(s->img), err);
    return rc == 0 ? mr_buf_download(s->img, 0, j->out, bytes, err) : rc;
  }
  if (s->maps_tracking > 0 || maps_due(s, p))
    rc = refresh_maps(s, dev, p, fhd, err);
  if (rc == 0)
    rc = solve_sense(s, dev, p, fhd, j->out, err);
  s->since_maps++;
  return rc;
}

static int reconstruct(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, reconstruct_task, arg, err);
}

/* Gathers the sampled lines of k into p (rank from the recon matrix); the
 * samples of a buffer whose every line was sampled are used where they
 * are (in host memory: downloaded first if they live on a device only). */
static int gather(fhd_cg *s, mr_gadget_ctx *ctx, mr_kspace *k, problem *p) {
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
  int rc = mr_positions_check(ctx, k, p->rank, 0, p->n, "recon");
  if (rc < 0)
    return rc;
  size_t lines = 0, nlines = k->ne1 * k->ne2;
  for (size_t l = 0; l < nlines; l++)
    lines += k->sampled[l] != 0;
  p->coils = k->nch;
  p->m = lines * k->nro;
  size_t per = mr_kspace_channel_size(k), row = k->nro * sizeof *p->data;
  int every_line = per == p->m;
  mr_err e = {0};
  if (mr_kspace_host(k, &e) == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", e.msg);
  int grown = mr_scratch_grow(&s->k, p->m * p->rank * sizeof *p->k, "the positions", &e);
  if (grown == 0 && !every_line)
    grown = mr_scratch_grow(&s->data, p->m * p->coils * sizeof *p->data, "the samples", &e);
  if (grown < 0)
    return mr_gadget_fail(ctx, grown, "%zu samples: %s", p->m, mr_err_text(&e, grown));
  p->k = s->k.p;
  p->data = every_line ? k->data : s->data.p;
  /* Line by line and coil by coil: whole readouts are contiguous on both
   * sides (sample by sample, the coils' strides made this a cache miss
   * per value). */
  mr_cfloat *data = s->data.p;
  size_t at = 0;
  for (size_t l = 0; l < nlines; l++) {
    if (!k->sampled[l])
      continue;
    for (size_t r = 0; r < k->nro; r++) {
      const float *t = k->traj + (l * k->nro + r) * (size_t)k->traj_dims;
      memcpy(p->k + (at + r) * p->rank, t, (size_t)p->rank * sizeof *t);
    }
    for (size_t c = 0; !every_line && c < p->coils; c++)
      memcpy(data + c * p->m + at, k->data + c * per + l * k->nro, row);
    at += k->nro;
  }
  return 0;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  fhd_cg *s = state;
  mr_kspace *k = msg->u.object.ptr;
  problem p = {0};
  mr_image_array *a = NULL;
  int rc;
  if (k->traj == NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "got Cartesian k-space (no trajectory): use fft");
    goto done;
  }
  if ((rc = gather(s, ctx, k, &p)) < 0)
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
  rc = mr_image_array_emit(a, k, ctx, out);
  a = NULL;
done:
  mr_image_array_free(a);
  return rc;
}

static void destroy(void *state) {
  fhd_cg *s = state;
  cache_clear(&s->cache);
  plan_clear(&s->q_plan);
  plan_clear(&s->fhd_plan);
  free(s->sens);
  mr_scratch_free(&s->k);
  mr_scratch_free(&s->data);
  mr_scratch_free(&s->sums_out);
  mr_buf_destroy(s->ones);
  mr_buf_destroy(s->data_dev);
  mr_buf_destroy(s->fhd);
  mr_buf_destroy(s->img);
  mr_fft_plan_destroy(s->maps_fft);
  mr_buf_destroy(s->maps_dev);
  mr_buf_destroy(s->maps_k);
  mr_buf_destroy(s->cg_b);
  mr_buf_destroy(s->cg_x);
  mr_toeplitz_split_destroy(s->split);
  mr_sparse_plan_destroy(s->sparse);
  mr_buf_destroy(s->reference);
  mr_scratch_free(&s->q_host);
  for (size_t i = 0; i < s->nothers; i++)
    mr_pool_release(s->place.pool, s->others[i]);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_fhd_cg = {
    .name = "fhd_cg",
    .summary = "non-Cartesian k-space to images: conjugate gradient on F^H F + lambda W^H W "
               "(F^H D by direct sums or NUFFT, Toeplitz Q reused per trajectory)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(fhd_cg),
    .handles = MR_HANDLES_ACCELERATION,
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
