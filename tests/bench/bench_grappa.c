/* mr-bench grappa: GRAPPA calibration at the seed's Table 5.1 configuration
 * (Ncol 512, R 4, 24 ACS lines, kernel 4 x 5, chi 1e-4, eta 1) for 32, 64
 * and 128 coils, on the CPU (double precision), on the GPU fused and hybrid
 * (double precision), on the GPU as the plain library chain (explicit A and
 * B, HERK + GEMM, potrf + potrs through gpu/, single precision) and as raw
 * cuBLAS/cuSOLVER calls; each with its weights error (eq. 5.1) against the
 * CPU's double-precision solve on realistic ACS data (the synthetic
 * phantom through smooth coil sensitivities, 2% noise), the time of its
 * steps (building the normal equations, solving them; the filling of a
 * 256-line k-space with the weights) and their physical limits. Then a
 * whole 2D slice (256 x 256, 32 coils, R 4): upload, calibration, filling,
 * FFT, RSS combination and download. */
#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coil.h"
#include "fft.h"
#include "host.h"
#include "vec.h"
#include "bench.h"
#include "grappa.h"
#include "grappa_impl.h"
#include "grappa_phantom.h"
#include "test_err.h"
#ifdef MR_HAVE_CUDA
#include "raw_cuda.h"
#endif

#define GPU_WARMUP 3
#define GPU_REPS 20
#define CPU_REPS 3

typedef struct calib_arg {
  mr_grappa_plan *plan;
  const mr_cfloat *acs;
  size_t coil_stride;
  mr_cfloat *weights;
} calib_arg;

static int calib_task(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  calib_arg *a = p;
  return mr_grappa_calibrate(a->plan, a->acs, a->coil_stride, a->weights, err);
}

static int time_median(mr_device *dev, mr_device_task task, void *arg, int warmup, int reps,
                       double *median) {
  double ms[64];
  int rc = mr_device_time(dev, task, arg, warmup, reps, ms, TERR);
  if (rc == 0)
    *median = bench_median(ms, reps);
  return rc;
}

/* The median build and solve times of reps calls of
 * mr_grappa_calibrate_steps (after one unmeasured call). */
static int time_steps(const calib_arg *a, int reps, double *build, double *solve) {
  double b[64], s[64];
  int rc = mr_grappa_calibrate_steps(a->plan, a->acs, a->coil_stride, a->weights, b, s, TERR);
  for (int r = 0; rc == 0 && r < reps; r++)
    rc = mr_grappa_calibrate_steps(a->plan, a->acs, a->coil_stride, a->weights, b + r, s + r, TERR);
  if (rc == 0) {
    *build = bench_median(b, reps);
    *solve = bench_median(s, reps);
  }
  return rc;
}

typedef struct timings {
  double ms, build_ms, solve_ms; /* NaN where not measured */
} timings;

/* Calibration on the GPU with device-resident ACS data: median ms (and by
 * step for the methods that split), and the weights (host) for the error
 * against the CPU; weights_dev (may be NULL) receives the device buffer
 * of the weights (the caller takes it). */
static int gpu_calibration(mr_device *gpu, const mr_grappa_opts *o, const mr_cfloat *acs,
                           size_t per_coil, timings *t, mr_cfloat *weights, mr_buf **weights_dev) {
  size_t nw = mr_grappa_weights_count(o);
  mr_grappa_plan *plan = NULL;
  mr_buf *da = NULL, *dw = NULL;
  *t = (timings){NAN, NAN, NAN};
  int rc = mr_grappa_plan_create(gpu, o, &plan, TERR);
  if (rc == 0)
    rc = mr_buf_create(gpu, per_coil * o->nc * sizeof(mr_cfloat), &da, TERR);
  if (rc == 0)
    rc = mr_buf_create(gpu, nw * sizeof(mr_cfloat), &dw, TERR);
  if (rc == 0)
    rc = mr_buf_upload(da, 0, acs, per_coil * o->nc * sizeof(mr_cfloat), TERR);
  calib_arg a = {plan, da != NULL ? mr_buf_data(da) : NULL, per_coil,
                 dw != NULL ? mr_buf_data(dw) : NULL};
  if (rc == 0)
    rc = time_median(gpu, calib_task, &a, GPU_WARMUP, GPU_REPS, &t->ms);
  if (rc == 0)
    rc = mr_grappa_status(plan, TERR);
  if (rc == 0 && o->method != MR_GRAPPA_DIRECT)
    rc = time_steps(&a, GPU_REPS, &t->build_ms, &t->solve_ms);
  if (rc == 0)
    rc = mr_buf_download(dw, 0, weights, nw * sizeof(mr_cfloat), TERR);
  mr_buf_destroy(da);
  if (weights_dev != NULL && rc == 0)
    *weights_dev = dw;
  else
    mr_buf_destroy(dw);
  mr_grappa_plan_destroy(plan);
  return rc;
}

typedef struct apply_arg {
  mr_grappa_plan *plan;
  const mr_cfloat *weights;
  const uint8_t *sampled;
  int ny;
  mr_cfloat *kspace;
} apply_arg;

/* Filling is idempotent (sources are sampled lines, never filled ones), so
 * repetitions need no fresh copy of the k-space. */
static int apply_task(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  apply_arg *a = p;
  return mr_grappa_apply(a->plan, a->weights, a->sampled, (size_t)a->ny, a->kspace, NULL, err);
}

/* The median time of filling the undersampled k (nc x ny x nro, host) on
 * the GPU with the weights already there. */
static int gpu_apply(mr_device *gpu, const mr_grappa_opts *o, mr_buf *weights,
                     const mr_cfloat *k, const uint8_t *sampled, int ny, double *ms) {
  size_t n = (size_t)o->nc * ny * o->nro;
  mr_grappa_plan *plan = NULL;
  mr_buf *dk = NULL;
  int rc = mr_grappa_plan_create(gpu, o, &plan, TERR);
  if (rc == 0)
    rc = mr_buf_create(gpu, n * sizeof(mr_cfloat), &dk, TERR);
  if (rc == 0)
    rc = mr_buf_upload(dk, 0, k, n * sizeof(mr_cfloat), TERR);
  apply_arg a = {plan, mr_buf_data(weights), sampled, ny, dk != NULL ? mr_buf_data(dk) : NULL};
  if (rc == 0)
    rc = time_median(gpu, apply_task, &a, GPU_WARMUP, GPU_REPS, ms);
  mr_buf_destroy(dk);
  mr_grappa_plan_destroy(plan);
  return rc;
}

/* The work of each step as the algorithm counts it (complex multiply-add:
 * 8 flops) and the bytes it must move, for bench_limits(). */
typedef struct step_work {
  double build_gflop, build_mbyte; /* kro lagged products of the source rows
                                      with the source and target rows; the
                                      ACS read, [M; U] written (double) */
  double solve_gflop, solve_mbyte; /* Cholesky of M, two triangular solves
                                      of the n_tgt right-hand sides; [M; U]
                                      read, the weights written (float) */
  double apply_gflop, apply_mbyte; /* n_tgt x n_src per missing block and
                                      sample; the k-space read and written
                                      once */
} step_work;

static step_work work_of(const mr_grappa_opts *o, int ny, int nblk) {
  double ns = (double)o->kpe * o->kro * o->nc, nt = (double)(o->accel - 1) * o->nc;
  double nb = (double)o->kpe * o->nc;
  double eqs = (double)(o->nacs - (o->kpe - 1) * o->accel) * (o->nro - o->kro + 1);
  step_work w;
  w.build_gflop = 8.0 * o->kro * nb * (nb + nt) * eqs / 1e9;
  w.build_mbyte = ((double)o->nc * o->nacs * o->nro * 8 + ns * (ns + nt) * 16) / 1e6;
  w.solve_gflop = (4.0 / 3.0 * ns * ns * ns + 8.0 * nt * ns * ns) / 1e9;
  w.solve_mbyte = (ns * (ns + nt) * 16 + ns * nt * 8) / 1e6;
  w.apply_gflop = 8.0 * nt * ns * (double)nblk * o->nro / 1e9;
  w.apply_mbyte = 2.0 * o->nc * ny * o->nro * 8 / 1e6;
  return w;
}

/* The tile kernel's phases (MR_GRAPPA_TILE_PHASES, grappa_impl.h) as
 * JSON and one line on stderr per sub-panel. */
static void tile_phases(bench_json *j, int nc, const double *ph) {
  static const char *const names[] = {"factor", "inverse", "barrier", "below", "write", "update"};
  enum { PER = sizeof names / sizeof *names, SUBS = (MR_GRAPPA_TILE_PHASES - 2) / PER };
  json_open(j, "gpu_tile_phase_us", '{');
  json_num(j, "load", ph[0]);
  json_open(j, "subpanels", '[');
  for (int s = 0; s < SUBS; s++) {
    const double *p = ph + 1 + PER * s;
    json_open(j, NULL, '{');
    for (int i = 0; i < PER; i++)
      json_num(j, names[i], p[i]);
    json_close(j, '}');
    fprintf(stderr,
            "mr-bench grappa: %d coils: tile sub-panel %d (us): factor %.2f inverse %.2f "
            "barrier %.2f below %.2f write %.2f update %.2f\n",
            nc, s, p[0], p[1], p[2], p[3], p[4], p[5]);
  }
  json_close(j, ']');
  json_num(j, "store", ph[MR_GRAPPA_TILE_PHASES - 1]);
  json_close(j, '}');
  fprintf(stderr, "mr-bench grappa: %d coils: tile load %.2f us, store %.2f us\n", nc, ph[0],
          ph[MR_GRAPPA_TILE_PHASES - 1]);
}

/* One tile step of the fused factorisation alone, the first of the
 * calibration's (the diagonal tile and all the rows of [M; U] below it): the
 * tile's kernel (factor and inverse) and the product of the rows below
 * with the inverse, best of GPU_REPS; then the kernel's phases from its
 * stamped build (the repetition with the shortest kernel). The tile is
 * diagonally dominant (its values do not change the time). */
static int tile_step_case(bench_json *j, mr_device *gpu, const mr_grappa_opts *o) {
  const int t = MR_GRAPPA_TILE;
  int ns = (o->kpe * o->kro * o->nc + t - 1) / t * t;
  int rows = ns + ((o->accel - 1) * o->nc + t - 1) / t * t;
  size_t n = (size_t)rows * t;
  double complex *panel = malloc(n * sizeof *panel), *work = malloc(n * sizeof *work),
                 *inv = malloc((size_t)t * t * sizeof *inv);
  int rc = panel == NULL || work == NULL || inv == NULL ? MR_ENOMEM : 0;
  for (int c = 0; rc == 0 && c < t; c++)
    for (int r = 0; r < rows; r++)
      panel[(size_t)c * rows + r] =
          r == c ? t : 0.25 * sin(0.7 * r + 1.3 * c) + 0.25 * I * cos(0.3 * r - c);
  double best_tile = INFINITY, best_below = INFINITY, best_stamped = INFINITY;
  double phase[MR_GRAPPA_TILE_PHASES], best_phase[MR_GRAPPA_TILE_PHASES];
  for (int rep = 0; rc == 0 && rep < 2 * GPU_REPS; rep++) {
    const bool stamped = rep >= GPU_REPS;
    double tile_ms, below_ms;
    memcpy(work, panel, n * sizeof *work);
    rc = mr_grappa_chol_tile(gpu, rows, (double *)work, (double *)inv, &tile_ms, &below_ms,
                             stamped ? phase : NULL, TERR);
    if (rc == 0 && stamped && tile_ms < best_stamped) {
      best_stamped = tile_ms;
      memcpy(best_phase, phase, sizeof phase);
    } else if (rc == 0 && !stamped) {
      best_tile = fmin(best_tile, tile_ms);
      best_below = fmin(best_below, below_ms);
    }
  }
  json_int(j, "gpu_tile_rows", rows);
  json_num(j, "gpu_tile_kernel_us", rc == 0 ? best_tile * 1e3 : NAN);
  json_num(j, "gpu_tile_below_us", rc == 0 ? best_below * 1e3 : NAN);
  json_num(j, "gpu_tile_stamped_kernel_us", rc == 0 ? best_stamped * 1e3 : NAN);
  fprintf(stderr,
          "mr-bench grappa: %d coils: one tile step: kernel %.1f us (stamped %.1f), the %d rows "
          "below times L^-H %.1f us\n",
          o->nc, best_tile * 1e3, best_stamped * 1e3, rows - t, best_below * 1e3);
  if (rc == 0)
    tile_phases(j, o->nc, best_phase);
  free(panel);
  free(work);
  free(inv);
  return rc;
}

static int calibration_case(const bench_ctx *ctx, mr_device *cpu, mr_device *gpu, int nc) {
  bench_json *j = ctx->json;
  const int nro = ctx->quick ? 128 : 512, nacs = 24, accel = 4, ny = ctx->quick ? 64 : 256;
  mr_grappa_opts o = mr_grappa_opts_default(nc, nro, nacs, accel);
  size_t per_coil = (size_t)nacs * nro, nw = mr_grappa_weights_count(&o);
  size_t nk = (size_t)nc * ny * nro;
  mr_cfloat *k = malloc(nk * sizeof *k), *under = malloc(nk * sizeof *under);
  mr_cfloat *acs = malloc(per_coil * nc * sizeof *acs);
  mr_cfloat *w_cpu = malloc(nw * sizeof *w_cpu), *w_gpu = malloc(nw * sizeof *w_gpu);
  uint8_t *sampled = malloc((size_t)ny);
  if (k == NULL || under == NULL || acs == NULL || w_cpu == NULL || w_gpu == NULL ||
      sampled == NULL)
    return MR_ENOMEM;
  int rc = grappa_phantom_kspace(cpu, nro, ny, nc, 0.02, 9, k);
  int a0 = grappa_phantom_acs_start(ny, nacs), nblk = 0;
  for (int c = 0; rc == 0 && c < nc; c++)
    memcpy(acs + c * per_coil, k + ((size_t)c * ny + a0) * nro, per_coil * sizeof *acs);
  grappa_phantom_pattern(ny, accel, 0, nacs, sampled);
  for (size_t i = 0; i < nk; i++)
    under[i] = sampled[(i / nro) % ny] ? k[i] : 0;
  for (int y = 0; y < ny - 1; y += accel) /* blocks with a missing line after them */
    for (int m = 1; m < accel && y + m < ny; m++)
      if (!sampled[y + m]) {
        nblk++;
        break;
      }
  step_work work = work_of(&o, ny, nblk);
  json_open(j, NULL, '{');
  json_int(j, "coils", nc);
  json_int(j, "ncol", nro);
  json_int(j, "acs_lines", nacs);
  json_int(j, "R", accel);
  json_str(j, "kernel", "4 x 5");
  json_int(j, "unknowns", (long long)o.kpe * o.kro * nc);
  json_int(j, "equations", (long long)(nacs - (o.kpe - 1) * accel) * (nro - o.kro + 1));
  json_int(j, "apply_lines", ny);
  json_int(j, "apply_blocks", nblk);
  /* CPU: the double-precision solve every error below is against */
  mr_grappa_plan *plan = NULL;
  double ms = NAN, build = NAN, solve = NAN;
  if (rc == 0)
    rc = mr_grappa_plan_create(cpu, &o, &plan, TERR);
  calib_arg a = {plan, acs, per_coil, w_cpu};
  if (rc == 0)
    rc = time_median(cpu, calib_task, &a, 1, CPU_REPS, &ms);
  if (rc == 0)
    rc = time_steps(&a, CPU_REPS, &build, &solve);
  mr_grappa_plan_destroy(plan);
  json_num(j, "cpu_ms", ms);
  json_num(j, "cpu_build_ms", build);
  json_num(j, "cpu_solve_ms", solve);
  fprintf(stderr, "mr-bench grappa: %d coils: CPU %.2f ms (build %.2f, solve %.2f)\n", nc, ms,
          build, solve);
  if (rc == 0 && gpu != NULL) {
    static const mr_grappa_method methods[] = {MR_GRAPPA_FUSED, MR_GRAPPA_HYBRID,
                                               MR_GRAPPA_DIRECT};
    static const char *names[] = {"fused", "hybrid", "library_chain"};
    mr_buf *w_dev = NULL;
    for (int m = 0; rc == 0 && m < 3; m++) {
      char key[64];
      timings t;
      o.method = methods[m];
      rc = gpu_calibration(gpu, &o, acs, per_coil, &t, w_gpu, m == 0 ? &w_dev : NULL);
      if (rc == MR_ENUMERIC && methods[m] == MR_GRAPPA_DIRECT) {
        /* single precision may find M + lambda I not positive definite */
        json_str(j, "gpu_library_chain_failed", mr_test_last_error());
        rc = 0;
        t = (timings){NAN, NAN, NAN};
        for (size_t i = 0; i < nw; i++)
          w_gpu[i] = NAN;
      }
      double err = rc == 0 ? grappa_rel_error_51(w_gpu, w_cpu, nw) : NAN;
      snprintf(key, sizeof key, "gpu_%s_ms", names[m]);
      json_num(j, key, t.ms);
      snprintf(key, sizeof key, "gpu_%s_eq51_error", names[m]);
      json_num(j, key, err);
      if (methods[m] != MR_GRAPPA_DIRECT) {
        snprintf(key, sizeof key, "gpu_%s_build_ms", names[m]);
        json_num(j, key, t.build_ms);
        snprintf(key, sizeof key, "gpu_%s_solve_ms", names[m]);
        json_num(j, key, t.solve_ms);
      }
      if (methods[m] == MR_GRAPPA_FUSED) {
        /* the products of both steps are ZGEMM/ZHERK on the FP64 tensor cores */
        bench_limits(j, "gpu_fused_build_", work.build_gflop, work.build_mbyte, t.build_ms,
                     BENCH_FP64_TENSOR);
        bench_limits(j, "gpu_fused_solve_", work.solve_gflop, work.solve_mbyte, t.solve_ms,
                     BENCH_FP64_TENSOR);
        bench_limits(j, "gpu_fused_", work.build_gflop + work.solve_gflop,
                     work.build_mbyte + work.solve_mbyte, t.ms, BENCH_FP64_TENSOR);
      }
      fprintf(stderr,
              "mr-bench grappa: %d coils: GPU %s %.3f ms (build %.3f, solve %.3f by steps; "
              "eq. 5.1 error %.2e)\n",
              nc, names[m], t.ms, t.build_ms, t.solve_ms, err);
    }
    if (rc == 0)
      rc = tile_step_case(j, gpu, &o);
    /* filling with the fused weights */
    o.method = MR_GRAPPA_FUSED;
    double apply = NAN;
    if (rc == 0)
      rc = gpu_apply(gpu, &o, w_dev, under, sampled, ny, &apply);
    mr_buf_destroy(w_dev);
    json_num(j, "gpu_apply_ms", apply);
    bench_limits(j, "gpu_apply_", work.apply_gflop, work.apply_mbyte, apply, BENCH_FP32);
    fprintf(stderr, "mr-bench grappa: %d coils: GPU apply (%d lines) %.3f ms\n", nc, ny, apply);
    /* the seed's own test input: random ACS data, well conditioned */
    bench_random_fill(acs, per_coil * nc, 11);
    if (rc == 0) {
      mr_grappa_plan *cp = NULL;
      timings t;
      rc = mr_grappa_plan_create(cpu, &o, &cp, TERR);
      if (rc == 0)
        rc = mr_grappa_calibrate(cp, acs, per_coil, w_cpu, TERR);
      mr_grappa_plan_destroy(cp);
      if (rc == 0)
        rc = gpu_calibration(gpu, &o, acs, per_coil, &t, w_gpu, NULL);
      double err = rc == 0 ? grappa_rel_error_51(w_gpu, w_cpu, nw) : NAN;
      json_num(j, "gpu_fused_eq51_error_random_acs", err);
      fprintf(stderr, "mr-bench grappa: %d coils: random ACS, fused eq. 5.1 error %.2e\n", nc,
              err);
    }
#ifdef MR_HAVE_CUDA
    /* The bare library calls at these sizes: HERK (M), GEMM (a square
     * n_src x n_src product, more than U needs), potrf + potrs. */
    int ns = o.kpe * o.kro * nc, nt = (accel - 1) * nc;
    int eqs = (nacs - (o.kpe - 1) * accel) * (nro - o.kro + 1);
    int ordinal = mr_device_ordinal(gpu);
    double herk = raw_cherk_ms(ordinal, ns, eqs, GPU_REPS);
    double rsolve = raw_solve_ms(ordinal, ns, nt, GPU_REPS);
    json_num(j, "raw_cherk_ms", herk);
    json_num(j, "raw_potrf_potrs_ms", rsolve);
    json_num(j, "raw_cherk_plus_solve_ms", herk + rsolve);
#endif
  }
  json_close(j, '}');
  free(k);
  free(under);
  free(acs);
  free(w_cpu);
  free(w_gpu);
  free(sampled);
  return rc;
}

/* ---- a whole slice --------------------------------------------------------- */

typedef struct slice_arg {
  mr_grappa_plan *plan;
  mr_fft_plan *fft;
  int nx, ny, nc, a0, transfers;
  const uint8_t *sampled;
  const mr_cfloat *host_k;
  float *host_image;
  mr_buf *k, *w, *image, *pristine;
} slice_arg;

static int slice_task(mr_device *dev, void *p, mr_err *err) {
  slice_arg *s = p;
  size_t per = (size_t)s->nx * s->ny;
  mr_cfloat *k = mr_buf_data(s->k), *w = mr_buf_data(s->w);
  float *image = mr_buf_data(s->image);
  int rc = 0;
  if (s->transfers)
    rc = mr_buf_upload(s->k, 0, s->host_k, per * s->nc * sizeof *k, err);
  else
    rc = mr_vec_copy(dev, per * s->nc, mr_buf_data(s->pristine), k, err);
  if (rc == 0)
    rc = mr_grappa_calibrate(s->plan, k + (size_t)s->a0 * s->nx, per, w, err);
  if (rc == 0)
    rc = mr_grappa_apply(s->plan, w, s->sampled, (size_t)s->ny, k, NULL, err);
  if (rc == 0)
    rc = mr_fft_execute(s->fft, MR_FFT_BACKWARD, k, k, err);
  if (rc == 0)
    rc = mr_coil_rss(dev, k, (size_t)s->nc, per, image, err);
  if (rc == 0 && s->transfers)
    rc = mr_buf_download(s->image, 0, s->host_image, per * sizeof *image, err);
  return rc;
}

static int slice_case(const bench_ctx *ctx, mr_device *dev, mr_device *cpu, const char *name,
                      int reps) {
  bench_json *j = ctx->json;
  const int n = ctx->quick ? 64 : 256, nc = ctx->quick ? 8 : 32, accel = 4, nacs = 24;
  size_t per = (size_t)n * n;
  mr_cfloat *full = malloc(per * nc * sizeof *full), *under = NULL;
  uint8_t *sampled = malloc(n);
  float *image = NULL, *reference = malloc(per * sizeof *reference);
  slice_arg s = {.nx = n, .ny = n, .nc = nc, .a0 = grappa_phantom_acs_start(n, nacs),
                 .sampled = sampled};
  mr_grappa_opts o = mr_grappa_opts_default(nc, n, nacs, accel);
  mr_fft_opts fo = {.rank = 2, .dims = {(size_t)n, (size_t)n, 1}, .batch = (size_t)nc};
  int rc = full != NULL && sampled != NULL && reference != NULL ? 0 : MR_ENOMEM;
  if (rc == 0)
    rc = mr_host_alloc(dev, per * nc * sizeof *under, (void **)&under, TERR);
  if (rc == 0)
    rc = mr_host_alloc(dev, per * sizeof *image, (void **)&image, TERR);
  if (rc == 0)
    rc = grappa_phantom_kspace(cpu, n, n, nc, 0.0, 2, full);
  grappa_phantom_pattern(n, accel, 0, nacs, sampled);
  for (size_t i = 0; rc == 0 && i < per * nc; i++)
    under[i] = sampled[(i / n) % n] ? full[i] : 0;
  s.host_k = under;
  s.host_image = image;
  if (rc == 0)
    rc = mr_grappa_plan_create(dev, &o, &s.plan, TERR);
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fo, &s.fft, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, per * nc * sizeof(mr_cfloat), &s.k, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, mr_grappa_weights_count(&o) * sizeof(mr_cfloat), &s.w, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, per * sizeof(float), &s.image, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, per * nc * sizeof(mr_cfloat), &s.pristine, TERR);
  double with = NAN, without = NAN;
  s.transfers = 1;
  if (rc == 0)
    rc = time_median(dev, slice_task, &s, reps > 1 ? 2 : 1, reps, &with);
  if (rc == 0)
    rc = mr_buf_upload(s.pristine, 0, under, per * nc * sizeof *under, TERR);
  /* device-resident: the undersampled k-space copied on the device instead
   * of uploaded, the image left there */
  s.transfers = 0;
  if (rc == 0)
    rc = time_median(dev, slice_task, &s, reps > 1 ? 2 : 1, reps, &without);
  double nrmse = NAN;
  if (rc == 0) {
    /* the image of a run with transfers against RSS of the full data */
    s.transfers = 1;
    mr_fft_plan *f = NULL;
    rc = mr_device_run(dev, slice_task, &s, TERR);
    if (rc == 0 && (rc = mr_fft_plan_create(cpu, &fo, &f, TERR)) == 0)
      rc = mr_fft_execute(f, MR_FFT_BACKWARD, full, full, TERR);
    mr_fft_plan_destroy(f);
    if (rc == 0 && (rc = mr_coil_rss(cpu, full, (size_t)nc, per, reference, TERR)) == 0) {
      double e = 0, r = 0;
      for (size_t i = 0; i < per; i++) {
        e += (image[i] - reference[i]) * (double)(image[i] - reference[i]);
        r += reference[i] * (double)reference[i];
      }
      nrmse = sqrt(e / r);
    }
  }
  json_open(j, name, '{');
  json_int(j, "matrix", n);
  json_int(j, "coils", nc);
  json_int(j, "R", accel);
  json_int(j, "acs_lines", nacs);
  json_str(j, "steps", "upload, calibration (the plan default method), filling, inverse FFT, RSS, download");
  json_num(j, "with_transfers_ms", with);
  json_num(j, "device_resident_ms", without);
  if (!isnan(nrmse))
    json_num(j, "nrmse_vs_fully_sampled_rss", nrmse);
  json_close(j, '}');
  fprintf(stderr, "mr-bench grappa: slice on %s: %.3f ms with transfers, %.3f ms resident\n",
          name, with, without);
  mr_buf_destroy(s.k);
  mr_buf_destroy(s.w);
  mr_buf_destroy(s.image);
  mr_buf_destroy(s.pristine);
  mr_fft_plan_destroy(s.fft);
  mr_grappa_plan_destroy(s.plan);
  mr_host_free(dev, under);
  mr_host_free(dev, image);
  free(full);
  free(sampled);
  free(reference);
  return rc;
}

int bench_grappa(const bench_ctx *ctx) {
  mr_device *cpu = NULL, *gpu = NULL;
  mr_err err = {0};
  if (mr_pool_acquire(ctx->pool, "cpu", &cpu, &err) != 0) {
    fprintf(stderr, "mr-bench grappa: %s\n", err.msg);
    return -1;
  }
  if (mr_pool_gpu_count(ctx->pool) > 0 && mr_pool_acquire(ctx->pool, "0", &gpu, &err) != 0)
    gpu = NULL;
  mr_device_info info;
  if (gpu != NULL && mr_device_info_get(gpu, &info, TERR) == 0)
    json_str(ctx->json, "gpu", info.name);
  json_str(ctx->json, "error_reference",
           "eq. 5.1 against the CPU calibration in double precision (ZHERK, ZGEMM, ZPOSV) on "
           "the phantom's ACS lines (smooth coil sensitivities, 2% noise)");
  json_open(ctx->json, "calibration", '[');
  const int coils[] = {32, 64, 128}, quick_coils[] = {8, 16};
  int rc = 0;
  for (int i = 0; rc == 0 && i < (ctx->quick ? 2 : 3); i++)
    rc = calibration_case(ctx, cpu, gpu, ctx->quick ? quick_coils[i] : coils[i]);
  json_close(ctx->json, ']');
  if (rc == 0)
    rc = slice_case(ctx, cpu, cpu, "slice_cpu", ctx->quick ? 1 : 3);
  if (rc == 0 && gpu != NULL)
    rc = slice_case(ctx, gpu, cpu, "slice_gpu", GPU_REPS);
  if (rc != 0)
    fprintf(stderr, "mr-bench grappa: failed: %s\n", mr_test_last_error());
  if (gpu != NULL)
    mr_pool_release(ctx->pool, gpu);
  mr_pool_release(ctx->pool, cpu);
  return rc;
}
