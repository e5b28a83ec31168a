#include <complex.h>
#include <lapacke.h>
#include <pthread.h>

#include "device_impl.h"
#include "error.h"
#include "solve_impl.h"

/* The items of a batch on the device's threads (LAPACK runs each in its
 * caller's thread: gpu/core/cpu_threads.c); the first failing item's
 * LAPACK info is kept for the calling thread to report in its err). */
typedef struct solve_job {
  mr_cmat a, b;
  float lambda;
  float *w;
  int failed_item; /* batch when none */
  lapack_int info;
  pthread_mutex_t lock;
} solve_job;

static void note_failure(solve_job *j, int item, lapack_int info) {
  pthread_mutex_lock(&j->lock);
  if (item < j->failed_item) {
    j->failed_item = item;
    j->info = info;
  }
  pthread_mutex_unlock(&j->lock);
}

static void hpd_items(void *arg, size_t begin, size_t end) {
  solve_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    lapack_complex_float *ai = (lapack_complex_float *)(j->a.data + i * j->a.stride);
    lapack_complex_float *bi = (lapack_complex_float *)(j->b.data + i * j->b.stride);
    for (int d = 0; d < j->a.rows; d++)
      ai[(size_t)d * j->a.ld + d] += j->lambda;
    lapack_int info = LAPACKE_cpotrf(LAPACK_COL_MAJOR, 'L', j->a.rows, ai, j->a.ld);
    if (info == 0)
      info = LAPACKE_cpotrs(LAPACK_COL_MAJOR, 'L', j->a.rows, j->b.cols, ai, j->a.ld, bi,
                            j->b.ld);
    if (info != 0)
      note_failure(j, (int)i, info);
  }
}

static void eigh_items(void *arg, size_t begin, size_t end) {
  solve_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    lapack_complex_float *ai = (lapack_complex_float *)(j->a.data + i * j->a.stride);
    lapack_int info = LAPACKE_cheevd(LAPACK_COL_MAJOR, 'V', 'L', j->a.rows, ai, j->a.ld,
                                     j->w + i * (size_t)j->a.rows);
    if (info != 0)
      note_failure(j, (int)i, info);
  }
}

/* Runs fn over the batch; the first failure as an error. */
static int run_items(mr_device *dev, mr_range_fn fn, solve_job *j, int batch, const char *what,
                     mr_err *err) {
  j->failed_item = batch;
  pthread_mutex_init(&j->lock, NULL);
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)batch, 1, fn, j);
  pthread_mutex_destroy(&j->lock);
  if (j->failed_item == batch)
    return 0;
  if (j->info < 0)
    return mr_err_set(err, MR_EINVAL, "%s: LAPACK rejected argument %d", what, (int)-j->info);
  return mr_err_set(err, MR_ENUMERIC,
                    fn == hpd_items ? "%s: item %d is not positive definite (column %d)"
                                    : "%s: item %d did not converge (%d)",
                    what, j->failed_item, (int)j->info);
}

int mr_solve_cpu_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err) {
  solve_job j = {.a = a, .b = b, .lambda = lambda};
  return run_items(dev, hpd_items, &j, batch, "solve", err);
}

int mr_solve_cpu_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err) {
  solve_job j = {.a = a, .w = w};
  return run_items(dev, eigh_items, &j, batch, "eigh", err);
}
