/* remove_oversampling: the readout cropped to the recon field of view,
 * checked against a double-precision DFT; lines that must pass untouched. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "test_support.h"

#define NS 32
#define NCH 3

/* Readout k-space of a profile with energy everywhere, so the crop
 * matters: k = DFT(x), x random per channel. */
static double complex profile[NCH][NS], kline[NCH][NS];

static void make_line(void) {
  srand(7);
  for (int c = 0; c < NCH; c++) {
    for (int s = 0; s < NS; s++)
      profile[c][s] = (rand() / (double)RAND_MAX - 0.5) + I * (rand() / (double)RAND_MAX - 0.5);
    mr_test_centered_dft(profile[c], kline[c], NS, 1, 1, -1);
  }
}

static float complex from_kline(int c, int s, void *arg) {
  (void)arg;
  return (float complex)kline[c][s];
}

/* A line of NS samples cropped to nout (the recon FOV nout/NS of the
 * encoded one): the central nout of the profile, back to k-space, with the
 * unitary scaling of an NS-point inverse then an nout-point forward. */
static void check_crop(int nout) {
  make_line();
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"remove_oversampling\"}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(NS, 8, 1, nout, 8, 1)), 0);
  mr_message *m = mr_harness_acquisition(NS, NCH, 3, 0, 0, from_kline, NULL);
  m->u.acq.head.center_sample = NS / 2;
  m->u.acq.head.sample_time_us = 5.0f;
  assert_int_equal(mr_harness_push(&h, m), 0);
  assert_int_equal(h.nout, 1);
  const mr_acquisition *a = &h.out[0]->u.acq;
  assert_int_equal(a->head.number_of_samples, nout);
  assert_int_equal(a->head.center_sample, lround(NS / 2 * (double)nout / NS));
  assert_float_equal(a->head.sample_time_us, 5.0 * NS / nout, 1e-4);
  assert_int_equal(a->head.idx.kspace_encode_step_1, 3);
  for (int c = 0; c < NCH; c++) {
    double complex crop[NS], want[NS];
    for (int s = 0; s < nout; s++)
      crop[s] = profile[c][s + NS / 2 - nout / 2];
    mr_test_centered_dft(crop, want, nout, 1, 1, -1);
    float complex wantf[NS];
    for (int s = 0; s < nout; s++)
      wantf[s] = (float complex)want[s];
    double err = mr_test_rel_error_c(a->data + c * nout, wantf, nout);
    assert_true(err < 1e-5);
  }
  mr_harness_close(&h);
}

/* 2x oversampled (encoded 32 x 8 over 64 mm, recon 16 x 8 over 32 mm):
 * the halving path (two transforms of 16). */
static void test_crops_to_recon_fov(void **state) {
  (void)state;
  check_crop(NS / 2);
}

/* Other factors, and an odd recon readout: the general path (an inverse
 * transform of 32, the central samples, a forward transform). */
static void test_crops_other_factors(void **state) {
  (void)state;
  check_crop(20);
  check_crop(15);
}

static void test_passes_what_it_must_not_touch(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"remove_oversampling\"}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(16, 8, 1, 8, 8, 1)), 0);
  mr_message *noise = mr_harness_acquisition(16, 2, 0, 0, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT),
                                             NULL, NULL);
  assert_int_equal(mr_harness_push(&h, noise), 0);
  assert_ptr_equal(h.out[0], noise);
  mr_harness_close(&h);
  /* No oversampling in the header: every line passes as it is. */
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"remove_oversampling\"}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(16, 8, 1, 16, 8, 1)), 0);
  mr_message *m = mr_harness_acquisition(16, 2, 0, 0, 0, NULL, NULL);
  assert_int_equal(mr_harness_push(&h, m), 0);
  assert_ptr_equal(h.out[0], m);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crops_to_recon_fov),
      cmocka_unit_test(test_crops_other_factors),
      cmocka_unit_test(test_passes_what_it_must_not_touch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
