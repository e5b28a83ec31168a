/* Conjugate gradient (cg.h): Hestenes-Stiefel, with the residual updated
 * by recursion (one apply of A per iteration). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "buf.h"
#include "cg.h"
#include "error.h"
#include "fail.h"
#include "vec.h"

typedef struct solve_job {
  size_t n;
  mr_cg_operator apply;
  void *op;
  const mr_cfloat *b;
  mr_cfloat *x;
  mr_cg_opts o;
  mr_cg_report report;
} solve_job;

/* Below this relative residual a float solve has nothing left to gain: a
 * p^H A p that comes out non-positive or non-finite there is rounding noise
 * (A's rounding-level eigenvalues, or p underflowing), not an indefinite A. */
#define ROUNDING_RESIDUAL 1e-5

/* Keeps x in x_best when its residual is the smallest so far. */
static int track_best(mr_device *dev, solve_job *j, double *best, mr_cfloat *x_best) {
  if (!(j->report.residual < *best))
    return 0;
  *best = j->report.residual;
  return mr_vec_copy(dev, j->n, j->x, x_best);
}

static int solve(mr_device *dev, solve_job *j, mr_cfloat *r, mr_cfloat *p, mr_cfloat *ap,
                 mr_cfloat *x_best) {
  size_t n = j->n;
  double bb, rr;
  int rc = mr_vec_sumsq(dev, n, j->b, &bb);
  if (rc < 0)
    return rc;
  if (j->o.warm_start) {
    rc = j->apply(j->op, j->x, ap); /* r = b - A x */
    if (rc == 0)
      rc = mr_vec_copy(dev, n, j->b, r);
    if (rc == 0)
      rc = mr_vec_axpy(dev, n, -1.0f, ap, r);
  } else {
    rc = mr_vec_zero(dev, n, j->x);
    if (rc == 0)
      rc = mr_vec_copy(dev, n, j->b, r);
  }
  if (rc == 0)
    rc = mr_vec_copy(dev, n, r, p);
  if (rc == 0)
    rc = mr_vec_sumsq(dev, n, r, &rr);
  if (rc < 0)
    return rc;
  j->report.residual = bb > 0 ? sqrt(rr / bb) : 0;
  if (!(bb > 0))
    return 0;
  double best = INFINITY;
  if ((rc = track_best(dev, j, &best, x_best)) < 0)
    return rc;
  while (j->report.iterations < j->o.max_iterations && j->report.residual > j->o.tolerance) {
    mr_cfloat pap;
    if ((rc = j->apply(j->op, p, ap)) < 0 || (rc = mr_vec_dot(dev, n, p, ap, &pap)) < 0)
      return rc;
    if (!(crealf(pap) > 0) || !isfinite(crealf(pap))) {
      if (best <= ROUNDING_RESIDUAL)
        break;
      return mr_fail(MR_ENUMERIC,
                     "cg: p^H A p = %g at iteration %d (relative residual %.2g): A is not "
                     "positive definite",
                     (double)crealf(pap), j->report.iterations + 1, best);
    }
    float alpha = (float)(rr / crealf(pap));
    double rr_next;
    if ((rc = mr_vec_axpy(dev, n, alpha, p, j->x)) < 0 ||
        (rc = mr_vec_axpy(dev, n, -alpha, ap, r)) < 0 ||
        (rc = mr_vec_sumsq(dev, n, r, &rr_next)) < 0)
      return rc;
    j->report.iterations++;
    if (!isfinite(rr_next)) {
      if (best <= ROUNDING_RESIDUAL)
        break;
      return mr_fail(MR_ENUMERIC, "cg: the residual is not finite at iteration %d",
                     j->report.iterations);
    }
    float beta = (float)(rr_next / rr); /* p = r + beta p */
    if ((rc = mr_vec_scale(dev, n, beta, p)) < 0 || (rc = mr_vec_axpy(dev, n, 1.0f, r, p)) < 0)
      return rc;
    rr = rr_next;
    j->report.residual = sqrt(rr / bb);
    if ((rc = track_best(dev, j, &best, x_best)) < 0)
      return rc;
  }
  /* The answer is the iterate with the smallest residual (x itself may have
   * taken a non-finite step since). */
  j->report.residual = best;
  return mr_vec_copy(dev, n, x_best, j->x);
}

static int solve_task(mr_device *dev, void *arg) {
  solve_job *j = arg;
  mr_buf *work = NULL;
  int rc = mr_buf_create(dev, 4 * j->n * sizeof(mr_cfloat), &work);
  if (rc < 0)
    return rc;
  mr_cfloat *w = mr_buf_data(work);
  rc = solve(dev, j, w, w + j->n, w + 2 * j->n, w + 3 * j->n);
  mr_buf_destroy(work);
  return rc;
}

int mr_cg_solve(mr_device *dev, size_t n, mr_cg_operator apply, void *op, const mr_cfloat *b,
                mr_cfloat *x, const mr_cg_opts *opts, mr_cg_report *report) {
  if (n < 1 || opts->max_iterations < 1 || !(opts->tolerance >= 0))
    return mr_fail(MR_EINVAL, "cg: %zu values, %d iterations, tolerance %g", n,
                   opts->max_iterations, opts->tolerance);
  solve_job j = {.n = n, .apply = apply, .op = op, .b = b, .x = x, .o = *opts};
  int rc = mr_device_run(dev, solve_task, &j);
  if (report != NULL)
    *report = j.report;
  return rc;
}
