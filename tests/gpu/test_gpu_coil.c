/* coil.h: RSS and sensitivity-weighted combination against double sums;
 * with --cuda, the GPU against the CPU. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coil.h"
#include "fft.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { COILS = 12, PIXELS = 50021 }; /* odd: ranges of uneven length */

static void cpu_rss(void **state) {
  (void)state;
  mr_cfloat *x = malloc(sizeof(mr_cfloat) * COILS * PIXELS);
  float *out = malloc(sizeof(float) * PIXELS), *ref = malloc(sizeof(float) * PIXELS);
  gpu_test_random(x, (size_t)COILS * PIXELS, 1);
  for (size_t p = 0; p < PIXELS; p++) {
    double sum = 0;
    for (size_t c = 0; c < COILS; c++) {
      double complex v = x[c * PIXELS + p];
      sum += creal(v) * creal(v) + cimag(v) * cimag(v);
    }
    ref[p] = (float)sqrt(sum);
  }
  GPU_OK(mr_coil_rss(gpu_test_cpu(), x, COILS, PIXELS, out, TERR));
  assert_true(mr_test_rel_error_f(out, ref, PIXELS) < 1e-6);
  memset(out, 0, sizeof(float) * PIXELS);
  GPU_OK(mr_coil_rss_host(gpu_test_cpu(), x, COILS, PIXELS, out, TERR));
  assert_true(mr_test_rel_error_f(out, ref, PIXELS) < 1e-6);
  free(x);
  free(out);
  free(ref);
}

static void cpu_combine(void **state) {
  (void)state;
  size_t n = (size_t)COILS * PIXELS;
  mr_cfloat *x = malloc(sizeof *x * n), *s = malloc(sizeof *s * n);
  mr_cfloat *out = malloc(sizeof *out * PIXELS), *ref = malloc(sizeof *ref * PIXELS);
  gpu_test_random(x, n, 2);
  gpu_test_random(s, n, 3);
  for (size_t c = 0; c < COILS; c++)
    s[c * PIXELS + 17] = 0; /* a pixel outside every coil */
  for (size_t p = 0; p < PIXELS; p++) {
    double complex num = 0;
    double den = 0;
    for (size_t c = 0; c < COILS; c++) {
      double complex sc = s[c * PIXELS + p], xc = x[c * PIXELS + p];
      num += conj(sc) * xc;
      den += creal(sc) * creal(sc) + cimag(sc) * cimag(sc);
    }
    ref[p] = den > 0 ? (float complex)(num / den) : 0;
  }
  GPU_OK(mr_coil_combine(gpu_test_cpu(), x, s, COILS, PIXELS, out, TERR));
  assert_true(mr_test_rel_error_c(out, ref, PIXELS) < 1e-5);
  assert_true(out[17] == 0);
  GPU_OK(mr_coil_combine_host(gpu_test_cpu(), x, s, COILS, PIXELS, out, TERR));
  assert_true(mr_test_rel_error_c(out, ref, PIXELS) < 1e-5);
  free(x);
  free(s);
  free(out);
  free(ref);
}

/* The Hann factor of sample i of n, width w, in double. */
static double hann_ref(size_t i, size_t n, int w) {
  double d = (double)i - (double)(n / 2);
  if (w > (int)n)
    w = (int)n;
  return fabs(d) * 2 < w ? 0.5 * (1 + cos(2 * M_PI * d / w)) : 0;
}

enum { WX = 20, WY = 14, WZ = 6, WC = 3 };

static void cpu_window_3d(void **state) {
  (void)state;
  size_t n = (size_t)WX * WY * WZ * WC, dims[3] = {WX, WY, WZ};
  int width[3] = {8, 6, 4};
  mr_cfloat *x = malloc(sizeof *x * n), *ref = malloc(sizeof *ref * n);
  gpu_test_random(x, n, 7);
  for (size_t i = 0; i < n; i++) {
    size_t xi = i % WX, y = i / WX % WY, z = i / WX / WY % WZ;
    ref[i] = (float complex)(x[i] * hann_ref(xi, WX, 8) * hann_ref(y, WY, 6) *
                             hann_ref(z, WZ, 4));
  }
  GPU_OK(mr_coil_window(gpu_test_cpu(), x, WC, dims, width, TERR));
  assert_true(mr_test_rel_error_c(x, ref, n) < 1e-6);
  /* the window reaches z: the outer partitions are zero */
  assert_true(x[0] == 0 && x[(size_t)WX * WY * (WZ - 1) + WX * (WY / 2) + WX / 2] == 0);
  free(x);
  free(ref);
}

static void cpu_normalise(void **state) {
  (void)state;
  size_t n = (size_t)COILS * PIXELS;
  mr_cfloat *m = malloc(sizeof *m * n);
  gpu_test_random(m, n, 8);
  for (size_t c = 0; c < COILS; c++)
    m[c * PIXELS + 5] *= 1e-7f; /* under the floor: no map */
  GPU_OK(mr_coil_normalise(gpu_test_cpu(), m, COILS, PIXELS, MR_COIL_MAP_FLOOR, TERR));
  for (size_t p = 0; p < PIXELS; p++) {
    double ss = 0;
    for (size_t c = 0; c < COILS; c++)
      ss += cabs(m[c * PIXELS + p]) * cabs(m[c * PIXELS + p]);
    assert_float_equal(ss, p == 5 ? 0 : 1, 1e-5);
  }
  free(m);
}

/* The low-resolution estimator is its steps: transform, window, transform
 * back, normalise with the floor given; in place or not. */
static void cpu_maps_lowres(void **state) {
  (void)state;
  size_t n = (size_t)WX * WY * WZ * WC, dims[3] = {WX, WY, WZ}, pixels = n / WC;
  int width[3] = {8, 6, 4};
  mr_cfloat *x = malloc(sizeof *x * n), *ref = malloc(sizeof *ref * n);
  mr_cfloat *maps = malloc(sizeof *maps * n);
  gpu_test_random(x, n, 13);
  mr_fft_opts o = {.rank = 3, .dims = {WX, WY, WZ}, .batch = WC};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, x, ref, TERR));
  GPU_OK(mr_coil_window(gpu_test_cpu(), ref, WC, dims, width, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_BACKWARD, ref, ref, TERR));
  GPU_OK(mr_coil_normalise(gpu_test_cpu(), ref, WC, pixels, 0.05, TERR));
  mr_fft_plan_destroy(plan);
  GPU_OK(mr_coil_maps_lowres(gpu_test_cpu(), x, WC, dims, width, 0.05, maps, TERR));
  assert_true(mr_test_rel_error_c(maps, ref, n) < 1e-6);
  GPU_OK(mr_coil_maps_lowres(gpu_test_cpu(), x, WC, dims, width, 0.05, x, TERR));
  assert_true(mr_test_rel_error_c(x, ref, n) < 1e-6);
  GPU_OK(mr_coil_maps_lowres(gpu_test_cpu(), ref, WC, dims, width, 0.5, maps, TERR));
  size_t zero = 0;
  for (size_t p = 0; p < pixels; p++)
    zero += maps[p] == 0;
  assert_true(zero > 0 && zero < pixels); /* a higher floor cuts the weaker pixels */
  assert_int_equal(mr_coil_normalise(gpu_test_cpu(), ref, WC, pixels, 1.5, TERR), MR_EINVAL);
  free(x);
  free(ref);
  free(maps);
}

static void cpu_rss_complex(void **state) {
  (void)state;
  size_t n = (size_t)COILS * PIXELS;
  mr_cfloat *x = malloc(sizeof *x * n), *out = malloc(sizeof *out * PIXELS);
  float *ref = malloc(sizeof *ref * PIXELS);
  gpu_test_random(x, n, 9);
  GPU_OK(mr_coil_rss(gpu_test_cpu(), x, COILS, PIXELS, ref, TERR));
  GPU_OK(mr_coil_rss_complex(gpu_test_cpu(), x, COILS, PIXELS, out, TERR));
  for (size_t p = 0; p < PIXELS; p++) {
    assert_float_equal(crealf(out[p]), ref[p], 1e-6 * ref[p]);
    assert_true(cimagf(out[p]) == 0);
  }
  free(x);
  free(out);
  free(ref);
}

/* The map steps on the GPU against the CPU. */
static void cuda_maps_match_cpu(void **state) {
  (void)state;
  size_t n = (size_t)WX * WY * WZ * WC, dims[3] = {WX, WY, WZ}, pixels = n / WC;
  int width[3] = {8, 6, 4};
  mr_cfloat *x = malloc(sizeof *x * n);
  gpu_test_random(x, n, 10);
  for (size_t c = 0; c < WC; c++)
    x[c * pixels + 3] *= 1e-8f;
  mr_device *gpu = gpu_test_gpu();
  mr_buf *d = gpu_test_upload(gpu, x, sizeof *x * n);
  mr_buf *r;
  GPU_OK(mr_buf_create(gpu, sizeof(mr_cfloat) * pixels, &r, TERR));
  GPU_OK(mr_coil_rss_complex(gpu, mr_buf_data(d), WC, pixels, mr_buf_data(r), TERR));
  GPU_OK(mr_coil_window(gpu, mr_buf_data(d), WC, dims, width, TERR));
  GPU_OK(mr_coil_normalise(gpu, mr_buf_data(d), WC, pixels, MR_COIL_MAP_FLOOR, TERR));
  mr_cfloat *rss_ref = malloc(sizeof *rss_ref * pixels);
  GPU_OK(mr_coil_rss_complex(gpu_test_cpu(), x, WC, pixels, rss_ref, TERR));
  GPU_OK(mr_coil_window(gpu_test_cpu(), x, WC, dims, width, TERR));
  GPU_OK(mr_coil_normalise(gpu_test_cpu(), x, WC, pixels, MR_COIL_MAP_FLOOR, TERR));
  mr_cfloat *got = gpu_test_download(d), *got_rss = gpu_test_download(r);
  assert_true(mr_test_rel_error_c(got, x, n) < 1e-5);
  assert_true(mr_test_rel_error_c(got_rss, rss_ref, pixels) < 1e-6);
  /* the low-resolution estimator (from the maps above as images) */
  GPU_OK(mr_coil_maps_lowres(gpu, mr_buf_data(d), WC, dims, width, 0.05, mr_buf_data(d), TERR));
  GPU_OK(mr_coil_maps_lowres(gpu_test_cpu(), x, WC, dims, width, 0.05, x, TERR));
  free(got);
  got = gpu_test_download(d);
  assert_true(mr_test_rel_error_c(got, x, n) < 1e-5);
  free(got);
  free(got_rss);
  free(rss_ref);
  mr_buf_destroy(d);
  mr_buf_destroy(r);
  free(x);
}

static void bad_sizes(void **state) {
  (void)state;
  mr_cfloat x[1];
  float out[1];
  assert_int_equal(mr_coil_rss(gpu_test_cpu(), x, 0, 1, out, TERR), MR_EINVAL);
  assert_int_equal(mr_coil_rss(gpu_test_cpu(), x, 1, 0, out, TERR), MR_EINVAL);
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  size_t n = (size_t)COILS * PIXELS;
  mr_cfloat *x = malloc(sizeof *x * n), *s = malloc(sizeof *s * n);
  gpu_test_random(x, n, 4);
  gpu_test_random(s, n, 5);
  for (size_t c = 0; c < COILS; c++)
    s[c * PIXELS + 17] = 0;
  float *rss_ref = malloc(sizeof(float) * PIXELS), *rss = malloc(sizeof(float) * PIXELS);
  mr_cfloat *comb_ref = malloc(sizeof(mr_cfloat) * PIXELS);
  mr_cfloat *comb = malloc(sizeof(mr_cfloat) * PIXELS);
  GPU_OK(mr_coil_rss(gpu_test_cpu(), x, COILS, PIXELS, rss_ref, TERR));
  GPU_OK(mr_coil_combine(gpu_test_cpu(), x, s, COILS, PIXELS, comb_ref, TERR));

  mr_device *gpu = gpu_test_gpu();
  mr_buf *dx = gpu_test_upload(gpu, x, sizeof *x * n);
  mr_buf *ds = gpu_test_upload(gpu, s, sizeof *s * n);
  mr_buf *drss, *dcomb;
  GPU_OK(mr_buf_create(gpu, sizeof(float) * PIXELS, &drss, TERR));
  GPU_OK(mr_buf_create(gpu, sizeof(mr_cfloat) * PIXELS, &dcomb, TERR));
  GPU_OK(mr_coil_rss(gpu, mr_buf_data(dx), COILS, PIXELS, mr_buf_data(drss), TERR));
  GPU_OK(mr_coil_combine(gpu, mr_buf_data(dx), mr_buf_data(ds), COILS, PIXELS, mr_buf_data(dcomb),
                         TERR));
  float *got_rss = gpu_test_download(drss);
  mr_cfloat *got_comb = gpu_test_download(dcomb);
  assert_true(mr_test_rel_error_f(got_rss, rss_ref, PIXELS) < 1e-6);
  assert_true(mr_test_rel_error_c(got_comb, comb_ref, PIXELS) < 1e-5);
  assert_true(got_comb[17] == 0);

  GPU_OK(mr_coil_rss_host(gpu, x, COILS, PIXELS, rss, TERR));
  GPU_OK(mr_coil_combine_host(gpu, x, s, COILS, PIXELS, comb, TERR));
  assert_true(mr_test_rel_error_f(rss, rss_ref, PIXELS) < 1e-6);
  assert_true(mr_test_rel_error_c(comb, comb_ref, PIXELS) < 1e-5);

  free(got_rss);
  free(got_comb);
  mr_buf_destroy(dx);
  mr_buf_destroy(ds);
  mr_buf_destroy(drss);
  mr_buf_destroy(dcomb);
  free(x);
  free(s);
  free(rss_ref);
  free(rss);
  free(comb_ref);
  free(comb);
}

/* The Cartesian image path as a gadget runs it: one task that uploads
 * k-space, transforms it and combines the coils, with no synchronisation
 * between the steps, then downloads the image. */
typedef struct chain {
  mr_fft_plan *plan;
  const mr_cfloat *kspace;
  size_t coils, pixels;
  float *image;
} chain;

static int chain_task(mr_device *dev, void *arg, mr_err *err) {
  chain *c = arg;
  mr_buf *k = NULL, *img = NULL;
  int rc = mr_buf_create(dev, c->coils * c->pixels * sizeof(mr_cfloat), &k, err);
  if (rc == 0)
    rc = mr_buf_create(dev, c->pixels * sizeof(float), &img, err);
  if (rc == 0)
    rc = mr_buf_upload(k, 0, c->kspace, mr_buf_size(k), err);
  if (rc == 0)
    rc = mr_fft_execute(c->plan, MR_FFT_BACKWARD, mr_buf_data(k), mr_buf_data(k), err);
  if (rc == 0)
    rc = mr_coil_rss(dev, mr_buf_data(k), c->coils, c->pixels, mr_buf_data(img), err);
  if (rc == 0)
    rc = mr_buf_download(img, 0, c->image, mr_buf_size(img), err);
  mr_buf_destroy(k);
  mr_buf_destroy(img);
  return rc;
}

static void run_chain(mr_device *dev, const mr_cfloat *kspace, float *image) {
  enum { NX = 192, NY = 160, NC = 16 };
  mr_fft_opts o = {.rank = 2, .dims = {NX, NY}, .batch = NC};
  chain c = {.kspace = kspace, .coils = NC, .pixels = (size_t)NX * NY, .image = image};
  GPU_OK(mr_fft_plan_create(dev, &o, &c.plan, TERR));
  GPU_OK(mr_device_run(dev, chain_task, &c, TERR));
  mr_fft_plan_destroy(c.plan);
}

static void cuda_chain_in_one_task(void **state) {
  (void)state;
  size_t n = (size_t)192 * 160 * 16, pixels = (size_t)192 * 160;
  mr_cfloat *kspace = malloc(n * sizeof *kspace);
  float *want = malloc(pixels * sizeof *want), *got = malloc(pixels * sizeof *got);
  gpu_test_random(kspace, n, 6);
  run_chain(gpu_test_cpu(), kspace, want);
  run_chain(gpu_test_gpu(), kspace, got);
  assert_true(mr_test_rel_error_f(got, want, pixels) < 1e-5);
  free(kspace);
  free(want);
  free(got);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_rss),
      cmocka_unit_test(cpu_combine),
      cmocka_unit_test(bad_sizes),
      cmocka_unit_test(cpu_window_3d),
      cmocka_unit_test(cpu_normalise),
      cmocka_unit_test(cpu_maps_lowres),
      cmocka_unit_test(cpu_rss_complex),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_chain_in_one_task),
      cmocka_unit_test(cuda_maps_match_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("coil_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("coil_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
