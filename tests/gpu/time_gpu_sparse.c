/* mr-sparse-timing: the compressed-sensing solve (gpu/sparse/sparse.h) on
 * the GPU and the CPU of one machine, device-resident data, JSON on
 * stdout: the whole solve (median of 5 after a warm-up; the CPU once),
 * the GPU's per-iteration parts (the SENSE gradient step, the wavelet
 * proximal step: 100 of each in one task) and the GPU image against the
 * CPU's. Cases: 2D 256 x 256 x 32 coils R 4 (wavelet, tv, l2; 100
 * iterations), 3D 256 x 256 x 128 x 32 coils R 8 (wavelet, GPU only).
 * mr-bench sparse (BART beside it) is the benchmark; this program times
 * the solver alone.
 *
 *   mr-sparse-timing [--quick]   (--quick: 2D 64 x 64 x 4 coils, 3D 32^3) */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cfloat.h"
#include "device.h"
#include "pool.h"
#include "prox.h"
#include "sense.h"
#include "sparse.h"
#include "test_err.h"
#include "wavelet.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Smooth maps of unit root sum of squares and k-space of a blob seen
 * through them, R accel with a calib x calib centre (random lines). */
typedef struct data {
  size_t dims[3], nc, n;
  mr_cfloat *k, *maps;
  uint8_t *mask;
} data;

static void make(data *d, size_t nx, size_t ny, size_t nz, size_t nc, int accel, size_t calib) {
  d->dims[0] = nx;
  d->dims[1] = ny;
  d->dims[2] = nz;
  d->nc = nc;
  d->n = nx * ny * nz;
  d->k = malloc(d->n * nc * sizeof *d->k);
  d->maps = malloc(d->n * nc * sizeof *d->maps);
  d->mask = malloc(ny * nz);
  unsigned st = 1;
  for (size_t i = 0; i < d->n; i++) {
    double x = (double)(i % nx) / (double)nx - 0.5, y = (double)(i / nx % ny) / (double)ny - 0.5;
    for (size_t c = 0; c < nc; c++) {
      double a = 2 * M_PI * (double)c / (double)nc;
      d->maps[c * d->n + i] = (mr_cfloat)(cexp(I * (a + 3 * x * cos(a) + 3 * y * sin(a))) /
                                           sqrt((double)nc));
      st = st * 1664525u + 1013904223u;
      double v = x * x + y * y < 0.1 ? 1 : 0;
      d->k[c * d->n + i] = (mr_cfloat)(v + 0.01 * ((st >> 9) / 8388608.0 - 1));
    }
  }
  for (size_t l = 0; l < ny * nz; l++) {
    size_t y = l % ny, z = l / ny;
    int centre = y + calib / 2 >= ny / 2 && y < ny / 2 + calib / 2 &&
                 (nz == 1 || (z + calib / 2 >= nz / 2 && z < nz / 2 + calib / 2));
    st = st * 1664525u + 1013904223u;
    d->mask[l] = centre || (st >> 8) % (unsigned)accel == 0;
  }
}

typedef struct run {
  mr_sparse_plan *plan;
  const mr_cfloat *k, *maps;
  const uint8_t *mask;
  mr_cfloat *img;
  mr_sense *sense;
  mr_wavelet *w;
  mr_cfloat *a, *b;
  size_t dims[3];
} run;

static int solve_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  run *r = arg;
  return mr_sparse_solve(r->plan, r->k, r->mask, r->maps, r->img, NULL, NULL, err);
}

static int steps_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  run *r = arg;
  int rc = 0;
  for (int i = 0; i < 100 && rc == 0; i++)
    rc = mr_sense_step(r->sense, r->a, r->img, 0.5f, r->b, err);
  return rc;
}

static int prox_task(mr_device *dev, void *arg, mr_err *err) {
  run *r = arg;
  (void)dev;
  size_t shift[3] = {3, 5, 1};
  int rc = 0;
  for (int i = 0; i < 100 && rc == 0; i++) {
    rc = mr_wavelet_forward(r->w, shift, r->a, r->b, err);
    if (rc == 0)
      rc = mr_wavelet_adjoint_soft(r->w, shift, 0.01f, r->b, r->img, err);
  }
  return rc;
}

static mr_cfloat *up(mr_device *dev, const void *host, size_t bytes, mr_buf **keep) {
  if (mr_buf_create(dev, bytes, keep, TERR) != 0 ||
      (host && mr_buf_upload(*keep, 0, host, bytes, TERR) != 0)) {
    fprintf(stderr, "upload: %s\n", mr_test_last_error());
    exit(1);
  }
  return mr_buf_data(*keep);
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fprintf(stderr, "%s: %s\n", #call, mr_test_last_error());                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* One case on dev: the solve's time (median) into *ms, its image into
 * img (host); parts: the per-iteration breakdown too. */
static void time_case(mr_device *dev, const data *d, const mr_sparse_opts *o, int reps, int parts,
                      mr_cfloat *img, double *ms, double *step_ms, double *prox_ms) {
  mr_buf *bk, *bm, *bi, *ba, *bb;
  run r = {.mask = d->mask};
  memcpy(r.dims, d->dims, sizeof r.dims);
  r.k = up(dev, d->k, d->n * d->nc * sizeof *d->k, &bk);
  r.maps = up(dev, d->maps, d->n * d->nc * sizeof *d->k, &bm);
  r.img = up(dev, NULL, d->n * sizeof *d->k, &bi);
  CHECK(mr_sparse_plan_create(dev, o, &r.plan, TERR));
  double t[9];
  if (mr_device_is_gpu(dev)) {
    CHECK(mr_device_time(dev, solve_task, &r, 1, reps, t, TERR));
  } else {
    for (int i = 0; i < reps; i++) {
      double t0 = now_ms();
      CHECK(mr_device_run(dev, solve_task, &r, TERR));
      t[i] = now_ms() - t0;
    }
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  *ms = t[reps / 2];
  CHECK(mr_buf_download(bi, 0, img, d->n * sizeof *img, TERR));
  if (parts) {
    r.a = up(dev, img, d->n * sizeof *img, &ba);
    r.b = up(dev, NULL, d->n * sizeof *img, &bb);
    CHECK(mr_sense_create(dev, d->dims, d->nc, &r.sense, TERR));
    CHECK(mr_sense_set(r.sense, r.maps, d->mask, NULL, TERR));
    CHECK(mr_wavelet_create(dev, d->dims, MR_WAVELET_DB2, &r.w, TERR));
    CHECK(mr_device_time(dev, steps_task, &r, 1, 3, t, TERR));
    qsort(t, 3, sizeof *t, cmp);
    *step_ms = t[1] / 100;
    CHECK(mr_device_time(dev, prox_task, &r, 1, 3, t, TERR));
    qsort(t, 3, sizeof *t, cmp);
    *prox_ms = t[1] / 100;
    mr_sense_destroy(r.sense);
    mr_wavelet_destroy(r.w);
    mr_buf_destroy(ba);
    mr_buf_destroy(bb);
  }
  mr_sparse_plan_destroy(r.plan);
  mr_buf_destroy(bk);
  mr_buf_destroy(bm);
  mr_buf_destroy(bi);
}

static double rel_diff(const mr_cfloat *a, const mr_cfloat *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += pow(cabsf(a[i] - b[i]), 2);
    den += pow(cabsf(b[i]), 2);
  }
  return den > 0 ? sqrt(num / den) : 0;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  mr_pool *pool;
  mr_device *cpu, *gpu = NULL;
  mr_pool_opts po = {.gpus = "all"};
  mr_err err = {0};
  CHECK(mr_pool_create(&po, &pool, &err));
  CHECK(mr_pool_acquire(pool, "cpu", &cpu, &err));
  if (mr_pool_gpu_count(pool) > 0)
    CHECK(mr_pool_acquire(pool, "auto", &gpu, &err));
  mr_device_info gi = {0}, ci = {0};
  CHECK(mr_device_info_get(cpu, &ci, TERR));
  if (gpu != NULL)
    CHECK(mr_device_info_get(gpu, &gi, TERR));
  printf("{\n  \"gpu\": \"%s\", \"cpu\": \"%s\", \"cpu_threads\": %d,\n  \"cases\": [\n",
         gpu ? gi.name : "none", ci.name, ci.units);
  static const char *const names[] = {"wavelet", "tv", "l2"};
  size_t n2 = quick ? 64 : 256, nc = quick ? 4 : 32;
  data d2;
  make(&d2, n2, n2, 1, nc, 4, quick ? 12 : 24);
  mr_cfloat *ig = malloc(d2.n * sizeof *ig), *ic = malloc(d2.n * sizeof *ic);
  for (int reg = 0; reg < 3; reg++) {
    mr_sparse_opts o;
    mr_sparse_opts_default(&o);
    memcpy(o.dims, d2.dims, sizeof o.dims);
    o.ncoils = nc;
    o.regularizer = (mr_sparse_regularizer)reg;
    double gms = 0, cms = 0, step = 0, prox = 0;
    if (gpu != NULL)
      time_case(gpu, &d2, &o, 5, reg == 0, ig, &gms, &step, &prox);
    time_case(cpu, &d2, &o, 1, 0, ic, &cms, NULL, NULL);
    printf("    {\"case\": \"2d\", \"dims\": [%zu, %zu, 1], \"coils\": %zu, \"regularizer\": \"%s\", "
           "\"iterations\": %d, \"gpu_ms\": %.3f, \"cpu_ms\": %.1f, \"cpu_over_gpu\": %.1f, "
           "\"gpu_step_ms\": %.4f, \"gpu_wavelet_prox_ms\": %.4f, \"gpu_vs_cpu_rel\": %.2e},\n",
           n2, n2, nc, names[reg], o.iterations, gms, cms, gms > 0 ? cms / gms : 0, step, prox,
           gpu ? rel_diff(ig, ic, d2.n) : 0);
    fflush(stdout);
  }
  if (gpu != NULL) {
    data d3;
    size_t n3 = quick ? 32 : 256, nz = quick ? 32 : 128;
    make(&d3, n3, n3, nz, nc, 8, quick ? 8 : 24);
    mr_cfloat *i3 = malloc(d3.n * sizeof *i3);
    mr_sparse_opts o;
    mr_sparse_opts_default(&o);
    memcpy(o.dims, d3.dims, sizeof o.dims);
    o.ncoils = nc;
    double gms = 0, step = 0, prox = 0;
    time_case(gpu, &d3, &o, 3, 1, i3, &gms, &step, &prox);
    printf("    {\"case\": \"3d\", \"dims\": [%zu, %zu, %zu], \"coils\": %zu, \"regularizer\": "
           "\"wavelet\", \"iterations\": %d, \"gpu_ms\": %.1f, \"gpu_step_ms\": %.3f, "
           "\"gpu_wavelet_prox_ms\": %.3f},\n",
           n3, n3, nz, nc, o.iterations, gms, step, prox);
    free(i3);
  }
  printf("    {\"end\": true}\n  ]\n}\n");
  free(ig);
  free(ic);
  return 0;
}
