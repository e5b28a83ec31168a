/* cg.h: a diagonal system with a known answer, an indefinite one, and the
 * issue's check of the whole Toeplitz path: the solution of the normal
 * equations, built from Q and F^H D, satisfies them with F^H F applied
 * exactly (direct sums in double) to a relative residual <= 1e-4, in 2D
 * and 3D, with each regularizer and with coil maps. --cuda: the same with
 * F^H D, Q, the operator and the solve on the GPU, and the GPU's loop
 * (scalars on the device) against the CPU's on diagonal systems; a batch
 * of systems solved together against each alone, on both; a cancel
 * stopping a solve at the next iteration, on both; the GPU's iteration
 * replayed as a CUDA graph against the queued loop. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cg.h"
#include "fhd.h"
#include "iterative_support.h"
#include "test_gpu_common.h"
#include "test_support.h"
#include "vec.h"

typedef struct diagonal {
  size_t n;
  const float *d;
} diagonal;

static int apply_diagonal(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  (void)err;
  const diagonal *a = op;
  for (size_t i = 0; i < a->n; i++)
    y[i] = a->d[i] * x[i];
  return 0;
}

static void cpu_diagonal(void **state) {
  (void)state;
  enum { N = 40 };
  float d[N];
  mr_cfloat b[N], x[N];
  for (int i = 0; i < N; i++)
    d[i] = 1.0f + (float)(i % 8); /* 8 distinct eigenvalues: exact in 8 steps */
  gpu_test_random(b, N, 1);
  diagonal a = {N, d};
  mr_cg_opts o = {.max_iterations = 50, .tolerance = 1e-6};
  mr_cg_report r;
  GPU_OK(mr_cg_solve(gpu_test_cpu(), N, apply_diagonal, &a, b, x, &o, &r, TERR));
  print_message("diagonal: %d iterations, residual %.2e\n", r.iterations, r.residual);
  assert_true(r.iterations <= 9);
  assert_true(r.residual <= 1e-6);
  for (int i = 0; i < N; i++)
    assert_true(cabsf(x[i] * d[i] - b[i]) < 1e-5f);
  /* From the answer, a warm start has nothing left to do. */
  o.warm_start = 1;
  GPU_OK(mr_cg_solve(gpu_test_cpu(), N, apply_diagonal, &a, b, x, &o, &r, TERR));
  assert_true(r.iterations <= 1);
}

static void cpu_indefinite(void **state) {
  (void)state;
  float d[4] = {1, -2, 3, 1};
  mr_cfloat b[4] = {0, 1, 0, 0}, x[4];
  diagonal a = {4, d};
  mr_cg_opts o = {.max_iterations = 10, .tolerance = 1e-6};
  assert_int_equal(mr_cg_solve(gpu_test_cpu(), 4, apply_diagonal, &a, b, x, &o, NULL, TERR),
                   MR_ENUMERIC);
  o.max_iterations = 0;
  assert_int_equal(mr_cg_solve(gpu_test_cpu(), 4, apply_diagonal, &a, b, x, &o, NULL, TERR),
                   MR_EINVAL);
}

/* y = d x with d on the solve's device (vec.h): an operator for either
 * device, so the GPU's loop (scalars on the device) meets the same
 * systems as the CPU's. */
typedef struct device_diagonal {
  mr_device *dev;
  size_t n;
  const mr_cfloat *d;
} device_diagonal;

static int apply_device_diagonal(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  const device_diagonal *a = op;
  return mr_vec_mul(a->dev, a->n, a->d, x, y, err);
}

/* Solves d x = b on dev (x from x0 when warm); x comes back in x. */
static int diagonal_solve(mr_device *dev, size_t n, const float *d, const mr_cfloat *b,
                          mr_cfloat *x, const mr_cg_opts *o, mr_cg_report *r) {
  mr_cfloat *dc = malloc(n * sizeof *dc);
  for (size_t i = 0; i < n; i++)
    dc[i] = d[i];
  size_t bytes = n * sizeof(mr_cfloat);
  mr_buf *bd = gpu_test_upload(dev, dc, bytes), *bb = gpu_test_upload(dev, b, bytes);
  mr_buf *bx = gpu_test_upload(dev, x, bytes);
  device_diagonal a = {dev, n, mr_buf_data(bd)};
  int rc =
      mr_cg_solve(dev, n, apply_device_diagonal, &a, mr_buf_data(bb), mr_buf_data(bx), o, r, TERR);
  GPU_OK(mr_buf_download(bx, 0, x, bytes, TERR));
  mr_buf_destroy(bd);
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  free(dc);
  return rc;
}

/* The GPU's loop against the CPU's on diagonal systems: the same
 * iterations and residuals to float rounding, the same answers; a warm
 * start from the answer; tolerance 0 (the best iterate); an indefinite
 * system fails on both. */
static void cuda_diagonal_matches_cpu(void **state) {
  (void)state;
  enum { N = 5000 };
  float *d = malloc(N * sizeof *d);
  mr_cfloat *b = malloc(N * sizeof *b), *xc = calloc(N, sizeof *xc), *xg = calloc(N, sizeof *xg);
  for (int i = 0; i < N; i++)
    d[i] = 1.0f + (float)(i % 37) * 0.25f;
  gpu_test_random(b, N, 3);
  /* The last one converges: the warm start below begins at its answer. */
  const mr_cg_opts opts[] = {{.max_iterations = 7, .tolerance = 1e-9},
                             {.max_iterations = 20, .tolerance = 1e-4},
                             {.max_iterations = 60, .tolerance = 0},
                             {.max_iterations = 50, .tolerance = 1e-6}};
  for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) {
    mr_cg_report rc, rg;
    GPU_OK(diagonal_solve(gpu_test_cpu(), N, d, b, xc, &opts[k], &rc));
    GPU_OK(diagonal_solve(gpu_test_gpu(), N, d, b, xg, &opts[k], &rg));
    print_message("diagonal, %d iterations at most, tolerance %g: CPU %d iterations, residual "
                  "%.3e; GPU %d, %.3e\n",
                  opts[k].max_iterations, opts[k].tolerance, rc.iterations, rc.residual,
                  rg.iterations, rg.residual);
    if (opts[k].tolerance == 0) { /* both run into rounding level, by different paths */
      assert_true(rc.residual <= 1e-5 && rg.residual <= 1e-5);
    } else {
      assert_true(abs(rc.iterations - rg.iterations) <= 1);
      assert_true(fabs(log10(rg.residual / rc.residual)) < 0.1);
    }
    assert_true(mr_test_rel_error_c(xg, xc, N) < 1e-4);
  }
  mr_cg_opts warm = {.max_iterations = 50, .tolerance = 1e-6, .warm_start = 1};
  mr_cg_report r;
  GPU_OK(diagonal_solve(gpu_test_gpu(), N, d, b, xg, &warm, &r));
  assert_true(r.iterations <= 1);

  float bad[4] = {1, -2, 3, 1};
  mr_cfloat b4[4] = {0, 1, 0, 0}, x4[4] = {0};
  mr_cg_opts o = {.max_iterations = 10, .tolerance = 1e-6};
  assert_int_equal(diagonal_solve(gpu_test_gpu(), 4, bad, b4, x4, &o, NULL), MR_ENUMERIC);
  print_message("indefinite: %s\n", mr_test_last_error());
  free(d);
  free(b);
  free(xc);
  free(xg);
}

/* y_i = d x_i for count vectors: the batch form of device_diagonal. */
static int apply_device_diagonal_batch(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                                       mr_err *err) {
  const device_diagonal *a = op;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < count; i++)
    rc = mr_vec_mul(a->dev, a->n, a->d, x + i * a->n, y + i * a->n, err);
  return rc;
}

/* A batch of systems (one with b = 0) solved together answers as each
 * solved alone: the same x (bit for bit on the CPU), the most iterations
 * and the largest residual in the report. */
static void check_batch(mr_device *dev) {
  enum { N = 3000, COUNT = 4 };
  float *d = malloc(N * sizeof *d);
  mr_cfloat *dc = malloc(N * sizeof *dc), *b = calloc(COUNT * N, sizeof *b);
  mr_cfloat *xb = malloc(COUNT * N * sizeof *xb), *x1 = calloc(N, sizeof *x1);
  for (int i = 0; i < N; i++)
    dc[i] = d[i] = 1.0f + (float)(i % 29) * 0.5f;
  for (int k = 0; k < COUNT; k++)
    if (k != 2)
      gpu_test_random(b + k * N, N, 40 + k);
  size_t bytes = N * sizeof(mr_cfloat);
  mr_buf *bd = gpu_test_upload(dev, dc, bytes), *bb = gpu_test_upload(dev, b, COUNT * bytes);
  mr_buf *bx = NULL;
  GPU_OK(mr_buf_create(dev, COUNT * bytes, &bx, TERR));
  device_diagonal a = {dev, N, mr_buf_data(bd)};
  mr_cg_opts o = {.max_iterations = 40, .tolerance = 1e-5};
  mr_cg_report all, one;
  GPU_OK(mr_cg_solve_batch(dev, N, COUNT, apply_device_diagonal_batch, &a, mr_buf_data(bb),
                           mr_buf_data(bx), &o, &all, TERR));
  GPU_OK(mr_buf_download(bx, 0, xb, COUNT * bytes, TERR));
  int most = 0;
  double largest = 0;
  for (int k = 0; k < COUNT; k++) {
    GPU_OK(diagonal_solve(dev, N, d, b + k * N, x1, &o, &one));
    most = one.iterations > most ? one.iterations : most;
    largest = one.residual > largest ? one.residual : largest;
    if (k == 2) {
      for (int i = 0; i < N; i++)
        assert_true(xb[k * N + i] == 0);
    } else if (mr_device_is_gpu(dev)) {
      assert_true(mr_test_rel_error_c(xb + k * N, x1, N) < 1e-6);
    } else {
      assert_memory_equal(xb + k * N, x1, bytes);
    }
  }
  print_message("batch of %d: %d iterations, residual %.3e; alone: %d, %.3e\n", COUNT,
                all.iterations, all.residual, most, largest);
  assert_int_equal(all.iterations, most);
  assert_true(fabs(all.residual - largest) <= 1e-3 * largest);
  mr_buf_destroy(bd);
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  free(d);
  free(dc);
  free(b);
  free(xb);
  free(x1);
}

static void cpu_batch(void **state) {
  (void)state;
  check_batch(gpu_test_cpu());
}

static void cuda_batch(void **state) {
  (void)state;
  check_batch(gpu_test_gpu());
}

/* A cancel asked before every iteration ends the solve there: an
 * operator that counts its applies raises the flag after the fifth, and
 * the solve stops before a sixth, with MR_ECANCELED. */
typedef struct counted_diagonal {
  device_diagonal a;
  int applies, cancel_after;
} counted_diagonal;

static int apply_counted(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  counted_diagonal *c = op;
  c->applies++;
  return apply_device_diagonal(&c->a, x, y, err);
}

static int cancel_after_applies(void *ctx) {
  const counted_diagonal *c = ctx;
  return c->applies >= c->cancel_after;
}

static void check_cancel(mr_device *dev) {
  enum { N = 3000 };
  mr_cfloat *dc = malloc(N * sizeof *dc), *b = malloc(N * sizeof *b);
  for (int i = 0; i < N; i++)
    dc[i] = 1.0f + (float)(i % 29) * 0.5f;
  gpu_test_random(b, N, 7);
  size_t bytes = N * sizeof(mr_cfloat);
  mr_buf *bd = gpu_test_upload(dev, dc, bytes), *bb = gpu_test_upload(dev, b, bytes);
  mr_buf *bx = NULL;
  GPU_OK(mr_buf_create(dev, bytes, &bx, TERR));
  counted_diagonal c = {{dev, N, mr_buf_data(bd)}, 0, 5};
  mr_cancel cancel = {cancel_after_applies, &c};
  mr_cg_opts o = {.max_iterations = 1000, .tolerance = 0, .cancel = &cancel};
  assert_int_equal(
      mr_cg_solve(dev, N, apply_counted, &c, mr_buf_data(bb), mr_buf_data(bx), &o, NULL, TERR),
      MR_ECANCELED);
  assert_int_equal(c.applies, 5);
  /* Not asked: the same solve runs on. */
  c.applies = 0;
  o.cancel = NULL;
  o.max_iterations = 50;
  GPU_OK(mr_cg_solve(dev, N, apply_counted, &c, mr_buf_data(bb), mr_buf_data(bx), &o, NULL, TERR));
  assert_true(c.applies > 5);
  mr_buf_destroy(bd);
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  free(dc);
  free(b);
}

static void cpu_cancel(void **state) {
  (void)state;
  check_cancel(gpu_test_cpu());
}

static void cuda_cancel(void **state) {
  (void)state;
  check_cancel(gpu_test_gpu());
}

typedef struct problem {
  int random; /* samples uniform over the band, else radial spokes */
  int rank;
  size_t n[3];
  int spokes, samples;
  double lambda; /* relative to the mean of Q's diagonal per voxel */
  mr_regularizer reg;
  size_t coils;
} problem;

static const problem problems[] = {
    /* lambda 0 needs F^H F well conditioned: samples over the whole band
     * (radial spokes leave its corners empty). */
    {1, 2, {24, 24, 1}, 40, 48, 0, MR_REG_IDENTITY, 0},
    {1, 3, {8, 7, 6}, 40, 32, 0, MR_REG_IDENTITY, 0},
    /* Radial: the regularizer fills in the empty corners. */
    {0, 2, {20, 18, 1}, 16, 40, 0.5, MR_REG_FINITE_DIFFERENCE, 0},
    {0, 3, {8, 8, 8}, 60, 16, 0.5, MR_REG_IDENTITY, 0},
    {0, 3, {8, 7, 6}, 40, 16, 0.5, MR_REG_FINITE_DIFFERENCE, 0},
    {0, 2, {16, 16, 1}, 12, 32, 0.5, MR_REG_FINITE_DIFFERENCE, 3},
};

/* Solves the normal equations of p on dev and returns the exact relative
 * residual. */
static double solve_and_check(mr_device *dev, const problem *p, const mr_cg_opts *co) {
  size_t m = (size_t)p->spokes * p->samples, coils = p->coils, batch = coils ? coils : 1;
  size_t nvox = p->n[0] * p->n[1] * (p->rank == 3 ? p->n[2] : 1);
  float *k = malloc(m * p->rank * sizeof *k);
  if (p->random) {
    uint64_t s = 77;
    for (size_t i = 0; i < m * p->rank; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      k[i] = (float)((s >> 11) * (1.0 / 9007199254740992.0) - 0.5);
    }
  } else {
    iter_radial(p->rank, p->spokes, p->samples, k);
  }
  mr_cfloat *data = malloc(m * batch * sizeof *data), *maps = malloc(batch * nvox * sizeof *maps);
  gpu_test_random(data, m * batch, 31);
  gpu_test_random(maps, batch * nvox, 32);
  int gpu = mr_device_is_gpu(dev);
  mr_fhd_precision prec = gpu ? MR_FHD_SINGLE : MR_FHD_DOUBLE;

  /* b = F^H D, combined through the maps when there are some. */
  mr_fhd_opts fo = {.rank = p->rank, .grid = {p->n[0], p->n[1], p->n[2]}, .batch = batch,
                    .precision = prec};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(dev, &fo, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, k, TERR));
  mr_cfloat *fhd = malloc(batch * nvox * sizeof *fhd), *b = calloc(nvox, sizeof *b);
  GPU_OK(mr_fhd_adjoint(plan, data, NULL, fhd, TERR));
  mr_fhd_plan_destroy(plan);
  for (size_t c = 0; c < batch; c++)
    for (size_t i = 0; i < nvox; i++)
      b[i] += coils ? conjf(maps[c * nvox + i]) * fhd[c * nvox + i] : fhd[i];

  fo.grid[0] *= 2;
  fo.grid[1] *= 2;
  fo.grid[2] = p->rank == 3 ? 2 * p->n[2] : 1;
  fo.batch = 1;
  GPU_OK(mr_fhd_plan_create(dev, &fo, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, k, TERR));
  mr_cfloat *q = malloc(mr_fhd_voxel_count(plan) * sizeof *q);
  GPU_OK(mr_fhd_adjoint(plan, NULL, NULL, q, TERR));
  mr_fhd_plan_destroy(plan);

  double lambda = p->lambda * (double)m / (double)nvox; /* F^H F's mean eigenvalue */
  mr_toeplitz_opts to = {.rank = p->rank, .n = {p->n[0], p->n[1], p->n[2]}, .lambda = lambda,
                         .reg = p->reg, .coils = coils};
  mr_toeplitz *t = NULL;
  GPU_OK(mr_toeplitz_create(dev, &to, q, &t, TERR));
  if (coils)
    GPU_OK(mr_toeplitz_set_maps(t, maps, TERR));
  mr_cfloat *x = malloc(nvox * sizeof *x);
  mr_cg_report r;
  size_t bytes = nvox * sizeof(mr_cfloat);
  if (gpu) {
    mr_buf *bb = gpu_test_upload(dev, b, bytes), *bx = NULL;
    GPU_OK(mr_buf_create(dev, bytes, &bx, TERR));
    GPU_OK(mr_cg_solve(dev, nvox, mr_toeplitz_apply_op, t, mr_buf_data(bb), mr_buf_data(bx), co, &r,
                       TERR));
    GPU_OK(mr_buf_download(bx, 0, x, bytes, TERR));
    mr_buf_destroy(bb);
    mr_buf_destroy(bx);
  } else {
    GPU_OK(mr_cg_solve(dev, nvox, mr_toeplitz_apply_op, t, b, x, co, &r, TERR));
  }
  mr_toeplitz_destroy(t);

  mr_cfloat *ax = malloc(nvox * sizeof *ax);
  iter_exact_normal(gpu_test_cpu(), p->rank, p->n, m, k, NULL, lambda, p->reg, coils, maps, x,
                    ax);
  double num = 0, den = 0;
  for (size_t i = 0; i < nvox; i++) {
    num += pow(cabs((double complex)b[i] - ax[i]), 2);
    den += pow(cabs((double complex)b[i]), 2);
  }
  double res = sqrt(num / den);
  print_message("%dD %zux%zux%zu, %zu samples, lambda %.3g %s, %zu coils: %d iterations, cg "
                "residual %.1e, exact residual %.2e\n",
                p->rank, p->n[0], p->n[1], p->n[2], m, lambda,
                p->reg == MR_REG_IDENTITY ? "identity" : "differences", coils, r.iterations,
                r.residual, res);
  free(k);
  free(data);
  free(maps);
  free(fhd);
  free(b);
  free(q);
  free(x);
  free(ax);
  return res;
}

static const mr_cg_opts to_tolerance = {.max_iterations = 500, .tolerance = 1e-6};
/* tolerance 0 (allowed: "run every iteration") on clean data: far past the
 * point where the residual reaches rounding level, p^H A p turns into
 * rounding noise (it came out at -9.9e10 after 1,840 iterations); the
 * solve must end with its best iterate, not fail. */
static const mr_cg_opts every_iteration = {.max_iterations = 3000, .tolerance = 0};

static void cpu_normal_equations(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_cpu(), &problems[i], &to_tolerance) <= 1e-4);
}

static void cuda_normal_equations(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_gpu(), &problems[i], &to_tolerance) <= 1e-4);
}

/* The GPU's iteration captured once and replayed (mr_cg_opts.replay)
 * against the queued loop: on a diagonal system (deterministic kernels,
 * past a read of the states at 16 iterations) the same iterations,
 * residual and answer; and every Toeplitz problem (cuFFT in the graph)
 * meets the tolerance (its F^H D sums atomically, so b itself differs in
 * the last bits from one computation to the next). */
static void cuda_replay_matches_queued(void **state) {
  (void)state;
  enum { N = 3000 };
  float *d = malloc(N * sizeof *d);
  mr_cfloat *b = malloc(N * sizeof *b), *xq = calloc(N, sizeof *xq), *xr = calloc(N, sizeof *xr);
  for (int i = 0; i < N; i++)
    d[i] = 1.0f + (float)(i % 37) * 0.25f;
  gpu_test_random(b, N, 5);
  mr_cg_opts o = {.max_iterations = 50, .tolerance = 1e-6};
  mr_cg_report rq, rr;
  GPU_OK(diagonal_solve(gpu_test_gpu(), N, d, b, xq, &o, &rq));
  o.replay = 1;
  GPU_OK(diagonal_solve(gpu_test_gpu(), N, d, b, xr, &o, &rr));
  print_message("diagonal: queued %d iterations, residual %.6e; replayed %d, %.6e\n",
                rq.iterations, rq.residual, rr.iterations, rr.residual);
  assert_true(rq.iterations > 16);
  assert_int_equal(rr.iterations, rq.iterations);
  assert_true(rr.residual == rq.residual);
  assert_memory_equal(xr, xq, N * sizeof *xq);
  free(d);
  free(b);
  free(xq);
  free(xr);
  mr_cg_opts replayed = to_tolerance;
  replayed.replay = 1;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_gpu(), &problems[i], &replayed) <= 1e-4);
}

static void cpu_tolerance_zero(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_cpu(), &problems[i], &every_iteration) <= 1e-4);
}

static void cuda_tolerance_zero(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_gpu(), &problems[i], &every_iteration) <= 1e-4);
}

/* Kirk & Hwu Fig. 14.19 made a test: reconstruct a Shepp-Logan phantom
 * (radial data from exact double-precision sums) with F^H D and Q from
 * the CPU in double precision and from a faster path, 20 CG iterations
 * each, and compare their PSNR against the phantom. */
typedef struct psnr_setup {
  size_t n;
  int spokes, samples;
  float *truth;
  float *k;
  mr_cfloat *data;
} psnr_setup;

static psnr_setup psnr_make(size_t n, int spokes, int samples) {
  psnr_setup p = {.n = n, .spokes = spokes, .samples = samples};
  size_t m = (size_t)spokes * samples;
  p.truth = malloc(n * n * sizeof *p.truth);
  p.k = malloc(2 * m * sizeof *p.k);
  p.data = malloc(m * sizeof *p.data);
  iter_shepp_logan(n, n, p.truth);
  iter_radial(2, spokes, samples, p.k);
  mr_cfloat *img = malloc(n * n * sizeof *img);
  for (size_t i = 0; i < n * n; i++)
    img[i] = p.truth[i];
  mr_fhd_opts o = {.rank = 2, .grid = {n, n, 1}, .batch = 1, .precision = MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, p.k, TERR));
  GPU_OK(mr_fhd_forward(plan, img, p.data, TERR));
  mr_fhd_plan_destroy(plan);
  free(img);
  return p;
}

static void psnr_free(psnr_setup *p) {
  free(p->truth);
  free(p->k);
  free(p->data);
}

/* PSNR of the reconstruction with the sums on `fhd_dev` (precision,
 * kernel) and the solve on `cg_dev`. */
static double psnr_of(const psnr_setup *p, mr_device *fhd_dev, mr_fhd_precision prec,
                      mr_fhd_kernel kernel, mr_device *cg_dev) {
  size_t n = p->n, nvox = n * n, m = (size_t)p->spokes * p->samples;
  mr_fhd_opts o = {.rank = 2, .grid = {n, n, 1}, .batch = 1, .precision = prec, .kernel = kernel};
  mr_fhd_plan *plan = NULL;
  mr_cfloat *b = malloc(nvox * sizeof *b), *q = malloc(4 * nvox * sizeof *q);
  GPU_OK(mr_fhd_plan_create(fhd_dev, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, p->k, TERR));
  GPU_OK(mr_fhd_adjoint(plan, p->data, NULL, b, TERR));
  mr_fhd_plan_destroy(plan);
  o.grid[0] = o.grid[1] = 2 * n;
  GPU_OK(mr_fhd_plan_create(fhd_dev, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, p->k, TERR));
  GPU_OK(mr_fhd_adjoint(plan, NULL, NULL, q, TERR));
  mr_fhd_plan_destroy(plan);
  mr_toeplitz_opts to = {.rank = 2, .n = {n, n, 1}};
  mr_toeplitz *t = NULL;
  GPU_OK(mr_toeplitz_create(cg_dev, &to, q, &t, TERR));
  mr_cg_opts co = {.max_iterations = 20, .tolerance = 0};
  mr_cfloat *x = malloc(nvox * sizeof *x);
  size_t bytes = nvox * sizeof *x;
  if (mr_device_is_gpu(cg_dev)) {
    mr_buf *bb = gpu_test_upload(cg_dev, b, bytes), *bx = NULL;
    GPU_OK(mr_buf_create(cg_dev, bytes, &bx, TERR));
    GPU_OK(mr_cg_solve(cg_dev, nvox, mr_toeplitz_apply_op, t, mr_buf_data(bb), mr_buf_data(bx), &co,
                       NULL, TERR));
    GPU_OK(mr_buf_download(bx, 0, x, bytes, TERR));
    mr_buf_destroy(bb);
    mr_buf_destroy(bx);
  } else {
    GPU_OK(mr_cg_solve(cg_dev, nvox, mr_toeplitz_apply_op, t, b, x, &co, NULL, TERR));
  }
  mr_toeplitz_destroy(t);
  float *mag = malloc(nvox * sizeof *mag);
  for (size_t i = 0; i < nvox; i++)
    mag[i] = cabsf(x[i]);
  double psnr = iter_psnr(mag, p->truth, nvox);
  free(mag);
  free(x);
  free(b);
  free(q);
  return psnr;
}

static void cpu_single_precision_psnr(void **state) {
  (void)state;
  psnr_setup p = psnr_make(40, 60, 80);
  double dbl = psnr_of(&p, gpu_test_cpu(), MR_FHD_DOUBLE, MR_FHD_AUTO, gpu_test_cpu());
  double single = psnr_of(&p, gpu_test_cpu(), MR_FHD_SINGLE, MR_FHD_AUTO, gpu_test_cpu());
  print_message("PSNR: CPU double %.3f dB, CPU single %.3f dB\n", dbl, single);
  assert_true(fabs(dbl - single) <= 0.01);
  psnr_free(&p);
}

static void cuda_hardware_trig_psnr(void **state) {
  (void)state;
  psnr_setup p = psnr_make(96, 150, 192);
  double dbl = psnr_of(&p, gpu_test_cpu(), MR_FHD_DOUBLE, MR_FHD_AUTO, gpu_test_cpu());
  double rec = psnr_of(&p, gpu_test_gpu(), MR_FHD_SINGLE, MR_FHD_RECURRENCE, gpu_test_gpu());
  double hw = psnr_of(&p, gpu_test_gpu(), MR_FHD_SINGLE, MR_FHD_HWTRIG, gpu_test_gpu());
  print_message("PSNR: CPU double %.3f dB, GPU recurrence %.3f dB, GPU book final (hwtrig) "
                "%.3f dB\n", dbl, rec, hw);
  assert_true(dbl - rec <= 0.1);
  assert_true(dbl - hw <= 0.1);
  psnr_free(&p);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_diagonal),
      cmocka_unit_test(cpu_indefinite),
      cmocka_unit_test(cpu_batch),
      cmocka_unit_test(cpu_cancel),
      cmocka_unit_test(cpu_normal_equations),
      cmocka_unit_test(cpu_tolerance_zero),
      cmocka_unit_test(cpu_single_precision_psnr),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_diagonal_matches_cpu),
      cmocka_unit_test(cuda_batch),
      cmocka_unit_test(cuda_cancel),
      cmocka_unit_test(cuda_normal_equations),
      cmocka_unit_test(cuda_replay_matches_queued),
      cmocka_unit_test(cuda_tolerance_zero),
      cmocka_unit_test(cuda_hardware_trig_psnr),
  };
  int rc = cuda ? cmocka_run_group_tests_name("cg_cuda", cuda_tests, NULL, NULL)
                : cmocka_run_group_tests_name("cg_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
