/* mr-bench gpu's "toeplitz" rows: one apply of the Toeplitz operator
 * (gpu/iterative/toeplitz.h), which folds the FFT's centering into its own
 * kernels, against the same steps with centred transforms and against the
 * floor of cuFFT plus the operator's elementwise passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "fft.h"
#include "raw_cuda.h"
#include "test_err.h"
#include "test_support.h"
#include "toeplitz.h"
#include "toeplitz_impl.h"
#include "vec.h"

/* Timing as the rest of mr-bench gpu: the median of 10 after 3 warm-ups. */
#define GPU_WARMUP 3
#define GPU_REPS 10

/* One apply of the Toeplitz operator (lambda 0) on an image of n, with
 * `coils` random maps (0: none), on the doubled grid. Three ways:
 * folded, the operator itself (plain transforms, the centering folded into
 * its kernel); centred, the same launches with fft.h's centred transforms
 * (expand, centred forward, times sqrt(P) F_c(q), centred backward,
 * gather: the operator before the fold); the floor, the operator's three
 * elementwise passes alone plus cuFFT forward and backward of the same
 * batch called directly (raw_cufft_round_trip_ms). Each is timed
 * TOEPLITZ_REPEAT times back to back and divided, as CG runs its applies
 * (its scalars stay on the device: no host wait between them), so that
 * no piece carries the gap before its first launch: timed one at a time,
 * the floor's separately timed pieces would each carry it. */
#define TOEPLITZ_REPEAT 20

typedef struct toeplitz_run {
  mr_device *dev;
  size_t dims[3], big[3], nvox, nbig, images, coils;
  mr_toeplitz *op;
  mr_fft_plan *centred, *centred1; /* `images` per execute; one */
  mr_buf *x, *y, *maps, *work, *kernel;
} toeplitz_run;

static const mr_cfloat *maps_of(const toeplitz_run *r) {
  return r->coils > 0 ? mr_buf_data(r->maps) : NULL;
}

static int folded_once(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  toeplitz_run *r = p;
  return mr_toeplitz_apply(r->op, mr_buf_data(r->x), mr_buf_data(r->y), err);
}

/* The three elementwise passes, with the centred transforms between them
 * when `centred` is set. */
static int toeplitz_steps(toeplitz_run *r, int centred) {
  mr_cfloat *w = mr_buf_data(r->work);
  int rc = mr_toeplitz_cuda_expand(r->dev, r->images, maps_of(r), mr_buf_data(r->x), r->dims,
                                   r->big, w, TERR);
  if (rc == 0 && centred)
    rc = mr_fft_execute(r->centred, MR_FFT_FORWARD, w, w, TERR);
  if (rc == 0)
    rc = mr_toeplitz_cuda_kernel_mul(r->dev, r->images, r->nbig, mr_buf_data(r->kernel), w, TERR);
  if (rc == 0 && centred)
    rc = mr_fft_execute(r->centred, MR_FFT_BACKWARD, w, w, TERR);
  if (rc == 0)
    rc = mr_toeplitz_cuda_gather(r->dev, r->images, maps_of(r), w, r->dims, r->big, NULL, 0,
                                 mr_buf_data(r->y), TERR);
  return rc;
}

static int centred_once(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  (void)err;
  return toeplitz_steps(p, 1);
}

static int passes_once(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  (void)err;
  return toeplitz_steps(p, 0);
}

/* TOEPLITZ_REPEAT of each, back to back. */
static int repeat(mr_device_task once, mr_device *dev, void *p, mr_err *err) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < TOEPLITZ_REPEAT; i++)
    rc = once(dev, p, err);
  return rc;
}

static int folded_task(mr_device *dev, void *p, mr_err *err) {
  return repeat(folded_once, dev, p, err);
}
static int centred_task(mr_device *dev, void *p, mr_err *err) {
  return repeat(centred_once, dev, p, err);
}
static int passes_task(mr_device *dev, void *p, mr_err *err) {
  return repeat(passes_once, dev, p, err);
}

/* The centred operator's kernel sqrt(P) F_c(q), q already in r->kernel. */
static int centred_kernel_task(mr_device *dev, void *p, mr_err *err) {
  toeplitz_run *r = p;
  mr_cfloat *k = mr_buf_data(r->kernel);
  int rc = mr_fft_execute(r->centred1, MR_FFT_FORWARD, k, k, err);
  return rc == 0 ? mr_vec_scale(dev, r->nbig, (mr_cfloat)sqrtf((float)r->nbig), k, err) : rc;
}

static int toeplitz_prepare(toeplitz_run *r, mr_device *gpu, int rank, size_t side,
                            size_t coils) {
  *r = (toeplitz_run){.dev = gpu, .nvox = 1, .nbig = 1, .coils = coils,
                      .images = coils > 0 ? coils : 1};
  for (int d = 0; d < 3; d++) {
    r->dims[d] = d < rank ? side : 1;
    r->big[d] = 2 * r->dims[d] - (d >= rank);
    r->nvox *= r->dims[d];
    r->nbig *= r->big[d];
  }
  mr_toeplitz_opts o = {.rank = rank, .n = {r->dims[0], r->dims[1], r->dims[2]},
                        .reg = MR_REG_IDENTITY, .coils = coils};
  mr_fft_opts fo = {.rank = rank, .dims = {r->big[0], r->big[1], r->big[2]},
                    .batch = r->images};
  mr_cfloat *q = malloc(r->nbig * sizeof *q), *maps = malloc(r->images * r->nvox * sizeof *q);
  int rc = q != NULL && maps != NULL ? 0 : MR_ENOMEM;
  if (rc == 0) {
    bench_random_fill(q, r->nbig, 11);
    bench_random_fill(maps, r->images * r->nvox, 12);
    rc = mr_toeplitz_create(gpu, &o, q, &r->op, TERR);
  }
  if (rc == 0 && coils > 0)
    rc = mr_toeplitz_set_maps(r->op, maps, TERR);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->images * r->nvox * sizeof *q, &r->maps, TERR);
  if (rc == 0)
    rc = mr_buf_upload(r->maps, 0, maps, r->images * r->nvox * sizeof *q, TERR);
  if (rc == 0)
    rc = mr_fft_plan_create(gpu, &fo, &r->centred, TERR);
  fo.batch = 1;
  if (rc == 0)
    rc = mr_fft_plan_create(gpu, &fo, &r->centred1, TERR);
  if (rc == 0)
    rc = bench_random_buf(gpu, r->nbig, 11, &r->kernel); /* the same values as q */
  if (rc == 0)
    rc = mr_device_run(gpu, centred_kernel_task, r, TERR);
  if (rc == 0)
    rc = bench_random_buf(gpu, r->nvox, 13, &r->x);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->nvox * sizeof *q, &r->y, TERR);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->images * r->nbig * sizeof *q, &r->work, TERR);
  free(q);
  free(maps);
  return rc;
}

static void toeplitz_release(toeplitz_run *r) {
  mr_toeplitz_destroy(r->op);
  mr_fft_plan_destroy(r->centred);
  mr_fft_plan_destroy(r->centred1);
  mr_buf_destroy(r->x);
  mr_buf_destroy(r->y);
  mr_buf_destroy(r->maps);
  mr_buf_destroy(r->work);
  mr_buf_destroy(r->kernel);
}

/* The output of `task` (host memory, nvox values). */
static int toeplitz_output(toeplitz_run *r, mr_device_task task, mr_cfloat *out) {
  int rc = mr_device_run(r->dev, task, r, TERR);
  return rc == 0 ? mr_buf_download(r->y, 0, out, r->nvox * sizeof *out, TERR) : rc;
}

typedef struct toeplitz_shape {
  int rank;
  size_t side, coils; /* the image's side in every dimension; 0 coils: no maps */
} toeplitz_shape;

static int toeplitz_row(const bench_ctx *ctx, mr_device *gpu, const toeplitz_shape *shape) {
  int rank = shape->rank;
  size_t coils = shape->coils;
  toeplitz_run r;
  double ms[3] = {NAN, NAN, NAN}, t[GPU_REPS], raw = NAN, diff = NAN; /* folded, centred, passes */
  mr_device_task tasks[3] = {folded_task, centred_task, passes_task};
  int rc = toeplitz_prepare(&r, gpu, rank, shape->side, coils);
  for (int i = 0; rc == 0 && i < 3; i++)
    if ((rc = mr_device_time(gpu, tasks[i], &r, GPU_WARMUP, GPU_REPS, t, TERR)) == 0)
      ms[i] = bench_median(t, GPU_REPS) / TOEPLITZ_REPEAT;
  mr_cfloat *a = malloc(r.nvox * sizeof *a), *b = malloc(r.nvox * sizeof *b);
  if (rc == 0)
    rc = a != NULL && b != NULL ? toeplitz_output(&r, folded_once, a) : MR_ENOMEM;
  if (rc == 0 && (rc = toeplitz_output(&r, centred_once, b)) == 0)
    diff = mr_test_rel_error_c(a, b, r.nvox);
  int n[3];
  for (int d = 0; d < rank; d++)
    n[d] = (int)r.big[rank - 1 - d];
  if (rc == 0 && (raw = raw_cufft_round_trip_ms(mr_device_ordinal(gpu), rank, n, (int)r.images,
                                                TOEPLITZ_REPEAT, GPU_REPS)) < 0)
    raw = NAN;
  if (rc < 0)
    fprintf(stderr, "mr-bench: toeplitz: %s (%s)\n", mr_strerror(rc), mr_test_last_error());
  char image[64], grid[64];
  snprintf(image, sizeof image, rank == 2 ? "%zux%zu" : "%zux%zux%zu", r.dims[0], r.dims[1],
           r.dims[2]);
  snprintf(grid, sizeof grid, rank == 2 ? "%zux%zu x %zu" : "%zux%zux%zu x %zu", r.big[0],
           r.big[1], rank == 2 ? r.images : r.big[2], r.images);
  double floor_ms = raw + ms[2];
  fprintf(stderr, "toeplitz %-10s coils %2zu: folded %.4f centred %.4f floor %.4f ms "
          "(%.3f, %.3f of the floor)\n", image, coils, ms[0], ms[1], floor_ms,
          ms[0] / floor_ms, ms[1] / floor_ms);
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_str(j, "image", image);
  json_int(j, "coils", (long long)coils);
  json_str(j, "doubled_grid", grid);
  json_num(j, "folded_ms", ms[0]);
  json_num(j, "centred_ms", ms[1]);
  json_num(j, "passes_ms", ms[2]);
  json_num(j, "raw_cufft_round_trip_ms", raw);
  json_num(j, "floor_ms", floor_ms);
  json_num(j, "folded_over_floor", ms[0] / floor_ms);
  json_num(j, "centred_over_floor", ms[1] / floor_ms);
  json_num(j, "centred_over_folded", ms[1] / ms[0]);
  json_num(j, "folded_vs_centred_rel_diff", diff);
  json_close(j, '}');
  free(a);
  free(b);
  toeplitz_release(&r);
  return rc;
}

int bench_gpu_toeplitz(const bench_ctx *ctx, mr_device *gpu) {
  /* rank, image side, coils: the stream's 2-D CG-SENSE frame (128^2, 16
   * coils) and a larger one, mr-bench fhd's 3-D problems (64^3 and its
   * CG's 128^3), with and without coils. */
  static const toeplitz_shape full[] = {{2, 128, 0}, {2, 128, 16}, {2, 256, 0}, {2, 256, 16},
                                        {3, 64, 0},  {3, 64, 8},   {3, 128, 0}};
  static const toeplitz_shape quick[] = {{2, 16, 0}, {2, 16, 2}, {3, 8, 0}, {3, 8, 2}};
  const toeplitz_shape *shapes = ctx->quick ? quick : full;
  size_t count = ctx->quick ? 4 : sizeof full / sizeof *full;
  bench_json *j = ctx->json;
  json_str(j, "toeplitz_note",
           "one apply of the Toeplitz operator, lambda 0, random Q, maps and image; folded: "
           "the operator (plain cuFFT plans, the centering folded into its kernel); centred: "
           "the same launches with fft.h's centred transforms (the operator before the "
           "fold); passes: its three elementwise launches alone (expand, times the kernel, "
           "gather); raw_cufft_round_trip_ms: cuFFT forward and inverse of the same batch, "
           "called directly; floor: passes plus that round trip; each the time of one of "
           "20 run back to back (as CG runs its applies); folded_vs_centred_rel_diff: their "
           "outputs against each other");
  json_open(j, "toeplitz", '[');
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < count; i++)
    rc = toeplitz_row(ctx, gpu, &shapes[i]);
  json_close(j, ']');
  return rc;
}
