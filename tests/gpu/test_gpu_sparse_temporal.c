/* gpu/sparse's temporal terms: TV's temporal group (tv.h: the differences
 * along a series' frames, or the difference from a reference image)
 * against its definition (K and K^H adjoint, the proximal step's
 * objective), the series operator (series.h) against sense.h frame by
 * frame, and a dynamic series solved jointly with temporal TV against the
 * same solve without the temporal term (each frame alone) on a moving
 * phantom, by PSNR (measured: 34.4 dB alone, 40.7 dB joint; asserted +3
 * dB); with --cuda, the GPU against the CPU (1e-4); with --bart, against
 * BART's pics -R T on the same data, maps and weights. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bart_cfl.h"
#include "cfl.h"
#include "sense.h"
#include "series.h"
#include "sparse.h"
#include "test_gpu_common.h"
#include "test_support.h"
#include "tv.h"

static double complex dot(const mr_cfloat *a, const mr_cfloat *b, size_t n) {
  double complex s = 0;
  for (size_t i = 0; i < n; i++)
    s += conj((double complex)a[i]) * b[i];
  return s;
}

/* Memory on dev holding a copy of host values (a host copy on the CPU). */
static mr_cfloat *put(mr_device *dev, const mr_cfloat *host, size_t n, mr_buf **buf) {
  *buf = NULL;
  if (mr_device_is_gpu(dev)) {
    *buf = gpu_test_upload(dev, host, n * sizeof *host);
    return mr_buf_data(*buf);
  }
  mr_cfloat *p = malloc(n * sizeof *p);
  memcpy(p, host, n * sizeof *p);
  return p;
}

static void get(mr_device *dev, const mr_cfloat *d, mr_cfloat *host, size_t n) {
  if (mr_device_is_gpu(dev))
    GPU_OK(mr_device_download(dev, host, d, n * sizeof *host, TERR));
  else
    memcpy(host, d, n * sizeof *host);
}

static void drop(mr_buf *buf, mr_cfloat *p) {
  if (buf != NULL)
    mr_buf_destroy(buf);
  else
    free(p);
}

/* 1/2 ||x - u||^2 + t (TV_xy(x) + w ||T x - r||_1), by its definition. */
static double objective(const mr_cfloat *x, const mr_cfloat *u, const size_t dims[3],
                        mr_tv_time time, double t, double w, const mr_cfloat *r) {
  size_t n = dims[0] * dims[1] * dims[2], st[3] = {1, dims[0], dims[0] * dims[1]};
  double fit = 0, tv = 0, temporal = 0;
  for (size_t i = 0; i < n; i++) {
    fit += pow(cabs(x[i] - u[i]), 2);
    double g2 = 0;
    for (int a = 0; a < (time == MR_TV_FRAMES ? 2 : 3); a++) {
      if (dims[a] < 2)
        continue;
      size_t pos = i / st[a] % dims[a], up = pos + 1 == dims[a] ? i - pos * st[a] : i + st[a];
      g2 += pow(cabs(x[up] - x[i]), 2);
    }
    tv += sqrt(g2);
    if (time == MR_TV_REFERENCE)
      temporal += cabs(x[i] - r[i]);
    else if (i / st[2] + 1 < dims[2])
      temporal += cabs(x[i + st[2]] - x[i]);
  }
  return fit / 2 + t * (tv + w * temporal);
}

/* K and K^H adjoint; the proximal step's objective below u's, the
 * reference's and nearby points'; a weight without a temporal term. */
static void cpu_tv_temporal(void **state) {
  (void)state;
  mr_device *cpu = gpu_test_cpu();
  size_t dims[3] = {20, 16, 6}, n = 20 * 16 * 6;
  mr_cfloat *x = malloc(n * sizeof *x), *g = malloc(4 * n * sizeof *g),
            *kx = malloc(4 * n * sizeof *kx), *kg = malloc(n * sizeof *kg),
            *r = malloc(n * sizeof *r), *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
  for (mr_tv_time time = MR_TV_FRAMES; time <= MR_TV_REFERENCE; time++) {
    mr_tv *tv;
    GPU_OK(mr_tv_create_time(cpu, dims, time, &tv, TERR));
    assert_int_equal(mr_tv_axes(tv), 3 + (time == MR_TV_REFERENCE));
    double w = 0.7;
    gpu_test_random(x, n, 4);
    gpu_test_random(r, n, 6);
    GPU_OK(mr_tv_set_time(tv, (float)w, r, TERR));
    size_t m = (size_t)mr_tv_axes(tv) * n;
    gpu_test_random(g, m, 5);
    GPU_OK(mr_tv_forward(tv, x, kx, TERR));
    GPU_OK(mr_tv_adjoint(tv, g, kg, TERR));
    double complex a = dot(kx, g, m), b = dot(x, kg, n);
    if (!(cabs(a - b) < 1e-4 * cabs(a)))
      fail_msg("temporal term %d: <K x, g> %g%+gi, <x, K^H g> %g%+gi", (int)time, creal(a),
               cimag(a), creal(b), cimag(b));
    /* Piecewise constant frames, the edge moving, plus noise. */
    for (size_t i = 0; i < n; i++)
      x[i] = (i % 20 < 8 + i / 320 ? 1.0f : 0.2f) + 0.1f * x[i];
    for (size_t i = 0; i < n; i++)
      r[i] = i % 20 < 8 ? 1.0f : 0.2f;
    double t = 0.05;
    GPU_OK(mr_tv_prox(tv, (float)t, 400, x, p, TERR));
    double best = objective(p, x, dims, time, t, w, r);
    assert_true(best < objective(x, x, dims, time, t, w, r));
    assert_true(best < objective(r, x, dims, time, t, w, r));
    for (unsigned seed = 10; seed < 14; seed++) {
      gpu_test_random(q, n, seed);
      for (size_t i = 0; i < n; i++)
        q[i] = p[i] + 0.01f * q[i];
      assert_true(best <= objective(q, x, dims, time, t, w, r) + 1e-6);
    }
    assert_int_equal(mr_tv_set_time(tv, -1, r, TERR), MR_EINVAL);
    mr_tv_destroy(tv);
  }
  mr_tv *spatial;
  GPU_OK(mr_tv_create(cpu, dims, &spatial, TERR));
  assert_int_equal(mr_tv_set_time(spatial, 1, NULL, TERR), MR_EINVAL);
  mr_tv_destroy(spatial);
  free(x);
  free(g);
  free(kx);
  free(kg);
  free(r);
  free(p);
  free(q);
}

/* --- a dynamic series --- */

enum { NX = 48, NY = 48, FRAMES = 10, COILS = 4 };
#define NPX ((size_t)NX * NY)

/* The truth: a static background square and a bright disc moving along x
 * (frame f at x 14 + 2 f). */
static void truth_of(mr_cfloat *x) {
  for (size_t f = 0; f < FRAMES; f++)
    for (size_t y = 0; y < NY; y++)
      for (size_t i = 0; i < NX; i++) {
        double dx = (double)i - (14.0 + 2.0 * (double)f), dy = (double)y - 24.0;
        float v = i >= 8 && i < 40 && y >= 8 && y < 40 ? 0.4f : 0.0f;
        if (dx * dx + dy * dy < 36)
          v = 1.0f;
        x[f * NPX + y * NX + i] = v;
      }
}

/* Smooth maps of unit root sum of squares, a coil at each corner. */
static void maps_of(mr_cfloat *maps) {
  for (size_t i = 0; i < NPX; i++) {
    double px = (double)(i % NX), py = (double)(i / NX), sum = 0;
    double complex m[COILS];
    for (int c = 0; c < COILS; c++) {
      double cx = c % 2 ? NX : 0, cy = c / 2 ? NY : 0,
             d2 = ((px - cx) * (px - cx) + (py - cy) * (py - cy)) / (NX * NY);
      m[c] = exp(-d2) * cexp(I * (0.5 * c + 0.02 * px));
      sum += pow(cabs(m[c]), 2);
    }
    for (int c = 0; c < COILS; c++)
      maps[(size_t)c * NPX + i] = (mr_cfloat)(m[c] / sqrt(sum));
  }
}

/* Frame f's mask: the 4 central lines and an eighth of the rest at random,
 * a new draw each frame. */
static void masks_of(uint8_t *mask) {
  unsigned s = 12345;
  for (size_t f = 0; f < FRAMES; f++)
    for (size_t y = 0; y < NY; y++) {
      s = s * 1103515245u + 12345u;
      mask[f * NY + y] = (y >= NY / 2 - 2 && y < NY / 2 + 2) || (s >> 16) % 8 == 0;
    }
}

/* The series' k-space: A x (the frames' sampled lines) plus noise there. */
static void kspace_of(const mr_cfloat *truth, const mr_cfloat *maps, const uint8_t *mask,
                      mr_cfloat *k) {
  mr_device *cpu = gpu_test_cpu();
  size_t dims[3] = {NX, NY, 1};
  mr_sense *op;
  GPU_OK(mr_sense_create(cpu, dims, COILS, &op, TERR));
  for (size_t f = 0; f < FRAMES; f++) {
    GPU_OK(mr_sense_set(op, maps, mask + f * NY, NULL, TERR));
    GPU_OK(mr_sense_forward(op, truth + f * NPX, k + f * COILS * NPX, TERR));
  }
  mr_sense_destroy(op);
  mr_cfloat *noise = malloc(FRAMES * COILS * NPX * sizeof *noise);
  gpu_test_random(noise, FRAMES * COILS * NPX, 3);
  for (size_t i = 0; i < FRAMES * COILS * NPX; i++) /* on the sampled lines: the rest is 0 */
    if (mask[i / (COILS * NPX) * NY + i % NPX / NX])
      k[i] += 0.03f * noise[i];
  free(noise);
}

static double psnr(const mr_cfloat *x, const mr_cfloat *truth, size_t n) {
  double err = 0, peak = 0;
  for (size_t i = 0; i < n; i++) {
    err += pow(cabsf(x[i]) - cabsf(truth[i]), 2);
    peak = fmax(peak, cabsf(truth[i]));
  }
  return 20 * log10(peak / sqrt(err / (double)n));
}

/* Options for the series with the temporal term's weight (tv, lambda
 * 0.01, 60 iterations). */
static mr_sparse_opts series_opts(double temporal) {
  mr_sparse_opts o;
  mr_sparse_opts_default(&o);
  o.dims[0] = NX;
  o.dims[1] = NY;
  o.dims[2] = FRAMES;
  o.ncoils = COILS;
  o.regularizer = MR_SPARSE_TV;
  o.lambda = 0.01;
  o.iterations = 60;
  o.time = MR_TV_FRAMES;
  o.temporal_lambda = temporal;
  return o;
}

/* The series solved on dev. */
static void solve_series(mr_device *dev, double temporal, const mr_cfloat *k,
                         const uint8_t *mask, const mr_cfloat *maps, mr_cfloat *img) {
  mr_sparse_opts o = series_opts(temporal);
  mr_sparse_plan *p;
  GPU_OK(mr_sparse_plan_create(dev, &o, &p, TERR));
  mr_buf *bk, *bm, *bi;
  mr_cfloat *dk = put(dev, k, FRAMES * COILS * NPX, &bk), *dm = put(dev, maps, COILS * NPX, &bm),
            *di = put(dev, img, FRAMES * NPX, &bi);
  GPU_OK(mr_sparse_solve(p, dk, mask, dm, di, NULL, NULL, TERR));
  get(dev, di, img, FRAMES * NPX);
  drop(bk, dk);
  drop(bm, dm);
  drop(bi, di);
  mr_sparse_plan_destroy(p);
}

typedef struct series_data {
  mr_cfloat truth[FRAMES * NPX], maps[COILS * NPX], k[FRAMES * COILS * NPX];
  uint8_t mask[FRAMES * NY];
} series_data;

static series_data *series_make(void) {
  series_data *d = malloc(sizeof *d);
  truth_of(d->truth);
  maps_of(d->maps);
  masks_of(d->mask);
  kspace_of(d->truth, d->maps, d->mask, d->k);
  return d;
}

/* The series operator is sense.h's frame by frame: A^H A through both. */
static void cpu_series_operator(void **state) {
  (void)state;
  mr_device *cpu = gpu_test_cpu();
  series_data *d = series_make();
  size_t dims[3] = {NX, NY, 1}, fewest;
  mr_series *s;
  mr_sense *op;
  GPU_OK(mr_series_create(cpu, dims, COILS, FRAMES, &s, TERR));
  GPU_OK(mr_sense_create(cpu, dims, COILS, &op, TERR));
  GPU_OK(mr_series_set(s, d->maps, d->mask, &fewest, TERR));
  assert_true(fewest >= 4);
  mr_cfloat *y = malloc(FRAMES * NPX * sizeof *y), *ref = malloc(NPX * sizeof *ref);
  GPU_OK(mr_series_normal(s, d->truth, y, TERR));
  for (size_t f = 0; f < FRAMES; f++) {
    GPU_OK(mr_sense_set(op, d->maps, d->mask + f * NY, NULL, TERR));
    GPU_OK(mr_sense_normal(op, d->truth + f * NPX, ref, TERR));
    assert_true(mr_test_rel_error_c(y + f * NPX, ref, NPX) < 1e-6);
  }
  size_t bad[3] = {NX, NY, 2};
  mr_series *none = NULL;
  assert_int_equal(mr_series_create(cpu, bad, COILS, FRAMES, &none, TERR), MR_EINVAL);
  mr_series_destroy(s);
  mr_sense_destroy(op);
  free(y);
  free(ref);
  free(d);
}

/* Temporal TV across the frames against each frame alone (the same
 * spatial TV, no temporal term): a measured PSNR margin on the moving
 * disc; and what the solver refuses. */
static void cpu_temporal_beats_frame_by_frame(void **state) {
  (void)state;
  mr_device *cpu = gpu_test_cpu();
  series_data *d = series_make();
  mr_cfloat *alone = calloc(FRAMES * NPX, sizeof *alone),
            *joint = calloc(FRAMES * NPX, sizeof *joint);
  solve_series(cpu, 0, d->k, d->mask, d->maps, alone);
  solve_series(cpu, 0.01, d->k, d->mask, d->maps, joint);
  double p_alone = psnr(alone, d->truth, FRAMES * NPX), p_joint = psnr(joint, d->truth, FRAMES * NPX);
  print_message("series of %d frames, R ~5: PSNR frame by frame %.2f dB, temporal TV %.2f dB\n",
                FRAMES, p_alone, p_joint);
  assert_true(p_joint >= p_alone + 3);
  /* refused: a temporal term with the wavelet, a frame of one line */
  mr_sparse_opts o = series_opts(0.01);
  o.regularizer = MR_SPARSE_WAVELET;
  mr_sparse_plan *p = NULL;
  assert_int_equal(mr_sparse_plan_create(cpu, &o, &p, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "temporal"));
  o.regularizer = MR_SPARSE_TV;
  o.iterations = 2;
  GPU_OK(mr_sparse_plan_create(cpu, &o, &p, TERR));
  memset(d->mask + 3 * NY, 0, NY);
  d->mask[3 * NY + NY / 2] = 1;
  assert_int_equal(mr_sparse_solve(p, d->k, d->mask, d->maps, joint, NULL, NULL, TERR), MR_EDATA);
  assert_non_null(strstr(mr_test_last_error(), "in a frame"));
  assert_int_equal(mr_sparse_set_reference(p, NULL, TERR), 0);
  mr_sparse_plan_destroy(p);
  o.time = MR_TV_SPATIAL;
  o.dims[2] = 1;
  GPU_OK(mr_sparse_plan_create(cpu, &o, &p, TERR));
  assert_int_equal(mr_sparse_set_reference(p, joint, TERR), MR_EINVAL);
  mr_sparse_plan_destroy(p);
  free(alone);
  free(joint);
  free(d);
}

/* --- against BART --- */

/* BART's pics on the series: the same maps, spatial TV and temporal TV
 * along BART's time dimension (10), `iterations` of its ADMM; the image
 * [frame][y][x] into img. */
static void bart_series(const series_data *d, double lambda, double temporal, int iterations,
                        mr_cfloat *img) {
  char dir[] = "/tmp/mr_bart_series_XXXXXX", cmd[1024], k[64], maps[64], out[64];
  if (mkdtemp(dir) == NULL)
    fail_msg("mkdtemp failed");
  snprintf(k, sizeof k, "%s/k", dir);
  snprintf(maps, sizeof maps, "%s/maps", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  /* [frame][coil][y][x]: x, y, 1, coils, then 1s to the time dimension */
  const long kdims[11] = {NX, NY, 1, COILS, 1, 1, 1, 1, 1, 1, FRAMES},
             mdims[4] = {NX, NY, 1, COILS};
  if (cfl_write(k, 11, kdims, d->k) != 0 || cfl_write(maps, 4, mdims, d->maps) != 0)
    fail_msg("cannot write the cfl files in %s", dir);
  snprintf(cmd, sizeof cmd,
           "bart pics -S -R T:3:0:%g -R T:1024:0:%g -i %d %s %s %s > /dev/null 2>&1", lambda,
           temporal, iterations, k, maps, out);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
  long odims[CFL_MAX_DIMS];
  mr_cfloat *got = cfl_read(out, odims);
  if (got == NULL || cfl_size(odims) != (long)(FRAMES * NPX))
    fail_msg("%s.cfl: not %zu values", out, FRAMES * NPX);
  memcpy(img, got, FRAMES * NPX * sizeof *img);
  free(got);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
}

/* The series through BART's pics -R T:3:0:0.01 -R T:1024:0:0.01 (spatial
 * and temporal TV: ADMM, 100 and 300 iterations) and ours at the same
 * weights (FISTA, 60 iterations): PSNR against the truth after the
 * least-squares scale of BART's image (its -S scale is not ours).
 * Measured: BART 31.5 dB at 100, 40.9 dB at 300; ours 40.7 dB. */
static void bart_temporal_tv(void **state) {
  (void)state;
  series_data *d = series_make();
  mr_cfloat *ours = calloc(FRAMES * NPX, sizeof *ours),
            *theirs = malloc(FRAMES * NPX * sizeof *theirs);
  solve_series(gpu_test_cpu(), 0.01, d->k, d->mask, d->maps, ours);
  double p_ours = psnr(ours, d->truth, FRAMES * NPX), p_bart[2];
  const int iterations[2] = {100, 300};
  for (int i = 0; i < 2; i++) {
    bart_series(d, 0.01, 0.01, iterations[i], theirs);
    double num = 0, den = 0;
    for (size_t j = 0; j < FRAMES * NPX; j++) {
      num += cabsf(theirs[j]) * cabsf(d->truth[j]);
      den += cabsf(theirs[j]) * cabsf(theirs[j]);
    }
    for (size_t j = 0; j < FRAMES * NPX; j++)
      theirs[j] *= (float)(num / den);
    p_bart[i] = psnr(theirs, d->truth, FRAMES * NPX);
  }
  print_message("series, lambda = temporal_lambda = 0.01: PSNR BART pics %.2f dB (100 iterations), "
                "%.2f dB (300); ours %.2f dB (60)\n", p_bart[0], p_bart[1], p_ours);
  assert_true(p_ours >= p_bart[1] - 0.5);
  free(ours);
  free(theirs);
  free(d);
}

/* --- the GPU against the CPU --- */

static void cuda_tv_temporal(void **state) {
  (void)state;
  mr_device *devs[2] = {gpu_test_cpu(), gpu_test_gpu()};
  size_t dims[3] = {40, 24, 5}, n = 40 * 24 * 5;
  mr_cfloat *x = malloc(n * sizeof *x), *r = malloc(n * sizeof *r), *out[2];
  gpu_test_random(x, n, 20);
  gpu_test_random(r, n, 21);
  for (mr_tv_time time = MR_TV_FRAMES; time <= MR_TV_REFERENCE; time++) {
    for (int d = 0; d < 2; d++) {
      mr_tv *tv;
      GPU_OK(mr_tv_create_time(devs[d], dims, time, &tv, TERR));
      mr_buf *bx, *br, *by;
      mr_cfloat *dx = put(devs[d], x, n, &bx), *dr = put(devs[d], r, n, &br),
                *dy = put(devs[d], x, n, &by);
      GPU_OK(mr_tv_set_time(tv, 0.8f, dr, TERR));
      GPU_OK(mr_tv_prox(tv, 0.1f, 20, dx, dy, TERR));
      out[d] = malloc(n * sizeof *x);
      get(devs[d], dy, out[d], n);
      drop(bx, dx);
      drop(br, dr);
      drop(by, dy);
      mr_tv_destroy(tv);
    }
    double e = mr_test_rel_error_c(out[1], out[0], n);
    if (e >= 1e-4)
      fail_msg("temporal term %d: GPU against CPU %g", (int)time, e);
    free(out[0]);
    free(out[1]);
  }
  free(x);
  free(r);
}

static void cuda_series_solve(void **state) {
  (void)state;
  mr_device *devs[2] = {gpu_test_cpu(), gpu_test_gpu()};
  series_data *d = series_make();
  mr_cfloat *img[2];
  for (int i = 0; i < 2; i++) {
    img[i] = calloc(FRAMES * NPX, sizeof *img[i]);
    solve_series(devs[i], 0.01, d->k, d->mask, d->maps, img[i]);
  }
  double e = mr_test_rel_error_c(img[1], img[0], FRAMES * NPX);
  print_message("series with temporal TV: GPU against CPU %g\n", e);
  assert_true(e < 1e-4);
  free(img[0]);
  free(img[1]);
  free(d);
}

int main(int argc, char **argv) {
  int group = bart_test_init(argc, argv), bart = group == 2, cuda = group == 1;
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_tv_temporal),
      cmocka_unit_test(cpu_series_operator),
      cmocka_unit_test(cpu_temporal_beats_frame_by_frame),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_tv_temporal),
      cmocka_unit_test(cuda_series_solve),
  };
  const struct CMUnitTest bart_tests[] = {
      cmocka_unit_test(bart_temporal_tv),
  };
  int failed = bart ? cmocka_run_group_tests_name("sparse_temporal_bart", bart_tests, NULL, NULL)
               : cuda ? cmocka_run_group_tests_name("sparse_temporal_cuda", cuda_tests, NULL, NULL)
                      : cmocka_run_group_tests_name("sparse_temporal_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
