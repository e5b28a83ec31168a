/* mr-bench split: one 3D CG-SENSE scan across 1, 2, ... of the pool's GPUs
 * (toeplitz_split.h, split by coils): the normal operator's apply and a
 * 10-iteration CG solve, timed for each device count, with the speed-up
 * over one. On a one-GPU machine, --gpus 0,0 gives two logical devices of
 * that GPU (the code path, not a speed-up). The timings are the wall clock
 * of whole calls: each ends with its results on the first device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cg.h"
#include "test_err.h"
#include "toeplitz_split.h"

#define MAX_DEVICES 16
#define APPLY_REPS 5

/* Q of a smooth, positive-definite convolution (a Gaussian of lags, one
 * voxel wide) on the doubled grid: the operator's cost does not depend on
 * the trajectory, and CG on it neither breaks down nor stops at once. */
static void gaussian_q(const size_t n[3], mr_cfloat *q) {
  size_t b[3] = {2 * n[0], 2 * n[1], 2 * n[2]};
  for (size_t z = 0; z < b[2]; z++)
    for (size_t y = 0; y < b[1]; y++)
      for (size_t x = 0; x < b[0]; x++) {
        double dx = (double)x - b[0] / 2, dy = (double)y - b[1] / 2, dz = (double)z - b[2] / 2;
        q[(z * b[1] + y) * b[0] + x] = (float)exp(-(dx * dx + dy * dy + dz * dz) / 2);
      }
}

/* One device count: fills the open object. */
static int run_count(bench_json *j, mr_device *const *devs, size_t count,
                     const mr_toeplitz_opts *o, const mr_cfloat *q, const mr_cfloat *maps,
                     const mr_cfloat *x, size_t nvox, double *apply_ms, double *cg_ms) {
  mr_toeplitz_split *s = NULL;
  mr_buf *bx = NULL, *by = NULL;
  size_t bytes = nvox * sizeof(mr_cfloat);
  int rc = mr_toeplitz_split_create(devs, count, o, q, &s, TERR);
  if (rc == 0)
    rc = mr_toeplitz_split_set_maps(s, maps, TERR);
  if (rc == 0)
    rc = mr_buf_create(devs[0], bytes, &bx, TERR);
  if (rc == 0)
    rc = mr_buf_create(devs[0], bytes, &by, TERR);
  if (rc == 0)
    rc = mr_buf_upload(bx, 0, x, bytes, TERR);
  double ms[APPLY_REPS];
  for (int r = -2; rc == 0 && r < APPLY_REPS; r++) { /* two untimed */
    double t0 = bench_now_ms();
    rc = mr_toeplitz_split_apply(s, mr_buf_data(bx), mr_buf_data(by), TERR);
    if (r >= 0)
      ms[r] = bench_now_ms() - t0;
  }
  mr_cg_report report = {0};
  if (rc == 0) {
    *apply_ms = bench_median(ms, APPLY_REPS);
    mr_cg_opts co = {.max_iterations = 10};
    double t0 = bench_now_ms();
    rc = mr_cg_solve_batch(devs[0], nvox, 1, mr_toeplitz_split_apply_op, s, mr_buf_data(by),
                           mr_buf_data(bx), &co, &report, TERR);
    *cg_ms = bench_now_ms() - t0;
  }
  json_int(j, "devices", (long long)count);
  if (rc == 0) {
    json_num(j, "apply_ms", *apply_ms);
    json_num(j, "cg_ms", *cg_ms);
    json_int(j, "cg_iterations", report.iterations);
  } else {
    json_str(j, "error", mr_test_last_error());
  }
  mr_buf_destroy(bx);
  mr_buf_destroy(by);
  mr_toeplitz_split_destroy(s);
  return rc;
}

int bench_split(const bench_ctx *ctx) {
  bench_json *j = ctx->json;
  int ngpus = mr_pool_gpu_count(ctx->pool);
  if (ngpus == 0) {
    json_str(j, "skipped", "no GPU found (or mr-bench --gpus none)");
    return 0;
  }
  size_t ndev = ngpus < MAX_DEVICES ? (size_t)ngpus : MAX_DEVICES;
  mr_device *devs[MAX_DEVICES] = {0};
  mr_err err = {0};
  int rc = 0;
  size_t held = 0;
  for (; rc == 0 && held < ndev; held++)
    rc = mr_pool_acquire_other(ctx->pool, devs, held, &devs[held], &err);
  if (rc < 0) {
    held--;
    json_str(j, "error", err.msg);
  }
  size_t side = ctx->quick ? 32 : 128, coils = ctx->quick ? 4 : 16;
  mr_toeplitz_opts o = {.rank = 3, .n = {side, side, side}, .lambda = 0.01,
                        .reg = MR_REG_IDENTITY, .coils = coils};
  size_t nvox = side * side * side;
  mr_cfloat *q = malloc(8 * nvox * sizeof *q), *maps = malloc(coils * nvox * sizeof *maps);
  mr_cfloat *x = malloc(nvox * sizeof *x);
  if (rc == 0 && (q == NULL || maps == NULL || x == NULL)) {
    json_str(j, "error", "out of host memory");
    rc = MR_ENOMEM;
  }
  if (rc == 0) {
    mr_device_info info;
    if (mr_device_info_get(devs[0], &info, TERR) == 0)
      json_str(j, "gpu", info.name);
    json_int(j, "gpus", ngpus);
    json_int(j, "n", (long long)side);
    json_int(j, "coils", (long long)coils);
    gaussian_q(o.n, q);
    bench_random_fill(maps, coils * nvox, 1);
    bench_random_fill(x, nvox, 2);
    json_open(j, "counts", '[');
    double one_apply = 0, one_cg = 0;
    for (size_t count = 1; rc == 0 && count <= ndev; count++) {
      double apply_ms = 0, cg_ms = 0;
      json_open(j, NULL, '{');
      rc = run_count(j, devs, count, &o, q, maps, x, nvox, &apply_ms, &cg_ms);
      if (count == 1) {
        one_apply = apply_ms;
        one_cg = cg_ms;
      }
      if (rc == 0) {
        json_num(j, "apply_speedup", one_apply / apply_ms);
        json_num(j, "cg_speedup", one_cg / cg_ms);
      }
      json_close(j, '}');
      fprintf(stderr, "split: %zu device(s): apply %.2f ms, cg %.1f ms\n", count, apply_ms,
              cg_ms);
    }
    json_close(j, ']');
  }
  for (size_t i = 0; i < held; i++)
    mr_pool_release(ctx->pool, devs[i]);
  free(q);
  free(maps);
  free(x);
  return rc;
}
