/* epi.h: readouts on the grid regrid to themselves (reversed ones to their
 * mirror image); ramp-sampled readouts of an object inside the middle half
 * of the field of view regrid to its uniform k-space, with the correction
 * of the reversed profiles; the truncated SVD keeps noise bounded where the
 * plain pseudo-inverse explodes; with --cuda, the GPU against the CPU. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "epi.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { NX = 64, COLS = 10 };

/* A trapezoid's sample positions: ramps of 0.2 of the readout, NX samples
 * over it, the flat top 1.25 grid steps apart; symmetric about 0. */
static void ramp_positions(double *fwd, double *rev) {
  double up = 0.2, flat = 0.6, area = 0.5 * up + flat + 0.5 * up;
  for (int q = 0; q < NX; q++) {
    double t = (q + 0.5) / NX, k;
    if (t <= up)
      k = 0.5 / up * t * t;
    else if (t <= up + flat)
      k = 0.5 * up + (t - up);
    else
      k = area - 0.5 / up * (1 - t) * (1 - t);
    fwd[q] = NX / area * (k - 0.5 * area);
    rev[q] = -fwd[q];
  }
}

/* Random profiles (COLS of them) inside the middle half of x, zero
 * outside; their samples at positions k; their uniform k-space. */
static void object(const double *k, mr_cfloat *prof, mr_cfloat *samples, mr_cfloat *uniform,
                   unsigned seed) {
  gpu_test_random(prof, (size_t)NX * COLS, seed);
  for (int c = 0; c < COLS; c++)
    for (int j = 0; j < NX; j++) {
      if (j < NX / 4 || j >= 3 * NX / 4)
        prof[c * NX + j] = 0;
    }
  for (int c = 0; c < COLS; c++)
    for (int q = 0; q < NX; q++) {
      double complex s = 0, u = 0;
      for (int j = 0; j < NX; j++) {
        s += prof[c * NX + j] * cexp(-2 * M_PI * I * k[q] * (j - NX / 2) / NX);
        u += prof[c * NX + j] * cexp(-2 * M_PI * I * (double)(q - NX / 2) * (j - NX / 2) / NX);
      }
      samples[c * NX + q] = (mr_cfloat)s;
      uniform[c * NX + q] = (mr_cfloat)u;
    }
}

static mr_epi_plan *plan(mr_device *dev, const double *fwd, const double *rev, double rcond) {
  mr_epi_readout r = {.samples = NX, .nx = NX, .forward = fwd, .reverse = rev, .rcond = rcond};
  mr_epi_plan *p = NULL;
  GPU_OK(mr_epi_plan_create(dev, &r, &p, TERR));
  return p;
}

/* Regrids host columns (nfwd forward first) on p's device into out. */
static void regrid(mr_epi_plan *p, const mr_cfloat *in, int nfwd, int nrev,
                   const mr_cfloat *correction, mr_cfloat *out) {
  mr_device *dev = mr_epi_plan_device(p);
  size_t bytes = (size_t)NX * (size_t)(nfwd + nrev) * sizeof(mr_cfloat);
  mr_buf *a = gpu_test_upload(dev, in, bytes), *b = NULL;
  GPU_OK(mr_buf_create(dev, bytes, &b, TERR));
  GPU_OK(mr_epi_regrid(p, mr_buf_data(a), nfwd, nrev, correction, mr_buf_data(b), TERR));
  GPU_OK(mr_buf_download(b, 0, out, bytes, TERR));
  mr_buf_destroy(a);
  mr_buf_destroy(b);
}

static void on_grid(mr_device *dev) {
  double fwd[NX], rev[NX];
  for (int q = 0; q < NX; q++) {
    fwd[q] = q - NX / 2;
    rev[q] = (NX - 1 - q) - NX / 2;
  }
  mr_epi_plan *p = plan(dev, fwd, rev, 1e-3);
  assert_int_equal(mr_epi_plan_rank(p, 0), NX);
  assert_int_equal(mr_epi_plan_rank(p, 1), NX);
  mr_cfloat in[NX * COLS], out[NX * COLS], want[NX * COLS];
  gpu_test_random(in, NX * COLS, 3);
  regrid(p, in, 4, COLS - 4, NULL, out);
  memcpy(want, in, sizeof want);
  for (int c = 4; c < COLS; c++)
    for (int q = 0; q < NX; q++)
      want[c * NX + q] = in[c * NX + NX - 1 - q];
  assert_true(mr_test_rel_error_c(out, want, NX * COLS) < 1e-5);
  mr_epi_plan_destroy(p);
}

static void cpu_on_grid(void **state) {
  (void)state;
  on_grid(gpu_test_cpu());
}

/* Forward and reversed ramp-sampled readouts of the object, the reversed
 * ones' profiles carrying a phase error that the correction removes. */
static void ramp(mr_device *dev) {
  double fwd[NX], rev[NX];
  ramp_positions(fwd, rev);
  mr_epi_plan *p = plan(dev, fwd, rev, 1e-3);
  print_message("ramp: kept %d / %d singular values\n", mr_epi_plan_rank(p, 0), NX);
  assert_true(mr_epi_plan_rank(p, 0) < NX); /* the edges of x are not determined */
  static mr_cfloat prof[NX * COLS], in[NX * COLS], want[NX * COLS], out[NX * COLS];
  static mr_cfloat prof_r[NX * COLS], in_r[NX * COLS], want_r[NX * COLS];
  object(fwd, prof, in, want, 5);
  /* the reversed readouts see the profiles times exp(i (0.6 + 3 x / NX)) */
  object(rev, prof_r, in_r, want_r, 7);
  mr_cfloat error[NX], correction[NX];
  for (int j = 0; j < NX; j++) {
    error[j] = (mr_cfloat)cexp(I * (0.6 + 3.0 * (j - NX / 2) / NX));
    correction[j] = conjf(error[j]);
  }
  for (int c = 0; c < COLS; c++)
    for (int q = 0; q < NX; q++) {
      double complex s = 0;
      for (int j = 0; j < NX; j++)
        s += prof_r[c * NX + j] * error[j] * cexp(-2 * M_PI * I * rev[q] * (j - NX / 2) / NX);
      in_r[c * NX + q] = (mr_cfloat)s;
    }
  /* 6 forward and 4 reversed columns */
  static mr_cfloat batch[NX * COLS], expect[NX * COLS];
  memcpy(batch, in, sizeof(mr_cfloat) * NX * 6);
  memcpy(batch + NX * 6, in_r, sizeof(mr_cfloat) * NX * 4);
  memcpy(expect, want, sizeof(mr_cfloat) * NX * 6);
  memcpy(expect + NX * 6, want_r, sizeof(mr_cfloat) * NX * 4);
  regrid(p, batch, 6, 4, correction, out);
  double e = mr_test_rel_error_c(out, expect, NX * COLS);
  print_message("ramp: regridded k-space error %.2e\n", e);
  assert_true(e < 5e-3);
  /* the navigators' profiles, on the host */
  mr_epi_profiles_host(p, 0, in, COLS, out);
  e = mr_test_rel_error_c(out, prof, NX * COLS);
  print_message("ramp: profile error %.2e\n", e);
  assert_true(e < 5e-3);
  mr_epi_plan_destroy(p);
}

static void cpu_ramp(void **state) {
  (void)state;
  ramp(gpu_test_cpu());
}

/* White noise through the operator: bounded with the truncated SVD, some
 * orders of magnitude up through a pseudo-inverse at machine precision. */
static double noise_gain(double rcond) {
  double fwd[NX], rev[NX];
  ramp_positions(fwd, rev);
  mr_epi_plan *p = plan(gpu_test_cpu(), fwd, rev, rcond);
  static mr_cfloat in[NX * COLS], out[NX * COLS];
  gpu_test_random(in, NX * COLS, 9);
  mr_epi_profiles_host(p, 0, in, COLS, out);
  double a = 0, b = 0;
  for (int i = 0; i < NX * COLS; i++) {
    a += cabsf(in[i]) * cabsf(in[i]);
    b += cabsf(out[i]) * cabsf(out[i]) * NX; /* profiles are 1/NX of samples */
  }
  mr_epi_plan_destroy(p);
  return sqrt(b / a);
}

static void cpu_noise_bounded(void **state) {
  (void)state;
  double regularised = noise_gain(1e-3), plain = noise_gain(1e-15);
  print_message("noise gain: %.3g regularised, %.3g at machine precision\n", regularised, plain);
  assert_true(regularised < 10);
  assert_true(plain > 100 * regularised);
}

static void bad_arguments(void **state) {
  (void)state;
  double k[NX] = {0};
  mr_epi_readout r = {.samples = NX, .nx = NX, .forward = k, .reverse = k, .rcond = 0};
  mr_epi_plan *p = NULL;
  assert_int_equal(mr_epi_plan_create(gpu_test_cpu(), &r, &p, TERR), MR_EINVAL);
  r.rcond = 1e-3;
  r.samples = 0;
  assert_int_equal(mr_epi_plan_create(gpu_test_cpu(), &r, &p, TERR), MR_EINVAL);
  r.samples = NX;
  k[3] = NAN;
  assert_int_equal(mr_epi_plan_create(gpu_test_cpu(), &r, &p, TERR), MR_EDATA);
  assert_null(p);
}

/* The plan's host matrices count against the server's memory budget (a
 * client's header chooses their size, up to 4096 x 4096): refused with
 * MR_ELIMIT and a line naming them when they do not fit, and nothing kept
 * when the plan is refused half way (the DFT fits, the first operator does
 * not). */
static void cpu_plan_within_budget(void **state) {
  (void)state;
  enum { N = 512 }; /* the DFT and each operator: 2 MiB */
  static double fwd[N], rev[N];
  for (int q = 0; q < N; q++) {
    fwd[q] = q - N / 2;
    rev[q] = (N - 1 - q) - N / 2;
  }
  mr_epi_readout r = {.samples = N, .nx = N, .forward = fwd, .reverse = rev, .rcond = 1e-3};
  uint64_t before = mr_budget_used();
  for (int mib = 1; mib <= 3; mib += 2) {
    mr_budget_set(before + ((uint64_t)mib << 20));
    mr_epi_plan *p = NULL;
    assert_int_equal(mr_epi_plan_create(gpu_test_cpu(), &r, &p, TERR), MR_ELIMIT);
    assert_non_null(strstr(mr_test_last_error(), "EPI regridding plan"));
    assert_null(p);
    assert_int_equal(mr_budget_used(), before);
  }
  mr_budget_set(0);
}

/* The GPU's regridding against the CPU's. */
static void cuda_matches_cpu(void **state) {
  (void)state;
  on_grid(gpu_test_gpu());
  ramp(gpu_test_gpu());
  double fwd[NX], rev[NX];
  ramp_positions(fwd, rev);
  mr_epi_plan *c = plan(gpu_test_cpu(), fwd, rev, 1e-3), *g = plan(gpu_test_gpu(), fwd, rev, 1e-3);
  static mr_cfloat in[NX * COLS], want[NX * COLS], got[NX * COLS];
  mr_cfloat correction[NX];
  gpu_test_random(in, NX * COLS, 11);
  gpu_test_random(correction, NX, 12);
  regrid(c, in, 3, COLS - 3, correction, want);
  regrid(g, in, 3, COLS - 3, correction, got);
  assert_true(mr_test_rel_error_c(got, want, NX * COLS) < 1e-5);
  mr_epi_plan_destroy(c);
  mr_epi_plan_destroy(g);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_on_grid),
      cmocka_unit_test(cpu_ramp),
      cmocka_unit_test(cpu_noise_bounded),
      cmocka_unit_test(bad_arguments),
      cmocka_unit_test(cpu_plan_within_budget),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("epi_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("epi_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
