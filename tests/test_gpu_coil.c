/* coil.h: RSS and sensitivity-weighted combination against double sums;
 * with --cuda, the GPU against the CPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
  GPU_OK(mr_coil_rss(gpu_test_cpu(), x, COILS, PIXELS, out));
  assert_true(mr_test_rel_error_f(out, ref, PIXELS) < 1e-6);
  memset(out, 0, sizeof(float) * PIXELS);
  GPU_OK(mr_coil_rss_host(gpu_test_cpu(), x, COILS, PIXELS, out));
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
  GPU_OK(mr_coil_combine(gpu_test_cpu(), x, s, COILS, PIXELS, out));
  assert_true(mr_test_rel_error_c(out, ref, PIXELS) < 1e-5);
  assert_true(out[17] == 0);
  GPU_OK(mr_coil_combine_host(gpu_test_cpu(), x, s, COILS, PIXELS, out));
  assert_true(mr_test_rel_error_c(out, ref, PIXELS) < 1e-5);
  free(x);
  free(s);
  free(out);
  free(ref);
}

static void bad_sizes(void **state) {
  (void)state;
  mr_cfloat x[1];
  float out[1];
  assert_int_equal(mr_coil_rss(gpu_test_cpu(), x, 0, 1, out), MR_EINVAL);
  assert_int_equal(mr_coil_rss(gpu_test_cpu(), x, 1, 0, out), MR_EINVAL);
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
  GPU_OK(mr_coil_rss(gpu_test_cpu(), x, COILS, PIXELS, rss_ref));
  GPU_OK(mr_coil_combine(gpu_test_cpu(), x, s, COILS, PIXELS, comb_ref));

  mr_device *gpu = gpu_test_gpu();
  mr_buf *dx = gpu_test_upload(gpu, x, sizeof *x * n);
  mr_buf *ds = gpu_test_upload(gpu, s, sizeof *s * n);
  mr_buf *drss, *dcomb;
  GPU_OK(mr_buf_create(gpu, sizeof(float) * PIXELS, &drss));
  GPU_OK(mr_buf_create(gpu, sizeof(mr_cfloat) * PIXELS, &dcomb));
  GPU_OK(mr_coil_rss(gpu, mr_buf_data(dx), COILS, PIXELS, mr_buf_data(drss)));
  GPU_OK(mr_coil_combine(gpu, mr_buf_data(dx), mr_buf_data(ds), COILS, PIXELS,
                         mr_buf_data(dcomb)));
  float *got_rss = gpu_test_download(drss);
  mr_cfloat *got_comb = gpu_test_download(dcomb);
  assert_true(mr_test_rel_error_f(got_rss, rss_ref, PIXELS) < 1e-6);
  assert_true(mr_test_rel_error_c(got_comb, comb_ref, PIXELS) < 1e-5);
  assert_true(got_comb[17] == 0);

  GPU_OK(mr_coil_rss_host(gpu, x, COILS, PIXELS, rss));
  GPU_OK(mr_coil_combine_host(gpu, x, s, COILS, PIXELS, comb));
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

static int chain_task(mr_device *dev, void *arg) {
  chain *c = arg;
  mr_buf *k = NULL, *img = NULL;
  int rc = mr_buf_create(dev, c->coils * c->pixels * sizeof(mr_cfloat), &k);
  if (rc == 0)
    rc = mr_buf_create(dev, c->pixels * sizeof(float), &img);
  if (rc == 0)
    rc = mr_buf_upload(k, 0, c->kspace, mr_buf_size(k));
  if (rc == 0)
    rc = mr_fft_execute(c->plan, MR_FFT_BACKWARD, mr_buf_data(k), mr_buf_data(k));
  if (rc == 0)
    rc = mr_coil_rss(dev, mr_buf_data(k), c->coils, c->pixels, mr_buf_data(img));
  if (rc == 0)
    rc = mr_buf_download(img, 0, c->image, mr_buf_size(img));
  mr_buf_destroy(k);
  mr_buf_destroy(img);
  return rc;
}

static void run_chain(mr_device *dev, const mr_cfloat *kspace, float *image) {
  enum { NX = 192, NY = 160, NC = 16 };
  mr_fft_opts o = {.rank = 2, .dims = {NX, NY}, .batch = NC};
  chain c = {.kspace = kspace, .coils = NC, .pixels = (size_t)NX * NY, .image = image};
  GPU_OK(mr_fft_plan_create(dev, &o, &c.plan));
  GPU_OK(mr_device_run(dev, chain_task, &c));
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
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_chain_in_one_task),
  };
  int failed = cuda ? cmocka_run_group_tests_name("coil_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("coil_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
