/* mr-bench grappa: GRAPPA calibration at the seed's Table 5.1 configuration
 * (Ncol 512, R 4, 24 ACS lines, kernel 4 x 5, chi 1e-4, eta 1) for 32, 64
 * and 128 coils, on the CPU, on the GPU fused, on the GPU as the plain
 * library chain (explicit A and B, HERK + GEMM, potrf + potrs through gpu/)
 * and as raw cuBLAS/cuSOLVER calls; then a whole 2D slice (256 x 256, 32
 * coils, R 4): upload, calibration, filling, FFT, RSS combination and
 * download. Data: the synthetic phantom with 2% noise. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "grappa.h"
#include "grappa_phantom.h"
#ifdef MR_HAVE_CUDA
#include "raw_cuda.h"
#endif

#define GPU_WARMUP 3

/* Uniform random complex samples in [-1, 1]^2 (the seed tested on such). */
static void random_fill(mr_cfloat *x, size_t n, unsigned seed) {
  srand(seed);
  for (size_t i = 0; i < n; i++)
    x[i] = (2.0f * rand() / RAND_MAX - 1) + I * (2.0f * rand() / RAND_MAX - 1);
}
#define GPU_REPS 20
#define CPU_REPS 3

typedef struct calib_arg {
  mr_grappa_plan *plan;
  const mr_cfloat *acs;
  size_t coil_stride;
  mr_cfloat *weights;
} calib_arg;

static int calib_task(mr_device *dev, void *p) {
  (void)dev;
  calib_arg *a = p;
  return mr_grappa_calibrate(a->plan, a->acs, a->coil_stride, a->weights);
}

static int time_median(mr_device *dev, mr_device_task task, void *arg, int warmup, int reps,
                       double *median) {
  double ms[64];
  int rc = mr_device_time(dev, task, arg, warmup, reps, ms);
  if (rc == 0)
    *median = bench_median(ms, reps);
  return rc;
}

/* Calibration on the GPU with device-resident ACS data: median ms, and the
 * weights (host) for the error against the CPU. */
static int gpu_calibration(mr_device *gpu, const mr_grappa_opts *o, const mr_cfloat *acs,
                           size_t per_coil, double *ms, mr_cfloat *weights) {
  size_t nw = mr_grappa_weights_count(o);
  mr_grappa_plan *plan = NULL;
  mr_buf *da = NULL, *dw = NULL;
  int rc = mr_grappa_plan_create(gpu, o, &plan);
  if (rc == 0)
    rc = mr_buf_create(gpu, per_coil * o->nc * sizeof(mr_cfloat), &da);
  if (rc == 0)
    rc = mr_buf_create(gpu, nw * sizeof(mr_cfloat), &dw);
  if (rc == 0)
    rc = mr_buf_upload(da, 0, acs, per_coil * o->nc * sizeof(mr_cfloat));
  calib_arg a = {plan, da != NULL ? mr_buf_data(da) : NULL, per_coil,
                 dw != NULL ? mr_buf_data(dw) : NULL};
  if (rc == 0)
    rc = time_median(gpu, calib_task, &a, GPU_WARMUP, GPU_REPS, ms);
  if (rc == 0)
    rc = mr_grappa_status(plan);
  if (rc == 0)
    rc = mr_buf_download(dw, 0, weights, nw * sizeof(mr_cfloat));
  mr_buf_destroy(da);
  mr_buf_destroy(dw);
  mr_grappa_plan_destroy(plan);
  return rc;
}

static int calibration_case(const bench_ctx *ctx, mr_device *cpu, mr_device *gpu, int nc) {
  bench_json *j = ctx->json;
  const int nro = ctx->quick ? 128 : 512, nacs = 24, accel = 4;
  mr_grappa_opts o = mr_grappa_opts_default(nc, nro, nacs, accel);
  size_t per_coil = (size_t)nacs * nro, nw = mr_grappa_weights_count(&o);
  int ny = 64;
  mr_cfloat *k = malloc((size_t)nc * ny * nro * sizeof *k);
  mr_cfloat *acs = malloc(per_coil * nc * sizeof *acs);
  mr_cfloat *w_cpu = malloc(nw * sizeof *w_cpu), *w_gpu = malloc(nw * sizeof *w_gpu);
  if (k == NULL || acs == NULL || w_cpu == NULL || w_gpu == NULL)
    return MR_ENOMEM;
  int rc = grappa_phantom_kspace(cpu, nro, ny, nc, 0.02, 9, k);
  int a0 = grappa_phantom_acs_start(ny, nacs);
  for (int c = 0; rc == 0 && c < nc; c++)
    memcpy(acs + c * per_coil, k + ((size_t)c * ny + a0) * nro, per_coil * sizeof *acs);
  json_open(j, NULL, '{');
  json_int(j, "coils", nc);
  json_int(j, "ncol", nro);
  json_int(j, "acs_lines", nacs);
  json_int(j, "R", accel);
  json_str(j, "kernel", "4 x 5");
  json_int(j, "unknowns", (long long)o.kpe * o.kro * nc);
  json_int(j, "equations", (long long)(nacs - (o.kpe - 1) * accel) * (nro - o.kro + 1));
  /* CPU (the direct solve) */
  mr_grappa_plan *plan = NULL;
  double ms = NAN;
  if (rc == 0)
    rc = mr_grappa_plan_create(cpu, &o, &plan);
  calib_arg a = {plan, acs, per_coil, w_cpu};
  if (rc == 0)
    rc = time_median(cpu, calib_task, &a, 1, CPU_REPS, &ms);
  mr_grappa_plan_destroy(plan);
  json_num(j, "cpu_ms", ms);
  fprintf(stderr, "mr-bench grappa: %d coils: CPU %.2f ms\n", nc, ms);
  if (rc == 0 && gpu != NULL) {
    static const mr_grappa_method methods[] = {MR_GRAPPA_FUSED, MR_GRAPPA_HYBRID,
                                               MR_GRAPPA_DIRECT};
    static const char *names[] = {"fused", "hybrid", "library_chain"};
    for (int m = 0; rc == 0 && m < 3; m++) {
      char key[64];
      o.method = methods[m];
      rc = gpu_calibration(gpu, &o, acs, per_coil, &ms, w_gpu);
      double err = rc == 0 ? grappa_rel_error_51(w_gpu, w_cpu, nw) : NAN;
      snprintf(key, sizeof key, "gpu_%s_ms", names[m]);
      json_num(j, key, ms);
      snprintf(key, sizeof key, "gpu_%s_eq51_error", names[m]);
      json_num(j, key, err);
      fprintf(stderr, "mr-bench grappa: %d coils: GPU %s %.3f ms (eq. 5.1 error %.2e)\n", nc,
              names[m], ms, err);
    }
    /* the seed's own test input: random ACS data, well conditioned */
    random_fill(acs, per_coil * nc, 11);
    if (rc == 0) {
      mr_grappa_plan *cp = NULL;
      o.method = MR_GRAPPA_FUSED;
      rc = mr_grappa_plan_create(cpu, &o, &cp);
      if (rc == 0)
        rc = mr_grappa_calibrate(cp, acs, per_coil, w_cpu);
      mr_grappa_plan_destroy(cp);
      if (rc == 0)
        rc = gpu_calibration(gpu, &o, acs, per_coil, &ms, w_gpu);
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
    double solve = raw_solve_ms(ordinal, ns, nt, GPU_REPS);
    json_num(j, "raw_cherk_ms", herk);
    json_num(j, "raw_potrf_potrs_ms", solve);
    json_num(j, "raw_cherk_plus_solve_ms", herk + solve);
#endif
  }
  json_close(j, '}');
  free(k);
  free(acs);
  free(w_cpu);
  free(w_gpu);
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

static int slice_task(mr_device *dev, void *p) {
  slice_arg *s = p;
  size_t per = (size_t)s->nx * s->ny;
  mr_cfloat *k = mr_buf_data(s->k), *w = mr_buf_data(s->w);
  float *image = mr_buf_data(s->image);
  int rc = 0;
  if (s->transfers)
    rc = mr_buf_upload(s->k, 0, s->host_k, per * s->nc * sizeof *k);
  else
    rc = mr_vec_copy(dev, per * s->nc, mr_buf_data(s->pristine), k);
  if (rc == 0)
    rc = mr_grappa_calibrate(s->plan, k + (size_t)s->a0 * s->nx, per, w);
  if (rc == 0)
    rc = mr_grappa_apply(s->plan, w, s->sampled, (size_t)s->ny, k, NULL);
  if (rc == 0)
    rc = mr_fft_execute(s->fft, MR_FFT_BACKWARD, k, k);
  if (rc == 0)
    rc = mr_coil_rss(dev, k, (size_t)s->nc, per, image);
  if (rc == 0 && s->transfers)
    rc = mr_buf_download(s->image, 0, s->host_image, per * sizeof *image);
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
    rc = mr_host_alloc(dev, per * nc * sizeof *under, (void **)&under);
  if (rc == 0)
    rc = mr_host_alloc(dev, per * sizeof *image, (void **)&image);
  if (rc == 0)
    rc = grappa_phantom_kspace(cpu, n, n, nc, 0.0, 2, full);
  grappa_phantom_pattern(n, accel, 0, nacs, sampled);
  for (size_t i = 0; rc == 0 && i < per * nc; i++)
    under[i] = sampled[(i / n) % n] ? full[i] : 0;
  s.host_k = under;
  s.host_image = image;
  if (rc == 0)
    rc = mr_grappa_plan_create(dev, &o, &s.plan);
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fo, &s.fft);
  if (rc == 0)
    rc = mr_buf_create(dev, per * nc * sizeof(mr_cfloat), &s.k);
  if (rc == 0)
    rc = mr_buf_create(dev, mr_grappa_weights_count(&o) * sizeof(mr_cfloat), &s.w);
  if (rc == 0)
    rc = mr_buf_create(dev, per * sizeof(float), &s.image);
  if (rc == 0)
    rc = mr_buf_create(dev, per * nc * sizeof(mr_cfloat), &s.pristine);
  double with = NAN, without = NAN;
  s.transfers = 1;
  if (rc == 0)
    rc = time_median(dev, slice_task, &s, reps > 1 ? 2 : 1, reps, &with);
  if (rc == 0)
    rc = mr_buf_upload(s.pristine, 0, under, per * nc * sizeof *under);
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
    rc = mr_device_run(dev, slice_task, &s);
    if (rc == 0 && (rc = mr_fft_plan_create(cpu, &fo, &f)) == 0)
      rc = mr_fft_execute(f, MR_FFT_BACKWARD, full, full);
    mr_fft_plan_destroy(f);
    if (rc == 0 && (rc = mr_coil_rss(cpu, full, (size_t)nc, per, reference)) == 0) {
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
  if (gpu != NULL && mr_device_info_get(gpu, &info) == 0)
    json_str(ctx->json, "gpu", info.name);
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
    fprintf(stderr, "mr-bench grappa: failed: %s\n", mr_device_last_error());
  if (gpu != NULL)
    mr_pool_release(ctx->pool, gpu);
  mr_pool_release(ctx->pool, cpu);
  return rc;
}
