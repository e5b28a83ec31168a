/* nufft.h and density.h: both directions against the exact non-uniform DFT
 * in double precision for tolerances 1e-2, 1e-4 and 1e-6, 2D and 3D, both
 * grid oversamplings; the CPU group by default, the GPU with --cuda (its
 * device-resident and host-memory paths, a trajectory dense enough to split
 * bins, coils of very different scales on a crowded centre, Pipe-Menon against the CPU, the points binned on the GPU against
 * the host's binning, set_points and execute against the CPU plan, the
 * measured automatic upsampling, a plan's bound on its points). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "density.h"
#include "host.h"
#include "nufft.h"
#include "device_impl.h"
#include "nufft_impl.h"
#include "nufft_support.h"
#include "test_gpu_common.h"
#include "test_support.h"

typedef struct shape {
  int rank;
  size_t dims[3];
  size_t batch;
  size_t npoints;
} shape;

/* Odd, even and mixed sizes; more points than pixels, as in MRI. */
static const shape shapes[] = {
    {2, {30, 36, 1}, 2, 2500},
    {2, {17, 16, 1}, 1, 700},
    {3, {12, 10, 9}, 2, 1500},
};
static const double tols[] = {1e-2, 1e-4, 1e-6};
static const double upsamplings[] = {2.0, 1.25};

static size_t pixels(const shape *s) { return s->dims[0] * s->dims[1] * s->dims[2]; }

/* A problem and its exact answers. */
typedef struct problem {
  const shape *s;
  float *k;
  mr_cfloat *samples, *image;       /* inputs */
  double complex *image_ref, *samples_ref;
} problem;

static void problem_make(problem *p, const shape *s, const float *k, unsigned seed) {
  p->s = s;
  p->k = malloc(s->npoints * s->rank * sizeof *p->k);
  if (k != NULL)
    memcpy(p->k, k, s->npoints * s->rank * sizeof *p->k);
  else
    nufft_test_random_points(p->k, s->npoints, s->rank, seed);
  p->samples = malloc(s->npoints * s->batch * sizeof *p->samples);
  p->image = malloc(pixels(s) * s->batch * sizeof *p->image);
  p->image_ref = malloc(pixels(s) * s->batch * sizeof *p->image_ref);
  p->samples_ref = malloc(s->npoints * s->batch * sizeof *p->samples_ref);
  gpu_test_random(p->samples, s->npoints * s->batch, seed + 1);
  gpu_test_random(p->image, pixels(s) * s->batch, seed + 2);
  nufft_test_dft_adjoint(s->rank, s->dims, s->batch, s->npoints, p->k, p->samples, p->image_ref);
  nufft_test_dft_forward(s->rank, s->dims, s->batch, s->npoints, p->k, p->image, p->samples_ref);
}

static void problem_free(problem *p) {
  free(p->k);
  free(p->samples);
  free(p->image);
  free(p->image_ref);
  free(p->samples_ref);
}

/* How execute is called: with pointers on the device, or host memory. */
enum { DEVICE_POINTERS, HOST_MEMORY };

/* out = plan(in) for one direction, NaN-poisoned first so that an element
 * left unwritten fails the comparison. */
static void run(mr_nufft_plan *plan, mr_device *dev, int how, mr_nufft_direction dir,
                const mr_cfloat *in, size_t nin, mr_cfloat *out, size_t nout) {
  for (size_t i = 0; i < nout; i++)
    out[i] = NAN;
  if (how == HOST_MEMORY || !mr_device_is_gpu(dev)) {
    GPU_OK(mr_nufft_execute_host(plan, dir, in, out, TERR));
    return;
  }
  mr_buf *a = gpu_test_upload(dev, in, nin * sizeof *in);
  mr_buf *b = gpu_test_upload(dev, out, nout * sizeof *out);
  GPU_OK(mr_nufft_execute(plan, dir, mr_buf_data(a), mr_buf_data(b), TERR));
  GPU_OK(mr_buf_download(b, 0, out, nout * sizeof *out, TERR));
  mr_buf_destroy(a);
  mr_buf_destroy(b);
}

/* Both directions of a plan against the references; returns the larger
 * relative error. */
static double both_directions(const problem *p, mr_nufft_plan *plan, mr_device *dev, int how) {
  const shape *s = p->s;
  size_t nimg = pixels(s) * s->batch, nsmp = s->npoints * s->batch;
  mr_cfloat *img = malloc(nimg * sizeof *img), *smp = malloc(nsmp * sizeof *smp);
  run(plan, dev, how, MR_NUFFT_ADJOINT, p->samples, nsmp, img, nimg);
  double e1 = nufft_test_rel_error(img, p->image_ref, nimg);
  run(plan, dev, how, MR_NUFFT_FORWARD, p->image, nimg, smp, nsmp);
  double e2 = nufft_test_rel_error(smp, p->samples_ref, nsmp);
  free(img);
  free(smp);
  return e1 > e2 ? e1 : e2;
}

static void matches_dft(mr_device *dev, int how) {
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
    const shape *s = &shapes[t];
    problem p;
    problem_make(&p, s, NULL, (unsigned)t * 10);
    for (size_t i = 0; i < sizeof tols / sizeof *tols; i++)
      for (size_t u = 0; u < sizeof upsamplings / sizeof *upsamplings; u++) {
        mr_nufft_opts o = {.rank = s->rank,
                           .dims = {s->dims[0], s->dims[1], s->dims[2]},
                           .batch = s->batch,
                           .tol = tols[i],
                           .upsampling = upsamplings[u]};
        mr_nufft_plan *plan = NULL;
        int rc = mr_nufft_plan_create(dev, &o, &plan, TERR);
        if (rc == MR_EINVAL && upsamplings[u] < 2 && tols[i] < 1e-5) {
          /* single precision does not reach it on this grid: said, not run */
          print_message("%dD tol %.0e, sigma %.2f: refused (%s)\n", s->rank, tols[i],
                        upsamplings[u], mr_test_last_error());
          assert_null(plan);
          continue;
        }
        GPU_OK(rc);
        GPU_OK(mr_nufft_set_points(plan, s->npoints, p.k, TERR));
        mr_nufft_info info;
        mr_nufft_info_get(plan, &info);
        double err = both_directions(&p, plan, dev, how);
        print_message("%dD %zux%zux%zu batch %zu, %zu points, tol %.0e, sigma %.2f "
                      "(grid %zu, width %d, floor %.1e): rel error %.2e\n",
                      s->rank, s->dims[0], s->dims[1], s->dims[2], s->batch, s->npoints,
                      tols[i], upsamplings[u], info.grid[0], info.width, info.float_floor, err);
        if (!(err <= tols[i]))
          fail_msg("rel error %.3g above tol %.0e", err, tols[i]);
        mr_nufft_plan_destroy(plan);
      }
    problem_free(&p);
  }
}

static void cpu_matches_dft(void **state) {
  (void)state;
  matches_dft(gpu_test_cpu(), HOST_MEMORY);
}

/* A radial trajectory piles hundreds of samples into the central bins (on
 * the GPU, more than one block takes: they add instead of store). */
static void dense_centre(mr_device *dev, int how) {
  enum { SPOKES = 201, SAMPLES = 64 };
  shape s = {2, {32, 32, 1}, 3, SPOKES * SAMPLES};
  float *k = malloc(s.npoints * 2 * sizeof *k);
  nufft_test_radial_points(k, SPOKES, SAMPLES);
  problem p;
  problem_make(&p, &s, k, 7);
  free(k);
  mr_nufft_opts o = {.rank = 2, .dims = {32, 32}, .batch = s.batch, .tol = 1e-5};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(dev, &o, &plan, TERR));
  GPU_OK(mr_nufft_set_points(plan, s.npoints, p.k, TERR));
  double err = both_directions(&p, plan, dev, how);
  print_message("radial %d x %d: rel error %.2e\n", SPOKES, SAMPLES, err);
  assert_true(err <= 1e-5);
  mr_nufft_plan_destroy(plan);
  problem_free(&p);
}

static void cpu_dense_centre(void **state) {
  (void)state;
  dense_centre(gpu_test_cpu(), HOST_MEMORY);
}

/* Type 1 on a crowded 3D centre (bins of more entries than one staging
 * round, cut into pieces) with coils of very different scales: 1, 1e-4
 * and silence. Each coil's image must meet the tolerance on its own, and
 * the silent coil's must be exactly zero: on the GPU the spreading adds in
 * fixed point scaled per coil (one plane at 1e-4; with the rounding
 * remainders at 1e-6), so a scale shared by the block's coils would bury
 * the quiet coil under the loud one's rounding steps. */
static void coil_scales(mr_device *dev, int how) {
  enum { POINTS = 2000 };
  shape s = {3, {12, 12, 12}, 3, POINTS};
  float *k = malloc(POINTS * 3 * sizeof *k);
  nufft_test_random_points(k, POINTS, 3, 41);
  for (size_t i = 0; i < POINTS * 3; i++)
    k[i] *= 0.2f; /* every sample within a fifth of the centre */
  problem p;
  problem_make(&p, &s, k, 43);
  free(k);
  const float scales[3] = {1.0f, 1e-4f, 0.0f};
  for (size_t c = 0; c < 3; c++)
    for (size_t j = 0; j < POINTS; j++)
      p.samples[c * POINTS + j] *= scales[c];
  nufft_test_dft_adjoint(3, s.dims, s.batch, POINTS, p.k, p.samples, p.image_ref);
  size_t npix = pixels(&s);
  mr_cfloat *img = malloc(npix * s.batch * sizeof *img);
  const double coil_tols[] = {1e-4, 1e-6};
  for (size_t t = 0; t < 2; t++) {
    mr_nufft_opts o = {.rank = 3, .dims = {12, 12, 12}, .batch = 3, .tol = coil_tols[t],
                       .upsampling = 2.0};
    mr_nufft_plan *plan;
    GPU_OK(mr_nufft_plan_create(dev, &o, &plan, TERR));
    GPU_OK(mr_nufft_set_points(plan, POINTS, p.k, TERR));
    mr_nufft_info info;
    mr_nufft_info_get(plan, &info);
    run(plan, dev, how, MR_NUFFT_ADJOINT, p.samples, POINTS * s.batch, img, npix * s.batch);
    for (size_t c = 0; c < 2; c++) {
      double err = nufft_test_rel_error(img + c * npix, p.image_ref + c * npix, npix);
      print_message("tol %.0e, %zu entries: coil of scale %g, rel error %.2e\n", coil_tols[t],
                    info.entries, scales[c], err);
      if (!(err <= coil_tols[t]))
        fail_msg("coil %zu: rel error %.3g above tol %.0e", c, err, coil_tols[t]);
    }
    for (size_t i = 0; i < npix; i++)
      assert_true(img[2 * npix + i] == 0);
    mr_nufft_plan_destroy(plan);
  }
  free(img);
  problem_free(&p);
}

static void cpu_coil_scales(void **state) {
  (void)state;
  coil_scales(gpu_test_cpu(), HOST_MEMORY);
}

/* New points replace the old; no points give a zero image. */
static void points_replaced(void **state) {
  (void)state;
  const shape *s = &shapes[0];
  problem p;
  problem_make(&p, s, NULL, 3);
  mr_nufft_opts o = {.rank = 2, .dims = {s->dims[0], s->dims[1]}, .batch = s->batch,
                     .tol = 1e-4};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  float *other = malloc(s->npoints * 2 * sizeof *other);
  nufft_test_random_points(other, s->npoints, 2, 99);
  GPU_OK(mr_nufft_set_points(plan, s->npoints, other, TERR));
  GPU_OK(mr_nufft_set_points(plan, s->npoints, p.k, TERR));
  assert_true(both_directions(&p, plan, gpu_test_cpu(), HOST_MEMORY) <= 1e-4);

  size_t nimg = pixels(s) * s->batch;
  mr_cfloat *img = malloc(nimg * sizeof *img);
  GPU_OK(mr_nufft_set_points(plan, 0, NULL, TERR));
  GPU_OK(mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, NULL, img, TERR));
  for (size_t i = 0; i < nimg; i++)
    assert_true(img[i] == 0);
  mr_nufft_info info;
  mr_nufft_info_get(plan, &info);
  assert_int_equal(info.npoints, 0);
  free(img);
  free(other);
  mr_nufft_plan_destroy(plan);
  problem_free(&p);
}

/* A plan made for at most max_points positions takes fewer and as many,
 * refuses more with a clear error, and keeps the points it had. */
static void max_points_bound(mr_device *dev, int how) {
  const shape *s = &shapes[0];
  problem p;
  problem_make(&p, s, NULL, 7);
  mr_nufft_opts o = {.rank = 2, .dims = {s->dims[0], s->dims[1]}, .batch = s->batch,
                     .tol = 1e-4, .max_points = s->npoints};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(dev, &o, &plan, TERR));
  mr_nufft_info info;
  GPU_OK(mr_nufft_set_points(plan, s->npoints / 2, p.k, TERR));
  mr_nufft_info_get(plan, &info);
  assert_int_equal(info.npoints, s->npoints / 2);
  GPU_OK(mr_nufft_set_points(plan, s->npoints, p.k, TERR));
  assert_true(both_directions(&p, plan, dev, how) <= 1e-4);
  float *more = malloc((s->npoints + 1) * 2 * sizeof *more);
  nufft_test_random_points(more, s->npoints + 1, 2, 8);
  assert_int_equal(mr_nufft_set_points(plan, s->npoints + 1, more, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "made for at most"));
  mr_nufft_info_get(plan, &info);
  assert_int_equal(info.npoints, s->npoints);
  assert_true(both_directions(&p, plan, dev, how) <= 1e-4); /* the points it had */
  free(more);
  mr_nufft_plan_destroy(plan);
  o.max_points = (size_t)1 << 40;
  assert_int_equal(mr_nufft_plan_create(dev, &o, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "max_points"));
  problem_free(&p);
}

static void cpu_max_points(void **state) {
  (void)state;
  max_points_bound(gpu_test_cpu(), HOST_MEMORY);
}

static void bad_arguments(void **state) {
  (void)state;
  mr_device *cpu = gpu_test_cpu();
  mr_nufft_plan *plan = NULL;
  mr_nufft_opts rank1 = {.rank = 1, .dims = {8}, .batch = 1, .tol = 1e-3};
  mr_nufft_opts tol0 = {.rank = 2, .dims = {8, 8}, .batch = 1, .tol = 0};
  mr_nufft_opts sigma3 = {.rank = 2, .dims = {8, 8}, .batch = 1, .tol = 1e-3, .upsampling = 3};
  mr_nufft_opts nobatch = {.rank = 2, .dims = {8, 8}, .batch = 0, .tol = 1e-3};
  assert_int_equal(mr_nufft_plan_create(cpu, &rank1, &plan, TERR), MR_EINVAL);
  assert_int_equal(mr_nufft_plan_create(cpu, &tol0, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "tolerance"));
  assert_int_equal(mr_nufft_plan_create(cpu, &sigma3, &plan, TERR), MR_EINVAL);
  assert_int_equal(mr_nufft_plan_create(cpu, &nobatch, &plan, TERR), MR_EINVAL);
  mr_nufft_opts tune3 = {.rank = 2, .dims = {8, 8}, .batch = 1, .tol = 1e-3, .tune_for = 3};
  assert_int_equal(mr_nufft_plan_create(cpu, &tune3, &plan, TERR), MR_EINVAL);
  assert_null(plan);

  mr_nufft_opts ok = {.rank = 2, .dims = {8, 8}, .batch = 1, .tol = 1e-3};
  GPU_OK(mr_nufft_plan_create(cpu, &ok, &plan, TERR));
  mr_cfloat img[64], smp[2] = {1, 1};
  assert_int_equal(mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, smp, img, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "set_points"));
  float bad[4] = {0.1f, 0.2f, NAN, 0.0f};
  assert_int_equal(mr_nufft_set_points(plan, 2, bad, TERR), MR_EINVAL);
  assert_int_equal(mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, smp, img, TERR), MR_EINVAL);
  float fine[4] = {0.1f, 0.2f, 0.3f, 0.0f};
  GPU_OK(mr_nufft_set_points(plan, 2, fine, TERR));
  assert_int_equal(mr_nufft_execute_host(plan, 3, smp, img, TERR), MR_EINVAL);
  float w[2];
  assert_int_equal(mr_density_pipe_menon(plan, 0, w, TERR), MR_EINVAL);
  mr_nufft_plan_destroy(plan);
}

/* Samples on the image's own Cartesian grid each stand for 1/N^2 of
 * k-space: Pipe-Menon finds that away from the edges. */
static void density_cartesian(void **state) {
  (void)state;
  enum { N = 24 };
  float k[N * N * 2];
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      k[(y * N + x) * 2] = (float)(x - N / 2) / N;
      k[(y * N + x) * 2 + 1] = (float)(y - N / 2) / N;
    }
  mr_nufft_opts o = {.rank = 2, .dims = {N, N}, .batch = 1, .tol = 1e-4};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_nufft_set_points(plan, N * N, k, TERR));
  float w[N * N];
  GPU_OK(mr_density_pipe_menon(plan, 30, w, TERR));
  double worst = 0;
  for (int y = 4; y < N - 4; y++)
    for (int x = 4; x < N - 4; x++) {
      double dev = fabs(w[y * N + x] * N * N - 1);
      worst = dev > worst ? dev : worst;
    }
  print_message("Cartesian: interior weights within %.2e of 1/N^2\n", worst);
  assert_true(worst < 0.02);
  mr_nufft_plan_destroy(plan);
}

/* On a radial trajectory Pipe-Menon agrees with the analytic weights at
 * mid radii, and the analytic ones add up to the disc's area. */
static void density_radial(void **state) {
  (void)state;
  enum { N = 32, SPOKES = 51, SAMPLES = 64 };
  size_t n = SPOKES * SAMPLES;
  float *k = malloc(n * 2 * sizeof *k), *pm = malloc(n * sizeof *pm), *an = malloc(n * sizeof *an);
  nufft_test_radial_points(k, SPOKES, SAMPLES);
  GPU_OK(mr_density_radial(2, n, k, SPOKES, 1.0 / SAMPLES, an, TERR));
  double area = 0;
  for (size_t j = 0; j < n; j++)
    area += an[j];
  print_message("radial: analytic weights sum to %.4f (disc %.4f)\n", area, M_PI / 4);
  assert_true(fabs(area - M_PI / 4) < 0.01);

  mr_nufft_opts o = {.rank = 2, .dims = {N, N}, .batch = 1, .tol = 1e-4};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_nufft_set_points(plan, n, k, TERR));
  GPU_OK(mr_density_pipe_menon(plan, 30, pm, TERR));
  double num = 0, den = 0;
  for (size_t j = 0; j < n; j++) {
    double r = hypot(k[2 * j], k[2 * j + 1]);
    if (r > 0.1 && r < 0.4) {
      num += (pm[j] - an[j]) * (double)(pm[j] - an[j]);
      den += (double)an[j] * an[j];
    }
  }
  print_message("radial: Pipe-Menon vs analytic at 0.1 < |k| < 0.4: rel %.3f\n", sqrt(num / den));
  assert_true(sqrt(num / den) < 0.05);
  float w3[1];
  assert_int_equal(mr_density_radial(1, 1, k, 1, 0.1, w3, TERR), MR_EINVAL);
  mr_nufft_plan_destroy(plan);
  free(k);
  free(pm);
  free(an);
}


/* Automatic upsampling never settles on a grid whose single-precision
 * floor misses the tolerance: where 1.25 cannot reach it, 2 is taken, and
 * the floor of what is taken is within the tolerance at every tolerance. */
static void automatic_upsampling_meets_tol(void **state) {
  (void)state;
  static const double sweep[] = {1e-1, 1e-3, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6};
  for (int rank = 2; rank <= 3; rank++)
    for (size_t i = 0; i < sizeof sweep / sizeof *sweep; i++) {
      mr_nufft_opts o = {.rank = rank, .dims = {16, 12, 10}, .batch = 1, .tol = sweep[i]};
      mr_nufft_opts at125 = o;
      at125.upsampling = 1.25;
      mr_nufft_plan *plan = NULL, *fixed = NULL;
      GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
      int rc125 = mr_nufft_plan_create(gpu_test_cpu(), &at125, &fixed, TERR);
      mr_nufft_info info;
      mr_nufft_info_get(plan, &info);
      print_message("%dD tol %.0e: upsampling %.2f, floor %.1e (1.25 %s)\n", rank, sweep[i],
                    info.upsampling, info.float_floor, rc125 == 0 ? "reaches it" : "does not");
      assert_true(info.float_floor <= sweep[i]);
      if (rc125 != 0)
        assert_true(info.upsampling == 2.0);
      mr_nufft_plan_destroy(plan);
      mr_nufft_plan_destroy(fixed);
    }
}

/* MR_NUFFT_UPSAMPLING_RULE takes the CPU's automatic choice on every
 * device, never a timed one: what density weights are made with. */
static void rule_upsampling(mr_device *dev) {
  static const double sweep[] = {1e-1, 1e-4, 1e-5, 1e-6};
  for (int rank = 2; rank <= 3; rank++)
    for (size_t i = 0; i < sizeof sweep / sizeof *sweep; i++) {
      mr_nufft_opts o = {.rank = rank, .dims = {16, 12, 10}, .batch = 1, .tol = sweep[i]};
      mr_nufft_opts rule = o;
      rule.upsampling = MR_NUFFT_UPSAMPLING_RULE;
      mr_nufft_plan *cpu_auto = NULL, *ruled = NULL;
      GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &cpu_auto, TERR));
      GPU_OK(mr_nufft_plan_create(dev, &rule, &ruled, TERR));
      mr_nufft_info want, got;
      mr_nufft_info_get(cpu_auto, &want);
      mr_nufft_info_get(ruled, &got);
      assert_true(got.upsampling == want.upsampling);
      assert_true(got.upsampling == (rank == 2 || sweep[i] <= 1e-5 ? 2.0 : 1.25));
      mr_nufft_plan_destroy(cpu_auto);
      mr_nufft_plan_destroy(ruled);
    }
  mr_nufft_opts bad = {.rank = 2, .dims = {8, 8}, .batch = 1, .tol = 1e-3, .upsampling = -0.5};
  mr_nufft_plan *none = NULL;
  assert_int_equal(mr_nufft_plan_create(dev, &bad, &none, TERR), MR_EINVAL);
}

static void cpu_rule_upsampling(void **state) {
  (void)state;
  rule_upsampling(gpu_test_cpu());
}

static void cuda_rule_upsampling(void **state) {
  (void)state;
  rule_upsampling(gpu_test_gpu());
}

/* Among the automatic upsampling's candidates is the least one that keeps
 * the kernel width of upsampling 2 (the same spreading on a smaller grid),
 * wherever it reaches the tolerance; a plan there meets the tolerance
 * against the exact DFT. */
static void middle_upsampling_keeps_width(void **state) {
  (void)state;
  static const shape cube = {3, {32, 32, 32}, 1, 1000}; /* grids of 24 round up alike */
  const shape *s = &cube;
  problem p;
  problem_make(&p, s, NULL, 5);
  static const double sweep[] = {1e-2, 1e-4};
  for (size_t i = 0; i < sizeof sweep / sizeof *sweep; i++) {
    mr_nufft_opts o = {.rank = 3, .dims = {s->dims[0], s->dims[1], s->dims[2]},
                       .batch = s->batch, .tol = sweep[i]};
    mr_nufft_plan *automatic, *at2, *middle;
    GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &automatic, TERR));
    double sigma = 0;
    for (int c = 0; c < automatic->ncandidates; c++)
      if (automatic->candidates[c] > 1.25 && automatic->candidates[c] < 2.0)
        sigma = automatic->candidates[c];
    mr_nufft_plan_destroy(automatic);
    assert_true(sigma > 1.25);
    o.upsampling = 2.0;
    GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &at2, TERR));
    o.upsampling = sigma;
    GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &middle, TERR));
    GPU_OK(mr_nufft_set_points(middle, s->npoints, p.k, TERR));
    mr_nufft_info i2, im;
    mr_nufft_info_get(at2, &i2);
    mr_nufft_info_get(middle, &im);
    double err = both_directions(&p, middle, gpu_test_cpu(), HOST_MEMORY);
    print_message("3D tol %.0e: middle upsampling %.2f, grid %zu (2: %zu), width %d (2: %d), "
                  "rel error %.2e\n", sweep[i], sigma, im.grid[0], i2.grid[0], im.width,
                  i2.width, err);
    assert_int_equal(im.width, i2.width);
    assert_true(im.grid[0] < i2.grid[0]);
    assert_true(err <= sweep[i]);
    mr_nufft_plan_destroy(at2);
    mr_nufft_plan_destroy(middle);
  }
  problem_free(&p);
}

/* The kernel in single precision against double, over the taps of
 * samples anywhere in a cell, weighted by the kernel (what a transform
 * sums): within 1e-7 rms at every width, where exp(beta (sqrt(1 - z^2) - 1))
 * as written lost 1.7e-7 at w = 4 and 3.3e-7 at w = 8 to cancellation. */
static void kernel_accurate(void **state) {
  (void)state;
  for (int w = 2; w <= MR_NUFFT_MAX_WIDTH; w++) {
    double beta = 0.97 * M_PI * (1 - 0.5 / 1.67) * w, err = 0, ref = 0;
    float inv_half_width = 2.0f / (float)w;
    for (int i = 0; i < 4096; i++) {
      float a = (float)(0.5 * w - 1 + (i + 0.5) / 4096); /* in (w/2 - 1, w/2] */
      for (int j = 0; j < w; j++) {
        float x = a - (float)j;
        double z = (double)x * inv_half_width;
        double exact = exp(beta * (sqrt(fmax(1 - z * z, 0)) - 1));
        double d = mr_nufft_kernel(x, inv_half_width, (float)beta) - exact;
        err += d * d;
        ref += exact * exact;
      }
    }
    if (!(sqrt(err / ref) <= 1e-7))
      fail_msg("w %d: rms relative error %.2e", w, sqrt(err / ref));
  }
}

/* A crowded bin is cut into pieces of about four average bins' entries
 * (within 256 .. 1024), so that its thread blocks finish with the others;
 * on uniform points no bin is cut. */
static void crowded_bins_cut_small(void **state) {
  (void)state;
  enum { SPOKES = 30, SAMPLES = 256, RANDOM = 5000 };
  mr_nufft_opts o = {.rank = 2, .dims = {128, 128}, .batch = 1, .tol = 1e-4, .upsampling = 2.0};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  float *k = malloc(2 * (RANDOM > SPOKES * SAMPLES ? RANDOM : SPOKES * SAMPLES) * sizeof *k);
  for (int radial = 0; radial < 2; radial++) {
    size_t n = radial ? SPOKES * SAMPLES : RANDOM;
    if (radial)
      nufft_test_radial_points(k, SPOKES, SAMPLES);
    else
      nufft_test_random_points(k, n, 2, 17);
    size_t piece = mr_nufft_sub_entries(&plan->geom, n), largest = 0;
    mr_nufft_points pts = {0};
    GPU_OK(mr_nufft_points_build(&plan->geom, n, k, piece, mr_device_threads(gpu_test_cpu()), &pts,
                                 TERR));
    for (size_t s = 0; s < pts.nsubs; s++) {
      size_t e = (size_t)(pts.subs[s][2] - pts.subs[s][1]);
      largest = e > largest ? e : largest;
    }
    print_message("%s: %zu entries in %zu bins, pieces of %zu: %zu pieces, largest %zu\n",
                  radial ? "radial" : "random", pts.nentries, pts.nbins, piece, pts.nsubs,
                  largest);
    assert_true(piece >= MR_NUFFT_MIN_SUB_ENTRIES && piece < MR_NUFFT_MAX_SUB_ENTRIES);
    assert_true(largest <= piece);
    if (radial)
      assert_true(pts.nsubs > pts.nbins); /* the centre's bins are cut */
    else
      assert_int_equal(pts.nsubs, pts.nbins);
    mr_nufft_points_free(&pts);
  }
  free(k);
  mr_nufft_plan_destroy(plan);
}

static void cuda_matches_dft(void **state) {
  (void)state;
  matches_dft(gpu_test_gpu(), DEVICE_POINTERS);
}

static void cuda_host_memory(void **state) {
  (void)state;
  const shape *s = &shapes[2];
  problem p;
  problem_make(&p, s, NULL, 5);
  mr_nufft_opts o = {.rank = 3, .dims = {s->dims[0], s->dims[1], s->dims[2]},
                     .batch = s->batch, .tol = 1e-4};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &plan, TERR));
  GPU_OK(mr_nufft_set_points(plan, s->npoints, p.k, TERR));
  assert_true(both_directions(&p, plan, gpu_test_gpu(), HOST_MEMORY) <= 1e-4);
  mr_nufft_plan_destroy(plan);
  problem_free(&p);
}

static void cuda_max_points(void **state) {
  (void)state;
  max_points_bound(gpu_test_gpu(), DEVICE_POINTERS);
}

static void cuda_dense_centre(void **state) {
  (void)state;
  dense_centre(gpu_test_gpu(), DEVICE_POINTERS);
}

static void cuda_coil_scales(void **state) {
  (void)state;
  coil_scales(gpu_test_gpu(), DEVICE_POINTERS);
}

/* (The weights follow the kernel, so both plans are given one upsampling:
 * the GPU's automatic choice is timed, the CPU's is not.) */
static void cuda_pipe_menon_matches_cpu(void **state) {
  (void)state;
  enum { N = 32, SPOKES = 51, SAMPLES = 64 };
  size_t n = SPOKES * SAMPLES;
  float *k = malloc(n * 2 * sizeof *k), *wc = malloc(n * sizeof *wc), *wg = malloc(n * sizeof *wg);
  nufft_test_radial_points(k, SPOKES, SAMPLES);
  mr_nufft_opts o = {.rank = 2, .dims = {N, N}, .batch = 1, .tol = 1e-4, .upsampling = 2.0};
  mr_nufft_plan *cpu, *gpu;
  GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &cpu, TERR));
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &gpu, TERR));
  GPU_OK(mr_nufft_set_points(cpu, n, k, TERR));
  GPU_OK(mr_nufft_set_points(gpu, n, k, TERR));
  GPU_OK(mr_density_pipe_menon(cpu, 20, wc, TERR));
  GPU_OK(mr_density_pipe_menon(gpu, 20, wg, TERR));
  double err = mr_test_rel_error_f(wg, wc, n);
  print_message("Pipe-Menon GPU vs CPU: rel %.2e\n", err);
  assert_true(err < 1e-4);
  mr_nufft_plan_destroy(cpu);
  mr_nufft_plan_destroy(gpu);
  free(k);
  free(wc);
  free(wg);
}


/* Positions that exercise the placement: random ones with the edges, a
 * radial trajectory crowding the centre bins (which then split), and
 * positions far outside [-0.5, 0.5) (the transform is periodic). */
static float *test_positions(int kind, int rank, size_t n) {
  float *k = malloc((n > 0 ? n : 1) * (size_t)rank * sizeof *k);
  if (kind == 1 && rank == 2) {
    nufft_test_radial_points(k, n / 64, 64);
  } else {
    nufft_test_random_points(k, n, rank, 41);
    if (kind == 2)
      for (size_t i = 0; i < n * (size_t)rank; i++)
        k[i] = k[i] * 7.0f + (float)((int)(i % 5) - 2);
  }
  return k;
}

static int ascending(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return x < y ? -1 : x > y;
}

/* The GPU's group layout (nufft_geom.h) lists exactly the host's entries:
 * the samples sorted by group, each bin's sources hold the samples whose
 * footprints reach into it, no other and none twice. On the CPU, with
 * partial last bins of every kind: none (grids of 32, 64), wider than the
 * kernel (40, 72, 80), narrower than it (36 and 100 at tol 1e-5: three
 * bins along y or x), and 36 at tol 1e-3 (near the kernel's width). */
static void groups_list_entries(void **state) {
  (void)state;
  static const struct {
    int rank;
    size_t dims[3], n;
    double tol;
  } cases[] = {
      {2, {50, 40, 1}, 4000, 1e-5}, {2, {32, 36, 1}, 3000, 1e-2},
      {3, {20, 18, 16}, 5000, 1e-5}, {3, {18, 32, 20}, 4000, 1e-3},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    mr_nufft_opts o = {.rank = cases[c].rank,
                       .dims = {cases[c].dims[0], cases[c].dims[1], cases[c].dims[2]},
                       .batch = 1, .tol = cases[c].tol, .upsampling = 2.0};
    mr_nufft_plan *plan;
    GPU_OK(mr_nufft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
    const mr_nufft_geom *g = &plan->geom;
    size_t n = cases[c].n;
    float *k = test_positions(2, o.rank, n);
    mr_nufft_points host = {0};
    GPU_OK(mr_nufft_points_build(g, n, k, mr_nufft_sub_entries(g, n), mr_device_threads(gpu_test_cpu()),
                                 &host, TERR));
    mr_nufft_groups q = mr_nufft_groups_of(g);
    size_t ngroups = host.nbins * (size_t)q.per_bin;
    int32_t *start = calloc(ngroups + 1, sizeof *start), *group = malloc(n * sizeof *group);
    int32_t *by_group = malloc(n * sizeof *by_group), *listed = malloc(host.nentries * sizeof *listed);
    for (size_t p = 0; p < n; p++) {
      group[p] = mr_nufft_group(g, &q, host.pos[p]);
      assert_true(group[p] >= 0 && (size_t)group[p] < ngroups);
      start[group[p] + 1]++;
    }
    for (size_t x = 0; x < ngroups; x++)
      start[x + 1] += start[x];
    for (size_t p = 0; p < n; p++) /* stable: host order within a group */
      by_group[start[group[p]]++] = (int32_t)p;
    for (size_t x = ngroups; x > 0; x--) /* back to the starts */
      start[x] = start[x - 1];
    start[0] = 0;
    for (size_t b = 0; b < host.nbins; b++) {
      size_t count = 0, want = (size_t)(host.bin_start[b + 1] - host.bin_start[b]);
      for (int j = 0; j < q.sources; j++) {
        int first, end;
        mr_nufft_source(&q, (int)b, j, &first, &end);
        for (int32_t e = start[first]; e < start[end]; e++, count++)
          if (count < want)
            listed[count] = by_group[e];
      }
      assert_int_equal(count, want);
      qsort(listed, count, sizeof *listed, ascending);
      assert_memory_equal(listed, host.entries + host.bin_start[b], count * sizeof *listed);
    }
    print_message("%dD %zux%zux%zu: grid %dx%dx%d, bins %dx%dx%d, reach %d %d %d, %d groups a bin, "
                  "%d sources, %zu entries\n", o.rank, o.dims[0], o.dims[1], o.dims[2], g->nf[0],
                  g->nf[1], g->nf[2], g->nbins[0], g->nbins[1], g->nbins[2], q.reach[0],
                  q.reach[1], q.reach[2], q.per_bin, q.sources, host.nentries);
    if (c == 0 || c == 2) /* the narrow last bins do make a reach of 3 */
      assert_int_equal(q.reach[0] * q.reach[1], 6);
    free(start);
    free(group);
    free(by_group);
    free(listed);
    mr_nufft_points_free(&host);
    mr_nufft_plan_destroy(plan);
    free(k);
  }
}

#ifdef MR_HAVE_CUDA
/* A sample's place in the host's order: home bin, then original index. */
typedef struct sample_key {
  int64_t home, index;
  size_t at;
} sample_key;

static int by_home_then_index(const void *a, const void *b) {
  const sample_key *x = a, *y = b;
  if (x->home != y->home)
    return x->home < y->home ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Puts the GPU's binning into the host's order: within a bin the GPU keeps
 * the order its atomics gave (nufft_points_cuda.cu), the host the order of
 * the original indices. Samples are sorted by (home bin, original index),
 * the entries renumbered to match and sorted within each bin (bin_start:
 * the host's). */
static void to_host_order(const mr_nufft_geom *g, mr_nufft_points *gpu, const int32_t *bin_start) {
  size_t n = gpu->npoints;
  sample_key *keys = malloc((n + 1) * sizeof *keys);
  int32_t(*pos)[4] = malloc((n + 1) * sizeof *pos), *renumber = malloc((n + 1) * sizeof *renumber);
  float(*off)[4] = malloc((n + 1) * sizeof *off);
  for (size_t p = 0; p < n; p++) {
    int64_t home = 0, stride = 1;
    for (int d = 0; d < 3; d++) {
      home += gpu->pos[p][d] / g->bin[d] * stride;
      stride *= g->nbins[d];
    }
    keys[p] = (sample_key){home, gpu->pos[p][3], p};
  }
  qsort(keys, n, sizeof *keys, by_home_then_index);
  for (size_t q = 0; q < n; q++) {
    memcpy(pos[q], gpu->pos[keys[q].at], sizeof *pos);
    memcpy(off[q], gpu->offset[keys[q].at], sizeof *off);
    renumber[keys[q].at] = (int32_t)q;
  }
  memcpy(gpu->pos, pos, n * sizeof *pos);
  memcpy(gpu->offset, off, n * sizeof *off);
  for (size_t e = 0; e < gpu->nentries; e++)
    gpu->entries[e] = renumber[gpu->entries[e]];
  for (size_t b = 0; b < gpu->nbins; b++)
    qsort(gpu->entries + bin_start[b], (size_t)(bin_start[b + 1] - bin_start[b]),
          sizeof *gpu->entries, ascending);
  free(keys);
  free(pos);
  free(renumber);
  free(off);
}

static void assert_points_equal(const mr_nufft_geom *g, mr_nufft_points *gpu,
                                const mr_nufft_points *cpu) {
  assert_int_equal(gpu->npoints, cpu->npoints);
  assert_int_equal(gpu->nbins, cpu->nbins);
  assert_int_equal(gpu->nentries, cpu->nentries);
  assert_int_equal(gpu->nsubs, cpu->nsubs);
  assert_memory_equal(gpu->subs, cpu->subs, cpu->nsubs * sizeof *cpu->subs);
  to_host_order(g, gpu, cpu->bin_start);
  assert_memory_equal(gpu->pos, cpu->pos, cpu->npoints * sizeof *cpu->pos);
  assert_memory_equal(gpu->offset, cpu->offset, cpu->npoints * sizeof *cpu->offset);
  assert_memory_equal(gpu->entries, cpu->entries, cpu->nentries * sizeof *cpu->entries);
}

/* The GPU's binning is the host's: same placement, same samples in the same
 * bins, same entries (the GPU's bins' sources, listed) and subproblems (up
 * to the order within a bin); from pageable and pinned host memory (in
 * several upload pieces for the larger ones) and from device memory; with
 * its memory made at plan creation (max_points) or at the first
 * set_points; counted in shared memory first (up to 1,024 groups) or not
 * (the 3D cases of 64^3 and 96^3: 1,728 bins of 8 groups; 18 x 64 x 48:
 * 144 bins of 12); with a partial last bin narrower than the kernel (a
 * footprint then touches three bins along that dimension: 2D 50 x 40,
 * 3D 20 x 18 x 16 and 18 x 64 x 48, grids of 100 and 36). */
static void cuda_points_match_host(void **state) {
  (void)state;
  static const struct {
    int rank, kind;
    size_t dims[3], n;
    double upsampling, tol;
  } cases[] = {
      {2, 0, {30, 36, 1}, 2500, 2.0, 1e-4},  {2, 0, {64, 48, 1}, 20000, 1.25, 1e-3},
      {2, 1, {32, 32, 1}, 201 * 64, 2.0, 1e-5}, {2, 2, {40, 40, 1}, 3000, 2.0, 1e-6},
      {3, 0, {12, 10, 9}, 1500, 1.25, 1e-4}, {3, 0, {32, 32, 32}, 40000, 2.0, 1e-2},
      {3, 2, {20, 24, 16}, 5000, 1.25, 1e-4}, {2, 0, {16, 16, 1}, 1, 2.0, 1e-4},
      {3, 0, {16, 16, 16}, 0, 2.0, 1e-4},     {2, 0, {128, 128, 1}, 150000, 2.0, 1e-4},
      {3, 0, {48, 48, 48}, 100000, 1.25, 1e-3}, {3, 0, {96, 96, 96}, 30000, 2.0, 1e-2},
      {2, 0, {50, 40, 1}, 6000, 2.0, 1e-5},     {3, 2, {20, 18, 16}, 5000, 2.0, 1e-5},
      {3, 0, {18, 64, 48}, 20000, 2.0, 1e-5},
  };
  mr_device *gpu = gpu_test_gpu();
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    mr_nufft_opts o = {.rank = cases[c].rank,
                       .dims = {cases[c].dims[0], cases[c].dims[1], cases[c].dims[2]},
                       .batch = 1, .tol = cases[c].tol, .upsampling = cases[c].upsampling,
                       .max_points = c % 2 ? cases[c].n : 0}; /* made at creation, or grown */
    size_t n = cases[c].n;
    float *k = test_positions(cases[c].kind, o.rank, n);
    mr_nufft_plan *plan;
    GPU_OK(mr_nufft_plan_create(gpu, &o, &plan, TERR));
    mr_nufft_points host = {0}, dev = {0};
    GPU_OK(mr_nufft_points_build(&plan->geom, n, k, mr_nufft_sub_entries(&plan->geom, n),
                                 mr_device_threads(gpu), &host, TERR));
    size_t bytes = (n > 0 ? n : 1) * (size_t)o.rank * sizeof *k;
    for (int from = 0; from < 3; from++) { /* pageable host, pinned host, device */
      mr_buf *kd = NULL;
      void *pinned = NULL;
      if (from == 2) {
        kd = gpu_test_upload(gpu, k, bytes);
        GPU_OK(mr_nufft_set_points_device(plan, n, mr_buf_data(kd), TERR));
      } else if (from == 1) {
        GPU_OK(mr_host_alloc(gpu, bytes, &pinned, TERR));
        memcpy(pinned, k, bytes);
        GPU_OK(mr_nufft_set_points(plan, n, pinned, TERR));
      } else {
        GPU_OK(mr_nufft_set_points(plan, n, k, TERR));
      }
      GPU_OK(mr_nufft_cuda_points_download(plan, &dev, TERR));
      print_message("%dD kind %d, %zu points, sigma %.2f: %zu entries, %zu bins, %zu subproblems "
                    "(host %zu, %zu)\n", o.rank, cases[c].kind, n, o.upsampling, dev.nentries,
                    dev.nbins, dev.nsubs, host.nentries, host.nsubs);
      assert_points_equal(&plan->geom, &dev, &host);
      mr_nufft_points_free(&dev);
      mr_buf_destroy(kd);
      mr_host_free(gpu, pinned);
    }
    if (cases[c].kind == 1)
      assert_true(host.nsubs > host.nbins); /* the centre bins were split */
    mr_nufft_points_free(&host);
    mr_nufft_plan_destroy(plan);
    free(k);
  }
}

/* GPU set_points and execute against the CPU plan on the same points and
 * data, both directions: equal to rounding; the 3D grid of 36 along y and
 * the 2D one of 100 along x end in a bin narrower than the kernel, whose
 * neighbours' samples a bin also reads (nufft_cuda.cuh). */
static void cuda_matches_cpu(void **state) {
  (void)state;
  static const shape cases[] = {{2, {32, 32, 1}, 3, 201 * 64},
                                {3, {20, 18, 16}, 2, 9000},
                                {2, {50, 40, 1}, 2, 6000}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const shape *s = &cases[c];
    float *k = test_positions(s->rank == 2 ? 1 : 2, s->rank, s->npoints);
    size_t nimg = pixels(s) * s->batch, nsmp = s->npoints * s->batch;
    mr_cfloat *smp = malloc(nsmp * sizeof *smp), *img = malloc(nimg * sizeof *img);
    mr_cfloat *out[2][2];
    gpu_test_random(smp, nsmp, 3);
    gpu_test_random(img, nimg, 4);
    mr_nufft_opts o = {.rank = s->rank, .dims = {s->dims[0], s->dims[1], s->dims[2]},
                       .batch = s->batch, .tol = 1e-5, .upsampling = 2.0};
    mr_device *devs[2] = {gpu_test_cpu(), gpu_test_gpu()};
    for (int d = 0; d < 2; d++) {
      mr_nufft_plan *plan;
      GPU_OK(mr_nufft_plan_create(devs[d], &o, &plan, TERR));
      GPU_OK(mr_nufft_set_points(plan, s->npoints, k, TERR));
      out[d][0] = malloc(nimg * sizeof(mr_cfloat));
      out[d][1] = malloc(nsmp * sizeof(mr_cfloat));
      run(plan, devs[d], DEVICE_POINTERS, MR_NUFFT_ADJOINT, smp, nsmp, out[d][0], nimg);
      run(plan, devs[d], DEVICE_POINTERS, MR_NUFFT_FORWARD, img, nimg, out[d][1], nsmp);
      mr_nufft_plan_destroy(plan);
    }
    double e1 = mr_test_rel_error_f((const float *)out[1][0], (const float *)out[0][0], 2 * nimg);
    double e2 = mr_test_rel_error_f((const float *)out[1][1], (const float *)out[0][1], 2 * nsmp);
    print_message("%dD GPU vs CPU: type 1 rel %.2e, type 2 rel %.2e\n", s->rank, e1, e2);
    assert_true(e1 < 1e-5 && e2 < 1e-5);
    for (int d = 0; d < 2; d++) {
      free(out[d][0]);
      free(out[d][1]);
    }
    free(smp);
    free(img);
    free(k);
  }
}

/* A position that is not finite is refused on the GPU too (found on the
 * device), and the plan takes good points after. */
static void cuda_bad_points(void **state) {
  (void)state;
  mr_nufft_opts o = {.rank = 2, .dims = {16, 16}, .batch = 1, .tol = 1e-4, .upsampling = 2.0};
  mr_nufft_plan *plan;
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &plan, TERR));
  float k[600];
  nufft_test_random_points(k, 300, 2, 5);
  k[377] = NAN;
  assert_int_equal(mr_nufft_set_points(plan, 300, k, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "not finite"));
  k[377] = INFINITY;
  assert_int_equal(mr_nufft_set_points(plan, 300, k, TERR), MR_EINVAL);
  mr_cfloat smp[300] = {0}, img[256];
  assert_int_equal(mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, smp, img, TERR), MR_EINVAL);
  k[377] = 0.25f;
  GPU_OK(mr_nufft_set_points(plan, 300, k, TERR));
  GPU_OK(mr_nufft_execute_host(plan, MR_NUFFT_ADJOINT, smp, img, TERR));
  mr_nufft_plan_destroy(plan);
}

/* The automatic upsampling is measured at the creation of the first plan
 * of a shape, meets the tolerance, and is remembered: a second plan of the
 * shape starts with it. */
static void cuda_automatic_upsampling(void **state) {
  (void)state;
  shape s = {2, {48, 40, 1}, 2, 4000};
  problem p;
  problem_make(&p, &s, NULL, 21);
  mr_nufft_opts o = {.rank = 2, .dims = {48, 40}, .batch = 2, .tol = 1e-4};
  mr_nufft_plan *first, *second;
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &first, TERR));
  mr_nufft_info a, b, created;
  mr_nufft_info_get(first, &created);
  GPU_OK(mr_nufft_set_points(first, s.npoints, p.k, TERR));
  mr_nufft_info_get(first, &a);
  assert_true(a.upsampling >= 1.25 && a.upsampling <= 2.0);
  assert_true(a.upsampling == created.upsampling); /* chosen at creation */
  double err = both_directions(&p, first, gpu_test_gpu(), DEVICE_POINTERS);
  print_message("automatic: upsampling %.2f, rel error %.2e\n", a.upsampling, err);
  assert_true(err <= 1e-4);
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &second, TERR));
  mr_nufft_info_get(second, &b);
  assert_true(b.upsampling == a.upsampling);
  assert_int_equal(b.grid[0], a.grid[0]);
  mr_nufft_plan_destroy(first);
  mr_nufft_plan_destroy(second);
  /* tuned for type 1 alone: measured apart, and still right both ways */
  o.tune_for = MR_NUFFT_ADJOINT;
  GPU_OK(mr_nufft_plan_create(gpu_test_gpu(), &o, &first, TERR));
  GPU_OK(mr_nufft_set_points(first, s.npoints, p.k, TERR));
  mr_nufft_info_get(first, &a);
  err = both_directions(&p, first, gpu_test_gpu(), DEVICE_POINTERS);
  print_message("automatic for type 1: upsampling %.2f, rel error %.2e\n", a.upsampling, err);
  assert_true(err <= 1e-4);
  mr_nufft_plan_destroy(first);
  problem_free(&p);
}

enum { SAME_SHAPE_THREADS = 8 };

typedef struct shape_maker {
  const mr_nufft_opts *o;
  double upsampling;
  int rc;
} shape_maker;

static void *make_plan_of_shape(void *arg) {
  shape_maker *m = arg;
  mr_nufft_plan *plan = NULL;
  m->rc = mr_nufft_plan_create(gpu_test_gpu(), m->o, &plan, NULL);
  if (m->rc == 0) {
    mr_nufft_info info;
    mr_nufft_info_get(plan, &info);
    m->upsampling = info.upsampling;
  }
  mr_nufft_plan_destroy(plan);
  return NULL;
}

/* Plans of a shape not seen before, made by many threads at once (sessions
 * starting together), measure it once: the others take the rule's choice
 * meanwhile, or the measured one after. */
static void cuda_upsampling_measured_once(void **state) {
  (void)state;
  mr_nufft_opts o = {.rank = 3, .dims = {40, 36, 28}, .batch = 3, .tol = 1e-3};
  int before = mr_nufft_sigma_measurements();
  shape_maker m[SAME_SHAPE_THREADS];
  pthread_t t[SAME_SHAPE_THREADS];
  for (int i = 0; i < SAME_SHAPE_THREADS; i++) {
    m[i] = (shape_maker){.o = &o};
    assert_int_equal(pthread_create(&t[i], NULL, make_plan_of_shape, &m[i]), 0);
  }
  for (int i = 0; i < SAME_SHAPE_THREADS; i++)
    pthread_join(t[i], NULL);
  assert_int_equal(mr_nufft_sigma_measurements() - before, 1);
  shape_maker after = {.o = &o};
  make_plan_of_shape(&after);
  GPU_OK(after.rc);
  for (int i = 0; i < SAME_SHAPE_THREADS; i++) {
    GPU_OK(m[i].rc);
    assert_true(m[i].upsampling == after.upsampling ||
                m[i].upsampling == mr_nufft_sigma_rule(o.rank));
  }
  assert_int_equal(mr_nufft_sigma_measurements() - before, 1);
}
#endif

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_matches_dft),   cmocka_unit_test(cpu_dense_centre),
      cmocka_unit_test(cpu_coil_scales),   cmocka_unit_test(kernel_accurate),
      cmocka_unit_test(points_replaced),   cmocka_unit_test(cpu_max_points),
      cmocka_unit_test(bad_arguments),
      cmocka_unit_test(density_cartesian), cmocka_unit_test(density_radial),
      cmocka_unit_test(automatic_upsampling_meets_tol),
      cmocka_unit_test(cpu_rule_upsampling),
      cmocka_unit_test(middle_upsampling_keeps_width),
      cmocka_unit_test(crowded_bins_cut_small),
      cmocka_unit_test(groups_list_entries),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_dft),
      cmocka_unit_test(cuda_host_memory),
      cmocka_unit_test(cuda_max_points),
      cmocka_unit_test(cuda_dense_centre),
      cmocka_unit_test(cuda_coil_scales),
      cmocka_unit_test(cuda_pipe_menon_matches_cpu),
      cmocka_unit_test(cuda_rule_upsampling),
#ifdef MR_HAVE_CUDA
      cmocka_unit_test(cuda_points_match_host),
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_bad_points),
      cmocka_unit_test(cuda_automatic_upsampling),
      cmocka_unit_test(cuda_upsampling_measured_once),
#endif
  };
  int rc = cuda ? cmocka_run_group_tests_name("nufft_cuda", cuda_tests, NULL, NULL)
                : cmocka_run_group_tests_name("nufft_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
