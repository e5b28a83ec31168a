#include "sparse.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "buf.h"
#include "cg.h"
#include "error.h"
#include "fft.h"
#ifdef MR_HAVE_CUDA
#include "graph.h"
#include "prox_impl.h"
#include "wavelet_impl.h"
#endif
#include "prox.h"
#include "series.h"
#include "tv.h"
#include "vec.h"

/* FISTA iterations between two tests of the tolerance. */
#define CHECK_EVERY 10
/* The largest calibration box of the scale, per axis (BART's). */
#define CALIB_MAX 32

enum { IMG_AHB, IMG_X, IMG_PREV, IMG_Z, IMG_U, IMG_C, NIMAGES };

struct mr_sparse_plan {
  mr_device *dev;
  mr_sparse_opts opts;
  size_t n;
  mr_series *series;   /* the Cartesian operator: one frame, or a series (MR_TV_FRAMES) */
  mr_wavelet *wavelet; /* wavelet */
  mr_tv *tv;           /* tv */
  mr_buf *images;      /* NIMAGES images */
  mr_buf *calib;       /* the scale's calibration box: [coil][box] and one more box */
  size_t calib_cap;    /* samples of the largest box */
  mr_fft_plan *calib_fft; /* its inverse transform, for the box of calib_dims */
  size_t calib_dims[3];
  unsigned rng;
};

void mr_sparse_opts_default(mr_sparse_opts *o) {
  memset(o, 0, sizeof *o);
  o->regularizer = MR_SPARSE_WAVELET;
  o->lambda = 0.005;
  o->iterations = 100;
  o->filter = MR_WAVELET_DB2;
  o->tv_steps = 10;
  o->seed = 1;
}

static int check_opts(const mr_sparse_opts *o, mr_err *err) {
  if (o->regularizer != MR_SPARSE_WAVELET && o->regularizer != MR_SPARSE_TV &&
      o->regularizer != MR_SPARSE_L2)
    return mr_err_set(err, MR_EINVAL, "sparse: unknown regularizer %d", (int)o->regularizer);
  if (o->regularizer != MR_SPARSE_L2 && !(o->lambda > 0))
    return mr_err_set(err, MR_EINVAL,
                      "sparse: lambda %g: the %s regularizer needs a lambda above 0 (0 leaves the "
                      "undersampled problem unregularised)",
                      o->lambda, o->regularizer == MR_SPARSE_TV ? "tv" : "wavelet");
  if (!(o->lambda >= 0) || !isfinite(o->lambda))
    return mr_err_set(err, MR_EINVAL, "sparse: lambda %g", o->lambda);
  if (o->time != MR_TV_SPATIAL && o->time != MR_TV_FRAMES && o->time != MR_TV_REFERENCE)
    return mr_err_set(err, MR_EINVAL, "sparse: unknown temporal term %d", (int)o->time);
  if (!(o->temporal_lambda >= 0) || !isfinite(o->temporal_lambda) ||
      (o->time != MR_TV_SPATIAL && o->regularizer != MR_SPARSE_TV))
    return mr_err_set(err, MR_EINVAL,
                      "sparse: temporal_lambda %g: a temporal term needs a temporal_lambda of 0 or "
                      "more and the tv regularizer",
                      o->temporal_lambda);
  if (o->iterations < 1 || !(o->tolerance >= 0) || o->tv_steps < 1)
    return mr_err_set(err, MR_EINVAL, "sparse: %d iterations, tolerance %g, %d TV steps",
                      o->iterations, o->tolerance, o->tv_steps);
  return 0;
}

static mr_cfloat *image(const mr_sparse_plan *p, int which) {
  return (mr_cfloat *)mr_buf_data(p->images) + (size_t)which * p->n;
}

int mr_sparse_plan_create(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **out,
                          mr_err *err) {
  *out = NULL;
  int rc = check_opts(opts, err);
  if (rc < 0)
    return rc;
  mr_sparse_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "sparse: out of memory");
  p->dev = dev;
  p->opts = *opts;
  /* a series: 2D frames along dims[2], each its own operator */
  int series = opts->time == MR_TV_FRAMES;
  size_t frame[3] = {opts->dims[0], opts->dims[1], series ? 1 : opts->dims[2]};
  if (opts->ncoils > 0)
    rc = mr_series_create(dev, frame, opts->ncoils, series ? opts->dims[2] : 1, &p->series, err);
  else if (opts->dims[0] < 1 || opts->dims[1] < 1 || opts->dims[2] < 1 ||
           opts->dims[0] > SIZE_MAX / 8 / NIMAGES / opts->dims[1] / opts->dims[2])
    rc = mr_err_set(err, MR_EINVAL, "sparse: image of %zu x %zu x %zu", opts->dims[0],
                    opts->dims[1], opts->dims[2]);
  if (rc == 0) {
    p->n = opts->dims[0] * opts->dims[1] * opts->dims[2];
    rc = mr_buf_create(dev, p->n * NIMAGES * sizeof(mr_cfloat), &p->images, err);
  }
  /* a series' scale comes from its zero-filled frames: BART's box is one
   * frame's, and the series has one per frame */
  if (rc == 0 && opts->ncoils > 0 && !series) {
    p->calib_cap = 1;
    for (int d = 0; d < 3; d++)
      p->calib_cap *= opts->dims[d] < CALIB_MAX ? opts->dims[d] : CALIB_MAX;
    rc = mr_buf_create(dev, p->calib_cap * (opts->ncoils + 1) * sizeof(mr_cfloat), &p->calib, err);
  }
  if (rc == 0 && opts->regularizer == MR_SPARSE_WAVELET)
    rc = mr_wavelet_create(dev, opts->dims, opts->filter, &p->wavelet, err);
  if (rc == 0 && opts->regularizer == MR_SPARSE_TV)
    rc = mr_tv_create_time(dev, opts->dims, opts->time, &p->tv, err);
  if (rc == 0 && opts->time != MR_TV_SPATIAL)
    rc = mr_sparse_set_reference(p, NULL, err);
  if (rc < 0) {
    mr_sparse_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int mr_sparse_plan_keep(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **plan,
                        mr_err *err) {
  if (*plan != NULL && (*plan)->dev == dev && memcmp(&(*plan)->opts, opts, sizeof *opts) == 0)
    return 0;
  mr_sparse_plan_destroy(*plan);
  *plan = NULL;
  return mr_sparse_plan_create(dev, opts, plan, err);
}

/* The temporal weight relative to the spatial term's (tv.h's w): both
 * scale with lambda' alike. */
int mr_sparse_set_reference(mr_sparse_plan *p, const mr_cfloat *reference, mr_err *err) {
  if (p->opts.time == MR_TV_SPATIAL)
    return mr_err_set(err, MR_EINVAL,
                      "sparse: a reference image for a plan without a temporal term");
  int off = p->opts.time == MR_TV_REFERENCE && reference == NULL;
  float w = off ? 0 : (float)(p->opts.temporal_lambda / p->opts.lambda);
  return mr_tv_set_time(p->tv, w, reference, err);
}

void mr_sparse_plan_destroy(mr_sparse_plan *p) {
  if (p == NULL)
    return;
  mr_series_destroy(p->series);
  mr_wavelet_destroy(p->wavelet);
  mr_tv_destroy(p->tv);
  mr_buf_destroy(p->images);
  mr_buf_destroy(p->calib);
  mr_fft_plan_destroy(p->calib_fft);
  free(p);
}

/* xorshift32: the shifts, reproducible per plan seed. */
static unsigned next_random(mr_sparse_plan *p) {
  unsigned x = p->rng ? p->rng : 0x9e3779b9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return p->rng = x;
}

typedef struct solve_job {
  mr_sparse_plan *p;
  const mr_cfloat *kspace, *maps;
  const uint8_t *mask;
  mr_cg_operator normal; /* the caller's A^H A (mr_sparse_solve_normal), or NULL: SENSE */
  void *op;
  const mr_cfloat *ahb;  /* A^H b */
  float bound;           /* >= ||A^H A|| */
  mr_cfloat *image;
  const mr_cancel *cancel;
  size_t calib_at[3], calib_box[3]; /* the scale's calibration box (samples 0: none) */
  mr_sparse_report report;
} solve_job;

static int normal(solve_job *j, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  return j->normal != NULL ? j->normal(j->op, x, y, err)
                           : mr_series_normal(j->p->series, x, y, err);
}

static int l2_apply(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  solve_job *j = op;
  mr_sparse_plan *p = j->p;
  int rc = normal(j, x, y, err);
  mr_cfloat lambda = (float)p->opts.lambda;
  return rc == 0 && p->opts.lambda > 0 ? mr_vec_axpy(p->dev, p->n, lambda, x, y, err) : rc;
}

static int solve_l2(solve_job *j, mr_err *err) {
  mr_sparse_plan *p = j->p;
  /* Replayed with our SENSE operator (launches alone); a caller's normal
   * operator may wait on the host. */
  mr_cg_opts o = {.max_iterations = p->opts.iterations, .tolerance = p->opts.tolerance,
                  .replay = j->normal == NULL};
  mr_cg_report r = {0};
  int rc = mr_cg_solve(p->dev, p->n, l2_apply, j, j->ahb, j->image, &o, &r, err);
  j->report.iterations = r.iterations;
  j->report.change = r.residual;
  return rc;
}

/* The wavelet's shift for the next iteration (none for TV). */
static void draw_shift(mr_sparse_plan *p, size_t shift[3]) {
  for (int d = 0; d < 3; d++)
    shift[d] = p->wavelet != NULL && p->opts.dims[d] > 1 ? next_random(p) % p->opts.dims[d] : 0;
}

/* x = the proximal step of the regularizer at u with threshold t (the
 * wavelet shifted by shift). */
static int prox(mr_sparse_plan *p, float t, const size_t shift[3], const mr_cfloat *u, mr_cfloat *x,
                mr_err *err) {
  if (p->tv != NULL)
    return mr_tv_prox(p->tv, t, p->opts.tv_steps, u, x, err);
  mr_cfloat *c = image(p, IMG_C);
  int rc = mr_wavelet_forward(p->wavelet, shift, u, c, err);
  return rc == 0 ? mr_wavelet_adjoint_soft(p->wavelet, shift, t, c, x, err) : rc;
}

/* ||x - prev|| / ||x||, through the coefficient image (free between
 * iterations). */
static int change(mr_sparse_plan *p, double *out, mr_err *err) {
  mr_cfloat *c = image(p, IMG_C), minus_one = -1;
  double d = 0, x = 0;
  int rc = mr_vec_copy(p->dev, p->n, image(p, IMG_X), c, err);
  if (rc == 0)
    rc = mr_vec_axpy(p->dev, p->n, minus_one, image(p, IMG_PREV), c, err);
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, p->n, c, &d, err);
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, p->n, image(p, IMG_X), &x, err);
  *out = x > 0 ? sqrt(d / x) : 0;
  return rc;
}

/* u = z - step (A^H A z - A^H b): fused into SENSE's last pass, else
 * three vector steps after the caller's operator. */
static int gradient_step(solve_job *j, const mr_cfloat *z, float step, mr_cfloat *u, mr_err *err) {
  mr_sparse_plan *p = j->p;
  if (j->normal == NULL)
    return mr_series_step(p->series, z, j->ahb, step, u, err);
  mr_cfloat minus_one = -1, minus_step = -step, one = 1;
  int rc = j->normal(j->op, z, u, err);
  if (rc == 0)
    rc = mr_vec_axpy(p->dev, p->n, minus_one, j->ahb, u, err);
  if (rc == 0)
    rc = mr_vec_scale(p->dev, p->n, minus_step, u, err);
  return rc == 0 ? mr_vec_axpy(p->dev, p->n, one, z, u, err) : rc;
}

/* One iteration: gradient step, proximal step, momentum; with marks (a
 * capture), the nodes the graph's setters change (back and momentum the
 * same node where the wavelet's last launch does the momentum). */
typedef struct graph_marks {
  void *before_prox, *back, *momentum;
} graph_marks;

static int mark(mr_sparse_plan *p, graph_marks *marks, void **node, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  return marks != NULL ? mr_graph_mark(p->dev, node, err) : 0;
#else
  (void)p, (void)marks, (void)node;
  return 0;
#endif
}

static int iteration(solve_job *j, float step, float t, const size_t shift[3], float beta,
                     int check, graph_marks *marks, mr_err *err) {
  mr_sparse_plan *p = j->p;
  mr_cfloat *x = image(p, IMG_X), *prev = image(p, IMG_PREV), *z = image(p, IMG_Z),
            *u = image(p, IMG_U), *c = image(p, IMG_C);
  graph_marks unused = {0};
  graph_marks *m = marks != NULL ? marks : &unused;
  int rc = gradient_step(j, z, step, u, err);
  if (rc == 0)
    rc = mark(p, marks, &m->before_prox, err);
  if (p->wavelet != NULL && !check && mr_wavelet_momentum_fused(p->wavelet)) {
    if (rc == 0)
      rc = mr_wavelet_forward(p->wavelet, shift, u, c, err);
    if (rc == 0)
      rc = mr_wavelet_adjoint_soft_momentum(p->wavelet, shift, t, c, beta, prev, z, x, err);
    if (rc == 0)
      rc = mark(p, marks, &m->back, err);
    m->momentum = m->back;
    return rc;
  }
  if (rc == 0)
    rc = prox(p, t, shift, u, x, err);
  if (rc == 0 && p->wavelet != NULL)
    rc = mark(p, marks, &m->back, err);
  if (rc == 0 && check)
    rc = change(p, &j->report.change, err);
  if (rc == 0)
    rc = mr_prox_momentum(p->dev, p->n, beta, x, prev, z, err);
  return rc == 0 ? mark(p, marks, &m->momentum, err) : rc;
}

#ifdef MR_HAVE_CUDA
/* The replayed iteration (graph.h): captured at its first use, then
 * its shifts and beta set before each replay. */
typedef struct replay {
  mr_graph *graph;
  void *forward; /* the wavelet's first node */
  graph_marks marks;
  int failed;    /* the capture failed: every iteration queued as it is */
} replay;

/* Whether a replay can run this solve: a GPU, the Cartesian operator
 * (ours, all launches; a caller's normal operator may wait on the host)
 * and no tolerance test (it reads x and prev between the steps). */
static int replayable(const solve_job *j) {
  return mr_device_is_gpu(j->p->dev) && j->normal == NULL && !(j->p->opts.tolerance > 0);
}

static int replay_step(solve_job *j, replay *r, float step, float t, const size_t shift[3],
                       float beta, mr_err *err) {
  mr_sparse_plan *p = j->p;
  if (r->graph == NULL) {
    int rc = mr_graph_begin(p->dev, err);
    if (rc == 0)
      rc = iteration(j, step, t, shift, beta, 0, &r->marks, err);
    int ended = mr_graph_end(p->dev, rc == 0, &r->graph, err);
    if (rc == 0 && ended == 0 && p->wavelet != NULL)
      rc = mr_graph_next(r->marks.before_prox, &r->forward, err);
    if (rc != 0 || ended != 0 || r->graph == NULL) {
      mr_graph_destroy(r->graph);
      r->graph = NULL;
      r->failed = 1; /* nothing of this iteration ran: the caller queues it */
      return 1;
    }
    return mr_graph_launch(p->dev, r->graph, err);
  }
  void *exec = mr_graph_exec(r->graph);
  int rc = p->wavelet != NULL ? mr_wavelet_cuda_set_shifts(exec, r->forward, r->marks.back,
                                                           p->opts.dims, shift, beta, err)
                              : 0;
  if (rc == 0 && r->marks.momentum != r->marks.back)
    rc = mr_prox_cuda_set_beta(exec, r->marks.momentum, beta, err);
  return rc == 0 ? mr_graph_launch(p->dev, r->graph, err) : rc;
}
#endif

static int solve_fista(solve_job *j, mr_err *err) {
  mr_sparse_plan *p = j->p;
  float step = 1.0f / j->bound, t = (float)p->opts.lambda * j->report.scale * step;
  int rc;
  if (p->opts.warm_start) {
    rc = mr_vec_copy(p->dev, p->n, j->image, image(p, IMG_PREV), err);
    if (rc == 0)
      rc = mr_vec_copy(p->dev, p->n, j->image, image(p, IMG_Z), err);
  } else {
    rc = mr_vec_zero(p->dev, p->n, image(p, IMG_PREV), err);
    if (rc == 0)
      rc = mr_vec_zero(p->dev, p->n, image(p, IMG_Z), err);
  }
  if (rc == 0 && p->tv != NULL)
    rc = mr_tv_reset(p->tv, err);
  double tk = 1;
  p->rng = p->opts.seed; /* the same shifts every solve: the same data gives the same image */
#ifdef MR_HAVE_CUDA
  replay r = {.failed = !replayable(j)};
#endif
  for (int it = 0; it < p->opts.iterations && rc == 0; it++) {
    if (mr_cancel_requested(j->cancel)) {
      rc = mr_err_set(err, MR_ECANCELED, "sparse: cancelled after %d iterations", it);
      break;
    }
    size_t shift[3];
    draw_shift(p, shift);
    double next = (1 + sqrt(1 + 4 * tk * tk)) / 2, beta = (tk - 1) / next;
    tk = next;
    int check = p->opts.tolerance > 0 && (it + 1) % CHECK_EVERY == 0, replayed = 0;
#ifdef MR_HAVE_CUDA
    /* the first iteration as it is (it makes the FFT plans), the rest replayed;
     * 1: the capture failed, nothing ran */
    if (it > 0 && !r.failed) {
      rc = replay_step(j, &r, step, t, shift, (float)beta, err);
      replayed = rc == 0;
      rc = rc == 1 ? 0 : rc;
    }
#endif
    if (rc == 0 && !replayed)
      rc = iteration(j, step, t, shift, (float)beta, check, NULL, err);
    j->report.iterations = it + 1;
    if (rc == 0 && check && j->report.change <= p->opts.tolerance)
      break;
  }
#ifdef MR_HAVE_CUDA
  mr_graph_destroy(r.graph);
#endif
  return rc == 0 ? mr_vec_copy(p->dev, p->n, image(p, IMG_PREV), j->image, err) : rc;
}

/* BART's rule on the order statistics of a set of magnitudes: its 90th
 * percentile, unless the few above it reach further from it than twice its
 * distance from the median (a small bright object on a dark field), then
 * its maximum. */
static float bart_scale(float median, float p90, float peak) {
  return peak - p90 < 2 * (p90 - median) ? p90 : peak;
}

/* Whether every line of the box of half-widths h (y, z) around (ny/2,
 * nz/2) was sampled (in 2D the one partition). */
static int box_sampled(const mr_sparse_plan *p, const uint8_t *mask, const size_t h[3]) {
  const size_t *d = p->opts.dims;
  size_t z0 = d[2] == 1 ? 0 : d[2] / 2 - h[2], z1 = d[2] == 1 ? 1 : d[2] / 2 + h[2];
  for (size_t z = z0; z < z1; z++)
    for (size_t y = d[1] / 2 - h[1]; y < d[1] / 2 + h[1]; y++)
      if (!mask[z * d[1] + y])
        return 0;
  return 1;
}

/* BART's calibration box: the readout's centre (CALIB_MAX wide at most)
 * by the largest fully sampled box of lines centred at (ny/2, nz/2),
 * grown a line on each side at a time, up to CALIB_MAX. Its samples (0: no
 * calibration lines at the centre). */
static size_t calib_box(const mr_sparse_plan *p, const uint8_t *mask, size_t at[3],
                        size_t box[3]) {
  const size_t *d = p->opts.dims;
  int flat = d[2] == 1;
  size_t cap[3], half[3];
  for (int i = 0; i < 3; i++)
    cap[i] = (d[i] < CALIB_MAX ? d[i] : CALIB_MAX) / 2;
  half[0] = cap[0];
  half[1] = 1;
  half[2] = flat ? 0 : 1;
  if (cap[1] == 0 || (!flat && cap[2] == 0) || !box_sampled(p, mask, half))
    return 0;
  for (int grown = 1; grown;) {
    grown = 0;
    for (int i = 1; i <= (flat ? 1 : 2); i++) {
      size_t h[3] = {half[0], half[1], half[2]};
      if (++h[i] <= cap[i] && box_sampled(p, mask, h)) {
        half[i] = h[i];
        grown = 1;
      }
    }
  }
  box[0] = d[0] > 1 ? 2 * half[0] : 1;
  box[1] = 2 * half[1];
  box[2] = flat ? 1 : 2 * half[2];
  for (int i = 0; i < 3; i++)
    at[i] = d[i] / 2 - box[i] / 2;
  return box[0] * box[1] * box[2];
}

/* The scale as BART's pics computes it for Cartesian data: the rule over
 * the root sum of squares across the coils of the calibration box's image
 * (the box's k-space by the centred unitary inverse transform of its own
 * size), divided by sqrt(pixels / box samples). 0: no box. */
static int calib_scale(mr_device *dev, solve_job *j, float *scale, mr_err *err) {
  mr_sparse_plan *p = j->p;
  size_t zero[3] = {0, 0, 0}, nc = p->opts.ncoils,
         m = j->calib_box[0] * j->calib_box[1] * j->calib_box[2];
  *scale = 0;
  if (m == 0)
    return 0;
  mr_cfloat *k = mr_buf_data(p->calib), *power = k + m * nc;
  size_t ranks[2] = {m / 2, (size_t)(0.9 * (double)m)};
  float peak = 0, order[2] = {0, 0};
  int finite = 1;
  int rc = mr_block_copy(dev, nc, j->kspace, p->opts.dims, j->calib_at, k, j->calib_box, zero,
                         j->calib_box, err);
  if (rc == 0)
    rc = mr_fft_execute(p->calib_fft, MR_FFT_BACKWARD, k, k, err);
  if (rc == 0) /* sum_c |x_c|^2: its order statistics are the squares of the RSS's */
    rc = mr_vec_conj_mul_sum(dev, nc, m, k, k, k, power, err);
  if (rc == 0)
    rc = mr_prox_peak(dev, m, power, &peak, &finite, err);
  if (rc == 0)
    rc = mr_prox_select(dev, m, power, 2, ranks, order, err);
  if (rc == 0)
    *scale = bart_scale(sqrtf(order[0]), sqrtf(order[1]), sqrtf(peak)) /
             sqrtf((float)p->n / (float)m);
  return rc;
}

/* The scale (A^H b checked: signal, no NaN), then the solver. */
static int scale_and_solve(mr_device *dev, solve_job *j, mr_err *err) {
  int finite = 1;
  size_t n = j->p->n, ranks[2] = {n / 2, (size_t)(0.9 * (double)n)};
  float peak = 0, order[2] = {0, 0};
  int rc = mr_prox_peak(dev, n, j->ahb, &peak, &finite, err);
  if (rc == 0 && !(peak > 0 && finite))
    return mr_err_set(err, MR_EDATA, "sparse: the zero-filled image has %s (largest pixel %g)",
                      finite ? "no signal" : "NaN or infinite pixels", (double)peak);
  if (rc == 0 && j->kspace != NULL)
    rc = calib_scale(dev, j, &j->report.scale, err);
  if (rc == 0 && !(j->report.scale > 0)) { /* no calibration box, or no k-space */
    rc = mr_prox_select(dev, n, j->ahb, 2, ranks, order, err);
    j->report.scale = bart_scale(order[0], order[1], peak);
  }
  if (rc != 0)
    return rc;
  return j->p->opts.regularizer == MR_SPARSE_L2 ? solve_l2(j, err) : solve_fista(j, err);
}

static int solve_task(mr_device *dev, void *arg, mr_err *err) {
  solve_job *j = arg;
  mr_sparse_plan *p = j->p;
  size_t lines = 0;
  float kpeak = 0;
  int finite = 1;
  if (p->series == NULL)
    return mr_err_set(err, MR_EINVAL,
                      "sparse: a plan of 0 coils solves through mr_sparse_solve_normal");
  int series = p->opts.time == MR_TV_FRAMES;
  int rc = mr_series_set(p->series, j->maps, j->mask, &lines, err);
  if (rc == 0 && lines < 2)
    return mr_err_set(err, MR_EDATA, "sparse: %zu sampled line%s of %zu%s: too few to reconstruct",
                      lines, lines == 1 ? "" : "s",
                      p->opts.dims[1] * (series ? 1 : p->opts.dims[2]),
                      series ? " in a frame" : "");
  if (rc == 0)
    rc = mr_prox_peak(dev, p->n * p->opts.ncoils, j->kspace, &kpeak, &finite, err);
  if (rc == 0 && !finite)
    return mr_err_set(err, MR_EDATA, "sparse: the k-space holds NaN or infinite samples");
  if (rc == 0)
    rc = mr_series_peak(p->series, &j->bound, err);
  if (rc == 0 && !(j->bound > 0))
    return mr_err_set(err, MR_EDATA, "sparse: the coil maps are zero everywhere");
  j->report.bound = j->bound;
  j->ahb = image(p, IMG_AHB);
  if (rc == 0)
    rc = mr_series_adjoint(p->series, j->kspace, image(p, IMG_AHB), err);
  return rc != 0 ? rc : scale_and_solve(dev, j, err);
}

/* POWER_STEPS of the power method from A^H b for ||A^H A||, with a margin
 * for what they leave short of it. */
#define POWER_STEPS 20
#define POWER_MARGIN 1.05

static int power_bound(solve_job *j, float *bound, mr_err *err) {
  mr_sparse_plan *p = j->p;
  mr_cfloat *v = image(p, IMG_U), *w = image(p, IMG_C);
  double vv = 0, ww = 0;
  int rc = mr_vec_copy(p->dev, p->n, j->ahb, v, err);
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, p->n, v, &vv, err);
  double estimate = 0;
  for (int i = 0; i < POWER_STEPS && rc == 0 && vv > 0; i++) {
    rc = j->normal(j->op, v, w, err);
    if (rc == 0)
      rc = mr_vec_sumsq(p->dev, p->n, w, &ww, err);
    if (rc == 0 && !(ww > 0 && isfinite(ww)))
      return mr_err_set(err, MR_EDATA, "sparse: the normal operator gives %g for A^H b", ww);
    estimate = sqrt(ww / vv);
    mr_cfloat scale = (float)(1 / sqrt(ww));
    if (rc == 0)
      rc = mr_vec_copy(p->dev, p->n, w, v, err);
    if (rc == 0)
      rc = mr_vec_scale(p->dev, p->n, scale, v, err);
    vv = 1;
  }
  *bound = (float)(estimate * POWER_MARGIN);
  return rc;
}

static int normal_task(mr_device *dev, void *arg, mr_err *err) {
  solve_job *j = arg;
  int rc = 0;
  if (!(j->bound > 0))
    rc = power_bound(j, &j->bound, err);
  if (rc == 0 && !(j->bound > 0))
    return mr_err_set(err, MR_EDATA, "sparse: A^H b is zero: no signal to reconstruct");
  j->report.bound = j->bound;
  return rc != 0 ? rc : scale_and_solve(dev, j, err);
}

int mr_sparse_solve_normal(mr_sparse_plan *plan, mr_cg_operator normal_op, void *op, float bound,
                           const mr_cfloat *ahb, mr_cfloat *image_out, const mr_cancel *cancel,
                           mr_sparse_report *report, mr_err *err) {
  solve_job j = {.p = plan, .normal = normal_op, .op = op, .ahb = ahb, .bound = bound,
                 .image = image_out, .cancel = cancel};
  int rc = mr_device_run(plan->dev, normal_task, &j, err);
  if (report != NULL)
    *report = j.report;
  return rc;
}

/* The calibration box of the scale and its transform's plan (kept while
 * the box stays the same), made before the task. */
static int calib_plan(mr_sparse_plan *p, solve_job *j, mr_err *err) {
  if (p->calib == NULL || calib_box(p, j->mask, j->calib_at, j->calib_box) == 0)
    return 0;
  if (p->calib_fft != NULL && memcmp(p->calib_dims, j->calib_box, sizeof p->calib_dims) == 0)
    return 0;
  mr_fft_plan_destroy(p->calib_fft);
  p->calib_fft = NULL;
  memcpy(p->calib_dims, j->calib_box, sizeof p->calib_dims);
  mr_fft_opts o = {.rank = j->calib_box[2] > 1 ? 3 : 2,
                   .dims = {j->calib_box[0], j->calib_box[1], j->calib_box[2]},
                   .batch = p->opts.ncoils};
  return mr_fft_plan_create(p->dev, &o, &p->calib_fft, err);
}

int mr_sparse_solve(mr_sparse_plan *plan, const mr_cfloat *kspace, const uint8_t *mask,
                    const mr_cfloat *maps, mr_cfloat *image_out, const mr_cancel *cancel,
                    mr_sparse_report *report, mr_err *err) {
  solve_job j = {.p = plan, .kspace = kspace, .maps = maps, .mask = mask, .image = image_out,
                 .cancel = cancel};
  int rc = calib_plan(plan, &j, err);
  if (rc == 0)
    rc = mr_device_run(plan->dev, solve_task, &j, err);
  if (report != NULL)
    *report = j.report;
  return rc;
}
