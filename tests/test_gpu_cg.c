/* cg.h: a diagonal system with a known answer, an indefinite one, and the
 * issue's check of the whole Toeplitz path: the solution of the normal
 * equations, built from Q and F^H D, satisfies them with F^H F applied
 * exactly (direct sums in double) to a relative residual <= 1e-4, in 2D
 * and 3D, with each regularizer and with coil maps. --cuda: the same with
 * F^H D, Q, the operator and the solve on the GPU. */
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

typedef struct diagonal {
  size_t n;
  const float *d;
} diagonal;

static int apply_diagonal(void *op, const mr_cfloat *x, mr_cfloat *y) {
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
  GPU_OK(mr_cg_solve(gpu_test_cpu(), N, apply_diagonal, &a, b, x, &o, &r));
  print_message("diagonal: %d iterations, residual %.2e\n", r.iterations, r.residual);
  assert_true(r.iterations <= 9);
  assert_true(r.residual <= 1e-6);
  for (int i = 0; i < N; i++)
    assert_true(cabsf(x[i] * d[i] - b[i]) < 1e-5f);
  /* From the answer, a warm start has nothing left to do. */
  o.warm_start = 1;
  GPU_OK(mr_cg_solve(gpu_test_cpu(), N, apply_diagonal, &a, b, x, &o, &r));
  assert_true(r.iterations <= 1);
}

static void cpu_indefinite(void **state) {
  (void)state;
  float d[4] = {1, -2, 3, 1};
  mr_cfloat b[4] = {0, 1, 0, 0}, x[4];
  diagonal a = {4, d};
  mr_cg_opts o = {.max_iterations = 10, .tolerance = 1e-6};
  assert_int_equal(mr_cg_solve(gpu_test_cpu(), 4, apply_diagonal, &a, b, x, &o, NULL),
                   MR_ENUMERIC);
  o.max_iterations = 0;
  assert_int_equal(mr_cg_solve(gpu_test_cpu(), 4, apply_diagonal, &a, b, x, &o, NULL), MR_EINVAL);
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
static double solve_and_check(mr_device *dev, const problem *p) {
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
  GPU_OK(mr_fhd_plan_create(dev, &fo, &plan));
  GPU_OK(mr_fhd_set_points(plan, m, k));
  mr_cfloat *fhd = malloc(batch * nvox * sizeof *fhd), *b = calloc(nvox, sizeof *b);
  GPU_OK(mr_fhd_adjoint(plan, data, NULL, fhd));
  mr_fhd_plan_destroy(plan);
  for (size_t c = 0; c < batch; c++)
    for (size_t i = 0; i < nvox; i++)
      b[i] += coils ? conjf(maps[c * nvox + i]) * fhd[c * nvox + i] : fhd[i];

  fo.grid[0] *= 2;
  fo.grid[1] *= 2;
  fo.grid[2] = p->rank == 3 ? 2 * p->n[2] : 1;
  fo.batch = 1;
  GPU_OK(mr_fhd_plan_create(dev, &fo, &plan));
  GPU_OK(mr_fhd_set_points(plan, m, k));
  mr_cfloat *q = malloc(mr_fhd_voxel_count(plan) * sizeof *q);
  GPU_OK(mr_fhd_adjoint(plan, NULL, NULL, q));
  mr_fhd_plan_destroy(plan);

  double lambda = p->lambda * (double)m / (double)nvox; /* F^H F's mean eigenvalue */
  mr_toeplitz_opts to = {.rank = p->rank, .n = {p->n[0], p->n[1], p->n[2]}, .lambda = lambda,
                         .reg = p->reg, .coils = coils};
  mr_toeplitz *t = NULL;
  GPU_OK(mr_toeplitz_create(dev, &to, q, &t));
  if (coils)
    GPU_OK(mr_toeplitz_set_maps(t, maps));
  mr_cfloat *x = malloc(nvox * sizeof *x);
  mr_cg_opts co = {.max_iterations = 500, .tolerance = 1e-6};
  mr_cg_report r;
  size_t bytes = nvox * sizeof(mr_cfloat);
  if (gpu) {
    mr_buf *bb = gpu_test_upload(dev, b, bytes), *bx = NULL;
    GPU_OK(mr_buf_create(dev, bytes, &bx));
    GPU_OK(mr_cg_solve(dev, nvox, mr_toeplitz_apply_op, t, mr_buf_data(bb), mr_buf_data(bx), &co,
                       &r));
    GPU_OK(mr_buf_download(bx, 0, x, bytes));
    mr_buf_destroy(bb);
    mr_buf_destroy(bx);
  } else {
    GPU_OK(mr_cg_solve(dev, nvox, mr_toeplitz_apply_op, t, b, x, &co, &r));
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

static void cpu_normal_equations(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_cpu(), &problems[i]) <= 1e-4);
}

static void cuda_normal_equations(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof problems / sizeof *problems; i++)
    assert_true(solve_and_check(gpu_test_gpu(), &problems[i]) <= 1e-4);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_diagonal),
      cmocka_unit_test(cpu_indefinite),
      cmocka_unit_test(cpu_normal_equations),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_normal_equations),
  };
  int rc = cuda ? cmocka_run_group_tests_name("cg_cuda", cuda_tests, NULL, NULL)
                : cmocka_run_group_tests_name("cg_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
