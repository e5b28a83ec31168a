/* blas.h: GEMM and HERK against double-precision loops; with --cuda, the
 * GPU against the CPU at a GRAPPA-like shape. */
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
#include "test_gpu_common.h"
#include "test_support.h"

/* op(m)(i, j) in double. */
static double complex at(const mr_cmat *m, size_t item, mr_blas_op op, int i, int j) {
  const mr_cfloat *d = m->data + item * m->stride;
  if (op == MR_BLAS_N)
    return d[(size_t)j * m->ld + i];
  double complex v = d[(size_t)i * m->ld + j];
  return op == MR_BLAS_C ? conj(v) : v;
}

/* A batch of rows x cols matrices with padding: ld = rows + 2 and a gap
 * between items, all random. */
static mr_cmat padded(int rows, int cols, int batch, unsigned seed) {
  mr_cmat m = {.rows = rows, .cols = cols, .ld = rows + 2};
  m.stride = (size_t)m.ld * cols + 5;
  m.data = malloc(m.stride * batch * sizeof *m.data);
  gpu_test_random(m.data, m.stride * batch, seed);
  return m;
}

/* Every op pair at one shape, batched, against the loops. */
static void gemm_shape(int M, int N, int K, int BATCH) {
  const mr_cfloat alpha = 0.75f - 0.5f * I, beta = -0.25f + 1.0f * I;
  size_t per = (size_t)M * N;
  mr_cfloat *ref = malloc(per * BATCH * sizeof *ref), *got = malloc(per * BATCH * sizeof *got);
  for (int oa = MR_BLAS_N; oa <= MR_BLAS_C; oa++)
    for (int ob = MR_BLAS_N; ob <= MR_BLAS_C; ob++) {
      mr_cmat a = oa == MR_BLAS_N ? padded(M, K, BATCH, 1) : padded(K, M, BATCH, 1);
      mr_cmat b = ob == MR_BLAS_N ? padded(K, N, BATCH, 2) : padded(N, K, BATCH, 2);
      mr_cmat c = padded(M, N, BATCH, 3);
      for (size_t t = 0; t < (size_t)BATCH; t++)
        for (int i = 0; i < M; i++)
          for (int j = 0; j < N; j++) {
            double complex s = 0;
            for (int l = 0; l < K; l++)
              s += at(&a, t, oa, i, l) * at(&b, t, ob, l, j);
            ref[t * per + (size_t)j * M + i] =
                (float complex)(alpha * s + beta * at(&c, t, MR_BLAS_N, i, j));
          }
      GPU_OK(mr_blas_gemm(gpu_test_cpu(), oa, ob, alpha, a, b, beta, c, BATCH, TERR));
      for (size_t t = 0; t < (size_t)BATCH; t++)
        for (int i = 0; i < M; i++)
          for (int j = 0; j < N; j++)
            got[t * per + (size_t)j * M + i] = c.data[t * c.stride + (size_t)j * c.ld + i];
      double err = mr_test_rel_error_c(got, ref, per * BATCH);
      if (err > 1e-5)
        fail_msg("gemm %d %d at %d x %d x %d (batch %d): rel error %g", oa, ob, M, N, K, BATCH,
                 err);
      free(a.data);
      free(b.data);
      free(c.data);
    }
  free(ref);
  free(got);
}

/* Small items; products the CPU cuts into pieces along m (prewhitening's
 * shape), along n, both in a batch; one it leaves whole to OpenBLAS. */
static void cpu_gemm(void **state) {
  (void)state;
  gemm_shape(7, 5, 9, 3);
  gemm_shape(3001, 6, 40, 1);
  gemm_shape(6, 2999, 40, 2);
  gemm_shape(96, 58, 128, 3);
  gemm_shape(130, 140, 150, 1);
}

static void cpu_herk(void **state) {
  (void)state;
  enum { N = 6, K = 11, BATCH = 2 };
  const float alpha = 0.5f, beta = 2.0f;
  for (int op = MR_BLAS_N; op <= MR_BLAS_C; op += MR_BLAS_C - MR_BLAS_N) {
    mr_cmat a = op == MR_BLAS_N ? padded(N, K, BATCH, 4) : padded(K, N, BATCH, 4);
    mr_cmat c = padded(N, N, BATCH, 5);
    /* c must start Hermitian for beta c to be well defined */
    for (size_t t = 0; t < BATCH; t++)
      for (int j = 0; j < N; j++)
        for (int i = 0; i <= j; i++) {
          mr_cfloat *d = c.data + t * c.stride;
          d[(size_t)j * c.ld + i] = conjf(d[(size_t)i * c.ld + j]);
          if (i == j)
            d[(size_t)j * c.ld + i] = crealf(d[(size_t)j * c.ld + i]);
        }
    mr_cfloat ref[BATCH][N * N], got[BATCH][N * N];
    for (size_t t = 0; t < BATCH; t++)
      for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
          double complex s = 0;
          for (int l = 0; l < K; l++)
            s += op == MR_BLAS_N ? at(&a, t, MR_BLAS_N, i, l) * conj(at(&a, t, MR_BLAS_N, j, l))
                                 : conj(at(&a, t, MR_BLAS_N, l, i)) * at(&a, t, MR_BLAS_N, l, j);
          ref[t][j * N + i] = (float complex)(alpha * s + beta * at(&c, t, MR_BLAS_N, i, j));
        }
    GPU_OK(mr_blas_herk(gpu_test_cpu(), op, alpha, a, beta, c, BATCH, TERR));
    for (size_t t = 0; t < BATCH; t++)
      for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
          got[t][j * N + i] = c.data[t * c.stride + (size_t)j * c.ld + i];
    double err = mr_test_rel_error_c(&got[0][0], &ref[0][0], BATCH * N * N);
    if (err > 1e-5)
      fail_msg("herk %d: rel error %g", op, err);
    free(a.data);
    free(c.data);
  }
}

static void bad_shapes(void **state) {
  (void)state;
  mr_cfloat d[64];
  mr_cmat a = mr_cmat_dense(d, 4, 3), b = mr_cmat_dense(d, 4, 3), c = mr_cmat_dense(d, 4, 3);
  assert_int_equal(mr_blas_gemm(gpu_test_cpu(), MR_BLAS_N, MR_BLAS_N, 1, a, b, 0, c, 1, TERR),
                   MR_EINVAL);
  mr_cmat thin = {d, 4, 3, 2, 12};
  assert_int_equal(mr_blas_gemm(gpu_test_cpu(), MR_BLAS_C, MR_BLAS_N, 1, thin, b, 0, c, 1, TERR),
                   MR_EINVAL);
  assert_int_equal(mr_blas_herk(gpu_test_cpu(), MR_BLAS_T, 1, a, 0, c, 1, TERR), MR_EINVAL);
  mr_cmat shared = {d, 3, 3, 3, 0};
  assert_int_equal(mr_blas_herk(gpu_test_cpu(), MR_BLAS_C, 1, a, 0, shared, 2, TERR), MR_EINVAL);
}

/* mr_blas_trmm_rows_host: the runs' rows times the upper triangle of b
 * where they lie (b's strict lower part holds garbage it must not read),
 * against the loops, every other row untouched, bit for bit the same on
 * pools of 1, 2 and 4 threads (pieces are cut from each run's start, not
 * by thread count). Runs: a single row, a run of two pieces and a bit, an
 * empty one, the last rows. */
static void trmm_rows_in_place(void **state) {
  (void)state;
  enum { ROWS = 1400, N = 12, LD = ROWS + 3 };
  static const int counts[] = {1, 2, 4};
  const size_t runs[] = {5, 6, 40, 40 + 2 * MR_BLAS_ROWS_PIECE + 17, 900, 900, 1300, ROWS};
  size_t nruns = sizeof runs / sizeof runs[0] / 2, total = (size_t)LD * N;
  mr_cfloat *x0 = malloc(total * sizeof *x0), *first = malloc(total * sizeof *first);
  mr_cfloat *x = malloc(total * sizeof *x), b[N * N];
  gpu_test_random(x0, total, 21);
  gpu_test_random(b, N * N, 22);
  for (int c = 0; c < N; c++)
    for (int r = c + 1; r < N; r++)
      b[c * N + r] = 1e30f; /* below the diagonal: not read */
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    mr_pool *pool;
    mr_device *cpu = gpu_test_cpu_pool(counts[i], &pool);
    memcpy(x, x0, total * sizeof *x);
    mr_cmat xm = {x, ROWS, N, LD, 0}, bm = mr_cmat_dense(b, N, N);
    GPU_OK(mr_blas_trmm_rows_host(cpu, xm, bm, runs, nruns, TERR));
    gpu_test_cpu_pool_end(pool, cpu);
    if (i > 0) {
      assert_memory_equal(x, first, total * sizeof *x);
      continue;
    }
    memcpy(first, x, total * sizeof *x);
    double worst = 0;
    for (int r = 0; r < LD; r++) {
      int in_run = 0;
      for (size_t q = 0; q < nruns; q++)
        in_run |= (size_t)r >= runs[2 * q] && (size_t)r < runs[2 * q + 1];
      for (int c = 0; c < N; c++) {
        double complex want = x0[(size_t)c * LD + r];
        if (in_run) {
          want = 0;
          for (int k = 0; k <= c; k++)
            want += (double complex)x0[(size_t)k * LD + r] * b[c * N + k];
        }
        double e = cabs(x[(size_t)c * LD + r] - want) / (cabs(want) + 1);
        worst = e > worst ? e : worst;
      }
    }
    if (worst > 1e-5)
      fail_msg("trmm rows: error %g", worst);
  }
  mr_cmat xm = {x, ROWS, N, LD, 0}, bm = mr_cmat_dense(b, N, N);
  const size_t outside[] = {ROWS - 1, ROWS + 1};
  assert_int_equal(mr_blas_trmm_rows_host(gpu_test_cpu(), xm, bm, outside, 1, TERR), MR_EINVAL);
  bm.rows = N - 1;
  assert_int_equal(mr_blas_trmm_rows_host(gpu_test_cpu(), xm, bm, runs, nruns, TERR), MR_EINVAL);
  free(x0);
  free(x);
  free(first);
}

/* Runs gemm and herk on both devices from the same inputs. */
static void cuda_matches_cpu(void **state) {
  (void)state;
  enum { N = 96, K = 700, BATCH = 2 };
  size_t an = (size_t)K * N * BATCH, cn = (size_t)N * N * BATCH;
  mr_cfloat *a = malloc(an * sizeof *a), *b = malloc(an * sizeof *b);
  mr_cfloat *c0 = malloc(cn * sizeof *c0), *ref = malloc(cn * sizeof *ref);
  gpu_test_random(a, an, 11);
  gpu_test_random(b, an, 12);
  gpu_test_random(c0, cn, 13);
  mr_device *gpu = gpu_test_gpu();
  mr_buf *da = gpu_test_upload(gpu, a, an * sizeof *a), *db = gpu_test_upload(gpu, b, an * sizeof *b);
  const mr_cfloat alpha = 1.5f + 0.5f * I, beta = 0.5f;
  for (int ob = MR_BLAS_N; ob <= MR_BLAS_C; ob++) {
    /* a^H op(b): b stored K x N for N, N x K otherwise */
    mr_cmat A = mr_cmat_dense(a, K, N);
    mr_cmat B = ob == MR_BLAS_N ? mr_cmat_dense(b, K, N) : mr_cmat_dense(b, N, K);
    memcpy(ref, c0, cn * sizeof *ref);
    GPU_OK(mr_blas_gemm(gpu_test_cpu(), MR_BLAS_C, ob, alpha, A, B, beta, mr_cmat_dense(ref, N, N),
                        BATCH, TERR));
    mr_buf *dc = gpu_test_upload(gpu, c0, cn * sizeof *c0);
    A.data = mr_buf_data(da);
    B.data = mr_buf_data(db);
    GPU_OK(mr_blas_gemm(gpu, MR_BLAS_C, ob, alpha, A, B, beta, mr_cmat_dense(mr_buf_data(dc), N, N),
                        BATCH, TERR));
    mr_cfloat *got = gpu_test_download(dc);
    double err = mr_test_rel_error_c(got, ref, cn);
    if (err > 1e-5)
      fail_msg("gemm C %d: rel error %g", ob, err);
    free(got);
    mr_buf_destroy(dc);
  }
  /* beta 0 takes the GPU's CGEMM path at this size, beta 0.5 CHERK and the
   * mirror pass; both backends read only c's lower triangle. */
  for (int op = MR_BLAS_N; op <= MR_BLAS_C; op += MR_BLAS_C - MR_BLAS_N)
    for (int b = 0; b < 2; b++) {
      float beta_h = b ? 0.5f : 0.0f;
      mr_cmat A = op == MR_BLAS_N ? mr_cmat_dense(a, N, K) : mr_cmat_dense(a, K, N);
      memcpy(ref, c0, cn * sizeof *ref);
      GPU_OK(
          mr_blas_herk(gpu_test_cpu(), op, 2.0f, A, beta_h, mr_cmat_dense(ref, N, N), BATCH, TERR));
      mr_buf *dc = gpu_test_upload(gpu, c0, cn * sizeof *c0);
      A.data = mr_buf_data(da);
      GPU_OK(mr_blas_herk(gpu, op, 2.0f, A, beta_h, mr_cmat_dense(mr_buf_data(dc), N, N), BATCH,
                          TERR));
      mr_cfloat *got = gpu_test_download(dc);
      double err = mr_test_rel_error_c(got, ref, cn);
      if (err > 1e-5)
        fail_msg("herk %d beta %g: rel error %g", op, beta_h, err);
      free(got);
      mr_buf_destroy(dc);
    }
  mr_buf_destroy(da);
  mr_buf_destroy(db);
  free(a);
  free(b);
  free(c0);
  free(ref);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_gemm),
      cmocka_unit_test(cpu_herk),
      cmocka_unit_test(bad_shapes),
      cmocka_unit_test(trmm_rows_in_place),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("blas_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("blas_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
