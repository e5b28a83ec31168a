/* mr-bench sms: slice-GRAPPA (gpu/sms/slice_grappa.h) from device-resident
 * data, GPU against CPU in the same run: calibration (leak-blocked, 5 x 5
 * kernel with its edge kernels, central 32 x 32) and the separation of one
 * collapsed slice group, for the fMRI shapes of issue 26: multiband 4,
 * CAIPI FOV/3, 32 coils, 64 x 64 and 96 x 96 (and multiband 2, 16 coils),
 * on random data (the products do not depend on the values); then the
 * configuration of configs/epi_sms.json (64 x 64, 32 coils, multiband 4,
 * FOV/3, calibration on the whole 64 x 64, lambda 1e-5), calibrated on a
 * noiseless phantom as the simulator's data are: its normal equations are
 * as ill-conditioned as a real calibration's, which decides how they are
 * solved. Median of REPS runs after a warm-up; --quick: the smallest case,
 * fewer runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "grappa_phantom.h"
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

/* A noiseless reference on dev: slice m the phantom (no noise) seen
 * through the ring of coils turned by m coils, so that the slices'
 * sensitivities differ as they do along the slice direction. */
static int phantom_buf(mr_device *cpu, mr_device *dev, const mr_slice_grappa_opts *o,
                       mr_buf **out) {
  size_t plane = (size_t)o->nc * o->ny * o->nx, coil = (size_t)o->ny * o->nx;
  mr_cfloat *one = malloc(plane * sizeof *one), *all = malloc(plane * o->mb * sizeof *all);
  int rc = one != NULL && all != NULL ? 0 : MR_ENOMEM;
  if (rc == 0)
    rc = grappa_phantom_kspace(cpu, o->nx, o->ny, o->nc, 0.0, 1, one);
  for (int m = 0; rc == 0 && m < o->mb; m++)
    for (int c = 0; c < o->nc; c++)
      memcpy(all + (size_t)m * plane + (size_t)c * coil, one + (size_t)((c + m) % o->nc) * coil,
             coil * sizeof *one);
  if (rc == 0)
    rc = mr_buf_create(dev, plane * o->mb * sizeof *all, out, TERR);
  if (rc == 0)
    rc = mr_buf_upload(*out, 0, all, plane * o->mb * sizeof *all, TERR);
  free(one);
  free(all);
  return rc;
}

/* Medians of both steps on dev; the reference is random, or with cpu
 * given the phantom (phantom_buf). */
static int time_on(mr_device *dev, mr_device *cpu, const mr_slice_grappa_opts *o, int reps,
                   double *cal_ms, double *apply_ms) {
  size_t plane = (size_t)o->nc * o->ny * o->nx;
  mr_buf *ref = NULL, *col = NULL, *w = NULL, *out = NULL;
  run r = {0};
  double ms[REPS];
  int rc = cpu != NULL ? phantom_buf(cpu, dev, o, &ref)
                        : bench_random_buf(dev, plane * o->mb, 1, &ref);
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
  enum { NCASES = 4 };
  const struct {
    const char *name;
    int n, nc, mb, caipi, epi_sms;
  } cases[NCASES] = {{"mb2_64", 64, 16, 2, 2, 0},
                     {"mb4_64", 64, 32, 4, 3, 0},
                     {"mb4_96", 96, 32, 4, 3, 0},
                     {"epi_sms", 64, 32, 4, 3, 1}};
  const char *names[NCASES];
  char unknown[64];
  for (int i = 0; i < NCASES; i++)
    names[i] = cases[i].name;
  if (bench_unknown_case(ctx->cases, names, NCASES, unknown, sizeof unknown)) {
    fprintf(stderr, "mr-bench: sms: no case '%s'\n", unknown);
    bench_devices_release(ctx, cpu, gpu);
    return -1;
  }
  int count = ctx->quick ? 1 : NCASES;
  int reps = ctx->quick ? 2 : REPS;
  json_open(j, "sms", '[');
  for (int i = 0; rc == 0 && i < count; i++) {
    if (!bench_listed(ctx->cases, cases[i].name))
      continue;
    mr_slice_grappa_opts o = mr_slice_grappa_opts_default(cases[i].nc, cases[i].n, cases[i].n,
                                                          cases[i].mb, cases[i].caipi);
    if (cases[i].epi_sms) { /* configs/epi_sms.json */
      o.cx = o.nx;
      o.cy = o.ny;
      o.lambda = 1e-5f;
    }
    fprintf(stderr, "sms: %d x %d, %d coils, multiband %d, FOV/%d, calibration %d x %d%s\n", o.nx,
            o.ny, o.nc, o.mb, o.caipi, o.cx, o.cy, cases[i].epi_sms ? " (epi_sms, phantom)" : "");
    mr_device *phantom = cases[i].epi_sms ? cpu : NULL;
    double gpu_cal = NAN, gpu_apply = NAN, cpu_cal = NAN, cpu_apply = NAN;
    if (gpu != NULL)
      rc = time_on(gpu, phantom, &o, reps, &gpu_cal, &gpu_apply);
    if (rc == 0)
      rc = time_on(cpu, phantom, &o, reps, &cpu_cal, &cpu_apply);
    if (rc < 0)
      fprintf(stderr, "sms: %s\n", mr_test_last_error());
    json_open(j, NULL, '{');
    json_str(j, "case", cases[i].name);
    json_int(j, "n", o.nx);
    json_int(j, "coils", o.nc);
    json_int(j, "multiband", o.mb);
    json_int(j, "caipi", o.caipi);
    json_int(j, "kernel", o.kx);
    json_int(j, "calibration", o.cx);
    json_num(j, "lambda", o.lambda);
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
