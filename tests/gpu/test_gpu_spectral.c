/* spectral.h: the truncated projector and pseudo-inverse of Gram matrices
 * with known eigenvectors (a random unitary q, eigenvalues w spread over
 * nine decades: the factor q diag(sqrt(w)), or its adjoint for the other
 * side), items of very different scales and a zero item in one batch; the
 * matrix polynomials (the GPU's path) against the eigen path (the CPU's);
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

#include "blas.h"
#include "cmat.h"
#include "solve.h"
#include "spectral.h"
#include "spectral_impl.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { N = 48, BATCH = 4 };
static const float THRESHOLD = 1e-3f;

/* Item b's factor: q diag(sqrt(w)) (side MR_BLAS_N) or its adjoint
 * (MR_BLAS_C), so that the Gram matrix is q diag(w) q^H, with q a random
 * unitary (the eigenvectors of a random Hermitian matrix), w_k = scale_b
 * 10^(-9 k / (N - 1)) but none within 10% of THRESHOLD times the largest;
 * item BATCH - 1 is zero. q and w kept for the expected values. */
static mr_cfloat *batch_of(mr_cfloat *q, float *w, mr_blas_op side) {
  static const float scale[BATCH] = {1e6f, 1.0f, 1e-3f, 0};
  size_t nn = (size_t)N * N;
  mr_cfloat *a = malloc(sizeof *a * nn * BATCH);
  for (int b = 0; b < BATCH; b++) {
    mr_cfloat *qb = q + b * nn;
    gpu_test_random(qb, nn, 40u + (unsigned)b);
    for (int j = 0; j < N; j++) /* Hermitian */
      for (int i = 0; i < j; i++)
        qb[(size_t)i * N + j] = conjf(qb[(size_t)j * N + i]);
    for (int i = 0; i < N; i++)
      qb[(size_t)i * N + i] = crealf(qb[(size_t)i * N + i]);
    GPU_OK(mr_solve_eigh(gpu_test_cpu(), mr_cmat_dense(qb, N, N), w + b * N, 1, TERR));
    for (int k = 0; k < N; k++) {
      double e = -9.0 * k / (N - 1);
      if (fabs(e + 3) < 0.05) /* 10^-3 +- 12% */
        e = -3.1;
      w[b * N + k] = scale[b] * (float)pow(10, e);
    }
    for (int j = 0; j < N; j++)
      for (int i = 0; i < N; i++) {
        float complex f = sqrtf(w[b * N + j]) * qb[(size_t)j * N + i]; /* (i, j) */
        if (side == MR_BLAS_N)
          a[b * nn + (size_t)j * N + i] = f;
        else
          a[b * nn + (size_t)i * N + j] = conjf(f);
      }
  }
  return a;
}

/* The expected projector (inverse 0) or truncated inverse (inverse 1). */
static double complex expected(const mr_cfloat *q, const float *w, int b, int i, int j,
                               int inverse) {
  size_t nn = (size_t)N * N;
  double complex s = 0;
  for (int k = 0; k < N; k++)
    if (w[b * N + k] > THRESHOLD * w[b * N])
      s += (inverse ? 1 / (double)w[b * N + k] : 1) * q[b * nn + (size_t)k * N + i] *
           conj(q[b * nn + (size_t)k * N + j]);
  return s;
}

static void cpu_projector_and_inverse(mr_blas_op side) {
  size_t nn = (size_t)N * N;
  mr_cfloat *q = malloc(sizeof *q * nn * BATCH), *proj = malloc(sizeof *proj * nn * BATCH);
  mr_cfloat *pinv = malloc(sizeof *pinv * nn * BATCH);
  float *w = malloc(sizeof *w * N * BATCH), lmax[BATCH];
  mr_cfloat *a = batch_of(q, w, side);
  GPU_OK(mr_spectral_truncate(gpu_test_cpu(), mr_cmat_dense(a, N, N), side, THRESHOLD,
                              mr_cmat_dense(proj, N, N), mr_cmat_dense(pinv, N, N), lmax, BATCH,
                              TERR));
  for (int b = 0; b < BATCH; b++) {
    double ep = 0, np = 0, ei = 0, ni = 0;
    for (int j = 0; j < N; j++)
      for (int i = 0; i < N; i++) {
        double complex p = expected(q, w, b, i, j, 0), v = expected(q, w, b, i, j, 1);
        ep += pow(cabs(proj[b * nn + (size_t)j * N + i] - p), 2);
        np += pow(cabs(p), 2);
        ei += pow(cabs(pinv[b * nn + (size_t)j * N + i] - v), 2);
        ni += pow(cabs(v), 2);
      }
    print_message("item %d: lambda_max %g (true %g), projector error %.2e, inverse %.2e\n", b,
                  (double)lmax[b], (double)w[b * N], sqrt(ep / (np > 0 ? np : 1)),
                  sqrt(ei / (ni > 0 ? ni : 1)));
    if (w[b * N] == 0) { /* the zero item: zero outputs */
      assert_true(lmax[b] == 0);
      assert_true(ep == 0 && ei == 0);
      continue;
    }
    assert_true(fabs(lmax[b] - w[b * N]) <= 6e-3 * w[b * N]);
    assert_true(sqrt(ep / np) < 1e-5);
    assert_true(sqrt(ei / ni) < 1e-5);
  }
  free(q);
  free(proj);
  free(pinv);
  free(w);
  free(a);
}

static void cpu_row_side(void **state) {
  (void)state;
  cpu_projector_and_inverse(MR_BLAS_N);
}

static void cpu_column_side(void **state) {
  (void)state;
  cpu_projector_and_inverse(MR_BLAS_C);
}

/* The matrix polynomials (the GPU's path) on the CPU against the CPU's
 * eigen path: the same function of the eigenvalues. */
static void cpu_polynomials_match_eigen(void **state) {
  (void)state;
  size_t nn = (size_t)N * N, bytes = sizeof(mr_cfloat) * nn * BATCH;
  mr_cfloat *q = malloc(bytes), *pe = malloc(bytes), *ie = malloc(bytes);
  mr_cfloat *pp = malloc(bytes), *ip = malloc(bytes);
  float *w = malloc(sizeof *w * N * BATCH), le[BATCH], lp[BATCH];
  mr_cfloat *a = batch_of(q, w, MR_BLAS_C);
  mr_spectral_ops poly = mr_spectral_cpu_ops;
  poly.by_eigen = NULL;
  GPU_OK(mr_spectral_truncate(gpu_test_cpu(), mr_cmat_dense(a, N, N), MR_BLAS_C, THRESHOLD,
                              mr_cmat_dense(pe, N, N), mr_cmat_dense(ie, N, N), le, BATCH, TERR));
  GPU_OK(mr_spectral_truncate_by(&poly, gpu_test_cpu(), mr_cmat_dense(a, N, N), MR_BLAS_C,
                                 THRESHOLD, mr_cmat_dense(pp, N, N), mr_cmat_dense(ip, N, N), lp,
                                 BATCH, TERR));
  for (int b = 0; b < BATCH - 1; b++) {
    double ep = mr_test_rel_error_c(pp + b * nn, pe + b * nn, nn);
    double ei = mr_test_rel_error_c(ip + b * nn, ie + b * nn, nn);
    print_message("item %d: polynomials against eigen: projector %.2e, inverse %.2e\n", b, ep,
                  ei);
    assert_true(ep < 1e-5);
    assert_true(ei < 1e-5);
    assert_true(fabsf(lp[b] - le[b]) <= 1e-6f * le[b]);
  }
  for (size_t i = (BATCH - 1) * nn; i < BATCH * nn; i++)
    assert_true(pp[i] == 0 && ip[i] == 0);
  free(q);
  free(pe);
  free(ie);
  free(pp);
  free(ip);
  free(w);
  free(a);
}

static void bad_input(void **state) {
  (void)state;
  mr_cfloat a[4] = {1, 0, 0, 1}, p[4];
  mr_cmat am = mr_cmat_dense(a, 2, 2), pm = mr_cmat_dense(p, 2, 2), none = {0};
  mr_device *cpu = gpu_test_cpu();
  assert_int_equal(mr_spectral_truncate(cpu, am, MR_BLAS_N, 0, pm, none, NULL, 1, TERR), MR_EINVAL);
  assert_int_equal(mr_spectral_truncate(cpu, am, MR_BLAS_N, 1, pm, none, NULL, 1, TERR), MR_EINVAL);
  assert_int_equal(mr_spectral_truncate(cpu, am, MR_BLAS_T, 0.1f, pm, none, NULL, 1, TERR),
                   MR_EINVAL);
  /* a 2 x 1 factor: its row-side Gram is 2 x 2, the column side's 1 x 1 */
  assert_int_equal(
      mr_spectral_truncate(cpu, mr_cmat_dense(a, 2, 1), MR_BLAS_C, 0.1f, pm, none, NULL, 1, TERR),
      MR_EINVAL);
  assert_int_equal(mr_spectral_truncate(cpu, am, MR_BLAS_N, 0.1f, pm, none, NULL, 0, TERR),
                   MR_EINVAL);
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  size_t nn = (size_t)N * N, bytes = sizeof(mr_cfloat) * nn * BATCH;
  mr_cfloat *q = malloc(bytes), *proj = malloc(bytes), *pinv = malloc(bytes);
  float *w = malloc(sizeof *w * N * BATCH), lc[BATCH], lg[BATCH];
  mr_cfloat *a = batch_of(q, w, MR_BLAS_N);
  GPU_OK(mr_spectral_truncate(gpu_test_cpu(), mr_cmat_dense(a, N, N), MR_BLAS_N, THRESHOLD,
                              mr_cmat_dense(proj, N, N), mr_cmat_dense(pinv, N, N), lc, BATCH,
                              TERR));
  mr_device *gpu = gpu_test_gpu();
  mr_buf *da = gpu_test_upload(gpu, a, bytes), *dp = NULL, *di = NULL;
  GPU_OK(mr_buf_create(gpu, bytes, &dp, TERR));
  GPU_OK(mr_buf_create(gpu, bytes, &di, TERR));
  GPU_OK(mr_spectral_truncate(gpu, mr_cmat_dense(mr_buf_data(da), N, N), MR_BLAS_N, THRESHOLD,
                              mr_cmat_dense(mr_buf_data(dp), N, N),
                              mr_cmat_dense(mr_buf_data(di), N, N), lg, BATCH, TERR));
  mr_cfloat *gp = gpu_test_download(dp), *gi = gpu_test_download(di);
  for (int b = 0; b < BATCH - 1; b++) {
    double ep = mr_test_rel_error_c(gp + b * nn, proj + b * nn, nn);
    double ei = mr_test_rel_error_c(gi + b * nn, pinv + b * nn, nn);
    print_message("item %d: GPU against CPU: projector %.2e, inverse %.2e\n", b, ep, ei);
    assert_true(ep < 1e-4);
    assert_true(ei < 1e-4);
    assert_true(fabsf(lg[b] - lc[b]) <= 1e-5f * lc[b]);
  }
  mr_buf_destroy(da);
  mr_buf_destroy(dp);
  mr_buf_destroy(di);
  free(q);
  free(proj);
  free(pinv);
  free(w);
  free(a);
  free(gp);
  free(gi);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_row_side),
      cmocka_unit_test(cpu_column_side),
      cmocka_unit_test(cpu_polynomials_match_eigen),
      cmocka_unit_test(bad_input),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("spectral_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("spectral_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
