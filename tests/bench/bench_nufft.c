/* mr-bench nufft: NUFFT set_points and execute times, ours on the GPU and
 * the CPU and the reference GPU library's (cuFINUFFT, loaded with dlopen
 * when it can be found: nufft_reference.h) in the same run, on the same
 * points and data, with each one's error against the exact sum.
 *
 * The matrix of issue 15: uniform random, radial, spiral and golden-angle
 * trajectories; 2D 256^2 x 8 coils and 3D 128^3; types 1 and 2; tolerances
 * 1e-2, 1e-4 and 1e-6. For each trajectory, shape and type, ours runs at a
 * ladder of tolerances (1e-1 .. 1e-6), each with its error against the
 * exact sum in double precision on a random subset of the output, so that
 * each case can also be compared at matched accuracy: our fastest run whose
 * error is no larger than the reference's.
 *
 * Each case: a plan with the automatic upsampling tuned for the case's
 * type, made for the case's point count (max_points), its creation timed
 * (the first plan of a shape also measures the upsamplings); set_points
 * timed (the first call apart, from device memory on a GPU, the host's on
 * the CPU; then the median of several, wall clock to
 * the end of the device work, positions from host memory and, on the GPU,
 * from pinned host memory and from device memory as the reference takes
 * them, the last also split into its stages by CUDA events:
 * gpu_set_points_stage_ms, placing, scan, scatter); random data resident
 * on the device, then
 * execute timed (median of several runs after warm-up; CUDA events on the
 * GPU). points_per_s counts sample-vector pairs: points x coils / seconds.
 * The GPU is also timed at each fixed upsampling (2 and 1.25), to show what
 * the automatic choice chose from, and its output is compared with the
 * CPU's (gpu_cpu_rel_diff) and the reference's (gpu_reference_rel_diff);
 * gpu_stage_ms splits a GPU run into its three passes (spreading or
 * deapodize-and-pad, FFT, deapodize-and-crop or interpolation), each with
 * its physical limits (write_limits). gpu_empty_call_ms is the floor under
 * every synchronous GPU call: one that does nothing, handed to the lane's
 * worker and back.
 *
 * MR_BENCH_NUFFT_CASE=i in the environment runs group i alone (trajectory
 * and type, 2D first: 0 .. 15, for a profiler); MR_BENCH_CUFINUFFT (or
 * --reference) names the reference library's file. */
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
#include "test_err.h"
#include "test_support.h"
#ifdef MR_HAVE_CUDA
#include "nufft_impl.h"
#endif

#define GPU_WARMUP 3
#define GPU_REPS 15
#define CPU_WARMUP 1
#define CPU_REPS 3
#define SET_POINTS_REPS 9

/* One transform of the matrix: a trajectory on a shape, a type, a
 * tolerance. npoints is what the trajectory asks for; it lays out whole
 * spokes, interleaves or planes, so its count may be a little less. */
typedef struct nufft_case {
  const char *trajectory;
  int rank;
  size_t n, coils, npoints;
  double tol;
  mr_nufft_direction dir;
} nufft_case;

/* The shapes of issue 15 (2D 256^2 x 8 coils, 3D 128^3), or small ones. */
typedef struct nufft_shape {
  int rank;
  size_t n, coils, npoints;
} nufft_shape;

static const nufft_shape full_shapes[] = {{2, 256, 8, 131072}, {3, 128, 1, 284592}};
static const nufft_shape quick_shapes[] = {{2, 32, 2, 2048}, {3, 16, 1, 4096}};
static const char *const trajectories[] = {"random", "radial", "spiral", "golden_angle"};
static const double case_tols[] = {1e-2, 1e-4, 1e-6};
/* The tolerances ours also runs at, for the comparison at matched accuracy. */
static const double ladder_tols[] = {1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4,
                                     3e-5, 1e-5, 3e-6, 1e-6};
#define NLADDER (sizeof ladder_tols / sizeof *ladder_tols)
/* Elements of the output compared with the exact sum (random ones). */
#define EXACT_SUBSET 48

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 40;
}

static double frac(double x) { return x - floor(x); }

/* Spokes through the centre, 2n samples each in [-0.5, 0.5) along the unit
 * direction dir; returns the samples written. */
static size_t spoke(const double *dir, int rank, size_t n, float *k) {
  size_t per = 2 * n;
  for (size_t i = 0; i < per; i++) {
    double r = ((double)i - (double)n) / (double)per;
    for (int d = 0; d < rank; d++)
      k[i * rank + d] = (float)(r * dir[d]);
  }
  return per;
}

/* A 2D spiral of `per` samples per interleave, `leaves` interleaves, its
 * turns spaced at the Nyquist distance 1/n between interleaves; writes x, y
 * (and z when rank 3) for each sample. */
static size_t spiral(size_t n, size_t leaves, size_t per, int rank, double z, float *k) {
  double turns = (double)n / (2.0 * leaves);
  for (size_t l = 0; l < leaves; l++)
    for (size_t i = 0; i < per; i++) {
      double t = (double)i / per, a = 2 * M_PI * (turns * t + (double)l / leaves);
      float *p = k + (l * per + i) * rank;
      p[0] = (float)(0.5 * t * cos(a));
      p[1] = (float)(0.5 * t * sin(a));
      if (rank == 3)
        p[2] = (float)z;
    }
  return leaves * per;
}

/* Positions k[npoints][rank] in cycles per pixel, [-0.5, 0.5): uniform
 * random; radial (spokes at evenly spread angles, in 3D evenly spread on
 * the sphere); spiral (interleaved Archimedean spirals, in 3D a stack of
 * them, one per kz plane); golden_angle (spokes at the golden angle, in 3D
 * Chan's 2D golden means). Returns the count, <= c->npoints. */
static size_t make_points(const nufft_case *c, float *k) {
  const int rank = c->rank;
  const size_t n = c->n;
  size_t m = 0;
  if (strcmp(c->trajectory, "random") == 0) {
    uint64_t s = 12345;
    for (size_t i = 0; i < c->npoints * (size_t)rank; i++)
      k[i] = (float)(lcg(&s) / (double)(1ull << 24) - 0.5);
    return c->npoints;
  }
  if (strcmp(c->trajectory, "spiral") == 0) {
    size_t leaves = 16, planes = rank == 3 ? n : 1;
    size_t per = c->npoints / (planes * leaves);
    for (size_t p = 0; p < planes; p++)
      m += spiral(n, leaves, per, rank, ((double)p - (double)(n / 2)) / n, k + m * rank);
    return m;
  }
  int golden = strcmp(c->trajectory, "golden_angle") == 0;
  size_t spokes = c->npoints / (2 * n);
  for (size_t s = 0; s < spokes; s++) {
    double dir[3];
    if (rank == 2) {
      double a = golden ? s * M_PI * (sqrt(5.0) - 1.0) / 2.0 : M_PI * s / spokes;
      dir[0] = cos(a);
      dir[1] = sin(a);
    } else {
      /* cos(polar) in (-1, 1) and the azimuth: evenly spread (Fibonacci
       * sphere) or golden means 0.4656, 0.6823 (Chan et al. 2009). */
      double cz = golden ? 2 * frac(s * 0.46557123) - 1 : 1 - (2.0 * s + 1) / spokes;
      double az = golden ? 2 * M_PI * frac(s * 0.68232780) : s * M_PI * (3.0 - sqrt(5.0));
      double rxy = sqrt(1 - cz * cz);
      dir[0] = rxy * cos(az);
      dir[1] = rxy * sin(az);
      dir[2] = cz;
    }
    m += spoke(dir, rank, n, k + m * rank);
  }
  return m;
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

static int execute_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  timed *t = arg;
  return mr_nufft_execute(t->plan, t->dir, mr_buf_data(t->in), mr_buf_data(t->out), err);
}

static size_t image_size(const nufft_case *c) {
  return c->rank == 2 ? c->n * c->n : c->n * c->n * c->n;
}

/* Plan creation and set_points times: the first call, then medians from
 * host memory and (GPU) from pinned host and device memory; NaN where not
 * measured. */
typedef struct set_times {
  double plan_ms, first_ms, host_ms, pinned_ms, device_ms;
  double stage_ms[3]; /* GPU, from device memory: placing, scan, finish (CUDA events, median) */
} set_times;

/* Median wall time of set_points, from host memory (kd NULL) or from the
 * device's copy kd. */
static int time_set_points(mr_nufft_plan *plan, size_t n, const float *k, mr_buf *kd,
                           double *ms) {
  double t[SET_POINTS_REPS];
  for (int r = 0; r < SET_POINTS_REPS; r++) {
    double t0 = bench_now_ms();
    int rc = kd != NULL ? mr_nufft_set_points_device(plan, n, mr_buf_data(kd), TERR)
                        : mr_nufft_set_points(plan, n, k, TERR);
    if (rc < 0)
      return rc;
    t[r] = bench_now_ms() - t0;
  }
  *ms = bench_median(t, SET_POINTS_REPS);
  return 0;
}

/* The first call from where the positions are (device memory on a GPU, as
 * the device medians and the reference take them), then the medians. */
static int measure_set_points(mr_device *dev, mr_nufft_plan *plan, const nufft_case *c,
                              const float *k, set_times *st) {
  int gpu = mr_device_is_gpu(dev);
  mr_buf *kd = NULL;
  void *pinned = NULL;
  size_t bytes = c->npoints * (size_t)c->rank * sizeof *k;
  int rc = gpu ? mr_buf_create(dev, bytes, &kd, TERR) : 0;
  if (rc == 0 && gpu)
    rc = mr_buf_upload(kd, 0, k, bytes, TERR);
  double t0 = bench_now_ms();
  if (rc == 0)
    rc = gpu ? mr_nufft_set_points_device(plan, c->npoints, mr_buf_data(kd), TERR)
             : mr_nufft_set_points(plan, c->npoints, k, TERR);
  st->first_ms = bench_now_ms() - t0;
  if (rc == 0)
    rc = time_set_points(plan, c->npoints, k, NULL, &st->host_ms);
  if (rc == 0 && gpu)
    rc = mr_host_alloc(dev, bytes, &pinned, TERR);
  if (rc == 0 && gpu) {
    memcpy(pinned, k, bytes);
    rc = time_set_points(plan, c->npoints, pinned, NULL, &st->pinned_ms);
  }
  if (rc == 0 && gpu)
    rc = time_set_points(plan, c->npoints, k, kd, &st->device_ms);
#ifdef MR_HAVE_CUDA
  double stage[3][SET_POINTS_REPS];
  for (int r = 0; rc == 0 && gpu && r < SET_POINTS_REPS; r++) {
    float f[3];
    rc = mr_nufft_cuda_set_points_stage_times(plan, c->npoints, mr_buf_data(kd), f, TERR);
    for (int i = 0; i < 3; i++)
      stage[i][r] = f[i];
  }
  for (int i = 0; rc == 0 && gpu && i < 3; i++)
    st->stage_ms[i] = bench_median(stage[i], SET_POINTS_REPS);
#endif
  mr_buf_destroy(kd);
  mr_host_free(dev, pinned);
  return rc;
}

/* Median execute time on dev at the given upsampling (0: automatic) on
 * the input host (borrowed); the output is copied to result (may be NULL) and the plan's choices to info,
 * set_points times to st (may be NULL: set once, untimed). NaN time when
 * the plan refuses the upsampling. */
static int measure(mr_device *dev, const nufft_case *c, const float *k, const mr_cfloat *host,
                   double upsampling, mr_cfloat *result, mr_nufft_info *info, double *ms, double stage_ms[3],
                   set_times *st) {
  int gpu = mr_device_is_gpu(dev);
  mr_nufft_opts o = {.rank = c->rank, .dims = {c->n, c->n, c->rank == 3 ? c->n : 1},
                     .batch = c->coils, .tol = c->tol, .upsampling = upsampling,
                     .tune_for = c->dir, .max_points = c->npoints};
  size_t nin = (c->dir == MR_NUFFT_ADJOINT ? c->npoints : image_size(c)) * c->coils;
  size_t nout = (c->dir == MR_NUFFT_ADJOINT ? image_size(c) : c->npoints) * c->coils;
  timed t = {.dir = c->dir};
  *ms = NAN;
  double t0 = bench_now_ms();
  int rc = mr_nufft_plan_create(dev, &o, &t.plan, TERR);
  if (st != NULL)
    st->plan_ms = bench_now_ms() - t0;
  if (rc == MR_EINVAL && upsampling != 0)
    return 0;
  if (rc == 0)
    rc = st != NULL ? measure_set_points(dev, t.plan, c, k, st)
                    : mr_nufft_set_points(t.plan, c->npoints, k, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, nin * sizeof *host, &t.in, TERR);
  if (rc == 0)
    rc = mr_buf_upload(t.in, 0, host, nin * sizeof *host, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, nout * sizeof(mr_cfloat), &t.out, TERR);
  double times[GPU_REPS];
  int reps = gpu ? GPU_REPS : CPU_REPS;
  if (rc == 0)
    rc = mr_device_time(dev, execute_task, &t, gpu ? GPU_WARMUP : CPU_WARMUP, reps, times, TERR);
  if (rc == 0) {
    *ms = bench_median(times, reps);
    mr_nufft_info_get(t.plan, info);
  }
  if (rc == 0 && result != NULL)
    rc = mr_buf_download(t.out, 0, result, nout * sizeof *result, TERR);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && stage_ms != NULL && gpu) {
    double st[3][GPU_REPS];
    for (int r = 0; rc == 0 && r < GPU_REPS; r++) {
      float f[3];
      rc = mr_nufft_cuda_stage_times(t.plan, t.dir, mr_buf_data(t.in), mr_buf_data(t.out), f, TERR);
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
            mr_test_last_error());
  mr_buf_destroy(t.in);
  mr_buf_destroy(t.out);
  mr_nufft_plan_destroy(t.plan);
  return rc;
}

/* The exact answers, in double, at EXACT_SUBSET random elements of the
 * output (indices into the output [coils][pixels or samples]). */
typedef struct exact_subset {
  size_t index[EXACT_SUBSET];
  double complex value[EXACT_SUBSET];
} exact_subset;

/* Mode of image index i along a dimension of n (the centre at n/2). */
static double mode(size_t i, size_t n) { return (double)i - (double)(n / 2); }

static int exact_make(const nufft_case *c, const float *k, const mr_cfloat *in, exact_subset *e) {
  const int adj = c->dir == MR_NUFFT_ADJOINT, rank = c->rank;
  const size_t n = c->n, npix = image_size(c), per = adj ? npix : c->npoints;
  double complex *f = malloc(3 * n * sizeof *f);
  if (f == NULL)
    return MR_ENOMEM;
  uint64_t s = 999;
  for (int i = 0; i < EXACT_SUBSET; i++) {
    size_t idx = ((lcg(&s) << 24) | lcg(&s)) % (per * c->coils), coil = idx / per, r = idx % per;
    double complex sum = 0;
    if (adj) { /* pixel r: sum_j c_j exp(+2 pi i k_j . m) */
      double m[3] = {mode(r % n, n), mode(r / n % n, n), rank == 3 ? mode(r / (n * n), n) : 0};
      const mr_cfloat *cj = in + coil * c->npoints;
      for (size_t j = 0; j < c->npoints; j++) {
        double ph = 0;
        for (int d = 0; d < rank; d++)
          ph += (double)k[j * rank + d] * m[d];
        sum += cj[j] * cexp(2 * M_PI * I * ph);
      }
    } else { /* sample r: sum_m f_m exp(-2 pi i k_r . m), separable */
      for (int d = 0; d < 3; d++)
        for (size_t x = 0; x < n; x++)
          f[d * n + x] = d < rank ? cexp(-2 * M_PI * I * (double)k[r * rank + d] * mode(x, n)) : 1;
      const mr_cfloat *img = in + coil * npix;
      for (size_t z = 0; z < (rank == 3 ? n : 1); z++)
        for (size_t y = 0; y < n; y++) {
          const mr_cfloat *row = img + (z * n + y) * n;
          double complex rs = 0;
          for (size_t x = 0; x < n; x++)
            rs += row[x] * f[x];
          sum += rs * f[n + y] * f[2 * n + z];
        }
    }
    e->index[i] = idx;
    e->value[i] = sum;
  }
  free(f);
  return 0;
}

/* Relative error of out on the subset. */
static double exact_error(const mr_cfloat *out, const exact_subset *e) {
  double num = 0, den = 0;
  for (int i = 0; i < EXACT_SUBSET; i++) {
    double complex d = out[e->index[i]] - e->value[i];
    num += creal(d) * creal(d) + cimag(d) * cimag(d);
    den += creal(e->value[i]) * creal(e->value[i]) + cimag(e->value[i]) * cimag(e->value[i]);
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Ours (the GPU's, or the CPU's without a GPU) at one tolerance with the
 * automatic upsampling. */
typedef struct ours {
  double ms, error, stage[3];
  mr_nufft_info info;
  set_times st;
} ours;

/* Writes the physical limits of our transform: the work and the bytes the
 * algorithm must do at the plan's grid and width, for the whole transform
 * and for each of its three stages. Per sample: rank x w kernel values
 * (counted 12 flops each, exp and sqrt included), their w^rank products,
 * and per coil a complex-by-real multiply-add per tap (4 flops); the FFT
 * 5 G log2 G per coil; deapodizing a complex-by-real product per pixel.
 * Bytes: samples and positions read once, the grid written (or read) once
 * by spreading (or interpolation) and read and written once by the FFT,
 * the image read or written once. */
static void write_limits(bench_json *j, const nufft_case *c, const ours *o) {
  const int adj = c->dir == MR_NUFFT_ADJOINT;
  double m = (double)c->npoints, coils = (double)c->coils, w = o->info.width;
  double taps = pow(w, c->rank), npix = (double)image_size(c);
  double cells = (double)o->info.grid[0] * o->info.grid[1] * (c->rank == 3 ? o->info.grid[2] : 1);
  double kernel_gflop = m * (12.0 * c->rank * w + taps + 4.0 * coils * taps) * 1e-9;
  double fft_gflop = 5.0 * coils * cells * log2(cells) * 1e-9;
  double scale_gflop = 2.0 * coils * npix * 1e-9;
  double samples_mb = 8e-6 * m * coils, points_mb = 4e-6 * c->rank * m;
  double grid_mb = 8e-6 * coils * cells, image_mb = 8e-6 * coils * npix;
  double kernel_mb = samples_mb + points_mb + grid_mb, fft_mb = 2 * grid_mb;
  double scale_mb = adj ? 2 * image_mb : image_mb + grid_mb;
  bench_limits(j, "gpu_", kernel_gflop + fft_gflop + scale_gflop, kernel_mb + fft_mb + scale_mb,
               o->ms, BENCH_FP32);
  bench_limits(j, adj ? "gpu_spread_" : "gpu_pad_", adj ? kernel_gflop : scale_gflop,
               adj ? kernel_mb : scale_mb, o->stage[0], BENCH_FP32);
  bench_limits(j, "gpu_fft_", fft_gflop, fft_mb, o->stage[1], BENCH_FP32);
  bench_limits(j, adj ? "gpu_crop_" : "gpu_interp_", adj ? scale_gflop : kernel_gflop,
               adj ? scale_mb : kernel_mb, o->stage[2], BENCH_FP32);
}

#define NCASE_TOLS (sizeof case_tols / sizeof *case_tols)

/* The buffers of one trajectory, shape and type. */
typedef struct group {
  nufft_case c; /* tol unset */
  float *k;
  /* out: ours at each case's tolerance, then at the ladder's other rungs */
  mr_cfloat *in, *out[NCASE_TOLS + 1], *out_cpu, *out_ref;
  exact_subset exact;
  ours ladder[NLADDER];
} group;

/* Index of tol in the ladder (every case's tol is on it). */
static size_t ladder_index(double tol) {
  size_t i = 0;
  while (i + 1 < NLADDER && ladder_tols[i] != tol)
    i++;
  return i;
}

/* Case t of the group, after its ladder ran. */
static int run_case(const bench_ctx *ctx, group *g, size_t t, mr_device *gpu, mr_device *cpu) {
  nufft_case c = g->c;
  c.tol = case_tols[t];
  const ours *o = &g->ladder[ladder_index(c.tol)];
  const mr_cfloat *out = g->out[t];
  const int adj = c.dir == MR_NUFFT_ADJOINT;
  size_t nout = (adj ? image_size(&c) : c.npoints) * c.coils;
  char shape[64];
  if (c.rank == 2)
    snprintf(shape, sizeof shape, "%zux%zu", c.n, c.n);
  else
    snprintf(shape, sizeof shape, "%zux%zux%zu", c.n, c.n, c.n);
  fprintf(stderr, "mr-bench: nufft type %d %s %s x %zu, %zu points, tol %.0e\n", adj ? 1 : 2,
          c.trajectory, shape, c.coils, c.npoints, c.tol);
  double by_sigma[2] = {NAN, NAN}, cpu_ms = o->ms, cpu_error = o->error, cpu_diff = NAN;
  set_times cst = o->st;
  mr_nufft_info scratch;
  static const double sigmas[2] = {2.0, 1.25};
  int rc = 0;
  if (gpu != NULL) {
    for (int s = 0; rc == 0 && s < 2; s++)
      rc = measure(gpu, &c, g->k, g->in, sigmas[s], NULL, &scratch, &by_sigma[s], NULL, NULL);
    if (rc == 0)
      rc = measure(cpu, &c, g->k, g->in, 0, g->out_cpu, &scratch, &cpu_ms, NULL, &cst);
    if (rc == 0) {
      cpu_error = exact_error(g->out_cpu, &g->exact);
      cpu_diff = mr_test_rel_error_c(out, g->out_cpu, nout);
    }
  }
  nufft_reference_result ref = {-1, NAN, NAN, NAN, NAN, {NAN, NAN, NAN}};
  double ref_diff = NAN, ref_error = NAN;
#ifdef MR_HAVE_CUDA
  if (rc == 0 && gpu != NULL && nufft_reference_available()) {
    size_t dims[3] = {c.n, c.n, c.n};
    if (nufft_reference_run(mr_device_ordinal(gpu), adj ? 1 : 2, c.rank, dims, c.coils,
                            c.npoints, g->k, g->in, g->out_ref, c.tol, GPU_REPS, &ref) == 0) {
      ref_diff = mr_test_rel_error_c(out, g->out_ref, nout);
      ref_error = exact_error(g->out_ref, &g->exact);
    }
  }
#endif
  /* At matched accuracy: our fastest run whose error is no larger. */
  int matched = -1;
  for (size_t i = 0; i < NLADDER; i++)
    if (g->ladder[i].error <= ref_error && (matched < 0 || g->ladder[i].ms < g->ladder[matched].ms))
      matched = (int)i;
  double pairs = (double)c.npoints * c.coils;
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_int(j, "type", adj ? 1 : 2);
  json_str(j, "trajectory", c.trajectory);
  json_str(j, "shape", shape);
  json_int(j, "coils", (long long)c.coils);
  json_int(j, "points", (long long)c.npoints);
  json_num(j, "tol", c.tol);
  json_num(j, "upsampling", o->info.upsampling);
  json_int(j, "grid", (long long)o->info.grid[0]);
  json_int(j, "width", o->info.width);
  json_int(j, "bin_entries", (long long)o->info.entries);
  double gpu_ms = gpu != NULL ? o->ms : NAN;
  json_num(j, "gpu_ms", gpu_ms);
  json_num(j, "gpu_error", gpu != NULL ? o->error : NAN);
  json_num(j, "gpu_points_per_s", pairs / gpu_ms * 1e3);
  json_open(j, "gpu_stage_ms", '[');
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, gpu != NULL ? o->stage[i] : NAN);
  json_close(j, ']');
  json_num(j, "gpu_ms_upsampling_2", by_sigma[0]);
  json_num(j, "gpu_ms_upsampling_1_25", by_sigma[1]);
  json_num(j, "gpu_set_points_ms", gpu != NULL ? o->st.host_ms : NAN);
  json_num(j, "gpu_set_points_pinned_ms", gpu != NULL ? o->st.pinned_ms : NAN);
  json_num(j, "gpu_set_points_device_ms", gpu != NULL ? o->st.device_ms : NAN);
  json_open(j, "gpu_set_points_stage_ms", '[');
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, gpu != NULL ? o->st.stage_ms[i] : NAN);
  json_close(j, ']');
  json_num(j, "gpu_first_set_points_ms", gpu != NULL ? o->st.first_ms : NAN);
  json_num(j, "gpu_plan_create_ms", gpu != NULL ? o->st.plan_ms : NAN);
  json_num(j, "reference_ms", ref.execute_ms);
  json_int(j, "reference_method", ref.method);
  json_open(j, "reference_ms_by_method", '[');
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, ref.execute_ms_by_method[i]);
  json_close(j, ']');
  json_num(j, "reference_error", ref_error);
  json_num(j, "reference_upsampling", ref.upsampling);
  json_num(j, "reference_set_points_ms", ref.set_points_ms);
  json_num(j, "reference_set_points_best_ms", ref.set_points_best_ms);
  json_num(j, "speedup_vs_reference", ref.execute_ms / gpu_ms);
  json_num(j, "set_points_speedup_vs_reference", ref.set_points_best_ms / o->st.device_ms);
  json_num(j, "gpu_reference_rel_diff", ref_diff);
  json_num(j, "matched_tol", matched >= 0 ? ladder_tols[matched] : NAN);
  json_num(j, "matched_gpu_ms", matched >= 0 ? g->ladder[matched].ms : NAN);
  json_num(j, "matched_gpu_error", matched >= 0 ? g->ladder[matched].error : NAN);
  json_num(j, "matched_speedup_vs_reference",
           matched >= 0 ? ref.execute_ms / g->ladder[matched].ms : NAN);
  json_open(j, "gpu_ladder", '[');
  for (size_t i = 0; gpu != NULL && i < NLADDER; i++) {
    json_open(j, NULL, '[');
    json_num(j, NULL, ladder_tols[i]);
    json_num(j, NULL, g->ladder[i].ms);
    json_num(j, NULL, g->ladder[i].error);
    json_close(j, ']');
  }
  json_close(j, ']');
  if (gpu != NULL)
    write_limits(j, &c, o);
  json_num(j, "cpu_set_points_ms", cst.host_ms);
  json_num(j, "cpu_ms", cpu_ms);
  json_num(j, "cpu_error", cpu_error);
  json_num(j, "cpu_points_per_s", pairs / cpu_ms * 1e3);
  json_num(j, "gpu_speedup_vs_cpu", cpu_ms / gpu_ms);
  json_num(j, "gpu_cpu_rel_diff", cpu_diff);
  json_close(j, '}');
  fflush(j->f);
  fprintf(stderr,
          "  gpu %.4f ms err %.2e (stages %.4f %.4f %.4f; sigma 2: %.4f, 1.25: %.4f), reference "
          "%.4f ms err %.2e [m%d], matched: ours %.4f ms at tol %g; cpu %.2f ms err %.2e\n",
          gpu_ms, o->error, o->stage[0], o->stage[1], o->stage[2], by_sigma[0], by_sigma[1],
          ref.execute_ms, ref_error, ref.method,
          matched >= 0 ? g->ladder[matched].ms : NAN, matched >= 0 ? ladder_tols[matched] : NAN,
          cpu_ms, cpu_error);
  return rc;
}

/* Every case of one trajectory, shape and type: ours over the ladder of
 * tolerances (its error against the exact subset), then each case. */
static int run_group(const bench_ctx *ctx, group *g, mr_device *gpu, mr_device *cpu) {
  nufft_case *c = &g->c;
  const int adj = c->dir == MR_NUFFT_ADJOINT;
  c->npoints = make_points(c, g->k);
  size_t nin = (adj ? c->npoints : image_size(c)) * c->coils;
  random_values(g->in, nin, 77);
  int rc = exact_make(c, g->k, g->in, &g->exact);
  mr_device *dev = gpu != NULL ? gpu : cpu;
  for (size_t i = 0; rc == 0 && i < NLADDER; i++) {
    nufft_case at = *c;
    at.tol = ladder_tols[i];
    ours *o = &g->ladder[i];
    size_t t = 0; /* the case of this tolerance, NCASE_TOLS if none */
    while (t < NCASE_TOLS && case_tols[t] != at.tol)
      t++;
    mr_cfloat *out = g->out[t];
    o->st = (set_times){NAN, NAN, NAN, NAN, NAN, {NAN, NAN, NAN}};
    for (int s = 0; s < 3; s++)
      o->stage[s] = NAN;
    rc = measure(dev, &at, g->k, g->in, 0, out, &o->info, &o->ms, gpu != NULL ? o->stage : NULL,
                 t < NCASE_TOLS ? &o->st : NULL);
    o->error = exact_error(out, &g->exact);
  }
  /* after the whole ladder: each case compares with all of it */
  for (size_t t = 0; rc == 0 && t < NCASE_TOLS; t++)
    rc = run_case(ctx, g, t, gpu, cpu);
  return rc;
}

static int empty_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)arg;
  (void)err;
  return 0;
}

#define EMPTY_CALLS 99

/* Median wall time of a synchronous GPU call that does nothing. */
static int time_empty_call(mr_device *gpu, double *ms) {
  double t[EMPTY_CALLS];
  for (int r = 0; r < EMPTY_CALLS; r++) {
    double t0 = bench_now_ms();
    int rc = mr_device_run(gpu, empty_task, NULL, TERR);
    if (rc < 0)
      return rc;
    t[r] = bench_now_ms() - t0;
  }
  *ms = bench_median(t, EMPTY_CALLS);
  return 0;
}

int bench_nufft(const bench_ctx *ctx) {
  mr_device *cpu, *gpu;
  int rc = bench_devices(ctx, &cpu, &gpu);
  if (rc < 0)
    return rc;
  bench_json *j = ctx->json;
  json_str(j, "note", "execute: CUDA events, median; set_points: wall clock to the end of its "
                      "device work, median after the first call (gpu_first_set_points_ms, from "
                      "device memory) of a plan made for the case's point count (max_points); "
                      "gpu_plan_create_ms: "
                      "that plan's creation, which for the first plan of a shape measures the "
                      "automatic upsamplings, tuned for the case's type; gpu_empty_call_ms: a "
                      "GPU call that does nothing (the hand-over to the lane's worker and back, "
                      "an empty stream's synchronisation), median of 99; "
                      "gpu_set_points_ms from host positions (upload included; _pinned: from "
                      "pinned host memory), "
                      "gpu_set_points_device_ms from device positions as the reference takes "
                      "them, gpu_set_points_stage_ms its stages (placing and counting, the scan, "
                      "the scatter and subproblems; CUDA events, median of 9); points_per_s = points x coils / s; *_error: relative error against "
                      "the exact sum in double precision on 48 random output elements; "
                      "reference_*: cuFINUFFT in this run on the same points and data, its "
                      "fastest method (set_points_best: its fastest set_points over the "
                      "methods; by_method: methods 1, 2, 3); matched_*: ours at the tolerance of "
                      "gpu_ladder ([tol, ms, error]) that is fastest with an error no larger "
                      "than the reference's; gpu_*_gflops/gbps/pct: the work and bytes the "
                      "algorithm must do at our grid and width (bench_nufft.c, write_limits) "
                      "against the H100's peaks, whole and per stage");
  if (gpu != NULL) {
    double empty_ms;
    rc = time_empty_call(gpu, &empty_ms);
    json_num(j, "gpu_empty_call_ms", rc == 0 ? empty_ms : NAN);
  }
  const nufft_shape *shapes = ctx->quick ? quick_shapes : full_shapes;
  const char *only = getenv("MR_BENCH_NUFFT_CASE");
  json_open(j, "cases", '[');
  int index = 0;
  for (int s = 0; rc == 0 && s < 2; s++) {
    const nufft_shape *sh = &shapes[s];
    size_t npix = sh->rank == 2 ? sh->n * sh->n : sh->n * sh->n * sh->n;
    size_t most = (npix > sh->npoints ? npix : sh->npoints) * sh->coils;
    group g = {.k = malloc(sh->npoints * sh->rank * sizeof(float)),
               .in = malloc(most * sizeof(mr_cfloat)),
               .out_cpu = malloc(most * sizeof(mr_cfloat)),
               .out_ref = malloc(most * sizeof(mr_cfloat))};
    int ok = g.k != NULL && g.in != NULL && g.out_cpu != NULL && g.out_ref != NULL;
    for (size_t t = 0; t <= NCASE_TOLS; t++)
      ok &= (g.out[t] = malloc(most * sizeof(mr_cfloat))) != NULL;
    if (!ok)
      rc = MR_ENOMEM;
    for (size_t t = 0; rc == 0 && t < sizeof trajectories / sizeof *trajectories; t++)
      for (int type = 1; rc == 0 && type <= 2; type++, index++) {
        if (only != NULL && atoi(only) != index)
          continue;
        g.c = (nufft_case){trajectories[t], sh->rank, sh->n, sh->coils, sh->npoints, 0,
                           type == 1 ? MR_NUFFT_ADJOINT : MR_NUFFT_FORWARD};
        rc = run_group(ctx, &g, gpu, cpu);
      }
    free(g.k);
    free(g.in);
    for (size_t t = 0; t <= NCASE_TOLS; t++)
      free(g.out[t]);
    free(g.out_cpu);
    free(g.out_ref);
  }
  json_close(j, ']');
  bench_devices_release(ctx, cpu, gpu);
  return rc;
}
