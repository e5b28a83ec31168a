/* mr-bench fhd: the direct F^H D and Q sums (gpu/iterative/fhd.h) and the CG solve
 * (gpu/iterative/toeplitz.h, gpu/iterative/cg.h) at the sizes of the sources: Parboil mri-q
 * (32^3 voxels x 3,072 samples; 64^3 x 2,048) and Kirk & Hwu's problem
 * (128^3 voxels x 284,592 samples), GPU and CPU in the same run.
 *
 * Trajectories are 3D radial (kooshball spokes of 128 samples, the last
 * one cut short); data are random. A rate is sample-voxel pairs per second
 * (one coil). Every GPU row carries its relative error against the CPU in
 * double precision, at 2,048 voxels spread over the image (the whole
 * double-precision sum at 128^3 would take the CPU minutes). The book's
 * kernels run on the Parboil sizes; on the book's problem only the last of
 * them (hardware sin/cos) and the two past it. The CPU sums the book's
 * problem over a 1/64 sample subset and reports the rate (the full time
 * follows from it). The same sums through the NUFFT (gpu/nufft/nufft.h) are
 * timed as its own benchmark times it: execute on device-resident data,
 * plan and point setup apart. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cg.h"
#include "fhd.h"
#include "nufft.h"
#include "test_err.h"
#include "toeplitz.h"

#define REPS 5
#define CHECK_VOXELS 2048

typedef struct problem {
  const char *name;
  size_t n; /* cube side */
  size_t m; /* samples */
  int big;  /* the book's problem: only the fast kernels */
} problem;

typedef struct data {
  size_t n, nvox, m;
  float *k;            /* [m][3] */
  mr_cfloat *d;        /* [m] */
  size_t check[CHECK_VOXELS];
  float check_x[CHECK_VOXELS][3];
  mr_cfloat want[CHECK_VOXELS]; /* CPU double at the check voxels */
} data;

static uint64_t rng = 12345;
static double uniform(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (rng >> 11) * (1.0 / 9007199254740992.0);
}

static void kooshball(size_t m, float *k) {
  const size_t per = 128;
  size_t spokes = (m + per - 1) / per;
  for (size_t i = 0; i < m; i++) {
    size_t s = i / per;
    double zc = 1 - (s + 0.5) / (double)spokes, r = sqrt(1 - zc * zc);
    double a = M_PI * (3 - sqrt(5.0)) * (double)s, t = ((double)(i % per) - per / 2) / per;
    k[3 * i] = (float)(t * r * cos(a));
    k[3 * i + 1] = (float)(t * r * sin(a));
    k[3 * i + 2] = (float)(t * zc);
  }
}

static int make_data(mr_device *cpu, const problem *p, data *d) {
  d->n = p->n;
  d->nvox = p->n * p->n * p->n;
  d->m = p->m;
  d->k = malloc(d->m * 3 * sizeof *d->k);
  d->d = malloc(d->m * sizeof *d->d);
  if (d->k == NULL || d->d == NULL)
    return MR_ENOMEM;
  kooshball(d->m, d->k);
  for (size_t i = 0; i < d->m; i++)
    d->d[i] = (float)(2 * uniform() - 1) + I * (float)(2 * uniform() - 1);
  size_t nc = d->nvox < CHECK_VOXELS ? d->nvox : CHECK_VOXELS;
  for (size_t c = 0; c < nc; c++) {
    size_t v = (size_t)(uniform() * (double)d->nvox);
    d->check[c] = v;
    d->check_x[c][0] = (float)((long)(v % p->n) - (long)(p->n / 2));
    d->check_x[c][1] = (float)((long)(v / p->n % p->n) - (long)(p->n / 2));
    d->check_x[c][2] = (float)((long)(v / p->n / p->n) - (long)(p->n / 2));
  }
  mr_fhd_opts o = {.rank = 3, .grid = {p->n, p->n, p->n}, .batch = 1,
                   .precision = MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  int rc = mr_fhd_plan_create(cpu, &o, &plan, TERR);
  if (rc == 0)
    rc = mr_fhd_set_voxels(plan, nc, &d->check_x[0][0], TERR);
  if (rc == 0)
    rc = mr_fhd_set_points(plan, d->m, d->k, TERR);
  if (rc == 0)
    rc = mr_fhd_adjoint(plan, d->d, NULL, d->want, TERR);
  mr_fhd_plan_destroy(plan);
  return rc;
}

static void free_data(data *d) {
  free(d->k);
  free(d->d);
}

/* Relative error of a grid result against the CPU's double-precision sums
 * at the check voxels. */
static double check_error(const data *d, const mr_cfloat *out) {
  double num = 0, den = 0;
  size_t nc = d->nvox < CHECK_VOXELS ? d->nvox : CHECK_VOXELS;
  for (size_t c = 0; c < nc; c++) {
    num += pow(cabs((double complex)out[d->check[c]] - d->want[c]), 2);
    den += pow(cabs((double complex)d->want[c]), 2);
  }
  return sqrt(num / den);
}

/* ---- timing ------------------------------------------------------------ */

typedef struct adjoint_run {
  mr_fhd_plan *plan;
  const mr_cfloat *d;
  mr_cfloat *out;
} adjoint_run;

static int adjoint_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  adjoint_run *r = arg;
  return mr_fhd_adjoint(r->plan, r->d, NULL, r->out, err);
}

static double median_ms(mr_device *dev, mr_device_task task, void *arg, int reps, int *rc) {
  double ms[REPS];
  *rc = mr_device_time(dev, task, arg, 1, reps, ms, TERR);
  return *rc == 0 ? bench_median(ms, reps) : NAN;
}

/* ---- F^H D --------------------------------------------------------------- */

typedef struct variant {
  mr_fhd_kernel kernel;
  mr_fhd_precision precision;
  int block, per_thread;
} variant;

/* One F^H D measurement as a JSON row; the CPU runs `subset` of the
 * samples (1: all). */
static int fhd_row(const bench_ctx *ctx, mr_device *dev, const problem *p, const data *d,
                   const variant *v, size_t subset) {
  int gpu = mr_device_is_gpu(dev);
  size_t m = d->m / subset;
  mr_fhd_opts o = {.rank = 3, .grid = {d->n, d->n, d->n}, .batch = 1, .kernel = v->kernel,
                   .precision = v->precision, .block = v->block,
                   .voxels_per_thread = v->per_thread};
  mr_fhd_plan *plan = NULL;
  mr_cfloat *out = malloc(d->nvox * sizeof *out);
  int rc = out != NULL ? mr_fhd_plan_create(dev, &o, &plan, TERR) : MR_ENOMEM;
  if (rc == 0)
    rc = mr_fhd_set_points(plan, m, d->k, TERR);
  adjoint_run r = {plan, d->d, out};
  double ms = NAN;
  if (rc == 0)
    ms = median_ms(dev, adjoint_task, &r, gpu ? REPS : 1, &rc);
  fprintf(stderr, "mr-bench: fhd %s %s %s block %d V %d: %.3f ms\n", p->name,
          gpu ? "gpu" : "cpu", mr_fhd_kernel_name(v->kernel), v->block, v->per_thread, ms);
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_str(j, "problem", p->name);
  json_str(j, "device", gpu ? "gpu" : "cpu");
  json_str(j, "kernel", gpu ? mr_fhd_kernel_name(v->kernel) : "cpu");
  json_str(j, "precision", v->precision == MR_FHD_DOUBLE ? "double" : "single");
  json_int(j, "block", v->block);
  json_int(j, "voxels_per_thread", v->per_thread);
  json_int(j, "voxels", (long long)d->nvox);
  json_int(j, "samples", (long long)m);
  json_num(j, "ms", ms);
  json_num(j, "pairs_per_s", (double)d->nvox * (double)m / (ms * 1e-3));
  if (subset > 1)
    json_num(j, "full_problem_s_estimate", ms * 1e-3 * (double)subset);
  if (rc == 0 && subset == 1)
    json_num(j, "rel_error_vs_cpu_double", check_error(d, out));
  json_close(j, '}');
  mr_fhd_plan_destroy(plan);
  free(out);
  return rc;
}

static int fhd_rows(const bench_ctx *ctx, mr_device *gpu, mr_device *cpu, const problem *p,
                    const data *d) {
  int rc = 0;
  if (gpu != NULL) {
    /* The book's steps (its kernels at its 1024-thread blocks), the tuned
     * final one, then past it. */
    for (int k = p->big ? MR_FHD_HWTRIG : MR_FHD_SCATTER; rc == 0 && k < MR_FHD_KERNEL_COUNT;
         k++) {
      variant v = {(mr_fhd_kernel)k, MR_FHD_SINGLE, 0, 0}; /* default block and V */
      /* Scatter's atomics crawl beyond the smallest problem. */
      if (k == MR_FHD_SCATTER && d->nvox * d->m > (size_t)2e8)
        continue;
      rc = fhd_row(ctx, gpu, p, d, &v, 1);
    }
  }
  size_t subset = p->big && !ctx->quick ? 64 : 1;
  variant single = {MR_FHD_AUTO, MR_FHD_SINGLE, 0, 0};
  if (rc == 0)
    rc = fhd_row(ctx, cpu, p, d, &single, subset);
  variant dbl = {MR_FHD_AUTO, MR_FHD_DOUBLE, 0, 0};
  if (rc == 0 && !p->big)
    rc = fhd_row(ctx, cpu, p, d, &dbl, 1);
  return rc;
}

/* The book's step 4 (block size for its final kernel) and ours (voxels
 * per thread and block size for the recurrence). */
static int tuning_rows(const bench_ctx *ctx, mr_device *gpu, const problem *p, const data *d) {
  static const int blocks[] = {64, 128, 256, 512, 1024};
  static const int per_thread[] = {4, 8, 16, 32};
  int rc = 0;
  for (int b = 0; rc == 0 && b < 5; b++) {
    variant v = {MR_FHD_HWTRIG, MR_FHD_SINGLE, blocks[b], 0};
    rc = fhd_row(ctx, gpu, p, d, &v, 1);
  }
  for (int t = 0; rc == 0 && t < 4; t++)
    for (int b = 1; rc == 0 && b < 4; b++) {
      variant v = {MR_FHD_RECURRENCE, MR_FHD_SINGLE, blocks[b], per_thread[t]};
      rc = fhd_row(ctx, gpu, p, d, &v, 1);
    }
  return rc;
}

/* ---- through the NUFFT ------------------------------------------------------ */

typedef struct nufft_run {
  mr_nufft_plan *plan;
  const mr_cfloat *in;
  mr_cfloat *out;
} nufft_run;

static int nufft_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  nufft_run *r = arg;
  return mr_nufft_execute(r->plan, MR_NUFFT_ADJOINT, r->in, r->out, err);
}

/* F^H D (q = 0) or Q on the doubled grid (q = 1) through the NUFFT at tol. */
static int nufft_row(const bench_ctx *ctx, mr_device *dev, const problem *p, const data *d,
                     double tol, int q) {
  int gpu = mr_device_is_gpu(dev);
  size_t side = q ? 2 * d->n : d->n, nvox = side * side * side;
  /* F^H D and Q are type 1 sums alone: the automatic upsampling is tuned
   * for that type, as an iterative reconstruction's plan would be. */
  mr_nufft_opts o = {.rank = 3, .dims = {side, side, side}, .batch = 1, .tol = tol,
                     .tune_for = MR_NUFFT_ADJOINT, .max_points = d->m};
  mr_nufft_plan *plan = NULL;
  mr_buf *in = NULL, *out = NULL;
  mr_cfloat *host = malloc(nvox * sizeof *host), *ones = malloc(d->m * sizeof *ones);
  int rc = host != NULL && ones != NULL ? 0 : MR_ENOMEM;
  for (size_t j = 0; rc == 0 && j < d->m; j++)
    ones[j] = 1;
  double t0 = bench_now_ms(), plan_ms = NAN, points_ms = NAN, ms = NAN;
  if (rc == 0)
    rc = mr_nufft_plan_create(dev, &o, &plan, TERR);
  plan_ms = bench_now_ms() - t0;
  t0 = bench_now_ms();
  if (rc == 0)
    rc = mr_nufft_set_points(plan, d->m, d->k, TERR);
  points_ms = bench_now_ms() - t0;
  if (rc == 0)
    rc = mr_buf_create(dev, d->m * sizeof(mr_cfloat), &in, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, nvox * sizeof(mr_cfloat), &out, TERR);
  if (rc == 0)
    rc = mr_buf_upload(in, 0, q ? ones : d->d, d->m * sizeof(mr_cfloat), TERR);
  nufft_run r = {plan, mr_buf_data(in), mr_buf_data(out)};
  if (rc == 0)
    ms = median_ms(dev, nufft_task, &r, gpu ? REPS : 1, &rc);
  if (rc == 0)
    rc = mr_buf_download(out, 0, host, nvox * sizeof(mr_cfloat), TERR);
  fprintf(stderr, "mr-bench: nufft %s %s %s tol %g: %.3f ms\n", p->name, gpu ? "gpu" : "cpu",
          q ? "Q" : "F^H D", tol, ms);
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_str(j, "problem", p->name);
  json_str(j, "device", gpu ? "gpu" : "cpu");
  json_str(j, "sum", q ? "Q (doubled grid)" : "F^H D");
  json_num(j, "tol", tol);
  json_int(j, "voxels", (long long)nvox);
  json_int(j, "samples", (long long)d->m);
  json_num(j, "ms", ms);
  json_num(j, "plan_ms", plan_ms);
  json_num(j, "set_points_ms", points_ms);
  json_num(j, "direct_equivalent_pairs_per_s", (double)nvox * (double)d->m / (ms * 1e-3));
  if (rc == 0 && !q)
    json_num(j, "rel_error_vs_cpu_double", check_error(d, host));
  json_close(j, '}');
  mr_nufft_plan_destroy(plan);
  mr_buf_destroy(in);
  mr_buf_destroy(out);
  free(host);
  free(ones);
  return rc;
}

static int nufft_rows(const bench_ctx *ctx, mr_device *gpu, mr_device *cpu, const problem *p,
                      const data *d) {
  const double tols[] = {1e-4, 1e-6};
  int rc = 0;
  for (int t = 0; rc == 0 && t < 2; t++) {
    if (gpu != NULL)
      rc = nufft_row(ctx, gpu, p, d, tols[t], 0);
    if (rc == 0)
      rc = nufft_row(ctx, cpu, p, d, tols[t], 0);
  }
  if (rc == 0 && gpu != NULL)
    rc = nufft_row(ctx, gpu, p, d, 1e-6, 1);
  return rc;
}

/* ---- Q and CG -------------------------------------------------------------- */

typedef struct solve_run {
  mr_device *dev;
  mr_toeplitz *op;
  const mr_cfloat *b;
  mr_cfloat *x;
  mr_cg_opts o;
  mr_cg_report report;
} solve_run;

static int solve_task(mr_device *dev, void *arg, mr_err *err) {
  solve_run *s = arg;
  return mr_cg_solve(dev, mr_toeplitz_voxels(s->op), mr_toeplitz_apply_op, s->op, s->b, s->x, &s->o,
                     &s->report, err);
}

typedef struct q_run {
  mr_fhd_plan *plan;
  mr_cfloat *q;
} q_run;

static int q_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  q_run *r = arg;
  return mr_fhd_adjoint(r->plan, NULL, NULL, r->q, err);
}

typedef struct build_run {
  mr_toeplitz_opts o;
  const mr_cfloat *q;
  mr_toeplitz *op;
} build_run;

static int build_task(mr_device *dev, void *arg, mr_err *err) {
  build_run *r = arg;
  mr_toeplitz_destroy(r->op);
  r->op = NULL;
  return mr_toeplitz_create(dev, &r->o, r->q, &r->op, err);
}

/* Q on the doubled grid and b = F^H D, computed once on `dev` (the GPU
 * when there is one: the CPU would take hours over the doubled grid). */
typedef struct normal_system {
  mr_cfloat *q, *b;
  double q_ms;
  const char *q_device;
} normal_system;

static int make_system(mr_device *dev, const data *d, normal_system *sys) {
  size_t n = d->n;
  mr_fhd_opts o = {.rank = 3, .grid = {2 * n, 2 * n, 2 * n}, .batch = 1};
  mr_fhd_plan *plan = NULL;
  sys->q = malloc(8 * d->nvox * sizeof *sys->q);
  sys->b = malloc(d->nvox * sizeof *sys->b);
  sys->q_device = mr_device_is_gpu(dev) ? "gpu" : "cpu";
  int rc = sys->q != NULL && sys->b != NULL ? mr_fhd_plan_create(dev, &o, &plan, TERR) : MR_ENOMEM;
  if (rc == 0)
    rc = mr_fhd_set_points(plan, d->m, d->k, TERR);
  q_run qr = {plan, sys->q};
  if (rc == 0)
    sys->q_ms = median_ms(dev, q_task, &qr, 1, &rc);
  mr_fhd_plan_destroy(plan);
  plan = NULL;
  o.grid[0] = o.grid[1] = o.grid[2] = n;
  if (rc == 0)
    rc = mr_fhd_plan_create(dev, &o, &plan, TERR);
  if (rc == 0)
    rc = mr_fhd_set_points(plan, d->m, d->k, TERR);
  if (rc == 0)
    rc = mr_fhd_adjoint(plan, d->d, NULL, sys->b, TERR);
  mr_fhd_plan_destroy(plan);
  return rc;
}

/* The operator built from Q, then CG on dev: time per iteration (20
 * iterations, no early stop; 3 on the CPU) and, on the GPU, to a relative
 * residual of 1e-4; for lambda 0 and for finite differences. */
static int cg_rows(const bench_ctx *ctx, mr_device *dev, const problem *p, const data *d,
                   const normal_system *sys) {
  int gpu = mr_device_is_gpu(dev);
  size_t n = d->n, nvox = d->nvox;
  mr_buf *bb = NULL, *bx = NULL;
  int rc = mr_buf_create(dev, nvox * sizeof(mr_cfloat), &bb, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, nvox * sizeof(mr_cfloat), &bx, TERR);
  if (rc == 0)
    rc = mr_buf_upload(bb, 0, sys->b, nvox * sizeof(mr_cfloat), TERR);
  bench_json *j = ctx->json;
  for (int reg = 0; rc == 0 && reg < 2; reg++) {
    build_run br = {.o = {.rank = 3, .n = {n, n, n}, .lambda = reg ? 0.01 * (double)d->m : 0,
                          .reg = reg ? MR_REG_FINITE_DIFFERENCE : MR_REG_IDENTITY},
                    .q = sys->q};
    double build_ms = median_ms(dev, build_task, &br, 1, &rc);
    solve_run s = {dev, br.op, mr_buf_data(bb), mr_buf_data(bx),
                   {.max_iterations = gpu || ctx->quick ? 20 : 3, .tolerance = 0}, {0}};
    double timed = NAN, conv = NAN;
    int reps = gpu ? REPS : 1;
    if (rc == 0)
      timed = median_ms(dev, solve_task, &s, reps, &rc);
    int iters = s.report.iterations;
    s.o = (mr_cg_opts){.max_iterations = 300, .tolerance = 1e-4};
    if (rc == 0 && gpu)
      conv = median_ms(dev, solve_task, &s, reps, &rc);
    fprintf(stderr, "mr-bench: cg %s %s reg %d: %d iterations %.2f ms\n", p->name,
            gpu ? "gpu" : "cpu", reg, iters, timed);
    json_open(j, NULL, '{');
    json_str(j, "problem", p->name);
    json_str(j, "device", gpu ? "gpu" : "cpu");
    json_str(j, "regularizer", reg ? "finite differences, lambda 0.01 (relative)" : "none");
    json_int(j, "voxels", (long long)nvox);
    json_int(j, "samples", (long long)d->m);
    json_str(j, "q_computed_on", sys->q_device);
    json_num(j, "q_ms", sys->q_ms);
    json_num(j, "q_pairs_per_s", 8.0 * (double)nvox * (double)d->m / (sys->q_ms * 1e-3));
    json_num(j, "operator_build_ms", build_ms);
    json_int(j, "iterations_timed", iters);
    json_num(j, "ms_per_iteration", timed / iters);
    json_num(j, "ms_20_iterations", timed / iters * 20);
    if (gpu) {
      json_int(j, "iterations_to_1e-4", s.report.iterations);
      json_num(j, "residual_reached", s.report.residual);
      json_num(j, "ms_to_1e-4", conv);
    }
    json_close(j, '}');
    mr_toeplitz_destroy(br.op);
  }
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  return rc;
}

int bench_fhd(const bench_ctx *ctx) {
  const problem full[] = {
      {"parboil_small_32^3_x_3072", 32, 3072, 0},
      {"parboil_large_64^3_x_2048", 64, 2048, 0},
      {"book_128^3_x_284592", 128, 284592, 1},
  };
  const problem quick[] = {
      {"quick_16^3_x_512", 16, 512, 0},
      {"quick_24^3_x_4096", 24, 4096, 1},
  };
  const problem *probs = ctx->quick ? quick : full;
  int nprob = ctx->quick ? 2 : 3;
  mr_device *cpu, *gpu;
  int rc = bench_devices(ctx, &cpu, &gpu);
  if (rc < 0)
    return rc;
  bench_json *j = ctx->json;
  data ds[3] = {{0}};
  for (int i = 0; rc == 0 && i < nprob; i++)
    rc = make_data(cpu, &probs[i], &ds[i]);
  json_open(j, "fhd", '[');
  for (int i = 0; rc == 0 && i < nprob; i++)
    rc = fhd_rows(ctx, gpu, cpu, &probs[i], &ds[i]);
  json_close(j, ']');
  json_open(j, "nufft", '[');
  for (int i = 0; rc == 0 && i < nprob; i++)
    rc = nufft_rows(ctx, gpu, cpu, &probs[i], &ds[i]);
  json_close(j, ']');
  if (gpu != NULL) {
    json_open(j, "tuning", '[');
    if (rc == 0)
      rc = tuning_rows(ctx, gpu, &probs[nprob - 1], &ds[nprob - 1]);
    json_close(j, ']');
  }
  normal_system sys = {0};
  const problem *last = &probs[nprob - 1];
  if (rc == 0)
    rc = make_system(gpu != NULL ? gpu : cpu, &ds[nprob - 1], &sys);
  json_open(j, "cg", '[');
  if (rc == 0 && gpu != NULL)
    rc = cg_rows(ctx, gpu, last, &ds[nprob - 1], &sys);
  if (rc == 0)
    rc = cg_rows(ctx, cpu, last, &ds[nprob - 1], &sys);
  json_close(j, ']');
  free(sys.q);
  free(sys.b);
  if (rc < 0)
    fprintf(stderr, "mr-bench fhd: %s\n", mr_test_last_error());
  for (int i = 0; i < nprob; i++)
    free_data(&ds[i]);
  bench_devices_release(ctx, cpu, gpu);
  return rc;
}
