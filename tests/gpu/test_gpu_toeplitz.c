/* toeplitz.h: the Toeplitz-embedded normal operator against the exact one
 * (direct sums in double), 2D and 3D, odd and even sizes, each
 * regularizer, with and without coil maps; an operator made for another
 * trajectory and given this one's Q in place (mr_toeplitz_set_q, Q in
 * device memory) answers the same; the coil combination against a host
 * sum; a batch of images against one at a time. --cuda: the same on the
 * GPU, with Q from the GPU's direct sums. */
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
#include "iterative_support.h"
#include "test_gpu_common.h"
#include "test_support.h"

typedef struct setup {
  int rank;
  size_t n[3];
  int spokes, samples;
  double lambda;
  mr_regularizer reg;
  size_t coils;
} setup;

static const setup setups[] = {
    {2, {12, 10, 1}, 16, 24, 0, MR_REG_IDENTITY, 0},
    {2, {9, 8, 1}, 12, 20, 0.5, MR_REG_FINITE_DIFFERENCE, 0},
    {3, {6, 5, 4}, 20, 12, 0.3, MR_REG_IDENTITY, 0},
    {3, {5, 6, 3}, 20, 12, 0.4, MR_REG_FINITE_DIFFERENCE, 0},
    {2, {10, 11, 1}, 14, 22, 0.2, MR_REG_FINITE_DIFFERENCE, 3},
    {3, {6, 4, 5}, 18, 12, 0.3, MR_REG_IDENTITY, 2},
};

/* Q of (k, w) on the doubled grid, computed on dev. */
static mr_cfloat *q_of(mr_device *dev, int rank, const size_t n[3], size_t m, const float *k,
                       const float *w) {
  mr_fhd_opts o = {.rank = rank,
                   .grid = {2 * n[0], 2 * n[1], rank == 3 ? 2 * n[2] : 1},
                   .batch = 1,
                   .precision = mr_device_is_gpu(dev) ? MR_FHD_SINGLE : MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(dev, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, k, TERR));
  mr_cfloat *q = malloc(mr_fhd_voxel_count(plan) * sizeof *q);
  GPU_OK(mr_fhd_adjoint(plan, NULL, w, q, TERR));
  mr_fhd_plan_destroy(plan);
  return q;
}

/* mr_toeplitz_combine against sum_c conj(S_c) x_c on the host. */
static void check_combine(mr_device *dev, mr_toeplitz *t, size_t coils, size_t nvox,
                          const mr_cfloat *maps) {
  mr_cfloat *x = malloc(coils * nvox * sizeof *x), *want = calloc(nvox, sizeof *want);
  mr_cfloat *got = malloc(nvox * sizeof *got);
  gpu_test_random(x, coils * nvox, 23);
  for (size_t c = 0; c < coils; c++)
    for (size_t i = 0; i < nvox; i++)
      want[i] += conjf(maps[c * nvox + i]) * x[c * nvox + i];
  mr_buf *bx = gpu_test_upload(dev, x, coils * nvox * sizeof *x), *bout = NULL;
  GPU_OK(mr_buf_create(dev, nvox * sizeof *got, &bout, TERR));
  GPU_OK(mr_toeplitz_combine(t, mr_buf_data(bx), mr_buf_data(bout), TERR));
  GPU_OK(mr_buf_download(bout, 0, got, nvox * sizeof *got, TERR));
  assert_true(mr_test_rel_error_c(got, want, nvox) < 1e-6);
  mr_buf_destroy(bx);
  mr_buf_destroy(bout);
  free(x);
  free(want);
  free(got);
}

/* mr_toeplitz_apply_batch of 3 images against 3 applies (bit for bit on
 * the CPU, which runs them one by one). */
static void check_batch(mr_device *dev, mr_toeplitz *t, size_t nvox) {
  enum { COUNT = 3 };
  size_t bytes = nvox * sizeof(mr_cfloat);
  mr_cfloat *x = malloc(COUNT * bytes), *all = malloc(COUNT * bytes), *one = malloc(bytes);
  gpu_test_random(x, COUNT * nvox, 24);
  mr_buf *bx = gpu_test_upload(dev, x, COUNT * bytes), *by = NULL;
  GPU_OK(mr_buf_create(dev, COUNT * bytes, &by, TERR));
  GPU_OK(mr_toeplitz_apply_batch(t, COUNT, mr_buf_data(bx), mr_buf_data(by), TERR));
  GPU_OK(mr_buf_download(by, 0, all, COUNT * bytes, TERR));
  for (size_t i = 0; i < COUNT; i++) {
    GPU_OK(mr_toeplitz_apply(t, (mr_cfloat *)mr_buf_data(bx) + i * nvox, mr_buf_data(by), TERR));
    GPU_OK(mr_buf_download(by, 0, one, bytes, TERR));
    if (mr_device_is_gpu(dev))
      assert_true(mr_test_rel_error_c(all + i * nvox, one, nvox) < 1e-6);
    else
      assert_memory_equal(all + i * nvox, one, bytes);
  }
  mr_buf_destroy(bx);
  mr_buf_destroy(by);
  free(x);
  free(all);
  free(one);
}

static void check_setup(mr_device *dev, const setup *s) {
  size_t m = (size_t)s->spokes * s->samples;
  size_t nvox = s->n[0] * s->n[1] * (s->rank == 3 ? s->n[2] : 1);
  float *k = malloc(m * s->rank * sizeof *k), *w = malloc(m * sizeof *w);
  iter_radial(s->rank, s->spokes, s->samples, k);
  for (size_t i = 0; i < m; i++)
    w[i] = 0.5f + (float)(i % 7) / 7;
  size_t coils = s->coils;
  mr_cfloat *maps = malloc((coils + 1) * nvox * sizeof *maps);
  mr_cfloat *x = malloc(nvox * sizeof *x), *want = malloc(nvox * sizeof *want);
  mr_cfloat *got = malloc(nvox * sizeof *got);
  gpu_test_random(maps, (coils + 1) * nvox, 21);
  gpu_test_random(x, nvox, 22);
  iter_exact_normal(gpu_test_cpu(), s->rank, s->n, m, k, w, s->lambda, s->reg, coils, maps, x,
                    want);

  mr_cfloat *q = q_of(dev, s->rank, s->n, m, k, w);
  size_t nbig = 8 * nvox / (s->rank == 3 ? 1 : 2);
  mr_toeplitz_opts o = {.rank = s->rank,
                        .n = {s->n[0], s->n[1], s->n[2]},
                        .lambda = s->lambda,
                        .reg = s->reg,
                        .coils = coils};
  size_t bytes = nvox * sizeof(mr_cfloat);
  mr_buf *bx = gpu_test_upload(dev, x, bytes), *by = NULL, *bq = NULL;
  GPU_OK(mr_buf_create(dev, bytes, &by, TERR));
  /* 0: made from this Q; 1: made from another trajectory's (all weights
   * 2) and given this one's in place, from device memory. */
  for (int in_place = 0; in_place < 2; in_place++) {
    mr_toeplitz *t = NULL;
    if (in_place) {
      float *w2 = malloc(m * sizeof *w2);
      for (size_t i = 0; i < m; i++)
        w2[i] = 2;
      mr_cfloat *other = q_of(dev, s->rank, s->n, m, k, w2);
      GPU_OK(mr_toeplitz_create(dev, &o, other, &t, TERR));
      bq = gpu_test_upload(dev, q, nbig * sizeof(mr_cfloat));
      GPU_OK(mr_toeplitz_set_q(t, mr_buf_data(bq), TERR));
      free(w2);
      free(other);
    } else {
      GPU_OK(mr_toeplitz_create(dev, &o, q, &t, TERR));
    }
    assert_int_equal(mr_toeplitz_voxels(t), nvox);
    if (coils > 0)
      GPU_OK(mr_toeplitz_set_maps(t, maps, TERR));
    GPU_OK(mr_toeplitz_apply(t, mr_buf_data(bx), mr_buf_data(by), TERR));
    GPU_OK(mr_buf_download(by, 0, got, bytes, TERR));
    double err = mr_test_rel_error_c(got, want, nvox);
    print_message("%dD %zux%zux%zu lambda %.1f %s, %zu coils%s: %.2e\n", s->rank, s->n[0],
                  s->n[1], s->n[2], s->lambda,
                  s->reg == MR_REG_IDENTITY ? "identity" : "differences", coils,
                  in_place ? ", Q in place" : "", err);
    assert_true(err < 1e-5);
    if (coils > 0 && in_place)
      check_combine(dev, t, coils, nvox, maps);
    if (coils == 0 && in_place)
      check_batch(dev, t, nvox);
    mr_toeplitz_destroy(t);
  }
  mr_buf_destroy(bx);
  mr_buf_destroy(by);
  mr_buf_destroy(bq);
  free(q);
  free(k);
  free(w);
  free(maps);
  free(x);
  free(want);
  free(got);
}

static void cpu_matches_exact(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof setups / sizeof *setups; i++)
    check_setup(gpu_test_cpu(), &setups[i]);
}

static void cpu_bad_input(void **state) {
  (void)state;
  mr_toeplitz *t = NULL;
  mr_cfloat q[64] = {0};
  mr_toeplitz_opts o = {.rank = 2, .n = {4, 4, 1}, .lambda = -1};
  assert_int_equal(mr_toeplitz_create(gpu_test_cpu(), &o, q, &t, TERR), MR_EINVAL);
  o.lambda = 0;
  o.coils = 2;
  GPU_OK(mr_toeplitz_create(gpu_test_cpu(), &o, q, &t, TERR));
  mr_cfloat x[16] = {0}, y[16];
  assert_int_equal(mr_toeplitz_apply(t, x, y, TERR), MR_EINVAL); /* no maps yet */
  assert_int_equal(mr_toeplitz_combine(t, x, y, TERR), MR_EINVAL);
  mr_toeplitz_destroy(t);
  o.coils = 0;
  GPU_OK(mr_toeplitz_create(gpu_test_cpu(), &o, NULL, &t, TERR)); /* Q to come */
  assert_int_equal(mr_toeplitz_apply(t, x, y, TERR), MR_EINVAL);
  GPU_OK(mr_toeplitz_set_q(t, q, TERR));
  GPU_OK(mr_toeplitz_apply(t, x, y, TERR));
  mr_toeplitz_destroy(t);
}

static void cuda_matches_exact(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof setups / sizeof *setups; i++)
    check_setup(gpu_test_gpu(), &setups[i]);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_matches_exact),
      cmocka_unit_test(cpu_bad_input),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_exact),
  };
  int rc = cuda ? cmocka_run_group_tests_name("toeplitz_cuda", cuda_tests, NULL, NULL)
                : cmocka_run_group_tests_name("toeplitz_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
