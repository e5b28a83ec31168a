#include "sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cg.h"
#include "error.h"
#include "fail.h"
#include "prox.h"
#include "sense.h"
#include "tv.h"
#include "vec.h"

/* FISTA iterations between two tests of the tolerance. */
#define CHECK_EVERY 10

enum { IMG_AHB, IMG_X, IMG_PREV, IMG_Z, IMG_U, IMG_C, NIMAGES };

struct mr_sparse_plan {
  mr_device *dev;
  mr_sparse_opts opts;
  size_t n;
  mr_sense *sense;
  mr_wavelet *wavelet; /* wavelet */
  mr_tv *tv;           /* tv */
  mr_buf *images;      /* NIMAGES images */
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

static int check_opts(const mr_sparse_opts *o) {
  if (o->regularizer != MR_SPARSE_WAVELET && o->regularizer != MR_SPARSE_TV &&
      o->regularizer != MR_SPARSE_L2)
    return mr_fail(MR_EINVAL, "sparse: unknown regularizer %d", (int)o->regularizer);
  if (o->regularizer != MR_SPARSE_L2 && !(o->lambda > 0))
    return mr_fail(MR_EINVAL,
                   "sparse: lambda %g: the %s regularizer needs a lambda above 0 (0 leaves the "
                   "undersampled problem unregularised)",
                   o->lambda, o->regularizer == MR_SPARSE_TV ? "tv" : "wavelet");
  if (!(o->lambda >= 0) || !isfinite(o->lambda))
    return mr_fail(MR_EINVAL, "sparse: lambda %g", o->lambda);
  if (o->iterations < 1 || !(o->tolerance >= 0) || o->tv_steps < 1)
    return mr_fail(MR_EINVAL, "sparse: %d iterations, tolerance %g, %d TV steps", o->iterations,
                   o->tolerance, o->tv_steps);
  return 0;
}

static mr_cfloat *image(const mr_sparse_plan *p, int which) {
  return (mr_cfloat *)mr_buf_data(p->images) + (size_t)which * p->n;
}

int mr_sparse_plan_create(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **out) {
  *out = NULL;
  int rc = check_opts(opts);
  if (rc < 0)
    return rc;
  mr_sparse_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_fail(MR_ENOMEM, "sparse: out of memory");
  p->dev = dev;
  p->opts = *opts;
  rc = mr_sense_create(dev, opts->dims, opts->ncoils, &p->sense);
  if (rc == 0) {
    p->n = opts->dims[0] * opts->dims[1] * opts->dims[2];
    rc = mr_buf_create(dev, p->n * NIMAGES * sizeof(mr_cfloat), &p->images);
  }
  if (rc == 0 && opts->regularizer == MR_SPARSE_WAVELET)
    rc = mr_wavelet_create(dev, opts->dims, opts->filter, &p->wavelet);
  if (rc == 0 && opts->regularizer == MR_SPARSE_TV)
    rc = mr_tv_create(dev, opts->dims, &p->tv);
  if (rc < 0) {
    mr_sparse_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int mr_sparse_plan_keep(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **plan) {
  if (*plan != NULL && (*plan)->dev == dev && memcmp(&(*plan)->opts, opts, sizeof *opts) == 0)
    return 0;
  mr_sparse_plan_destroy(*plan);
  *plan = NULL;
  return mr_sparse_plan_create(dev, opts, plan);
}

void mr_sparse_plan_destroy(mr_sparse_plan *p) {
  if (p == NULL)
    return;
  mr_sense_destroy(p->sense);
  mr_wavelet_destroy(p->wavelet);
  mr_tv_destroy(p->tv);
  mr_buf_destroy(p->images);
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
  mr_cfloat *image;
  const atomic_int *cancel;
  mr_sparse_report report;
} solve_job;

static int l2_apply(void *op, const mr_cfloat *x, mr_cfloat *y) {
  mr_sparse_plan *p = op;
  int rc = mr_sense_normal(p->sense, x, y);
  mr_cfloat lambda = (float)p->opts.lambda;
  return rc == 0 && p->opts.lambda > 0 ? mr_vec_axpy(p->dev, p->n, lambda, x, y) : rc;
}

static int solve_l2(solve_job *j) {
  mr_sparse_plan *p = j->p;
  mr_cg_opts o = {.max_iterations = p->opts.iterations, .tolerance = p->opts.tolerance};
  mr_cg_report r = {0};
  int rc = mr_cg_solve(p->dev, p->n, l2_apply, p, image(p, IMG_AHB), j->image, &o, &r);
  j->report.iterations = r.iterations;
  j->report.change = r.residual;
  return rc;
}

/* x = the proximal step of the regularizer at u with threshold t. */
static int prox(mr_sparse_plan *p, float t, const mr_cfloat *u, mr_cfloat *x) {
  if (p->tv != NULL)
    return mr_tv_prox(p->tv, t, p->opts.tv_steps, u, x);
  size_t shift[3], keep[3];
  for (int d = 0; d < 3; d++)
    shift[d] = p->opts.dims[d] > 1 ? next_random(p) % p->opts.dims[d] : 0;
  mr_wavelet_coarse(p->wavelet, keep);
  mr_cfloat *c = image(p, IMG_C);
  int rc = mr_wavelet_forward(p->wavelet, shift, u, c);
  if (rc == 0)
    rc = mr_prox_soft(p->dev, p->opts.dims, keep, t, c);
  return rc == 0 ? mr_wavelet_adjoint(p->wavelet, shift, c, x) : rc;
}

/* ||x - prev|| / ||x||, through the coefficient image (free between
 * iterations). */
static int change(mr_sparse_plan *p, double *out) {
  mr_cfloat *c = image(p, IMG_C), minus_one = -1;
  double d = 0, x = 0;
  int rc = mr_vec_copy(p->dev, p->n, image(p, IMG_X), c);
  if (rc == 0)
    rc = mr_vec_axpy(p->dev, p->n, minus_one, image(p, IMG_PREV), c);
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, p->n, c, &d);
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, p->n, image(p, IMG_X), &x);
  *out = x > 0 ? sqrt(d / x) : 0;
  return rc;
}

static int solve_fista(solve_job *j, float lipschitz) {
  mr_sparse_plan *p = j->p;
  float step = 1.0f / lipschitz, t = (float)p->opts.lambda * j->report.scale * step;
  mr_cfloat *x = image(p, IMG_X), *prev = image(p, IMG_PREV), *z = image(p, IMG_Z),
            *u = image(p, IMG_U);
  int rc = mr_vec_zero(p->dev, p->n, prev);
  if (rc == 0)
    rc = mr_vec_zero(p->dev, p->n, z);
  if (rc == 0 && p->tv != NULL)
    rc = mr_tv_reset(p->tv);
  double tk = 1;
  p->rng = p->opts.seed; /* the same shifts every solve: the same data gives the same image */
  for (int it = 0; it < p->opts.iterations && rc == 0; it++) {
    if (j->cancel != NULL && atomic_load(j->cancel))
      return mr_fail(MR_ECANCELED, "sparse: cancelled after %d iterations", it);
    rc = mr_sense_step(p->sense, z, image(p, IMG_AHB), step, u);
    if (rc == 0)
      rc = prox(p, t, u, x);
    double next = (1 + sqrt(1 + 4 * tk * tk)) / 2, beta = (tk - 1) / next;
    tk = next;
    int stop = 0;
    if (rc == 0 && p->opts.tolerance > 0 && (it + 1) % CHECK_EVERY == 0) {
      rc = change(p, &j->report.change);
      stop = j->report.change <= p->opts.tolerance;
    }
    if (rc == 0)
      rc = mr_prox_momentum(p->dev, p->n, (float)beta, x, prev, z);
    j->report.iterations = it + 1;
    if (stop)
      break;
  }
  return rc == 0 ? mr_vec_copy(p->dev, p->n, prev, j->image) : rc;
}

static int solve_task(mr_device *dev, void *arg) {
  solve_job *j = arg;
  mr_sparse_plan *p = j->p;
  size_t lines = 0;
  float kpeak = 0, lipschitz = 0;
  int finite = 1;
  int rc = mr_sense_set(p->sense, j->maps, j->mask, &lines);
  if (rc == 0 && lines < 2)
    return mr_fail(MR_EDATA, "sparse: %zu sampled line%s of %zu: too few to reconstruct", lines,
                   lines == 1 ? "" : "s", p->opts.dims[1] * p->opts.dims[2]);
  if (rc == 0)
    rc = mr_prox_peak(dev, p->n * p->opts.ncoils, j->kspace, &kpeak, &finite);
  if (rc == 0 && !finite)
    return mr_fail(MR_EDATA, "sparse: the k-space holds NaN or infinite samples");
  if (rc == 0)
    rc = mr_sense_peak(p->sense, &lipschitz);
  if (rc == 0 && !(lipschitz > 0))
    return mr_fail(MR_EDATA, "sparse: the coil maps are zero everywhere");
  if (rc == 0)
    rc = mr_sense_adjoint(p->sense, j->kspace, image(p, IMG_AHB));
  if (rc == 0)
    rc = mr_prox_peak(dev, p->n, image(p, IMG_AHB), &j->report.scale, &finite);
  if (rc == 0 && !(j->report.scale > 0 && finite))
    return mr_fail(MR_EDATA, "sparse: the zero-filled image has no signal (largest pixel %g)",
                   (double)j->report.scale);
  if (rc != 0)
    return rc;
  return p->opts.regularizer == MR_SPARSE_L2 ? solve_l2(j) : solve_fista(j, lipschitz);
}

int mr_sparse_solve(mr_sparse_plan *plan, const mr_cfloat *kspace, const uint8_t *mask,
                    const mr_cfloat *maps, mr_cfloat *image_out, const atomic_int *cancel,
                    mr_sparse_report *report) {
  solve_job j = {.p = plan, .kspace = kspace, .maps = maps, .mask = mask, .image = image_out,
                 .cancel = cancel};
  int rc = mr_device_run(plan->dev, solve_task, &j);
  if (report != NULL)
    *report = j.report;
  return rc;
}
