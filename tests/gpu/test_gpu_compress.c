/* compress.h: orthonormal compression matrices that keep the energy they
 * report (and no more channels than that needs), GCC at least as good as
 * SVD per readout position, the compressed image's RSS close to the full
 * one's, clear errors; with --cuda, the GPU's products against the CPU's;
 * with --bart, the energy kept and the RSS image against `bart cc -S` and
 * `bart cc -G` (77 without bart). */
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
#include "coil.h"
#include "compress.h"
#include "fft.h"
#include "grappa_phantom.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { NX = 64, NY = 64, NC = 16, CAL = 24 };

static mr_cfloat *phantom(double noise) {
  mr_cfloat *k = malloc(sizeof *k * NX * NY * NC);
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), NX, NY, NC, noise, 5, k));
  return k;
}

/* The central CAL lines of every coil: [coil][line][NX]. */
static mr_cfloat *calibration(const mr_cfloat *k) {
  mr_cfloat *c = malloc(sizeof *c * NC * CAL * NX);
  for (size_t ch = 0; ch < NC; ch++)
    memcpy(c + ch * CAL * NX, k + (ch * NY + NY / 2 - CAL / 2) * NX, sizeof *c * CAL * NX);
  return c;
}

static double energy(const mr_cfloat *x, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++)
    e += pow(cabsf(x[i]), 2);
  return e;
}

static void assert_orthonormal(const mr_cfloat *m, size_t nc, size_t nv) {
  for (size_t v = 0; v < nv; v++)
    for (size_t w = 0; w < nv; w++) {
      double complex dot = 0;
      for (size_t c = 0; c < nc; c++)
        dot += conj(m[v * nc + c]) * m[w * nc + c];
      assert_true(cabs(dot - (v == w)) < 1e-5);
    }
}

/* Compresses lines [coil][line][nro] on dev. */
static mr_cfloat *compress(mr_device *dev, mr_compress_method method, const mr_cfloat *m,
                           size_t nv, const mr_cfloat *lines, size_t nl, size_t nro) {
  mr_cfloat *out = malloc(sizeof *out * nv * nl * nro);
  size_t msize = mr_compress_matrix_size(method, NC, nro);
  mr_buf *dm = gpu_test_upload(dev, m, sizeof *m * msize);
  mr_buf *din = gpu_test_upload(dev, lines, sizeof *lines * NC * nl * nro), *dout = NULL;
  GPU_OK(mr_buf_create(dev, sizeof *out * nv * nl * nro, &dout, TERR));
  GPU_OK(mr_compress_apply(dev, method, mr_buf_data(dm), NC, nv, nl, nro, mr_buf_data(din),
                           mr_buf_data(dout), TERR));
  GPU_OK(mr_buf_download(dout, 0, out, sizeof *out * nv * nl * nro, TERR));
  mr_buf_destroy(dm);
  mr_buf_destroy(din);
  mr_buf_destroy(dout);
  return out;
}

/* The RSS image of k-space [coil][NY][NX]. */
static float *rss(const mr_cfloat *k, size_t nc) {
  size_t npix = (size_t)NX * NY;
  mr_cfloat *img = malloc(sizeof *img * npix * nc);
  float *out = malloc(sizeof *out * npix);
  mr_fft_opts o = {.rank = 2, .dims = {NX, NY, 1}, .batch = nc};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_BACKWARD, k, img, TERR));
  mr_fft_plan_destroy(plan);
  GPU_OK(mr_coil_rss(gpu_test_cpu(), img, nc, npix, out, TERR));
  free(img);
  return out;
}

static double nrmse(const float *a, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += pow(a[i] - ref[i], 2);
    den += pow(ref[i], 2);
  }
  return sqrt(num / den);
}

static void check_method(mr_compress_method method, const char *name) {
  mr_cfloat *k = phantom(0.02), *cal = calibration(k);
  mr_cfloat *m = malloc(sizeof *m * mr_compress_matrix_size(method, NC, NX));
  size_t nv = 0, items = method == MR_COMPRESS_GCC ? NX : 1;
  double kept = 0;
  GPU_OK(
      mr_compress_matrix(gpu_test_cpu(), method, cal, NC, CAL, NX, 0, 0.95, m, &nv, &kept, TERR));
  print_message("%s: %zu of %d channels keep %.4f of the energy\n", name, nv, NC, kept);
  assert_true(nv >= 1 && nv < NC);
  assert_true(kept >= 0.95);
  for (size_t x = 0; x < items; x++)
    assert_orthonormal(m + x * NC * NC, NC, nv);
  /* the energy it reports is the energy the compressed calibration keeps */
  mr_cfloat *cc = compress(gpu_test_cpu(), method, m, nv, cal, CAL, NX);
  double got = energy(cc, nv * CAL * NX) / energy(cal, (size_t)NC * CAL * NX);
  print_message("%s: compressed calibration keeps %.4f\n", name, got);
  assert_true(fabs(got - kept) < 2e-3);
  /* one channel fewer would not do */
  double fewer = 0;
  size_t nv2 = 0;
  GPU_OK(mr_compress_matrix(gpu_test_cpu(), method, cal, NC, CAL, NX, nv - 1, 0, m, &nv2, &fewer,
                            TERR));
  assert_int_equal(nv2, nv - 1);
  assert_true(fewer < 0.95);
  /* 8 of 16 channels: the RSS image stays close to the full one */
  size_t nv8 = 0;
  GPU_OK(mr_compress_matrix(gpu_test_cpu(), method, cal, NC, CAL, NX, 8, 0, m, &nv8, NULL, TERR));
  mr_cfloat *k8 = compress(gpu_test_cpu(), method, m, 8, k, NY, NX);
  float *full = rss(k, NC), *eight = rss(k8, 8);
  double e = nrmse(eight, full, (size_t)NX * NY);
  print_message("%s: RSS of 8 channels against all 16: NRMSE %.4f\n", name, e);
  assert_true(e < 0.05);
  free(k);
  free(cal);
  free(m);
  free(cc);
  free(k8);
  free(full);
  free(eight);
}

static void cpu_svd(void **state) {
  (void)state;
  check_method(MR_COMPRESS_SVD, "svd");
}

static void cpu_gcc(void **state) {
  (void)state;
  check_method(MR_COMPRESS_GCC, "gcc");
}

/* GCC's matrices per position keep at least what one SVD matrix keeps. */
static void cpu_gcc_beats_svd(void **state) {
  (void)state;
  mr_cfloat *k = phantom(0.02), *cal = calibration(k);
  mr_cfloat *m = malloc(sizeof *m * mr_compress_matrix_size(MR_COMPRESS_GCC, NC, NX));
  size_t nv;
  double svd, gcc;
  GPU_OK(mr_compress_matrix(gpu_test_cpu(), MR_COMPRESS_SVD, cal, NC, CAL, NX, 4, 0, m, &nv, &svd,
                            TERR));
  GPU_OK(mr_compress_matrix(gpu_test_cpu(), MR_COMPRESS_GCC, cal, NC, CAL, NX, 4, 0, m, &nv, &gcc,
                            TERR));
  print_message("4 channels: svd keeps %.4f, gcc %.4f\n", svd, gcc);
  assert_true(gcc >= svd - 1e-3);
  free(k);
  free(cal);
  free(m);
}

static void bad_input(void **state) {
  (void)state;
  mr_cfloat *k = phantom(0), *cal = calibration(k);
  mr_cfloat *m = malloc(sizeof *m * NC * NC);
  size_t nv;
  assert_int_equal(mr_compress_matrix(gpu_test_cpu(), MR_COMPRESS_SVD, cal, NC, CAL, NX, NC + 1, 0,
                                      m, &nv, NULL, TERR),
                   MR_EINVAL);
  assert_int_equal(mr_compress_matrix(gpu_test_cpu(), MR_COMPRESS_SVD, cal, NC, CAL, NX, 0, 0, m,
                                      &nv, NULL, TERR),
                   MR_EINVAL);
  memset(cal, 0, sizeof *cal * NC * CAL * NX);
  assert_int_equal(mr_compress_matrix(gpu_test_cpu(), MR_COMPRESS_SVD, cal, NC, CAL, NX, 4, 0, m,
                                      &nv, NULL, TERR),
                   MR_EDATA);
  assert_int_equal(
      mr_compress_apply(gpu_test_cpu(), MR_COMPRESS_SVD, m, NC, NC + 1, CAL, NX, cal, k, TERR),
      MR_EINVAL);
  free(k);
  free(cal);
  free(m);
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  mr_cfloat *k = phantom(0.02), *cal = calibration(k);
  mr_compress_method methods[] = {MR_COMPRESS_SVD, MR_COMPRESS_GCC};
  for (int i = 0; i < 2; i++) {
    mr_cfloat *m = malloc(sizeof *m * mr_compress_matrix_size(methods[i], NC, NX));
    size_t nv;
    GPU_OK(
        mr_compress_matrix(gpu_test_gpu(), methods[i], cal, NC, CAL, NX, 6, 0, m, &nv, NULL, TERR));
    mr_cfloat *want = compress(gpu_test_cpu(), methods[i], m, nv, k, NY, NX);
    mr_cfloat *got = compress(gpu_test_gpu(), methods[i], m, nv, k, NY, NX);
    double err = mr_test_rel_error_c(got, want, nv * NY * NX);
    print_message("method %d: GPU against CPU %.2e\n", i, err);
    assert_true(err < 1e-5);
    free(m);
    free(want);
    free(got);
  }
  free(k);
  free(cal);
}

/* --- against BART --- */

static void against_bart(mr_compress_method method, const char *flag) {
  enum { NV = 6 };
  mr_cfloat *k = phantom(0.02), *cal = calibration(k);
  mr_cfloat *m = malloc(sizeof *m * mr_compress_matrix_size(method, NC, NX));
  mr_cfloat *theirs = malloc(sizeof *theirs * NX * NY * NC);
  char cmd[64];
  size_t dims[4] = {NX, NY, 1, NC};
  snprintf(cmd, sizeof cmd, "cc %s -p %d", flag, NV);
  bart_run(cmd, dims, k, (size_t)NX * NY * NV, theirs);
  size_t nv;
  GPU_OK(mr_compress_matrix(gpu_test_cpu(), method, cal, NC, CAL, NX, NV, 0, m, &nv, NULL, TERR));
  mr_cfloat *ours = compress(gpu_test_cpu(), method, m, NV, k, NY, NX);
  double all = energy(k, (size_t)NX * NY * NC);
  double e_ours = energy(ours, (size_t)NX * NY * NV) / all;
  double e_theirs = energy(theirs, (size_t)NX * NY * NV) / all;
  float *full = rss(k, NC), *a = rss(ours, NV), *b = rss(theirs, NV);
  double ea = nrmse(a, full, (size_t)NX * NY), eb = nrmse(b, full, (size_t)NX * NY);
  double between = nrmse(a, b, (size_t)NX * NY);
  print_message("bart cc %s -p %d: energy kept ours %.4f bart %.4f; RSS NRMSE against all "
                "coils ours %.4f bart %.4f, ours against bart's %.4f\n",
                flag, NV, e_ours, e_theirs, ea, eb, between);
  assert_true(e_ours >= e_theirs - 0.005);
  assert_true(ea <= eb + 0.005);
  assert_true(between < 0.03);
  free(k);
  free(cal);
  free(m);
  free(theirs);
  free(ours);
  free(full);
  free(a);
  free(b);
}

static void bart_svd(void **state) {
  (void)state;
  against_bart(MR_COMPRESS_SVD, "-S");
}

static void bart_gcc(void **state) {
  (void)state;
  against_bart(MR_COMPRESS_GCC, "-G");
}

int main(int argc, char **argv) {
  int group = bart_test_init(argc, argv), bart = group == 2, cuda = group == 1;
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_svd),
      cmocka_unit_test(cpu_gcc),
      cmocka_unit_test(cpu_gcc_beats_svd),
      cmocka_unit_test(bad_input),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
  };
  const struct CMUnitTest bart_tests[] = {
      cmocka_unit_test(bart_svd),
      cmocka_unit_test(bart_gcc),
  };
  int failed = bart   ? cmocka_run_group_tests_name("compress_bart", bart_tests, NULL, NULL)
               : cuda ? cmocka_run_group_tests_name("compress_cuda", cuda_tests, NULL, NULL)
                      : cmocka_run_group_tests_name("compress_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
