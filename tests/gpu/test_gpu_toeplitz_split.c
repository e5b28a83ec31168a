/* toeplitz_split.h: the coil-map operator split across devices answers
 * as one device's within 1e-5, applied and in a CG-SENSE solve, 3D, with
 * each regularizer and uneven coil shares; a device failing mid-solve
 * fails the solve (no hang). The CPU group splits across fake GPUs
 * (pool.h); --cuda across every GPU of a machine with several (up to 8),
 * else two logical devices of GPU 0 (share_gpus), so the transfers and
 * the reduction run through CUDA. Two scans split the
 * other way round at once finish (crossed_splits; on a GPU with one lane
 * per device this hung before helpers had a lane of their own). */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cg.h"
#include "fhd.h"
#include "iterative_support.h"
#include "test_gpu_common.h"
#include "test_support.h"
#include "toeplitz_split.h"

static mr_pool *pool;
static mr_device *devs[8];
static size_t ndevs;

typedef struct problem {
  size_t n[3], nvox, coils;
  double lambda;
  mr_regularizer reg;
  mr_cfloat *q, *maps, *x;
} problem;

static void quiet(void *ctx, const char *line) {
  (void)ctx;
  (void)line;
}

/* A 3D radial trajectory's Q (computed on the first device), random maps
 * and a random image. */
static problem make_problem(size_t coils, double lambda, mr_regularizer reg) {
  problem p = {.n = {8, 6, 5}, .coils = coils, .lambda = lambda, .reg = reg};
  p.nvox = p.n[0] * p.n[1] * p.n[2];
  enum { SPOKES = 24, SAMPLES = 16 };
  size_t m = SPOKES * SAMPLES;
  float *k = malloc(3 * m * sizeof *k), *w = malloc(m * sizeof *w);
  iter_radial(3, SPOKES, SAMPLES, k);
  for (size_t i = 0; i < m; i++)
    w[i] = 0.5f + (float)(i % 5) / 5;
  mr_fhd_opts o = {.rank = 3, .grid = {2 * p.n[0], 2 * p.n[1], 2 * p.n[2]}, .batch = 1,
                   .precision = mr_device_is_gpu(devs[0]) ? MR_FHD_SINGLE : MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(devs[0], &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, k, TERR));
  p.q = malloc(mr_fhd_voxel_count(plan) * sizeof *p.q);
  GPU_OK(mr_fhd_adjoint(plan, NULL, w, p.q, TERR));
  mr_fhd_plan_destroy(plan);
  p.maps = malloc(coils * p.nvox * sizeof *p.maps);
  p.x = malloc(p.nvox * sizeof *p.x);
  gpu_test_random(p.maps, coils * p.nvox, 31);
  gpu_test_random(p.x, p.nvox, 32);
  free(k);
  free(w);
  return p;
}

static void free_problem(problem *p) {
  free(p->q);
  free(p->maps);
  free(p->x);
}

static mr_toeplitz_opts opts_of(const problem *p) {
  return (mr_toeplitz_opts){.rank = 3, .n = {p->n[0], p->n[1], p->n[2]}, .lambda = p->lambda,
                            .reg = p->reg, .coils = p->coils};
}

typedef struct solve_case {
  mr_toeplitz *one;
  mr_toeplitz_split *split;
} solve_case;

/* A = one device's operator and the split one on the first `parts`
 * devices; the coil combination, y = A x and an 8-iteration CG solve of A x = b with each. */
static void compare(const problem *p, size_t parts) {
  mr_toeplitz_opts o = opts_of(p);
  mr_device *d0 = devs[0];
  mr_toeplitz *one = NULL;
  mr_toeplitz_split *split = NULL;
  GPU_OK(mr_toeplitz_create(d0, &o, p->q, &one, TERR));
  GPU_OK(mr_toeplitz_set_maps(one, p->maps, TERR));
  GPU_OK(mr_toeplitz_split_create(devs, parts, &o, p->q, &split, TERR));
  mr_buf *bx = gpu_test_upload(d0, p->x, p->nvox * sizeof(mr_cfloat)), *by = NULL, *bs = NULL;
  GPU_OK(mr_buf_create(d0, p->nvox * sizeof(mr_cfloat), &by, TERR));
  assert_int_equal(mr_toeplitz_split_apply(split, mr_buf_data(bx), mr_buf_data(by), TERR),
                   MR_EINVAL); /* no maps yet */
  GPU_OK(mr_toeplitz_split_set_maps(split, p->maps, TERR));
  assert_int_equal(mr_toeplitz_split_devices(split), parts < p->coils ? parts : p->coils);
  size_t bytes = p->nvox * sizeof(mr_cfloat);
  GPU_OK(mr_buf_create(d0, bytes, &bs, TERR));
  mr_cfloat *want = malloc(bytes), *got = malloc(bytes);

  /* The right-hand side's combination of coil images (the maps as images). */
  mr_buf *coil_images = gpu_test_upload(d0, p->maps, p->coils * bytes);
  GPU_OK(mr_toeplitz_combine(one, mr_buf_data(coil_images), mr_buf_data(by), TERR));
  GPU_OK(mr_toeplitz_split_combine(split, mr_buf_data(coil_images), mr_buf_data(bs), TERR));
  GPU_OK(mr_buf_download(by, 0, want, bytes, TERR));
  GPU_OK(mr_buf_download(bs, 0, got, bytes, TERR));
  assert_true(mr_test_rel_error_c(got, want, p->nvox) < 1e-6);
  mr_buf_destroy(coil_images);

  GPU_OK(mr_toeplitz_apply(one, mr_buf_data(bx), mr_buf_data(by), TERR));
  GPU_OK(mr_toeplitz_split_apply(split, mr_buf_data(bx), mr_buf_data(bs), TERR));
  GPU_OK(mr_buf_download(by, 0, want, bytes, TERR));
  GPU_OK(mr_buf_download(bs, 0, got, bytes, TERR));
  double apply_err = mr_test_rel_error_c(got, want, p->nvox);

  /* CG-SENSE: b = A x, solved from 0 with each operator. */
  mr_cg_opts co = {.max_iterations = 8};
  GPU_OK(mr_cg_solve_batch(d0, p->nvox, 1, mr_toeplitz_apply_batch_op, one, mr_buf_data(by),
                           mr_buf_data(bx), &co, NULL, TERR));
  GPU_OK(mr_buf_download(bx, 0, want, bytes, TERR));
  GPU_OK(mr_cg_solve_batch(d0, p->nvox, 1, mr_toeplitz_split_apply_op, split, mr_buf_data(by),
                           mr_buf_data(bs), &co, NULL, TERR));
  GPU_OK(mr_buf_download(bs, 0, got, bytes, TERR));
  double solve_err = mr_test_rel_error_c(got, want, p->nvox);
  print_message("%zu coils on %zu devices, lambda %.1f %s: apply %.2e, solve %.2e\n", p->coils,
                parts, p->lambda, p->reg == MR_REG_IDENTITY ? "identity" : "differences",
                apply_err, solve_err);
  assert_true(apply_err < 1e-5);
  assert_true(solve_err < 1e-5);
  mr_buf_destroy(bx);
  mr_buf_destroy(by);
  mr_buf_destroy(bs);
  free(want);
  free(got);
  mr_toeplitz_destroy(one);
  mr_toeplitz_split_destroy(split);
}

static void split_matches_one(void **state) {
  (void)state;
  problem a = make_problem(5, 0.3, MR_REG_IDENTITY);
  for (size_t parts = 1; parts <= ndevs; parts++)
    compare(&a, parts);
  free_problem(&a);
  problem b = make_problem(4, 0.5, MR_REG_FINITE_DIFFERENCE);
  compare(&b, ndevs);
  free_problem(&b);
  problem c = make_problem(1, 0.1, MR_REG_IDENTITY); /* fewer coils than devices */
  compare(&c, ndevs);
  free_problem(&c);
}

/* The last device fails during the solve: the solve fails with its error,
 * every helper is waited for, and the operator is still destroyed cleanly. */
static void device_fails_mid_solve(void **state) {
  (void)state;
  problem p = make_problem(3, 0.3, MR_REG_IDENTITY);
  mr_toeplitz_opts o = opts_of(&p);
  mr_toeplitz_split *split = NULL;
  GPU_OK(mr_toeplitz_split_create(devs, 3, &o, p.q, &split, TERR));
  GPU_OK(mr_toeplitz_split_set_maps(split, p.maps, TERR));
  size_t bytes = p.nvox * sizeof(mr_cfloat);
  mr_buf *bb = gpu_test_upload(devs[0], p.x, bytes), *bx = NULL;
  GPU_OK(mr_buf_create(devs[0], bytes, &bx, TERR));
  GPU_OK(mr_pool_fake_fault(pool, 2, 5, MR_EDEVICE, TERR));
  mr_cg_opts co = {.max_iterations = 20};
  assert_int_equal(mr_cg_solve_batch(devs[0], p.nvox, 1, mr_toeplitz_split_apply_op, split,
                                     mr_buf_data(bb), mr_buf_data(bx), &co, NULL, TERR),
                   MR_EDEVICE);
  assert_non_null(strstr(mr_test_last_error(), "fake GPU 2"));
  GPU_OK(mr_pool_fake_fault(pool, 2, -1, 0, TERR));
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  mr_toeplitz_split_destroy(split);
  free_problem(&p);
}

typedef struct crossed {
  mr_device *order[2];
  const problem *p;
  int rc;
} crossed;

/* Solves, split across order[0] then order[1]. */
static void *solve_split(void *arg) {
  crossed *c = arg;
  const problem *p = c->p;
  mr_toeplitz_opts o = opts_of(p);
  mr_toeplitz_split *split = NULL;
  size_t bytes = p->nvox * sizeof(mr_cfloat);
  mr_buf *bb = NULL, *bx = NULL;
  c->rc = mr_toeplitz_split_create(c->order, 2, &o, p->q, &split, TERR);
  if (c->rc == 0)
    c->rc = mr_toeplitz_split_set_maps(split, p->maps, TERR);
  if (c->rc == 0)
    c->rc = mr_buf_create(c->order[0], bytes, &bb, TERR);
  if (c->rc == 0)
    c->rc = mr_buf_create(c->order[0], bytes, &bx, TERR);
  if (c->rc == 0)
    c->rc = mr_buf_upload(bb, 0, p->x, bytes, TERR);
  mr_cg_opts co = {.max_iterations = 10};
  for (int i = 0; c->rc == 0 && i < 20; i++)
    c->rc = mr_cg_solve_batch(c->order[0], p->nvox, 1, mr_toeplitz_split_apply_op, split,
                              mr_buf_data(bb), mr_buf_data(bx), &co, NULL, TERR);
  mr_buf_destroy(bb);
  mr_buf_destroy(bx);
  mr_toeplitz_split_destroy(split);
  return NULL;
}

/* Two scans split across the same two devices the other way round, at
 * once, one lane each: each solve's task waits on the other device while
 * holding its own, so helpers that queued on the ordinary lanes would
 * wait for each other for ever (the helpers' lane keeps them apart). */
static void crossed_splits(void **state) {
  (void)state;
  problem p = make_problem(4, 0.3, MR_REG_IDENTITY);
  crossed a = {{devs[0], devs[1]}, &p, 0}, b = {{devs[1], devs[0]}, &p, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, solve_split, &a);
  pthread_create(&tb, NULL, solve_split, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  GPU_OK(a.rc);
  GPU_OK(b.rc);
  free_problem(&p);
}

static void bad_input(void **state) {
  (void)state;
  mr_toeplitz_opts o = {.rank = 3, .n = {4, 4, 4}, .coils = 0};
  mr_cfloat q[512] = {0};
  mr_toeplitz_split *s = NULL;
  assert_int_equal(mr_toeplitz_split_create(devs, ndevs, &o, q, &s, TERR), MR_EINVAL);
  o.coils = 2;
  assert_int_equal(mr_toeplitz_split_create(devs, 0, &o, q, &s, TERR), MR_EINVAL);
  assert_int_equal(mr_toeplitz_split_create(devs, ndevs, &o, NULL, &s, TERR), MR_EINVAL);
  assert_null(s);
}

/* The pool the group runs on: 3 fake GPUs; --cuda every GPU of a machine
 * with several, else GPU 0 twice. One lane each: crossed_splits then has
 * every task of a device in one lane. */
static int make_pool(int cuda, mr_err *err) {
  mr_pool_opts o = {.cpu_threads = 2, .gpu_lanes = 1, .log = quiet};
  if (!cuda) {
    o.fake_gpus = 3;
    return mr_pool_create(&o, &pool, err);
  }
  o.gpus = "all";
  if (mr_pool_create(&o, &pool, err) == 0 && mr_pool_gpu_count(pool) >= 2)
    return 0;
  mr_pool_destroy(pool);
  pool = NULL;
  o.gpus = "0,0";
  o.share_gpus = 1;
  return mr_pool_create(&o, &pool, err);
}

int main(int argc, char **argv) {
  int cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
  mr_err err = {0};
  if (make_pool(cuda, &err) < 0) {
    printf("skipped: %s\n", err.msg);
    return cuda ? 77 : 1;
  }
  ndevs = (size_t)mr_pool_gpu_count(pool);
  if (ndevs > 8)
    ndevs = 8;
  for (size_t i = 0; i < ndevs; i++)
    if (mr_pool_acquire_other(pool, devs, i, &devs[i], &err) < 0) {
      printf("%s\n", err.msg);
      return 1;
    }
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(split_matches_one),
      cmocka_unit_test(crossed_splits),
      cmocka_unit_test(device_fails_mid_solve),
      cmocka_unit_test(bad_input),
  };
  const struct CMUnitTest cuda_tests[] = {cmocka_unit_test(split_matches_one),
                                          cmocka_unit_test(crossed_splits)};
  int rc = cuda ? cmocka_run_group_tests(cuda_tests, NULL, NULL)
                : cmocka_run_group_tests(cpu_tests, NULL, NULL);
  for (size_t i = 0; i < ndevs; i++)
    mr_pool_release(pool, devs[i]);
  mr_pool_destroy(pool);
  return rc;
}
