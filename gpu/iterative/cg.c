/* Conjugate gradient (cg.h): Hestenes-Stiefel, with the residual updated
 * by recursion (one apply of A per iteration). This is the CPU's loop; a
 * GPU runs the same recursion with its scalars on the device
 * (cg_cuda.cu). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "buf.h"
#include "cg.h"
#include "cg_impl.h"
#include "error.h"
#include "vec.h"

typedef mr_cg_job solve_job;

int mr_cg_breakdown_fail(const char *what, double value, int iteration, double residual,
                         mr_err *err) {
  return mr_err_set(err, MR_ENUMERIC,
                    "cg: %s = %g at iteration %d (relative residual %.2g): A is not positive "
                    "definite",
                    what, value, iteration, residual);
}

/* A step broke down: 0 (stop; the answer is what the solve has) at
 * rounding level, else the error. */
static int breakdown(const solve_job *j, const char *what, double value, mr_err *err) {
  if (j->report.residual <= MR_CG_ROUNDING_RESIDUAL)
    return 0;
  return mr_cg_breakdown_fail(what, value, j->report.iterations + 1, j->report.residual, err);
}

/* With tolerance 0 every iteration runs, and past convergence float CG
 * wanders: such a solve keeps the iterate of smallest residual in x_best
 * (NULL otherwise: the answer is the last iterate, as a stopping solve's
 * must be). */
static int track_best(mr_device *dev, solve_job *j, double *best, mr_cfloat *x_best, mr_err *err) {
  if (x_best == NULL || !(j->report.residual < *best))
    return 0;
  *best = j->report.residual;
  return mr_vec_copy(dev, j->n, j->x, x_best, err);
}

static int solve(mr_device *dev, solve_job *j, mr_cfloat *r, mr_cfloat *p, mr_cfloat *ap,
                 mr_cfloat *x_best, mr_err *err) {
  size_t n = j->n;
  double bb = 0, rr = 0;
  int rc = mr_vec_sumsq(dev, n, j->b, &bb, err);
  if (rc < 0)
    return rc;
  if (j->o.warm_start) {
    rc = j->apply(j->op, 1, j->x, ap, err); /* r = b - A x */
    if (rc == 0)
      rc = mr_vec_copy(dev, n, j->b, r, err);
    if (rc == 0)
      rc = mr_vec_axpy(dev, n, -1.0f, ap, r, err);
  } else {
    rc = mr_vec_zero(dev, n, j->x, err);
    if (rc == 0)
      rc = mr_vec_copy(dev, n, j->b, r, err);
  }
  if (rc == 0)
    rc = mr_vec_copy(dev, n, r, p, err);
  if (rc == 0)
    rc = mr_vec_sumsq(dev, n, r, &rr, err);
  if (rc < 0)
    return rc;
  j->report.residual = bb > 0 ? sqrt(rr / bb) : 0;
  double best = INFINITY;
  if (!(bb > 0) || (rc = track_best(dev, j, &best, x_best, err)) < 0)
    return rc;
  while (j->report.iterations < j->o.max_iterations && j->report.residual > j->o.tolerance) {
    if (mr_cancel_requested(j->o.cancel))
      return mr_err_set(err, MR_ECANCELED, "cg: cancelled at iteration %d",
                        j->report.iterations + 1);
    mr_cfloat pap;
    if ((rc = j->apply(j->op, 1, p, ap, err)) < 0 ||
        (rc = mr_vec_dot(dev, n, p, ap, &pap, err)) < 0)
      return rc;
    float alpha = (float)(rr / crealf(pap));
    if (!(crealf(pap) > 0) || !isfinite(alpha)) {
      if ((rc = breakdown(j, "p^H A p", (double)crealf(pap), err)) < 0)
        return rc;
      break;
    }
    double rr_next;
    if ((rc = mr_vec_axpy(dev, n, alpha, p, j->x, err)) < 0 ||
        (rc = mr_vec_axpy(dev, n, -alpha, ap, r, err)) < 0 ||
        (rc = mr_vec_sumsq(dev, n, r, &rr_next, err)) < 0)
      return rc;
    if (!isfinite(rr_next)) { /* back to the last finite iterate */
      if ((rc = breakdown(j, "|r|^2", rr_next, err)) < 0 ||
          (rc = mr_vec_axpy(dev, n, -alpha, p, j->x, err)) < 0)
        return rc;
      break;
    }
    float beta = (float)(rr_next / rr); /* p = r + beta p */
    if ((rc = mr_vec_scale(dev, n, beta, p, err)) < 0 ||
        (rc = mr_vec_axpy(dev, n, 1.0f, r, p, err)) < 0)
      return rc;
    rr = rr_next;
    j->report.iterations++;
    j->report.residual = sqrt(rr / bb);
    if ((rc = track_best(dev, j, &best, x_best, err)) < 0)
      return rc;
  }
  if (x_best == NULL)
    return 0;
  j->report.residual = best;
  return mr_vec_copy(dev, n, x_best, j->x, err);
}

/* The systems one after another (the CPU). */
static int solve_each(mr_device *dev, solve_job *j, mr_err *err) {
  mr_buf *work = NULL;
  int keep_best = j->o.tolerance == 0;
  int rc = mr_buf_create(dev, (3 + (size_t)keep_best) * j->n * sizeof(mr_cfloat), &work, err);
  if (rc < 0)
    return rc;
  mr_cfloat *w = mr_buf_data(work);
  for (size_t i = 0; rc == 0 && i < j->count; i++) {
    solve_job one = *j;
    one.b += i * j->n;
    one.x += i * j->n;
    one.report = (mr_cg_report){0};
    rc = solve(dev, &one, w, w + j->n, w + 2 * j->n, keep_best ? w + 3 * j->n : NULL, err);
    if (one.report.iterations > j->report.iterations)
      j->report.iterations = one.report.iterations;
    if (i == 0 || one.report.residual > j->report.residual)
      j->report.residual = one.report.residual;
  }
  mr_buf_destroy(work);
  return rc;
}

static int solve_task(mr_device *dev, void *arg, mr_err *err) {
  solve_job *j = arg;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_cg_cuda_solve(dev, j, err);
#endif
  return solve_each(dev, j, err);
}

int mr_cg_solve_batch(mr_device *dev, size_t n, size_t count, mr_cg_batch_operator apply, void *op,
                      const mr_cfloat *b, mr_cfloat *x, const mr_cg_opts *opts,
                      mr_cg_report *report, mr_err *err) {
  if (n < 1 || count < 1 || opts->max_iterations < 1 || !(opts->tolerance >= 0))
    return mr_err_set(err, MR_EINVAL, "cg: %zu x %zu values, %d iterations, tolerance %g", count, n,
                      opts->max_iterations, opts->tolerance);
  solve_job j = {.n = n, .count = count, .apply = apply, .op = op, .b = b, .x = x, .o = *opts};
  int rc = mr_device_run(dev, solve_task, &j, err);
  if (report != NULL)
    *report = j.report;
  return rc;
}

/* One system's operator as a batch operator (count is always 1). */
typedef struct single {
  mr_cg_operator apply;
  void *op;
} single;

static int apply_single(void *arg, size_t count, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  (void)count;
  const single *s = arg;
  return s->apply(s->op, x, y, err);
}

int mr_cg_solve(mr_device *dev, size_t n, mr_cg_operator apply, void *op, const mr_cfloat *b,
                mr_cfloat *x, const mr_cg_opts *opts, mr_cg_report *report, mr_err *err) {
  single s = {apply, op};
  return mr_cg_solve_batch(dev, n, 1, apply_single, &s, b, x, opts, report, err);
}
