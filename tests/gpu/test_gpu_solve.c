/* solve.h: (A + lambda I) X = B against a double-precision Cholesky solve;
 * with --cuda, the GPU against the CPU. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmat.h"
#include "solve.h"
#include "test_gpu_common.h"
#include "test_support.h"

/* batch Hermitian positive-definite n x n matrices M^H M / rows, dense. */
static mr_cfloat *hpd(int n, int batch, unsigned seed) {
  int rows = 2 * n;
  mr_cfloat *m = malloc(sizeof *m * rows * n), *a = malloc(sizeof *a * n * n * batch);
  for (int t = 0; t < batch; t++) {
    gpu_test_random(m, (size_t)rows * n, seed + t);
    for (int j = 0; j < n; j++)
      for (int i = 0; i < n; i++) {
        double complex s = 0;
        for (int r = 0; r < rows; r++)
          s += conj(m[(size_t)i * rows + r]) * m[(size_t)j * rows + r];
        a[(size_t)t * n * n + (size_t)j * n + i] = (float complex)(s / rows);
      }
  }
  free(m);
  return a;
}

/* x = (a + lambda I)^-1 b in double: Cholesky, then two triangular solves. */
static void reference(const mr_cfloat *a, double lambda, const mr_cfloat *b, int n,
                      int nrhs, mr_cfloat *x) {
  double complex *l = calloc((size_t)n * n, sizeof *l);
  for (int j = 0; j < n; j++) {
    double d = creal(a[(size_t)j * n + j]) + lambda;
    for (int k = 0; k < j; k++)
      d -= creal(l[(size_t)k * n + j] * conj(l[(size_t)k * n + j]));
    l[(size_t)j * n + j] = sqrt(d);
    for (int i = j + 1; i < n; i++) {
      double complex s = a[(size_t)j * n + i];
      for (int k = 0; k < j; k++)
        s -= l[(size_t)k * n + i] * conj(l[(size_t)k * n + j]);
      l[(size_t)j * n + i] = s / creal(l[(size_t)j * n + j]);
    }
  }
  double complex *y = malloc(sizeof *y * n);
  for (int r = 0; r < nrhs; r++) {
    for (int i = 0; i < n; i++) {
      double complex s = b[(size_t)r * n + i];
      for (int k = 0; k < i; k++)
        s -= l[(size_t)k * n + i] * y[k];
      y[i] = s / l[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
      double complex s = y[i];
      for (int k = i + 1; k < n; k++)
        s -= conj(l[(size_t)i * n + k]) * y[k];
      y[i] = s / l[(size_t)i * n + i];
    }
    for (int i = 0; i < n; i++)
      x[(size_t)r * n + i] = (float complex)y[i];
  }
  free(y);
  free(l);
}

static void cpu_solve(void **state) {
  (void)state;
  enum { N = 40, NRHS = 7, BATCH = 3 };
  const float lambda = 0.05f;
  mr_cfloat *a = hpd(N, BATCH, 1);
  mr_cfloat *b = malloc(sizeof *b * N * NRHS * BATCH), *ref = malloc(sizeof *b * N * NRHS * BATCH);
  gpu_test_random(b, (size_t)N * NRHS * BATCH, 9);
  for (int t = 0; t < BATCH; t++)
    reference(a + (size_t)t * N * N, lambda, b + (size_t)t * N * NRHS, N, NRHS,
              ref + (size_t)t * N * NRHS);
  GPU_OK(mr_solve_hpd(gpu_test_cpu(), mr_cmat_dense(a, N, N), lambda, mr_cmat_dense(b, N, NRHS),
                      BATCH, TERR));
  double err = mr_test_rel_error_c(b, ref, (size_t)N * NRHS * BATCH);
  if (err > 1e-4)
    fail_msg("solve: rel error %g", err);
  free(a);
  free(b);
  free(ref);
}

static void not_positive_definite(mr_device *dev) {
  enum { N = 5 };
  mr_cfloat a[N * N] = {0}, b[N] = {1, 2, 3, 4, 5};
  for (int i = 0; i < N; i++)
    a[i * N + i] = i == 3 ? -1.0f : 1.0f;
  mr_buf *da = NULL, *db = NULL;
  mr_cfloat *pa = a, *pb = b;
  if (mr_device_is_gpu(dev)) {
    da = gpu_test_upload(dev, a, sizeof a);
    db = gpu_test_upload(dev, b, sizeof b);
    pa = mr_buf_data(da);
    pb = mr_buf_data(db);
  }
  assert_int_equal(
      mr_solve_hpd(dev, mr_cmat_dense(pa, N, N), 0.5f, mr_cmat_dense(pb, N, 1), 1, TERR),
      MR_ENUMERIC);
  assert_non_null(strstr(mr_test_last_error(), "positive definite"));
  mr_buf_destroy(da);
  mr_buf_destroy(db);
}

static void cpu_not_positive_definite(void **state) {
  (void)state;
  not_positive_definite(gpu_test_cpu());
}

static void bad_shapes(void **state) {
  (void)state;
  mr_cfloat d[16];
  assert_int_equal(
      mr_solve_hpd(gpu_test_cpu(), mr_cmat_dense(d, 4, 3), 0, mr_cmat_dense(d, 4, 1), 1, TERR),
      MR_EINVAL);
  assert_int_equal(
      mr_solve_hpd(gpu_test_cpu(), mr_cmat_dense(d, 2, 2), -1, mr_cmat_dense(d, 2, 1), 1, TERR),
      MR_EINVAL);
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  enum { N = 200, NRHS = 16, BATCH = 2 };
  const float lambda = 1e-3f;
  size_t an = (size_t)N * N * BATCH, bn = (size_t)N * NRHS * BATCH;
  mr_cfloat *a = hpd(N, BATCH, 3), *b = malloc(sizeof *b * bn);
  gpu_test_random(b, bn, 4);
  mr_device *gpu = gpu_test_gpu();
  mr_buf *da = gpu_test_upload(gpu, a, an * sizeof *a), *db = gpu_test_upload(gpu, b, bn * sizeof *b);
  GPU_OK(mr_solve_hpd(gpu_test_cpu(), mr_cmat_dense(a, N, N), lambda, mr_cmat_dense(b, N, NRHS),
                      BATCH, TERR));
  GPU_OK(mr_solve_hpd(gpu, mr_cmat_dense(mr_buf_data(da), N, N), lambda,
                      mr_cmat_dense(mr_buf_data(db), N, NRHS), BATCH, TERR));
  mr_cfloat *x = gpu_test_download(db), *l = gpu_test_download(da);
  double err = mr_test_rel_error_c(x, b, bn);
  if (err > 1e-4)
    fail_msg("solve: GPU against CPU rel error %g", err);
  /* the lower factor agrees too (the upper triangle is unspecified) */
  for (int t = 0; t < BATCH; t++)
    for (int j = 0; j < N; j++)
      for (int i = 0; i < j; i++)
        l[(size_t)t * N * N + (size_t)j * N + i] = a[(size_t)t * N * N + (size_t)j * N + i] = 0;
  assert_true(mr_test_rel_error_c(l, a, an) < 1e-4);
  free(x);
  free(l);
  mr_buf_destroy(da);
  mr_buf_destroy(db);
  free(a);
  free(b);
  not_positive_definite(gpu);
}

/* batch random Hermitian n x n matrices (a = r + r^H), back to back. */
static mr_cfloat *hermitian(int n, int batch, unsigned seed) {
  size_t nn = (size_t)n * n;
  mr_cfloat *r = malloc(sizeof *r * nn * batch), *a = malloc(sizeof *a * nn * batch);
  gpu_test_random(r, nn * batch, seed);
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < n; i++)
        a[b * nn + (size_t)j * n + i] = r[b * nn + (size_t)j * n + i] + conjf(r[b * nn + (size_t)i * n + j]);
  free(r);
  return a;
}

/* eigh: a v_k = w_k v_k, orthonormal v, w ascending. */
static void cpu_eigh(void **state) {
  (void)state;
  enum { N = 37, BATCH = 3 };
  size_t nn = (size_t)N * N;
  mr_cfloat *a = hermitian(N, BATCH, 11), *v = malloc(sizeof *v * nn * BATCH);
  float *w = malloc(sizeof *w * N * BATCH);
  memcpy(v, a, sizeof *v * nn * BATCH);
  GPU_OK(mr_solve_eigh(gpu_test_cpu(), mr_cmat_dense(v, N, N), w, BATCH, TERR));
  for (int b = 0; b < BATCH; b++)
    for (int k = 0; k < N; k++) {
      const mr_cfloat *vk = v + b * nn + (size_t)k * N;
      if (k > 0)
        assert_true(w[b * N + k] >= w[b * N + k - 1]);
      double res = 0;
      for (int i = 0; i < N; i++) {
        double complex sum = 0;
        for (int j = 0; j < N; j++)
          sum += a[b * nn + (size_t)j * N + i] * vk[j];
        res += pow(cabs(sum - w[b * N + k] * vk[i]), 2);
      }
      assert_true(sqrt(res) < 1e-4 * N);
      for (int l = 0; l < N; l++) {
        double complex dot = 0;
        for (int i = 0; i < N; i++)
          dot += conjf(vk[i]) * v[b * nn + (size_t)l * N + i];
        assert_true(cabs(dot - (k == l)) < 1e-4);
      }
    }
  assert_int_equal(mr_solve_eigh(gpu_test_cpu(), mr_cmat_dense(v, N, N - 1), w, 1, TERR),
                   MR_EINVAL);
  free(a);
  free(v);
  free(w);
}

/* The GPU's eigenvalues and projectors onto the top eigenvectors (phase
 * free) against the CPU's. */
static void cuda_eigh_matches_cpu(void **state) {
  (void)state;
  enum { N = 40, BATCH = 2, TOP = 5 };
  size_t nn = (size_t)N * N;
  mr_cfloat *a = hermitian(N, BATCH, 12), *cpu = malloc(sizeof *cpu * nn * BATCH);
  float *wc = malloc(sizeof *wc * N * BATCH);
  memcpy(cpu, a, sizeof *cpu * nn * BATCH);
  GPU_OK(mr_solve_eigh(gpu_test_cpu(), mr_cmat_dense(cpu, N, N), wc, BATCH, TERR));
  mr_device *gpu = gpu_test_gpu();
  mr_buf *da = gpu_test_upload(gpu, a, sizeof *a * nn * BATCH), *dw = NULL;
  GPU_OK(mr_buf_create(gpu, sizeof(float) * N * BATCH, &dw, TERR));
  GPU_OK(mr_solve_eigh(gpu, mr_cmat_dense(mr_buf_data(da), N, N), mr_buf_data(dw), BATCH, TERR));
  mr_cfloat *g = gpu_test_download(da);
  float *wg = gpu_test_download(dw);
  assert_true(mr_test_rel_error_f(wg, wc, (size_t)N * BATCH) < 1e-5);
  for (int b = 0; b < BATCH; b++)
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N; j++) {
        double complex pc = 0, pg = 0;
        for (int k = N - TOP; k < N; k++) {
          pc += cpu[b * nn + (size_t)k * N + i] * conjf(cpu[b * nn + (size_t)k * N + j]);
          pg += g[b * nn + (size_t)k * N + i] * conjf(g[b * nn + (size_t)k * N + j]);
        }
        assert_true(cabs(pc - pg) < 1e-4);
      }
  mr_buf_destroy(da);
  mr_buf_destroy(dw);
  free(a);
  free(cpu);
  free(wc);
  free(g);
  free(wg);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_solve),
      cmocka_unit_test(cpu_not_positive_definite),
      cmocka_unit_test(bad_shapes),
      cmocka_unit_test(cpu_eigh),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_eigh_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("solve_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("solve_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
