/* fhd.h: the direct sums. CPU group: double precision against a plain
 * double loop written here, single precision (the recurrence on grids, the
 * exact phase reduction on points) against double, forward and adjoint as
 * each other's transposes. --cuda: every GPU kernel against the CPU in
 * double precision, including several chunks and coils; the accuracy the
 * issue asks of the GPU (2e-5) on a 3D problem. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fhd.h"
#include "test_gpu_common.h"
#include "test_support.h"

/* A problem: trajectory, weights, data for `batch` coils. */
typedef struct problem {
  int rank;
  size_t grid[3], m, batch;
  float *k, *w;
  mr_cfloat *d;
} problem;

static double uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (*s >> 11) * (1.0 / 9007199254740992.0);
}

static problem make_problem(int rank, size_t nx, size_t ny, size_t nz, size_t m, size_t batch,
                            unsigned seed) {
  problem p = {.rank = rank, .grid = {nx, ny, nz}, .m = m, .batch = batch};
  p.k = malloc(m * rank * sizeof *p.k);
  p.w = malloc(m * sizeof *p.w);
  p.d = malloc(m * batch * sizeof *p.d);
  uint64_t s = seed * 7919u + 1;
  for (size_t i = 0; i < m * rank; i++)
    p.k[i] = (float)(uniform(&s) - 0.5);
  for (size_t i = 0; i < m; i++)
    p.w[i] = (float)(0.5 + uniform(&s));
  gpu_test_random(p.d, m * batch, seed);
  return p;
}

static void free_problem(problem *p) {
  free(p->k);
  free(p->w);
  free(p->d);
}

static size_t voxels(const problem *p) { return p->grid[0] * p->grid[1] * p->grid[2]; }

/* F^H W D in double, the plain way (Fig. 14.4B). */
static void naive_adjoint(const problem *p, double complex *out) {
  size_t nx = p->grid[0], ny = p->grid[1], nz = p->grid[2], n = voxels(p);
  for (size_t b = 0; b < p->batch; b++)
    for (size_t v = 0; v < n; v++) {
      double x[3] = {(double)(v % nx) - (double)(nx / 2), (double)(v / nx % ny) - (double)(ny / 2),
                     (double)(v / nx / ny) - (double)(nz / 2)};
      double complex sum = 0;
      for (size_t m = 0; m < p->m; m++) {
        double t = 0;
        for (int d = 0; d < p->rank; d++)
          t += p->k[m * p->rank + d] * x[d];
        sum += p->w[m] * (double complex)p->d[b * p->m + m] * cexp(2 * M_PI * I * t);
      }
      out[b * n + v] = sum;
    }
}

static mr_fhd_plan *plan_for(mr_device *dev, const problem *p, mr_fhd_kernel kernel,
                             mr_fhd_precision precision) {
  mr_fhd_opts o = {.rank = p->rank,
                   .grid = {p->grid[0], p->grid[1], p->grid[2]},
                   .batch = p->batch,
                   .kernel = kernel,
                   .precision = precision};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(dev, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, p->m, p->k, TERR));
  return plan;
}

/* The adjoint of p on dev with the given plan settings. */
static mr_cfloat *adjoint(mr_device *dev, const problem *p, const mr_fhd_opts *extra) {
  mr_fhd_opts o = *extra;
  o.rank = p->rank;
  memcpy(o.grid, p->grid, sizeof o.grid);
  o.batch = p->batch;
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(dev, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, p->m, p->k, TERR));
  mr_cfloat *out = malloc(voxels(p) * p->batch * sizeof *out);
  for (size_t i = 0; i < voxels(p) * p->batch; i++)
    out[i] = NAN; /* poisoned: every element must be written */
  GPU_OK(mr_fhd_adjoint(plan, p->d, p->w, out, TERR));
  mr_fhd_plan_destroy(plan);
  return out;
}

static mr_cfloat *adjoint_double(const problem *p) {
  mr_fhd_opts o = {.precision = MR_FHD_DOUBLE};
  return adjoint(gpu_test_cpu(), p, &o);
}

static void cpu_double_matches_naive(void **state) {
  (void)state;
  problem p = make_problem(3, 6, 5, 4, 97, 2, 1);
  size_t n = voxels(&p) * p.batch;
  double complex *want = malloc(n * sizeof *want);
  naive_adjoint(&p, want);
  mr_cfloat *got = adjoint_double(&p);
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += pow(cabs(got[i] - want[i]), 2);
    den += pow(cabs(want[i]), 2);
  }
  print_message("double vs naive: %.2e\n", sqrt(num / den));
  assert_true(sqrt(num / den) < 1e-7); /* float storage of the result */
  free(want);
  free(got);
  free_problem(&p);
}

/* Single precision on grids of awkward sizes (odd, shorter and longer than
 * one recurrence segment) against double. */
static void cpu_single_grid(void **state) {
  (void)state;
  const size_t shapes[][4] = {{2, 33, 7, 1}, {2, 5, 16, 1}, {3, 17, 6, 5}, {2, 64, 3, 1}};
  for (int s = 0; s < 4; s++) {
    problem p = make_problem((int)shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 300, 2,
                             10 + s);
    mr_fhd_opts o = {.precision = MR_FHD_SINGLE};
    mr_cfloat *got = adjoint(gpu_test_cpu(), &p, &o), *want = adjoint_double(&p);
    double err = mr_test_rel_error_c(got, want, voxels(&p) * p.batch);
    print_message("single grid %zux%zux%zu: %.2e\n", p.grid[0], p.grid[1], p.grid[2], err);
    assert_true(err < 2e-6);
    free(got);
    free(want);
    free_problem(&p);
  }
}

/* Arbitrary voxels: the grid's own positions given as points must give the
 * grid's result, and off-grid points match the double loop. */
static void cpu_points(void **state) {
  (void)state;
  problem p = make_problem(2, 9, 8, 1, 200, 1, 3);
  size_t n = voxels(&p);
  float *pts = malloc(n * 2 * sizeof *pts);
  for (size_t v = 0; v < n; v++) {
    pts[2 * v] = (float)((long)(v % 9) - 4) + 0.25f;
    pts[2 * v + 1] = (float)((long)(v / 9) - 4) - 0.5f;
  }
  for (int prec = 0; prec < 2; prec++) {
    mr_fhd_plan *plan = plan_for(gpu_test_cpu(), &p, MR_FHD_AUTO, (mr_fhd_precision)prec);
    GPU_OK(mr_fhd_set_voxels(plan, n, pts, TERR));
    mr_cfloat *out = malloc(n * sizeof *out);
    GPU_OK(mr_fhd_adjoint(plan, p.d, p.w, out, TERR));
    double complex *want = malloc(n * sizeof *want);
    for (size_t v = 0; v < n; v++) {
      double complex sum = 0;
      for (size_t m = 0; m < p.m; m++)
        sum += p.w[m] * (double complex)p.d[m] *
               cexp(2 * M_PI * I * ((double)p.k[2 * m] * pts[2 * v] + (double)p.k[2 * m + 1] * pts[2 * v + 1]));
      want[v] = sum;
    }
    double num = 0, den = 0;
    for (size_t v = 0; v < n; v++) {
      num += pow(cabs(out[v] - want[v]), 2);
      den += pow(cabs(want[v]), 2);
    }
    print_message("points, %s: %.2e\n", prec ? "double" : "single", sqrt(num / den));
    assert_true(sqrt(num / den) < (prec ? 1e-7 : 2e-6));
    free(want);
    free(out);
    mr_fhd_plan_destroy(plan);
  }
  free(pts);
  free_problem(&p);
}

/* <F x, y> == <x, F^H y>: forward and adjoint are transposes, with the
 * signs and voxel positions fhd.h promises. */
static void cpu_forward_is_adjoint_transpose(void **state) {
  (void)state;
  problem p = make_problem(3, 5, 4, 6, 50, 1, 4);
  size_t n = voxels(&p);
  mr_cfloat *x = malloc(n * sizeof *x), *fx = malloc(p.m * sizeof *fx);
  mr_cfloat *fhy = malloc(n * sizeof *fhy);
  gpu_test_random(x, n, 9);
  for (int prec = 0; prec < 2; prec++) {
    mr_fhd_plan *plan = plan_for(gpu_test_cpu(), &p, MR_FHD_AUTO, (mr_fhd_precision)prec);
    GPU_OK(mr_fhd_forward(plan, x, fx, TERR));
    GPU_OK(mr_fhd_adjoint(plan, p.d, NULL, fhy, TERR));
    double complex a = 0, b = 0;
    for (size_t m = 0; m < p.m; m++)
      a += conj((double complex)fx[m]) * p.d[m];
    for (size_t v = 0; v < n; v++)
      b += conj((double complex)x[v]) * fhy[v];
    print_message("<Fx,y> %g%+gi, <x,F^H y> %g%+gi\n", creal(a), cimag(a), creal(b), cimag(b));
    assert_true(cabs(a - b) < 1e-5 * cabs(a));
    mr_fhd_plan_destroy(plan);
  }
  free(x);
  free(fx);
  free(fhy);
  free_problem(&p);
}

/* Q is the adjoint of the weights alone, and is Hermitian about the
 * origin of a grid of even size: q(-x) = conj(q(x)). */
static void cpu_q(void **state) {
  (void)state;
  problem p = make_problem(2, 8, 8, 1, 120, 1, 5);
  mr_fhd_plan *plan = plan_for(gpu_test_cpu(), &p, MR_FHD_AUTO, MR_FHD_SINGLE);
  mr_cfloat q[64];
  GPU_OK(mr_fhd_adjoint(plan, NULL, p.w, q, TERR));
  double total = 0;
  for (size_t m = 0; m < p.m; m++)
    total += p.w[m];
  assert_float_equal(crealf(q[4 * 8 + 4]), total, 1e-4 * total); /* x = 0 */
  for (int y = 1; y < 8; y++)
    for (int x = 1; x < 8; x++) {
      mr_cfloat a = q[y * 8 + x], b = q[(8 - y) * 8 + (8 - x)];
      assert_true(cabsf(a - conjf(b)) < 1e-4f * total);
    }
  mr_fhd_plan_destroy(plan);
  free_problem(&p);
}

static void cpu_bad_options(void **state) {
  (void)state;
  mr_fhd_plan *plan = NULL;
  mr_fhd_opts o = {.rank = 4, .grid = {4, 4, 4}, .batch = 1};
  assert_int_equal(mr_fhd_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  o.rank = 2;
  o.voxels_per_thread = 12;
  assert_int_equal(mr_fhd_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  o.voxels_per_thread = 0;
  o.kernel = MR_FHD_RECURRENCE;
  GPU_OK(mr_fhd_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  float pt[2] = {0, 0};
  assert_int_equal(mr_fhd_set_voxels(plan, 1, pt, TERR), MR_EINVAL);
  mr_cfloat out[16];
  assert_int_equal(mr_fhd_adjoint(plan, NULL, NULL, out, TERR), MR_EINVAL); /* no trajectory */
  float bad[2] = {NAN, 0};
  assert_int_equal(mr_fhd_set_points(plan, 1, bad, TERR), MR_EINVAL);
  mr_fhd_plan_destroy(plan);
}

/* ---- CUDA group ---------------------------------------------------------- */

static void check_gpu(const problem *p, const mr_cfloat *want, mr_fhd_kernel kernel,
                      int per_thread, size_t chunk, double tol) {
  mr_fhd_opts o = {.kernel = kernel, .voxels_per_thread = per_thread, .chunk = chunk};
  mr_cfloat *got = adjoint(gpu_test_gpu(), p, &o);
  double err = mr_test_rel_error_c(got, want, voxels(p) * p->batch);
  print_message("%-12s V=%2d chunk %6zu: %.2e\n", mr_fhd_kernel_name(kernel), per_thread, chunk,
                err);
  assert_true(err < tol);
  free(got);
}

static void cuda_every_kernel(void **state) {
  (void)state;
  problem p = make_problem(3, 19, 12, 10, 5000, 2, 6);
  mr_cfloat *want = adjoint_double(&p);
  /* The book's kernels compute the phase 2 pi k.x in float: its rounding,
   * not the sin/cos, sets their error. */
  for (int k = MR_FHD_SCATTER; k <= MR_FHD_HWTRIG; k++)
    check_gpu(&p, want, (mr_fhd_kernel)k, 0, 0, 1e-4);
  check_gpu(&p, want, MR_FHD_TILED, 0, 0, 2e-5);
  int per_thread[] = {4, 8, 16, 32};
  for (int i = 0; i < 4; i++)
    check_gpu(&p, want, MR_FHD_RECURRENCE, per_thread[i], 0, 2e-5);
  /* Several chunks (one smaller than the rest), and chunks smaller than a
   * constant-memory piece. */
  check_gpu(&p, want, MR_FHD_RECURRENCE, 16, 1200, 2e-5);
  check_gpu(&p, want, MR_FHD_HWTRIG, 0, 1200, 1e-4);
  check_gpu(&p, want, MR_FHD_TILED, 0, 777, 2e-5);
  free(want);
  free_problem(&p);
}

static void cuda_points_and_forward(void **state) {
  (void)state;
  problem p = make_problem(2, 40, 30, 1, 3000, 2, 7);
  size_t n = voxels(&p);
  float *pts = malloc(n * 2 * sizeof *pts);
  uint64_t s = 5;
  for (size_t i = 0; i < n * 2; i++)
    pts[i] = (float)(40 * uniform(&s) - 20);
  mr_cfloat *img = malloc(n * p.batch * sizeof *img);
  gpu_test_random(img, n * p.batch, 3);
  mr_cfloat *out[2][2];
  for (int dev = 0; dev < 2; dev++) {
    mr_device *d = dev ? gpu_test_gpu() : gpu_test_cpu();
    mr_fhd_plan *plan = plan_for(d, &p, MR_FHD_AUTO, dev ? MR_FHD_SINGLE : MR_FHD_DOUBLE);
    out[dev][0] = malloc(n * p.batch * sizeof(mr_cfloat));
    out[dev][1] = malloc(p.m * p.batch * sizeof(mr_cfloat));
    GPU_OK(mr_fhd_forward(plan, img, out[dev][1], TERR)); /* on the grid */
    GPU_OK(mr_fhd_set_voxels(plan, n, pts, TERR));
    GPU_OK(mr_fhd_adjoint(plan, p.d, p.w, out[dev][0], TERR));
    mr_fhd_plan_destroy(plan);
  }
  double e_adj = mr_test_rel_error_c(out[1][0], out[0][0], n * p.batch);
  double e_fwd = mr_test_rel_error_c(out[1][1], out[0][1], p.m * p.batch);
  print_message("points adjoint %.2e, forward %.2e\n", e_adj, e_fwd);
  assert_true(e_adj < 2e-5);
  assert_true(e_fwd < 2e-5);
  for (int i = 0; i < 4; i++)
    free(out[i / 2][i % 2]);
  free(img);
  free(pts);
  free_problem(&p);
}

/* The bar on a 3D problem of realistic phase range. */
static void cuda_accuracy_3d(void **state) {
  (void)state;
  problem p = make_problem(3, 32, 32, 32, 16384, 1, 8);
  mr_cfloat *want = adjoint_double(&p);
  check_gpu(&p, want, MR_FHD_AUTO, 0, 0, 2e-5);
  free(want);
  free_problem(&p);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_double_matches_naive),
      cmocka_unit_test(cpu_single_grid),
      cmocka_unit_test(cpu_points),
      cmocka_unit_test(cpu_forward_is_adjoint_transpose),
      cmocka_unit_test(cpu_q),
      cmocka_unit_test(cpu_bad_options),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_every_kernel),
      cmocka_unit_test(cuda_points_and_forward),
      cmocka_unit_test(cuda_accuracy_3d),
  };
  int rc = cuda ? cmocka_run_group_tests_name("fhd_cuda", cuda_tests, NULL, NULL)
                : cmocka_run_group_tests_name("fhd_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
