/* noise_adjust: correlated coil noise comes out white (unit variance,
 * uncorrelated) at the noise lines' dwell time and at another one; noise
 * lines are not passed on; streams without noise pass unchanged; bad noise
 * fails clearly. A noise stored by one session ("store") whitens a later
 * scan that names it as its dependency exactly as the same noise lines in
 * the scan would; a missing one or one of other channels is a warning. */
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

#include "gadget_harness.h"
#include "kspace.h"
#include "noise_store.h"
#include "state_dir.h"
#include "test_support.h"

enum { NCH = 6, NS = 512 };

/* Noise with covariance B B^H: x = B g, g white complex Gaussian. */
typedef struct noise_source {
  double complex mix[NCH][NCH];
  double scale; /* standard deviation multiplier (dwell-time effect) */
  uint64_t state;
  double complex line[NS][NCH];
} noise_source;

static double gauss(uint64_t *s) {
  double u[2];
  for (int k = 0; k < 2; k++) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    u[k] = ((*s >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

static void next_line(noise_source *n) {
  for (int t = 0; t < NS; t++) {
    double complex g[NCH];
    for (int c = 0; c < NCH; c++) {
      double re = gauss(&n->state), im = gauss(&n->state);
      g[c] = (re + I * im) / sqrt(2.0);
    }
    for (int c = 0; c < NCH; c++) {
      double complex v = 0;
      for (int k = 0; k < NCH; k++)
        v += n->mix[c][k] * g[k];
      n->line[t][c] = v * n->scale;
    }
  }
}

static float complex line_value(int c, int s, void *arg) {
  const noise_source *n = arg;
  return (float complex)n->line[s][c];
}

static mr_message *noise_acq(noise_source *n, uint64_t flags, float dwell_us) {
  next_line(n);
  mr_message *m = mr_harness_acquisition(NS, NCH, 0, 0, flags, line_value, n);
  m->u.acq.head.sample_time_us = dwell_us;
  return m;
}

static void open_adjust(mr_harness *h) {
  assert_int_equal(mr_harness_open(h, "[{\"gadget\":\"noise_adjust\"}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(NS, 8, 1, NS, 8, 1)), 0);
}

static void mixing(noise_source *n, unsigned seed) {
  memset(n, 0, sizeof *n);
  srand(seed);
  /* coupling as between neighbouring coils: correlations up to about 0.4 */
  for (int c = 0; c < NCH; c++)
    for (int k = 0; k <= c; k++)
      n->mix[c][k] = k == c ? 1.0 + 0.5 * rand() / (double)RAND_MAX
                            : 0.3 * ((rand() / (double)RAND_MAX - 0.5) +
                                     I * (rand() / (double)RAND_MAX - 0.5));
  n->state = seed;
  n->scale = 1;
}

/* Covariance of the pushed-through lines: max |C - I| over entries. */
static double distance_from_identity(mr_harness *h) {
  double complex cov[NCH][NCH] = {{0}};
  size_t samples = 0;
  for (int m = 0; m < h->nout; m++) {
    const mr_acquisition *a = &h->out[m]->u.acq;
    for (int t = 0; t < NS; t++)
      for (int i = 0; i < NCH; i++)
        for (int j = 0; j < NCH; j++)
          cov[i][j] += a->data[i * NS + t] * conj(a->data[j * NS + t]);
    samples += NS;
  }
  double worst = 0;
  for (int i = 0; i < NCH; i++)
    for (int j = 0; j < NCH; j++) {
      double d = cabs(cov[i][j] / samples - (i == j ? 1 : 0));
      if (d > worst)
        worst = d;
    }
  return worst;
}

static void whitens(float noise_dwell, float data_dwell) {
  mr_harness h;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 7);
  open_adjust(&h);
  for (int l = 0; l < 16; l++)
    assert_int_equal(
        mr_harness_push(&h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), noise_dwell)),
        0);
  assert_int_equal(h.nout, 0); /* noise lines stay behind */
  /* noise power goes with bandwidth, the inverse dwell time */
  n->scale = sqrt(noise_dwell / data_dwell);
  for (int l = 0; l < 16; l++)
    assert_int_equal(mr_harness_push(&h, noise_acq(n, 0, data_dwell)), 0);
  assert_int_equal(h.nout, 16);
  double d = distance_from_identity(&h);
  print_message("dwell %g us noise, %g us data: whitened covariance within %.3f of I\n",
                noise_dwell, data_dwell, d);
  assert_true(d < 0.08);
  mr_harness_close(&h);
  free(n);
}

static void whitens_same_dwell(void **state) {
  (void)state;
  whitens(5.0f, 5.0f);
}

static void whitens_other_dwell(void **state) {
  (void)state;
  whitens(10.0f, 2.5f);
}

/* The k-space path (noise_adjust after accumulate; on the CPU a product
 * per run of consecutive sampled lines, in place) gives the samples the
 * line path (before accumulate) gives: lines sampled alone and in runs,
 * calibration-only and calibration-and-imaging lines, on a buffer of 20
 * lines x 512 samples x 6 channels. */
static void kspace_whitening_matches_lines(void **state) {
  (void)state;
  enum { NY = 20 };
  noise_source *n = malloc(sizeof *n);
  const char *chains[2] = {
      "[{\"gadget\":\"noise_adjust\"},{\"gadget\":\"accumulate\",\"trigger\":\"end\"}]",
      "[{\"gadget\":\"accumulate\",\"trigger\":\"end\"},{\"gadget\":\"noise_adjust\"}]"};
  mr_harness h[2];
  for (int c = 0; c < 2; c++) {
    mixing(n, 11);
    assert_int_equal(mr_harness_open(&h[c], chains[c], MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
    assert_int_equal(
        mr_harness_configure(&h[c], mr_harness_cartesian_header(NS, NY, 1, NS, NY, 1)), 0);
    for (int l = 0; l < 8; l++)
      assert_int_equal(
          mr_harness_push(&h[c], noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 5)), 0);
    for (int y = 0; y < NY; y++) {
      uint64_t flags = y >= 8 && y < 13 ? MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING)
                       : y == 14        ? MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)
                                        : 0;
      if (y % 3 != 0 && flags == 0)
        continue; /* undersampled outside the calibration lines */
      next_line(n);
      mr_message *m = mr_harness_acquisition(NS, NCH, y, 0, flags, line_value, n);
      m->u.acq.head.sample_time_us = 5;
      assert_int_equal(mr_harness_push(&h[c], m), 0);
    }
    assert_int_equal(mr_harness_flush(&h[c]), 0);
    assert_int_equal(h[c].nout, 1);
    assert_int_equal(h[c].out[0]->kind, MR_MSG_KSPACE);
  }
  const mr_kspace *a = h[0].out[0]->u.object.ptr, *b = h[1].out[0]->u.object.ptr;
  assert_non_null(a->calib);
  assert_non_null(b->calib);
  size_t count = (size_t)NCH * NY * NS;
  double err = mr_test_rel_error_c(b->data, a->data, count);
  double err_calib = mr_test_rel_error_c(b->calib->data, a->calib->data, count);
  print_message("k-space against line whitening: rel error %.2e, calibration part %.2e\n", err,
                err_calib);
  assert_true(err < 1e-6);
  assert_true(err_calib < 1e-6);
  for (int c = 0; c < 2; c++)
    mr_harness_close(&h[c]);
  free(n);
}

static void passes_without_noise(void **state) {
  (void)state;
  mr_harness h;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 3);
  open_adjust(&h);
  mr_message *m = noise_acq(n, 0, 5.0f);
  float complex first = m->u.acq.data[5];
  assert_int_equal(mr_harness_push(&h, m), 0);
  assert_int_equal(h.nout, 1);
  assert_true(h.out[0]->u.acq.data[5] == first);
  mr_harness_close(&h);
  free(n);
}

static void rejects_bad_noise(void **state) {
  (void)state;
  mr_harness h;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 4);
  /* channel 2 without noise */
  for (int k = 0; k < NCH; k++)
    n->mix[2][k] = 0;
  open_adjust(&h);
  assert_int_equal(
      mr_harness_push(&h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 5.0f)), 0);
  assert_int_equal(mr_harness_push(&h, noise_acq(n, 0, 5.0f)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "not positive definite"));
  mr_harness_close(&h);
  /* data with other channels than the noise */
  mixing(n, 4);
  open_adjust(&h);
  assert_int_equal(
      mr_harness_push(&h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 5.0f)), 0);
  mr_message *m = mr_harness_acquisition(NS, NCH - 1, 0, 0, 0, NULL, NULL);
  assert_int_equal(mr_harness_push(&h, m), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "channels"));
  mr_harness_close(&h);
  free(n);
}

/* Pulseq-based tools write noise-flagged lines of 0 samples x 0 channels:
 * they are skipped and counted (one warning at the end), and the real
 * noise lines around them still whiten the data. */
static void skips_empty_noise_lines(void **state) {
  (void)state;
  mr_harness h;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 5);
  open_adjust(&h);
  uint64_t noise = MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(0, 0, 0, 0, noise, NULL, NULL)), 0);
  for (int l = 0; l < 16; l++)
    assert_int_equal(mr_harness_push(&h, noise_acq(n, noise, 5.0f)), 0);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(0, 0, 0, 0, noise, NULL, NULL)), 0);
  for (int l = 0; l < 16; l++)
    assert_int_equal(mr_harness_push(&h, noise_acq(n, 0, 5.0f)), 0);
  assert_int_equal(h.nout, 16);
  assert_true(distance_from_identity(&h) < 0.08);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 17);
  assert_int_equal(h.out[16]->kind, MR_MSG_TEXT);
  assert_non_null(strstr(h.out[16]->u.text, "WARNING: noise_adjust: skipped 2 noise"));
  mr_harness_close(&h);
  free(n);
}

/* The Cartesian test header with a measurementInformation block. */
static const char *header_with(const char *info) {
  static char xml[4096];
  const char *base = mr_harness_cartesian_header(NS, 8, 1, NS, 8, 1);
  size_t open = strlen("<ismrmrdHeader>");
  snprintf(xml, sizeof xml, "%.*s<measurementInformation>%s</measurementInformation>%s",
           (int)open, base, info, base + open);
  return xml;
}

#define DEPENDS_ON(id)                                                                           \
  "<measurementID>scan_2</measurementID><measurementDependency><dependencyType>SenMap"          \
  "</dependencyType><measurementID>" id "</measurementID></measurementDependency>"              \
  "<measurementDependency><dependencyType>Noise</dependencyType><measurementID>" id             \
  "</measurementID></measurementDependency>"

static char state_dir[256];

static int open_state(void **state) {
  (void)state;
  mr_err e = {0};
  snprintf(state_dir, sizeof state_dir, "%s", mr_test_tmpdir("noise-adjust"));
  return mr_state_dir_open(state_dir, &mr_state_limits_default, &e);
}

static int close_state(void **state) {
  (void)state;
  mr_state_dir_close();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", state_dir);
  return system(cmd);
}

enum { NOISE_LINES = 16, DATA_LINES = 8 };

/* A noise-only session with "store", as the measurement id noise_1. */
static void store_noise_session(noise_source *n) {
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"noise_adjust\",\"store\":true}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(
      mr_harness_configure(&h, header_with("<measurementID>noise_1</measurementID>")), 0);
  for (int l = 0; l < NOISE_LINES; l++)
    assert_int_equal(
        mr_harness_push(&h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 10.0f)), 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 0); /* a noise session answers nothing */
  mr_harness_close(&h);
}

/* DATA_LINES lines of nch channels at 2.5 us (noise from n, or smooth
 * lines: mr_harness_smooth_line) through a scan session whose header says
 * info; with noise_lines, the noise comes first in the scan. */
static void scan_session(mr_harness *h, const char *info, noise_source *n, int noise_lines,
                         int nch, int smooth) {
  assert_int_equal(mr_harness_open(h, "[{\"gadget\":\"noise_adjust\"}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_equal(mr_harness_configure(h, header_with(info)), 0);
  for (int l = 0; l < noise_lines; l++)
    assert_int_equal(
        mr_harness_push(h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 10.0f)), 0);
  n->scale = 2; /* sqrt(10 / 2.5): the scan's wider bandwidth */
  for (int l = 0; l < DATA_LINES; l++) {
    mr_message *m = !smooth ? noise_acq(n, 0, 2.5f)
                            : mr_harness_acquisition(NS, nch, l, 0, 0, mr_harness_smooth_line, &l);
    m->u.acq.head.sample_time_us = 2.5f;
    assert_int_equal(mr_harness_push(h, m), 0);
  }
  assert_int_equal(mr_harness_flush(h), 0);
}

static void stored_noise_whitens_like_scan_noise(void **state) {
  (void)state;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 11);
  store_noise_session(n);
  /* The imaging scan names it and brings no noise of its own. */
  mr_harness stored, inscan;
  scan_session(&stored, DEPENDS_ON("noise_1"), n, 0, NCH, 0);
  /* The same noise lines and data in one scan. */
  mixing(n, 11);
  scan_session(&inscan, "", n, NOISE_LINES, NCH, 0);
  assert_int_equal(stored.nout, DATA_LINES);
  assert_int_equal(inscan.nout, DATA_LINES);
  for (int l = 0; l < DATA_LINES; l++)
    assert_memory_equal(stored.out[l]->u.acq.data, inscan.out[l]->u.acq.data,
                        NS * NCH * sizeof(float complex));
  double d = distance_from_identity(&stored);
  print_message("stored noise, other dwell time: whitened covariance within %.3f of I\n", d);
  assert_true(d < 0.1);
  mr_harness_close(&stored);
  mr_harness_close(&inscan);
  free(n);
}

/* A missing noise and one of other channels: a warning, and the data as
 * it came. */
static void unusable_stored_noise_warns(void **state) {
  (void)state;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 12);
  store_noise_session(n);
  static const struct {
    const char *info;
    int nch;
    const char *warning;
  } cases[] = {
      {DEPENDS_ON("noise_9"), NCH, "noise measurement 'noise_9' is not stored: no prewhitening"},
      {DEPENDS_ON("noise_1"), NCH - 2,
       "stored noise measurement 'noise_1' has 6 channels, the scan 4: no prewhitening"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mr_harness h;
    scan_session(&h, cases[i].info, n, 0, cases[i].nch, 1);
    assert_int_equal(h.nout, DATA_LINES + 1);
    assert_int_equal(h.out[0]->kind, MR_MSG_TEXT);
    assert_non_null(strstr(h.out[0]->u.text, cases[i].warning));
    int e1 = 3;
    assert_true(h.out[1 + e1]->u.acq.data[5] == mr_harness_smooth_line(0, 5, &e1));
    mr_harness_close(&h);
  }
  free(n);
}

/* "store" without a measurementID to store under fails; without a state
 * directory too. */
static void store_needs_an_id_and_a_store(void **state) {
  (void)state;
  noise_source *n = malloc(sizeof *n);
  mixing(n, 13);
  for (int with_dir = 1; with_dir >= 0; with_dir--) {
    if (!with_dir)
      mr_state_dir_close();
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"noise_adjust\",\"store\":true}]",
                                     MR_KIND_BIT(MR_MSG_ACQUISITION)),
                     0);
    assert_int_equal(mr_harness_configure(&h, header_with(with_dir ? "" : "<measurementID>x"
                                                                          "</measurementID>")),
                     0);
    assert_int_equal(
        mr_harness_push(&h, noise_acq(n, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT), 5.0f)), 0);
    assert_true(mr_harness_flush(&h) < 0);
    assert_non_null(strstr(h.err.msg, with_dir ? "no measurementInformation/measurementID"
                                               : "--state-dir"));
    mr_harness_close(&h);
  }
  free(n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(whitens_same_dwell),
      cmocka_unit_test(whitens_other_dwell),
      cmocka_unit_test(kspace_whitening_matches_lines),
      cmocka_unit_test(passes_without_noise),
      cmocka_unit_test(rejects_bad_noise),
      cmocka_unit_test(skips_empty_noise_lines),
      cmocka_unit_test_setup_teardown(stored_noise_whitens_like_scan_noise, open_state,
                                      close_state),
      cmocka_unit_test_setup_teardown(unusable_stored_noise_warns, open_state, close_state),
      cmocka_unit_test_setup_teardown(store_needs_an_id_and_a_store, open_state, close_state),
  };
  return cmocka_run_group_tests_name("gadgets_noise_adjust", tests, NULL, NULL);
}
