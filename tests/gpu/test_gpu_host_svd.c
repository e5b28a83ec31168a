/* host_svd.h: U diag(s) V^H gives the matrix back, U and V have orthonormal
 * columns, s descends, over shapes whose row
 * counts are 2 more than a multiple of 4 (where OpenBLAS 0.3.21's ZGEMV 'N'
 * reads past x) and others; bad sizes are refused. Its `_fenced` run
 * (tests/fence.cmake) ends every block at an inaccessible page. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "host_svd.h"
#include "test_gpu_common.h"
#include "test_support.h"

/* Fills a with uniform random samples, reproducible per seed. */
static void random_matrix(double complex *a, size_t count, unsigned seed) {
  mr_cfloat *f = malloc(count * sizeof *f);
  assert_non_null(f);
  gpu_test_random(f, count, seed);
  for (size_t i = 0; i < count; i++)
    a[i] = f[i];
  free(f);
}

/* Largest |(X^H X - I)[i][j]| over the k columns (length len, stride ld
 * between columns, step between rows). */
static double orthonormality(const double complex *x, int len, int k, size_t ld, size_t step) {
  double worst = 0;
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) {
      double complex dot = 0;
      for (int q = 0; q < len; q++)
        dot += conj(x[(size_t)i * ld + (size_t)q * step]) * x[(size_t)j * ld + (size_t)q * step];
      worst = fmax(worst, cabs(dot - (i == j)));
    }
  return worst;
}

static void check_shape(int m, int n) {
  mr_host_svd *svd = NULL;
  GPU_OK(mr_host_svd_create(m, n, &svd, TERR));
  int r = svd->r;
  assert_int_equal(r, m < n ? m : n);
  size_t count = (size_t)m * n;
  double complex *a = malloc(count * sizeof *a);
  random_matrix(a, count, (unsigned)(m * 1000 + n));
  memcpy(svd->a, a, count * sizeof *a);
  GPU_OK(mr_host_svd_run(svd, TERR));
  const double *s = svd->s;
  const double complex *u = svd->u, *vt = svd->vt;
  for (int l = 0; l < r; l++) {
    assert_true(s[l] >= 0);
    if (l > 0)
      assert_true(s[l] <= s[l - 1]);
  }
  double err = 0, norm = 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double complex v = 0;
      for (int l = 0; l < r; l++)
        v += u[(size_t)l * m + i] * s[l] * vt[(size_t)j * r + l];
      err += pow(cabs(v - a[(size_t)j * m + i]), 2);
      norm += pow(cabs(a[(size_t)j * m + i]), 2);
    }
  double rel = sqrt(err / norm);
  double ou = orthonormality(u, m, r, (size_t)m, 1);
  double ov = orthonormality(vt, n, r, 1, (size_t)r); /* rows of V^H */
  if (rel > 1e-12 || ou > 1e-12 || ov > 1e-12)
    fail_msg("%d x %d: relative error %.3g, U^H U - I %.3g, V^H V - I %.3g", m, n, rel, ou, ov);
  mr_host_svd_destroy(svd);
  free(a);
}

static void factors_reproduce_the_matrix(void **state) {
  (void)state;
  static const int shapes[][2] = {{1, 1},  {2, 3},    {3, 2},    {6, 6},     {6, 3},
                                  {3, 6},  {10, 7},   {7, 10},   {66, 64},   {64, 66},
                                  {130, 128}, {128, 130}, {128, 128}, {200, 64}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_shape(shapes[i][0], shapes[i][1]);
}

static void bad_sizes(void **state) {
  (void)state;
  mr_host_svd *svd = NULL;
  assert_int_equal(mr_host_svd_create(0, 1, &svd, TERR), MR_EINVAL);
  assert_int_equal(mr_host_svd_create(1, -1, &svd, TERR), MR_EINVAL);
  assert_null(svd);
}

/* The matrices count against the server's memory budget: refused with
 * MR_ELIMIT and a line naming them, nothing kept when the first fits and
 * the second does not. */
static void within_budget(void **state) {
  (void)state;
  uint64_t before = mr_budget_used(); /* each matrix of 600 x 600: 5.5 MiB */
  for (int mib = 1; mib <= 7; mib += 6) {
    mr_budget_set(before + ((uint64_t)mib << 20));
    mr_host_svd *svd = NULL;
    assert_int_equal(mr_host_svd_create(600, 600, &svd, TERR), MR_ELIMIT);
    assert_non_null(strstr(mr_test_last_error(), "SVD's matrices"));
    assert_null(svd);
    assert_int_equal(mr_budget_used(), before);
  }
  mr_budget_set(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(factors_reproduce_the_matrix),
      cmocka_unit_test(bad_sizes),
      cmocka_unit_test(within_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
