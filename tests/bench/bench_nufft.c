/* mr-bench nufft: NUFFT set_points and execute times at the sizes of issue
 * 5, on the GPU and the CPU and for the reference GPU library (cuFINUFFT,
 * loaded with dlopen when it can be found: nufft_reference.h) in the same
 * run, on the same points and data.
 *
 * Each case: a plan with the automatic upsampling tuned for the case's
 * type; set_points timed (the
 * first call apart: with automatic upsampling it also measures the
 * upsamplings once per shape; then the median of several, wall clock to
 * the end of the device work, positions from host memory and, on the GPU,
 * from pinned host memory and from device memory as the reference takes
 * them); random data resident on
 * the device, then execute timed (median of several runs after warm-up;
 * CUDA events on the GPU). points_per_s counts sample-vector pairs: points
 * x coils / seconds. The GPU is also timed at each fixed upsampling (2 and
 * 1.25), to show what the automatic choice chose from, and its output is
 * compared with the CPU's (gpu_cpu_rel_diff) and the reference's
 * (gpu_reference_rel_diff); gpu_stage_ms splits a GPU run into its three
 * passes (spreading or deapodize-and-pad, FFT, deapodize-and-crop or
 * interpolation).
 *
 * MR_BENCH_NUFFT_CASE=i in the environment runs case i alone (for a
 * profiler); MR_BENCH_CUFINUFFT names the reference library's file. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "host.h"
#include "nufft.h"
#include "nufft_reference.h"
#ifdef MR_HAVE_CUDA
#include "nufft_impl.h"
#endif

#define GPU_WARMUP 3
#define GPU_REPS 15
#define CPU_WARMUP 1
#define CPU_REPS 3
#define SET_POINTS_REPS 9

typedef struct nufft_case {
  const char *trajectory; /* "random" (uniform in the k-space cube) or "radial" */
  int rank;
  size_t n, coils, npoints;
  double tol;
  mr_nufft_direction dir;
  double reference_ms; /* the figure; NaN when it gives none */
} nufft_case;

static const nufft_case full[] = {
    {"random", 2, 256, 8, 131072, 1e-4, MR_NUFFT_ADJOINT, 0.75},
    {"random", 2, 256, 8, 131072, 1e-4, MR_NUFFT_FORWARD, 0.25},
    {"random", 2, 256, 8, 131072, 1e-6, MR_NUFFT_ADJOINT, 1.30},
    {"random", 2, 256, 8, 131072, 1e-6, MR_NUFFT_FORWARD, 0.27},
    {"random", 3, 128, 1, 284592, 1e-4, MR_NUFFT_ADJOINT, 1.90},
    {"random", 3, 128, 1, 284592, 1e-4, MR_NUFFT_FORWARD, 0.84},
    {"random", 3, 128, 1, 284592, 1e-6, MR_NUFFT_ADJOINT, 4.62},
    {"random", 3, 128, 1, 284592, 1e-6, MR_NUFFT_FORWARD, 0.94},
    {"radial", 2, 256, 8, 131072, 1e-4, MR_NUFFT_ADJOINT, NAN},
    {"radial", 2, 256, 8, 131072, 1e-4, MR_NUFFT_FORWARD, NAN},
};

static const nufft_case quick[] = {
    {"random", 2, 64, 4, 8192, 1e-4, MR_NUFFT_ADJOINT, NAN},
    {"random", 2, 64, 4, 8192, 1e-4, MR_NUFFT_FORWARD, NAN},
    {"random", 3, 24, 1, 8000, 1e-6, MR_NUFFT_ADJOINT, NAN},
    {"radial", 2, 64, 2, 8192, 1e-4, MR_NUFFT_FORWARD, NAN},
};

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 40;
}

static void make_points(const nufft_case *c, float *k) {
  if (strcmp(c->trajectory, "radial") == 0) {
    /* spokes of 2n samples through the centre, evenly spread angles */
    size_t per = 2 * c->n, spokes = c->npoints / per;
    for (size_t s = 0; s < spokes; s++)
      for (size_t i = 0; i < per; i++) {
        double a = M_PI * s / spokes, r = ((double)i - (double)(per / 2)) / per;
        k[(s * per + i) * 2] = (float)(r * cos(a));
        k[(s * per + i) * 2 + 1] = (float)(r * sin(a));
      }
    return;
  }
  uint64_t s = 12345;
  for (size_t i = 0; i < c->npoints * (size_t)c->rank; i++)
    k[i] = (float)(lcg(&s) / (double)(1ull << 24) - 0.5);
}

static void random_values(mr_cfloat *x, size_t n, uint64_t seed) {
  float *f = (float *)x;
  for (size_t i = 0; i < 2 * n; i++)
    f[i] = (float)(lcg(&seed) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* The state a timed run needs. */
typedef struct timed {
  mr_nufft_plan *plan;
  mr_nufft_direction dir;
  mr_buf *in, *out;
} timed;

static int execute_task(mr_device *dev, void *arg) {
  (void)dev;
  timed *t = arg;
  return mr_nufft_execute(t->plan, t->dir, mr_buf_data(t->in), mr_buf_data(t->out));
}

static size_t image_size(const nufft_case *c) {
  return c->rank == 2 ? c->n * c->n : c->n * c->n * c->n;
}

/* set_points times: the first call, then medians from host memory and (GPU)
 * from pinned host and device memory; NaN where not measured. */
typedef struct set_times {
  double first_ms, host_ms, pinned_ms, device_ms;
} set_times;

/* Median wall time of set_points, from host memory (kd NULL) or from the
 * device's copy kd. */
static int time_set_points(mr_nufft_plan *plan, size_t n, const float *k, mr_buf *kd,
                           double *ms) {
  double t[SET_POINTS_REPS];
  for (int r = 0; r < SET_POINTS_REPS; r++) {
    double t0 = bench_now_ms();
    int rc = kd != NULL ? mr_nufft_set_points_device(plan, n, mr_buf_data(kd))
                        : mr_nufft_set_points(plan, n, k);
    if (rc < 0)
      return rc;
    t[r] = bench_now_ms() - t0;
  }
  *ms = bench_median(t, SET_POINTS_REPS);
  return 0;
}

static int measure_set_points(mr_device *dev, mr_nufft_plan *plan, const nufft_case *c,
                              const float *k, set_times *st) {
  double t0 = bench_now_ms();
  int rc = mr_nufft_set_points(plan, c->npoints, k);
  st->first_ms = bench_now_ms() - t0;
  if (rc == 0)
    rc = time_set_points(plan, c->npoints, k, NULL, &st->host_ms);
  if (rc < 0 || !mr_device_is_gpu(dev))
    return rc;
  mr_buf *kd = NULL;
  void *pinned = NULL;
  size_t bytes = c->npoints * (size_t)c->rank * sizeof *k;
  rc = mr_host_alloc(dev, bytes, &pinned);
  if (rc == 0) {
    memcpy(pinned, k, bytes);
    rc = time_set_points(plan, c->npoints, pinned, NULL, &st->pinned_ms);
  }
  if (rc == 0)
    rc = mr_buf_create(dev, bytes, &kd);
  if (rc == 0)
    rc = mr_buf_upload(kd, 0, k, bytes);
  if (rc == 0)
    rc = time_set_points(plan, c->npoints, k, kd, &st->device_ms);
  mr_buf_destroy(kd);
  mr_host_free(dev, pinned);
  return rc;
}

/* Median execute time on dev at the given upsampling (0: automatic); the
 * output is copied to result (may be NULL) and the plan's choices to info,
 * set_points times to st (may be NULL: set once, untimed). NaN time when
 * the plan refuses the upsampling. */
static int measure(mr_device *dev, const nufft_case *c, const float *k, double upsampling,
                   mr_cfloat *result, mr_nufft_info *info, double *ms, double stage_ms[3],
                   set_times *st) {
  int gpu = mr_device_is_gpu(dev);
  mr_nufft_opts o = {.rank = c->rank, .dims = {c->n, c->n, c->rank == 3 ? c->n : 1},
                     .batch = c->coils, .tol = c->tol, .upsampling = upsampling,
                     .tune_for = c->dir};
  size_t nin = (c->dir == MR_NUFFT_ADJOINT ? c->npoints : image_size(c)) * c->coils;
  size_t nout = (c->dir == MR_NUFFT_ADJOINT ? image_size(c) : c->npoints) * c->coils;
  timed t = {.dir = c->dir};
  *ms = NAN;
  int rc = mr_nufft_plan_create(dev, &o, &t.plan);
  if (rc == MR_EINVAL && upsampling != 0)
    return 0;
  mr_cfloat *host = malloc(nin * sizeof *host);
  if (rc == 0 && host == NULL)
    rc = MR_ENOMEM;
  if (rc == 0)
    rc = st != NULL ? measure_set_points(dev, t.plan, c, k, st)
                    : mr_nufft_set_points(t.plan, c->npoints, k);
  if (rc == 0) {
    random_values(host, nin, 77);
    rc = mr_buf_create(dev, nin * sizeof *host, &t.in);
  }
  if (rc == 0)
    rc = mr_buf_upload(t.in, 0, host, nin * sizeof *host);
  if (rc == 0)
    rc = mr_buf_create(dev, nout * sizeof(mr_cfloat), &t.out);
  double times[GPU_REPS];
  int reps = gpu ? GPU_REPS : CPU_REPS;
  if (rc == 0)
    rc = mr_device_time(dev, execute_task, &t, gpu ? GPU_WARMUP : CPU_WARMUP, reps, times);
  if (rc == 0) {
    *ms = bench_median(times, reps);
    mr_nufft_info_get(t.plan, info);
  }
  if (rc == 0 && result != NULL)
    rc = mr_buf_download(t.out, 0, result, nout * sizeof *result);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && stage_ms != NULL && gpu) {
    double st[3][GPU_REPS];
    for (int r = 0; rc == 0 && r < GPU_REPS; r++) {
      float f[3];
      rc = mr_nufft_cuda_stage_times(t.plan, t.dir, mr_buf_data(t.in), mr_buf_data(t.out), f);
      for (int i = 0; i < 3; i++)
        st[i][r] = f[i];
    }
    for (int i = 0; rc == 0 && i < 3; i++)
      stage_ms[i] = bench_median(st[i], GPU_REPS);
  }
#else
  (void)stage_ms;
#endif
  if (rc < 0)
    fprintf(stderr, "mr-bench: nufft on %s: %s (%s)\n", gpu ? "GPU" : "CPU", mr_strerror(rc),
            mr_device_last_error());
  free(host);
  mr_buf_destroy(t.in);
  mr_buf_destroy(t.out);
  mr_nufft_plan_destroy(t.plan);
  return rc;
}

static double rel_diff(const mr_cfloat *a, const mr_cfloat *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += cabsf(a[i] - b[i]) * (double)cabsf(a[i] - b[i]);
    den += cabsf(b[i]) * (double)cabsf(b[i]);
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int run_case(const bench_ctx *ctx, const nufft_case *c, mr_device *gpu, mr_device *cpu) {
  char shape[64];
  if (c->rank == 2)
    snprintf(shape, sizeof shape, "%zux%zu", c->n, c->n);
  else
    snprintf(shape, sizeof shape, "%zux%zux%zu", c->n, c->n, c->n);
  fprintf(stderr, "mr-bench: nufft %s %s %s x %zu, %zu points, tol %.0e\n",
          c->dir == MR_NUFFT_ADJOINT ? "type 1" : "type 2", c->trajectory, shape, c->coils,
          c->npoints, c->tol);
  size_t nout = (c->dir == MR_NUFFT_ADJOINT ? image_size(c) : c->npoints) * c->coils;
  float *k = malloc(c->npoints * c->rank * sizeof *k);
  mr_cfloat *out_gpu = malloc(nout * sizeof *out_gpu), *out_cpu = malloc(nout * sizeof *out_cpu);
  if (k == NULL || out_gpu == NULL || out_cpu == NULL) {
    free(k);
    free(out_gpu);
    free(out_cpu);
    return MR_ENOMEM;
  }
  make_points(c, k);
  mr_nufft_info gi = {0}, ci = {0}, scratch;
  double gpu_ms = NAN, cpu_ms = NAN, by_sigma[2] = {NAN, NAN}, stage[3] = {NAN, NAN, NAN};
  set_times gst = {NAN, NAN, NAN, NAN}, cst = {NAN, NAN, NAN, NAN};
  static const double sigmas[2] = {2.0, 1.25};
  int rc = 0;
  if (gpu != NULL) {
    rc = measure(gpu, c, k, 0, out_gpu, &gi, &gpu_ms, stage, &gst);
    for (int s = 0; rc == 0 && s < 2; s++)
      rc = measure(gpu, c, k, sigmas[s], NULL, &scratch, &by_sigma[s], NULL, NULL);
  }
  if (rc == 0)
    rc = measure(cpu, c, k, 0, out_cpu, &ci, &cpu_ms, NULL, &cst);
  nufft_reference_result ref = {-1, NAN, NAN, NAN, NAN};
  double ref_diff = NAN;
#ifdef MR_HAVE_CUDA
  if (rc == 0 && gpu != NULL && nufft_reference_available()) {
    size_t dims[3] = {c->n, c->n, c->n};
    size_t nin = (c->dir == MR_NUFFT_ADJOINT ? c->npoints : image_size(c)) * c->coils;
    mr_cfloat *in = malloc(nin * sizeof *in), *out_ref = malloc(nout * sizeof *out_ref);
    if (in != NULL && out_ref != NULL) {
      random_values(in, nin, 77); /* the data measure() gave ours */
      if (nufft_reference_run(mr_device_ordinal(gpu), c->dir == MR_NUFFT_ADJOINT ? 1 : 2, c->rank,
                              dims, c->coils, c->npoints, k, in, out_ref, c->tol, GPU_REPS,
                              &ref) == 0)
        ref_diff = rel_diff(out_gpu, out_ref, nout);
    }
    free(in);
    free(out_ref);
  }
#endif
  double pairs = (double)c->npoints * c->coils;
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_int(j, "type", c->dir == MR_NUFFT_ADJOINT ? 1 : 2);
  json_str(j, "trajectory", c->trajectory);
  json_str(j, "shape", shape);
  json_int(j, "coils", (long long)c->coils);
  json_int(j, "points", (long long)c->npoints);
  json_num(j, "tol", c->tol);
  json_num(j, "upsampling", gpu != NULL ? gi.upsampling : ci.upsampling);
  json_int(j, "grid", (long long)(gpu != NULL ? gi.grid[0] : ci.grid[0]));
  json_int(j, "width", gpu != NULL ? gi.width : ci.width);
  json_int(j, "bin_entries", (long long)(gpu != NULL ? gi.entries : ci.entries));
  json_num(j, "gpu_ms", gpu_ms);
  json_num(j, "gpu_points_per_s", pairs / gpu_ms * 1e3);
  json_open(j, "gpu_stage_ms", '[');
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, stage[i]);
  json_close(j, ']');
  json_num(j, "gpu_ms_upsampling_2", by_sigma[0]);
  json_num(j, "gpu_ms_upsampling_1_25", by_sigma[1]);
  json_num(j, "gpu_set_points_ms", gst.host_ms);
  json_num(j, "gpu_set_points_pinned_ms", gst.pinned_ms);
  json_num(j, "gpu_set_points_device_ms", gst.device_ms);
  json_num(j, "gpu_first_set_points_ms", gst.first_ms);
  json_num(j, "reference_ms", ref.execute_ms);
  json_int(j, "reference_method", ref.method);
  json_num(j, "reference_upsampling", ref.upsampling);
  json_num(j, "reference_set_points_ms", ref.set_points_ms);
  json_num(j, "reference_set_points_best_ms", ref.set_points_best_ms);
  json_num(j, "speedup_vs_reference", ref.execute_ms / gpu_ms);
  json_num(j, "set_points_speedup_vs_reference", ref.set_points_best_ms / gst.device_ms);
  json_num(j, "gpu_reference_rel_diff", ref_diff);
  json_num(j, "issue_reference_ms", c->reference_ms);
  json_num(j, "cpu_set_points_ms", cst.host_ms);
  json_num(j, "cpu_ms", cpu_ms);
  json_num(j, "cpu_points_per_s", pairs / cpu_ms * 1e3);
  json_num(j, "gpu_speedup_vs_cpu", cpu_ms / gpu_ms);
  json_num(j, "gpu_cpu_rel_diff", gpu != NULL && rc == 0 ? rel_diff(out_gpu, out_cpu, nout) : NAN);
  json_close(j, '}');
  fflush(j->f);
  fprintf(stderr,
          "  gpu %.4f ms (stages %.4f %.4f %.4f; sigma 2: %.4f, 1.25: %.4f), reference %.4f ms "
          "[m%d], cpu %.2f ms\n"
          "  set_points: gpu %.4f ms (pinned %.4f, device positions %.4f, first %.2f), "
          "reference %.4f ms (best %.4f), cpu %.2f ms\n",
          gpu_ms, stage[0], stage[1], stage[2], by_sigma[0], by_sigma[1], ref.execute_ms,
          ref.method, cpu_ms, gst.host_ms, gst.pinned_ms, gst.device_ms, gst.first_ms,
          ref.set_points_ms,
          ref.set_points_best_ms, cst.host_ms);
  free(k);
  free(out_gpu);
  free(out_cpu);
  return rc;
}

int bench_nufft(const bench_ctx *ctx) {
  mr_device *cpu, *gpu;
  int rc = bench_devices(ctx, &cpu, &gpu);
  if (rc < 0)
    return rc;
  bench_json *j = ctx->json;
  json_str(j, "note", "execute: CUDA events, median; set_points: wall clock to the end of its "
                      "device work, median after the first call (gpu_first_set_points_ms, which "
                      "with automatic upsampling, tuned for the case's type, measures both "
                      "upsamplings once per shape); "
                      "gpu_set_points_ms from host positions (upload included; _pinned: from "
                      "pinned host memory), "
                      "gpu_set_points_device_ms from device positions as the reference takes "
                      "them; points_per_s = points x coils / s; reference_*: cuFINUFFT in this "
                      "run on the same points and data, its fastest method (set_points_best: "
                      "its fastest set_points over the methods); issue_reference_ms: the "
                      "figures issue 5 gave");
  const nufft_case *cases = ctx->quick ? quick : full;
  size_t ncases = ctx->quick ? sizeof quick / sizeof *quick : sizeof full / sizeof *full;
  const char *only = getenv("MR_BENCH_NUFFT_CASE");
  json_open(j, "cases", '[');
  for (size_t i = 0; rc == 0 && i < ncases; i++)
    if (only == NULL || (size_t)atoi(only) == i)
      rc = run_case(ctx, &cases[i], gpu, cpu);
  json_close(j, ']');
  bench_devices_release(ctx, cpu, gpu);
  return rc;
}
