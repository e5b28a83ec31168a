/* mr-bench sms: slice-GRAPPA (gpu/sms/slice_grappa.h) from device-resident
 * data, GPU against CPU in the same run: calibration (leak-blocked, 5 x 5
 * kernel with its edge kernels, central 32 x 32) and the separation of one
 * collapsed slice group, for the fMRI shapes of issue 26: multiband 4,
 * CAIPI FOV/3, 32 coils, 64 x 64 and 96 x 96 (and multiband 2, 16 coils).
 * Random data (the work does not depend on the values; a random reference
 * keeps the normal equations positive definite). Median of REPS runs after
 * a warm-up; --quick: the smallest case, fewer runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "slice_grappa.h"
#include "test_err.h"

enum { REPS = 5 };

typedef struct run {
  mr_slice_grappa_plan *plan;
  const mr_cfloat *reference, *collapsed;
  mr_cfloat *weights, *slices;
} run;

static int calibrate_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  run *r = arg;
  return mr_slice_grappa_calibrate(r->plan, r->reference, r->weights, err);
}

static int apply_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  run *r = arg;
  return mr_slice_grappa_apply(r->plan, r->weights, r->collapsed, r->slices, err);
}

/* Medians of both steps on dev. */
static int time_on(mr_device *dev, const mr_slice_grappa_opts *o, int reps, double *cal_ms,
                   double *apply_ms) {
  size_t plane = (size_t)o->nc * o->ny * o->nx;
  mr_buf *ref = NULL, *col = NULL, *w = NULL, *out = NULL;
  run r = {0};
  double ms[REPS];
  int rc = bench_random_buf(dev, plane * o->mb, 1, &ref);
  if (rc == 0)
    rc = bench_random_buf(dev, plane, 2, &col);
  if (rc == 0)
    rc = mr_buf_create(dev, mr_slice_grappa_weights_count(o) * sizeof(mr_cfloat), &w, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, plane * o->mb * sizeof(mr_cfloat), &out, TERR);
  if (rc == 0)
    rc = mr_slice_grappa_plan_create(dev, o, &r.plan, TERR);
  if (rc == 0) {
    r.reference = mr_buf_data(ref);
    r.collapsed = mr_buf_data(col);
    r.weights = mr_buf_data(w);
    r.slices = mr_buf_data(out);
    rc = mr_device_time(dev, calibrate_task, &r, 1, reps, ms, TERR);
  }
  if (rc == 0) {
    *cal_ms = bench_median(ms, reps);
    rc = mr_device_time(dev, apply_task, &r, 1, reps, ms, TERR);
  }
  if (rc == 0)
    *apply_ms = bench_median(ms, reps);
  mr_slice_grappa_plan_destroy(r.plan);
  mr_buf_destroy(ref);
  mr_buf_destroy(col);
  mr_buf_destroy(w);
  mr_buf_destroy(out);
  return rc;
}

int bench_sms(const bench_ctx *ctx) {
  mr_device *cpu, *gpu;
  int rc = bench_devices(ctx, &cpu, &gpu);
  if (rc < 0)
    return rc;
  bench_json *j = ctx->json;
  const struct {
    int n, nc, mb, caipi;
  } cases[] = {{64, 16, 2, 2}, {64, 32, 4, 3}, {96, 32, 4, 3}};
  int count = ctx->quick ? 1 : (int)(sizeof cases / sizeof *cases);
  int reps = ctx->quick ? 2 : REPS;
  json_open(j, "sms", '[');
  for (int i = 0; rc == 0 && i < count; i++) {
    mr_slice_grappa_opts o = mr_slice_grappa_opts_default(cases[i].nc, cases[i].n, cases[i].n,
                                                          cases[i].mb, cases[i].caipi);
    fprintf(stderr, "sms: %d x %d, %d coils, multiband %d, FOV/%d\n", o.nx, o.ny, o.nc, o.mb,
            o.caipi);
    double gpu_cal = NAN, gpu_apply = NAN, cpu_cal = NAN, cpu_apply = NAN;
    if (gpu != NULL)
      rc = time_on(gpu, &o, reps, &gpu_cal, &gpu_apply);
    if (rc == 0)
      rc = time_on(cpu, &o, reps, &cpu_cal, &cpu_apply);
    if (rc < 0)
      fprintf(stderr, "sms: %s\n", mr_test_last_error());
    json_open(j, NULL, '{');
    json_int(j, "n", o.nx);
    json_int(j, "coils", o.nc);
    json_int(j, "multiband", o.mb);
    json_int(j, "caipi", o.caipi);
    json_int(j, "kernel", o.kx);
    json_num(j, "gpu_calibrate_ms", gpu_cal);
    json_num(j, "gpu_apply_ms", gpu_apply);
    json_num(j, "cpu_calibrate_ms", cpu_cal);
    json_num(j, "cpu_apply_ms", cpu_apply);
    json_num(j, "calibrate_cpu_over_gpu", cpu_cal / gpu_cal);
    json_num(j, "apply_cpu_over_gpu", cpu_apply / gpu_apply);
    json_close(j, '}');
  }
  json_close(j, ']');
  bench_devices_release(ctx, cpu, gpu);
  return rc;
}
