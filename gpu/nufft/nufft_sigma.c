/* The automatic grid oversampling of a GPU NUFFT plan: measured, once per
 * shape and device, and remembered for the life of the process.
 *
 * Which upsampling is faster depends on the sample density, the
 * tolerance and the type, not on the rank alone: 1.25 makes a smaller FFT
 * and a wider kernel, 2 the reverse (3D 128^3 with 284,592 points at 1e-4:
 * type 1 took 1.051 ms at 1.25 and 0.978 ms at 2, while type 2 was twice
 * as fast at 1.25), and the least upsampling that keeps 2's width
 * (nufft.c) often beats both for type 1 (0.82 ms there). So the creation
 * of an automatic GPU plan whose shape (device, rank, dims, batch, tol,
 * tune_for, max_points within a factor of two) has not been seen times
 * one type 1 and one type 2 transform (only the type opts.tune_for names,
 * if it names one) at each upsampling that meets the tolerance, on
 * uniformly spread points (max_points of them, else one per pixel up to
 * 4M: the density decides between a larger grid and a wider kernel, the
 * trajectory's shape much less, and a plan has no points yet), and keeps
 * the faster sum; the rule's choice (below) unless the other is faster by
 * more than 5%, so that near-ties, which timing noise would decide, give
 * the same plan every time (the results of the two differ within the
 * tolerance; Pipe-Menon's weights, which follow the kernel, differ more).
 * It costs up to three throw-away plans, their cuFFT plans and a few
 * transforms once per shape (on the H100, 90-175 ms for the first plan of
 * 256^2 x 8 or 128^3 in a process, most of it making the cuFFT plans of
 * the grid sizes; 15-50 ms for another tolerance, some of whose grids'
 * plans are made; the chosen one stays in the device's plan cache); every
 * later plan of that shape takes the remembered choice (4-9 ms to make)
 * and never measures (the server's warm start makes the plans of its
 * recorded sessions' shapes before it is ready). Plans of a shape made
 * while another thread measures it take the rule's choice and neither
 * wait nor measure: 64 3D CG-SENSE scans starting at once on a GPU that
 * had not seen their shape all measured it, each with its throw-away
 * plans (a sixth of the server's CPU samples; issue 25), and a plan made
 * inside a device task must not wait for another thread's, which may
 * need that task's lane. An explicit upsampling
 * skips all this. The CPU keeps the rule the H100 measurements gave
 * before (2 in 2D, 1.25 in 3D) without measuring: its transforms take too
 * long to time at plan creation. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "error.h"
#include "nufft_impl.h"
#include "vec.h"

/* Another upsampling than the rule's must be this much faster to be taken. */
#define MARGIN 0.05

/* Most points a measurement without max_points times on. */
#define MAX_TRIAL_POINTS ((size_t)1 << 22)

/* Shapes remembered; past this the oldest is forgotten. */
#define REMEMBERED 64

typedef struct choice {
  int ordinal, rank, tune_for, points;
  size_t dims[3], batch;
  double tol, upsampling;
} choice;

/* The class of a plan's max_points, for the memory of choices: its bit
 * length (0 for 0). Counts within a factor of two share a choice: the
 * density decides it, not the exact count (the bench's 3D trajectories
 * have 282,624-284,592 points). */
static int points_class(size_t n) {
  int bits = 0;
  for (; n > 0; n >>= 1)
    bits++;
  return bits;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static choice choices[REMEMBERED];
static size_t nchoices; /* ever stored; slot nchoices % REMEMBERED is next */
/* The shapes being measured now (their upsampling unset). */
static choice measuring[REMEMBERED];
static int nmeasuring;
static int measurements; /* begun, ever */

/* Whether a and b are the same shape (their upsampling aside). */
static int same_shape(const choice *a, const choice *b) {
  if (a->ordinal != b->ordinal || a->rank != b->rank || a->batch != b->batch || a->tol != b->tol ||
      a->tune_for != b->tune_for || a->points != b->points)
    return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return 0;
  return 1;
}

double mr_nufft_sigma_rule(int rank) { return rank == 3 ? 1.25 : 2.0; }

static choice shape_of(mr_device *dev, const mr_nufft_opts *o) {
  choice c = {.ordinal = mr_device_ordinal(dev), .rank = o->rank, .tune_for = o->tune_for,
              .points = points_class(o->max_points), .batch = o->batch, .tol = o->tol};
  memcpy(c.dims, o->dims, sizeof c.dims);
  return c;
}

/* What a plan of a shape does: measure it, take the remembered choice, or
 * take the rule's while another thread measures. */
enum { MEASURE, REMEMBERED_CHOICE, BEING_MEASURED };

/* What to do for shape c (under the lock): a remembered choice goes into
 * *upsampling; a shape not being measured is marked as being measured by
 * the caller (when the marks have room). */
static int look_up(const choice *c, double *upsampling) {
  size_t n = nchoices < REMEMBERED ? nchoices : REMEMBERED;
  for (size_t i = 0; i < n; i++)
    if (same_shape(&choices[i], c)) {
      *upsampling = choices[i].upsampling;
      return REMEMBERED_CHOICE;
    }
  for (int i = 0; i < nmeasuring; i++)
    if (same_shape(&measuring[i], c))
      return BEING_MEASURED;
  if (nmeasuring < REMEMBERED)
    measuring[nmeasuring++] = *c;
  measurements++;
  return MEASURE;
}

/* Ends the caller's measurement of shape c: remembered when it succeeded
 * (c.upsampling then set). */
static void measured(const choice *c, int ok) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nmeasuring; i++)
    if (same_shape(&measuring[i], c)) {
      measuring[i] = measuring[--nmeasuring];
      break;
    }
  if (ok)
    choices[nchoices++ % REMEMBERED] = *c;
  pthread_mutex_unlock(&lock);
}

/* One timed transform. */
typedef struct trial {
  mr_nufft_plan *plan;
  mr_nufft_direction dir;
  mr_cfloat *in, *out;
} trial;

static int trial_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  trial *t = arg;
  return mr_nufft_execute(t->plan, t->dir, t->in, t->out, err);
}

/* Milliseconds of one type 1 plus one type 2 transform (or of the type
 * o->tune_for alone) at upsampling sigma on the n points k (host memory;
 * the fastest of a few runs each). */
static int time_upsampling(mr_device *dev, const mr_nufft_opts *o, double sigma, size_t n,
                           const float *k, double *ms, mr_err *err) {
  enum { WARMUP = 1, REPS = 3 };
  mr_nufft_opts at = *o;
  at.upsampling = sigma;
  at.max_points = n;
  mr_nufft_plan *plan = NULL;
  mr_buf *samples = NULL, *image = NULL;
  size_t pixels = o->dims[0] * o->dims[1] * (o->rank == 3 ? o->dims[2] : 1);
  size_t nsamples = n * o->batch, nimage = pixels * o->batch;
  int rc = mr_nufft_plan_create(dev, &at, &plan, err);
  if (rc == 0)
    rc = mr_nufft_set_points(plan, n, k, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nsamples * sizeof(mr_cfloat), &samples, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nimage * sizeof(mr_cfloat), &image, err);
  /* Samples of 1, not 0: data, not silence, as the transforms will see
   * (the spreading scales each coil by its largest sample; a silent coil
   * is a degenerate case). */
  mr_cfloat *ones = rc == 0 ? malloc(nsamples * sizeof *ones) : NULL;
  if (rc == 0 && ones == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "nufft: out of memory");
  for (size_t i = 0; rc == 0 && i < nsamples; i++)
    ones[i] = 1;
  if (rc == 0)
    rc = mr_buf_upload(samples, 0, ones, nsamples * sizeof *ones, err);
  free(ones);
  if (rc == 0)
    rc = mr_vec_zero(dev, nimage, mr_buf_data(image), err);
  *ms = 0;
  for (int d = 0; rc == 0 && d < 2; d++) {
    trial t = {.plan = plan, .dir = d == 0 ? MR_NUFFT_ADJOINT : MR_NUFFT_FORWARD};
    if (o->tune_for != 0 && o->tune_for != (int)t.dir)
      continue;
    t.in = mr_buf_data(d == 0 ? samples : image);
    t.out = mr_buf_data(d == 0 ? image : samples);
    double runs[REPS];
    rc = mr_device_time(dev, trial_task, &t, WARMUP, REPS, runs, err);
    double best = runs[0];
    for (int r = 1; rc == 0 && r < REPS; r++)
      best = runs[r] < best ? runs[r] : best;
    if (rc == 0)
      *ms += best;
  }
  mr_buf_destroy(samples);
  mr_buf_destroy(image);
  mr_nufft_plan_destroy(plan);
  return rc;
}

/* Times the candidates on uniformly spread points; the faster into
 * *upsampling (the rule's unless another is faster by MARGIN). */
static int measure(mr_device *dev, const mr_nufft_opts *o, const double *candidates,
                   int ncandidates, double *upsampling, mr_err *err) {
  size_t n = o->max_points;
  if (n == 0) { /* one per pixel, up to a bound on the trial's memory and time */
    n = o->dims[0] * o->dims[1] * (o->rank == 3 ? o->dims[2] : 1);
    n = n < MAX_TRIAL_POINTS ? n : MAX_TRIAL_POINTS;
  }
  float *k = malloc(n * (size_t)o->rank * sizeof *k);
  if (k == NULL)
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory for %zu trial points", n);
  uint64_t state = 12345;
  for (size_t i = 0; i < n * (size_t)o->rank; i++) { /* uniform in [-0.5, 0.5) */
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    k[i] = (float)((double)(state >> 40) / (double)(1ull << 24) - 0.5);
  }
  double best_ms = INFINITY, rule_ms = INFINITY, rule = mr_nufft_sigma_rule(o->rank);
  for (int i = 0; i < ncandidates; i++) {
    double ms;
    int rc = time_upsampling(dev, o, candidates[i], n, k, &ms, err);
    if (rc < 0) {
      free(k);
      return rc;
    }
    if (ms < best_ms) {
      best_ms = ms;
      *upsampling = candidates[i];
    }
    if (candidates[i] == rule)
      rule_ms = ms;
  }
  free(k);
  if (best_ms > (1 - MARGIN) * rule_ms)
    *upsampling = rule;
  return 0;
}

int mr_nufft_sigma_measurements(void) {
  pthread_mutex_lock(&lock);
  int n = measurements;
  pthread_mutex_unlock(&lock);
  return n;
}

int mr_nufft_sigma_choose(mr_device *dev, const mr_nufft_opts *o, const double *candidates,
                          int ncandidates, double *upsampling, mr_err *err) {
  choice c = shape_of(dev, o);
  pthread_mutex_lock(&lock);
  int what = look_up(&c, upsampling);
  pthread_mutex_unlock(&lock);
  if (what != MEASURE)
    return 0;
  double chosen = *upsampling;
  int rc = measure(dev, o, candidates, ncandidates, &chosen, err);
  c.upsampling = chosen;
  measured(&c, rc == 0);
  if (rc == 0)
    *upsampling = chosen;
  return rc;
}
