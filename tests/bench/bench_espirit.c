/* mr-bench espirit: ESPIRiT maps (gpu/coil/espirit.h) from device-resident
 * k-space, GPU against CPU in the same run: 2D 256 x 256 with 8 and 32
 * coils (the phantom of grappa_phantom.h, fully sampled), and 3D 256 x 256
 * x 128 with 32 coils, whose calibration region (24 x 24 ky-kz lines along
 * the whole readout) carries the 2D phantom's k-space times a z profile
 * (what ESPIRiT reads; the rest is unsampled). The CPU runs the 2D cases
 * only (the 3D case is hundreds of 2D problems: minutes there). Median of
 * GPU_REPS runs after a warm-up; then, on the GPU, the stages' times
 * (mr_espirit_opts.profile: the device waited for after each stage, so
 * their sum is a little above the median), averaged over PROFILE_REPS
 * more runs. --quick: 64 x 64 (x 32), 8 coils. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "espirit.h"
#include "grappa_phantom.h"
#include "test_err.h"

enum { GPU_REPS = 10, CPU_REPS = 2, PROFILE_REPS = 3 };

typedef struct run {
  const mr_cfloat *kspace;
  size_t dims[3], nc;
  mr_cfloat *maps;
  double *profile; /* NULL, or the stages' milliseconds, added to */
} run;

static int maps_task(mr_device *dev, void *arg, mr_err *err) {
  run *r = arg;
  mr_espirit_opts o;
  mr_espirit_opts_default(&o);
  o.profile = r->profile;
  return mr_espirit_maps(dev, r->kspace, r->dims, r->nc, &o, r->maps, err);
}

/* The median of reps runs on dev (k-space uploaded first, not timed);
 * with stages (not NULL), their mean milliseconds over PROFILE_REPS more. */
static int time_on(mr_device *dev, const mr_cfloat *host, const size_t dims[3], size_t nc,
                   int warmup, int reps, double *median, double *stages) {
  size_t n = dims[0] * dims[1] * dims[2] * nc;
  mr_buf *k = NULL, *m = NULL;
  double ms[GPU_REPS];
  int rc = mr_buf_create(dev, n * sizeof *host, &k, TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, n * sizeof *host, &m, TERR);
  if (rc == 0)
    rc = mr_buf_upload(k, 0, host, n * sizeof *host, TERR);
  run r = {.nc = nc};
  memcpy(r.dims, dims, sizeof r.dims);
  if (rc == 0) {
    r.kspace = mr_buf_data(k);
    r.maps = mr_buf_data(m);
    rc = mr_device_time(dev, maps_task, &r, warmup, reps, ms, TERR);
  }
  if (rc == 0)
    *median = bench_median(ms, reps);
  if (stages != NULL) {
    memset(stages, 0, MR_ESPIRIT_STAGES * sizeof *stages);
    r.profile = stages;
    for (int i = 0; rc == 0 && i < PROFILE_REPS; i++)
      rc = mr_device_run(dev, maps_task, &r, TERR);
    for (int i = 0; i < MR_ESPIRIT_STAGES; i++)
      stages[i] /= PROFILE_REPS;
  }
  mr_buf_destroy(k);
  mr_buf_destroy(m);
  return rc;
}

/* k-space of dims (dims[2] > 1: the 3D construction above). */
static mr_cfloat *kspace_for(mr_device *cpu, const size_t dims[3], size_t nc) {
  size_t nx = dims[0], ny = dims[1], nz = dims[2], plane = nx * ny;
  mr_cfloat *k2 = malloc(plane * nc * sizeof *k2);
  mr_cfloat *k = nz > 1 ? calloc(plane * nz * nc, sizeof *k) : k2;
  if (k2 == NULL || k == NULL ||
      grappa_phantom_kspace(cpu, (int)nx, (int)ny, (int)nc, 0.01, 1, k2) < 0) {
    free(k2);
    if (k != k2)
      free(k);
    return NULL;
  }
  if (nz == 1)
    return k;
  for (size_t c = 0; c < nc; c++)
    for (size_t z = nz / 2 - 12; z < nz / 2 + 12; z++) {
      double dz = (double)z - (double)(nz / 2);
      float complex g = (float complex)(exp(-dz * dz / 50) * cexp(I * 0.2 * dz));
      for (size_t y = ny / 2 - 12; y < ny / 2 + 12; y++)
        for (size_t x = 0; x < nx; x++)
          k[(c * nz + z) * plane + y * nx + x] = k2[c * plane + y * nx + x] * g;
    }
  free(k2);
  return k;
}

int bench_espirit(const bench_ctx *ctx) {
  mr_device *cpu, *gpu;
  int rc = bench_devices(ctx, &cpu, &gpu);
  if (rc < 0)
    return rc;
  bench_json *j = ctx->json;
  size_t big = ctx->quick ? 64 : 256;
  const struct {
    size_t dims[3], nc;
  } cases[] = {
      {{big, big, 1}, 8},
      {{big, big, 1}, ctx->quick ? 8 : 32},
      {{big, big, ctx->quick ? 32 : 128}, ctx->quick ? 8 : 32},
  };
  json_open(j, "espirit", '[');
  for (size_t i = 0; rc == 0 && i < sizeof cases / sizeof *cases; i++) {
    const size_t *d = cases[i].dims;
    size_t nc = cases[i].nc;
    fprintf(stderr, "espirit: %zu x %zu x %zu, %zu coils\n", d[0], d[1], d[2], nc);
    mr_cfloat *k = kspace_for(cpu, d, nc);
    if (k == NULL) {
      rc = MR_ENOMEM;
      break;
    }
    double gpu_ms = NAN, cpu_ms = NAN, stages[MR_ESPIRIT_STAGES];
    for (int s = 0; s < MR_ESPIRIT_STAGES; s++)
      stages[s] = NAN;
    if (gpu != NULL)
      rc = time_on(gpu, k, d, nc, 1, GPU_REPS, &gpu_ms, stages);
    if (rc == 0 && (d[2] == 1 || ctx->quick))
      rc = time_on(cpu, k, d, nc, 0, CPU_REPS, &cpu_ms, NULL);
    if (rc < 0)
      fprintf(stderr, "espirit: %s\n", mr_test_last_error());
    json_open(j, NULL, '{');
    json_int(j, "nx", (long long)d[0]);
    json_int(j, "ny", (long long)d[1]);
    json_int(j, "nz", (long long)d[2]);
    json_int(j, "coils", (long long)nc);
    json_num(j, "gpu_ms", gpu_ms);
    json_num(j, "cpu_ms", cpu_ms);
    json_num(j, "cpu_over_gpu", cpu_ms / gpu_ms);
    static const char *const stage_names[MR_ESPIRIT_STAGES] = {
        [MR_ESPIRIT_CALIBRATION] = "calibration", [MR_ESPIRIT_SUBSPACE] = "subspace",
        [MR_ESPIRIT_PROJECTOR] = "projector", [MR_ESPIRIT_KERNEL_FFT] = "kernel_fft",
        [MR_ESPIRIT_EIGEN] = "eigen"};
    json_open(j, "gpu_stages_ms", '{');
    for (int s = 0; s < MR_ESPIRIT_STAGES; s++)
      json_num(j, stage_names[s], stages[s]);
    json_close(j, '}');
    json_close(j, '}');
    free(k);
  }
  json_close(j, ']');
  bench_devices_release(ctx, cpu, gpu);
  return rc;
}
