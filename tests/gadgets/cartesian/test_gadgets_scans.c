/* Features of real scans through the installed `cartesian` config (CPU),
 * on generated data (a multi-coil phantom's k-space, grappa_phantom.h)
 * sent line by line as a scanner does: several slices (interleaved line by
 * line), echoes (one image each, only the last echo's last line flagged, as
 * Siemens scans are), averages, sets, navigator and phase-correction lines
 * in between (kept out), partial Fourier (zero-filled, or homodyne with
 * the partial_fourier gadget) and an asymmetric echo; each against the
 * image of the fully sampled k-space. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "gadget_harness.h"
#include "grappa_phantom.h"
#include "test_support.h"

enum { N = 64, NC = 4 };

/* One line as a scanner sends it: k-space line y of the phantom, times
 * scale, plus sign times a fixed pseudo-random noise, from readout sample
 * first on. */
typedef struct line_src {
  const mr_cfloat *k;
  int y, first;
  float scale, sign;
} line_src;

static float noise_at(int c, int s, int y) {
  unsigned h = (unsigned)(c * 7919 + s * 104729 + y * 1299709) * 2654435761u;
  return ((float)(h >> 8) / (float)(1u << 24) - 0.5f) * 0.02f;
}

static float complex line_value(int c, int s, void *arg) {
  const line_src *l = arg;
  int x = l->first + s;
  return l->scale * l->k[((size_t)c * N + l->y) * N + x] +
         l->sign * (noise_at(c, x, l->y) + I * noise_at(c + 11, x, l->y));
}

typedef struct counters {
  int slice, contrast, set, average;
} counters;

static mr_message *scan_line(const mr_cfloat *k, int y, const counters *n, float scale,
                             float sign, uint64_t flags) {
  line_src l = {k, y, 0, scale, sign};
  mr_message *m = mr_harness_acquisition(N, NC, y, 0, flags, line_value, &l);
  m->u.acq.head.idx.slice = (uint16_t)n->slice;
  m->u.acq.head.idx.contrast = (uint16_t)n->contrast;
  m->u.acq.head.idx.set = (uint16_t)n->set;
  m->u.acq.head.idx.average = (uint16_t)n->average;
  return m;
}

static void push(mr_harness *h, mr_message *m) {
  if (mr_harness_push(h, m) != 0)
    fail_msg("push: %s", h->err.msg);
}

/* A Cartesian N x N header whose e1 lines run from e1_min (partial
 * Fourier) to N - 1, centre N / 2; accelerated by accel (embedded ACS
 * lines) when above 1. */
static const char *header(int e1_min, int accel) {
  static char xml[2048];
  char parallel[512] = "";
  if (accel > 1)
    snprintf(parallel, sizeof parallel,
             "<parallelImaging><accelerationFactor><kspace_encoding_step_1>%d"
             "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
             "</accelerationFactor><calibrationMode>embedded</calibrationMode>"
             "</parallelImaging>",
             accel);
  snprintf(xml, sizeof xml,
           "<ismrmrdHeader><encoding>"
           "<encodedSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>5</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>5</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>%d</minimum><maximum>%d</maximum>"
           "<center>%d</center></kspace_encoding_step_1></encodingLimits>"
           "<trajectory>cartesian</trajectory>%s</encoding></ismrmrdHeader>",
           N, N, N, N, N, N, N, N, e1_min, N - 1, N / 2, parallel);
  return xml;
}

/* An installed config's gadgets, with partial_fourier before fft when
 * asked (malloc'd JSON). */
static char *installed_chain(const char *config, int homodyne) {
  cJSON *doc = mr_harness_installed_config(config);
  assert_non_null(doc);
  cJSON *gadgets = cJSON_GetObjectItem(doc, "gadgets"), *chain = cJSON_CreateArray();
  for (int i = 0; i < cJSON_GetArraySize(gadgets); i++) {
    cJSON *g = cJSON_GetArrayItem(gadgets, i);
    if (homodyne && strcmp(cJSON_GetObjectItem(g, "gadget")->valuestring, "fft") == 0)
      cJSON_AddItemToArray(chain, cJSON_Parse("{\"gadget\":\"partial_fourier\"}"));
    cJSON_AddItemToArray(chain, cJSON_Duplicate(g, 1));
  }
  char *out = cJSON_PrintUnformatted(chain);
  cJSON_Delete(chain);
  cJSON_Delete(doc);
  return out;
}

typedef struct scan {
  mr_harness h;
  mr_cfloat *k; /* the phantom's k-space [coil][line][ro] */
} scan;

static void scan_open_config(scan *s, const char *config, int homodyne, int e1_min, int accel) {
  char *chain = installed_chain(config, homodyne);
  assert_int_equal(mr_harness_open(&s->h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  free(chain);
  assert_int_equal(mr_harness_configure(&s->h, header(e1_min, accel)), 0);
  s->k = malloc(sizeof *s->k * NC * N * N);
  assert_int_equal(grappa_phantom_kspace(s->h.device, N, N, NC, 0.0, 3, s->k), 0);
}

static void scan_open(scan *s, int homodyne, int e1_min) {
  scan_open_config(s, "cartesian", homodyne, e1_min, 1);
}

static void scan_close(scan *s) {
  mr_harness_close(&s->h);
  free(s->k);
}

static const mr_image *image(const scan *s, int i) {
  assert_true(i < s->h.nout);
  assert_int_equal(s->h.out[i]->kind, MR_MSG_IMAGE);
  const mr_image *im = &s->h.out[i]->u.image;
  assert_int_equal(im->head.matrix_size[0], N);
  assert_int_equal(im->head.matrix_size[1], N);
  return im;
}

/* The image of the fully sampled k-space through config (malloc'd
 * N x N). */
static float *reference_of(const char *config) {
  scan s;
  scan_open_config(&s, config, 0, 0, 1);
  counters n = {0};
  for (int y = 0; y < N; y++)
    push(&s.h, scan_line(s.k, y, &n, 1, 0, y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
  assert_int_equal(s.h.nout, 1);
  float *ref = malloc(sizeof *ref * N * N);
  memcpy(ref, image(&s, 0)->data, sizeof *ref * N * N);
  scan_close(&s);
  return ref;
}

static float *reference(void) { return reference_of("cartesian"); }

/* How far image i is from ref, and its intensity relative to ref's. */
static double error_of(const scan *s, int i, const float *ref, double *scale) {
  const float *px = image(s, i)->data;
  double ab = 0, bb = 0;
  for (size_t p = 0; p < (size_t)N * N; p++) {
    ab += (double)px[p] * ref[p];
    bb += (double)ref[p] * ref[p];
  }
  if (scale != NULL)
    *scale = ab / bb;
  return mr_test_nrmse_scaled(px, ref, (size_t)N * N);
}

static void slices_interleaved(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  scan_open(&s, 0, 0);
  for (int y = 0; y < N; y++)
    for (int sl = 0; sl < 3; sl++) {
      counters n = {.slice = sl};
      push(&s.h, scan_line(s.k, y, &n, (float)(sl + 1), 0,
                           y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
    }
  assert_int_equal(s.h.nout, 3);
  for (int i = 0; i < 3; i++) {
    double scale, e = error_of(&s, i, ref, &scale);
    print_message("slice %d: NRMSE %.2e, intensity x%.3f\n", i, e, scale);
    assert_int_equal(image(&s, i)->head.slice, i);
    assert_true(e < 1e-5);
    assert_true(fabs(scale - (i + 1)) < 1e-3);
  }
  scan_close(&s);
  free(ref);
}

/* Three echoes per line, decaying; only the last echo of the last line
 * carries LAST_IN_SLICE: every echo's image comes then, in echo order. */
static void echoes_one_image_each(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  scan_open(&s, 0, 0);
  for (int y = 0; y < N; y++)
    for (int c = 0; c < 3; c++) {
      counters n = {.contrast = c};
      push(&s.h, scan_line(s.k, y, &n, expf(-0.5f * (float)c), 0,
                           y == N - 1 && c == 2 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
    }
  assert_int_equal(s.h.nout, 3); /* before the end of the stream */
  for (int i = 0; i < 3; i++) {
    double scale, e = error_of(&s, i, ref, &scale);
    print_message("echo %d: NRMSE %.2e, intensity x%.3f\n", i, e, scale);
    assert_int_equal(image(&s, i)->head.contrast, i);
    assert_true(e < 1e-5);
    assert_true(fabs(scale - exp(-0.5 * i)) < 1e-3);
  }
  scan_close(&s);
  free(ref);
}

/* Two sets (say, two flow encodings) line by line, each set's last line
 * flagged. */
static void sets_one_image_each(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  scan_open(&s, 0, 0);
  for (int y = 0; y < N; y++)
    for (int set = 0; set < 2; set++) {
      counters n = {.set = set};
      push(&s.h, scan_line(s.k, y, &n, set == 0 ? 1.0f : 0.5f, 0,
                           y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
    }
  assert_int_equal(s.h.nout, 2);
  for (int i = 0; i < 2; i++) {
    double scale, e = error_of(&s, i, ref, &scale);
    assert_int_equal(image(&s, i)->head.set, i);
    assert_true(e < 1e-5);
    assert_true(fabs(scale - (i == 0 ? 1.0 : 0.5)) < 1e-3);
  }
  scan_close(&s);
  free(ref);
}

/* Two averages with opposite noise average to the noiseless image; one
 * alone is noisy. */
static void averages_are_averaged(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  double alone = 0;
  for (int navg = 1; navg <= 2; navg++) {
    scan_open(&s, 0, 0);
    for (int a = 0; a < navg; a++)
      for (int y = 0; y < N; y++) {
        counters n = {.average = a};
        push(&s.h, scan_line(s.k, y, &n, 1, a == 0 ? 1.0f : -1.0f,
                             y == N - 1 && a == navg - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)
                                                         : 0));
      }
    assert_int_equal(s.h.nout, 1);
    double e = error_of(&s, 0, ref, NULL);
    print_message("%d average(s): NRMSE %.2e\n", navg, e);
    if (navg == 1)
      alone = e;
    else
      assert_true(e < 1e-5 && alone > 100 * e);
    scan_close(&s);
  }
  free(ref);
}

/* Navigator and phase-correction lines (EPI's, with the counters of image
 * lines and other samples) between the image lines change nothing. */
static void navigators_and_phase_correction_kept_out(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  scan_open(&s, 0, 0);
  counters n = {0};
  for (int y = 0; y < N; y++) {
    if (y % 8 == 0) {
      push(&s.h, scan_line(s.k, N - 1 - y, &n, 50, 1, MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA)));
      push(&s.h, scan_line(s.k, y, &n, -20, 1, MR_FLAG(ISMRMRD_ACQ_IS_NAVIGATION_DATA)));
    }
    push(&s.h, scan_line(s.k, y, &n, 1, 0, y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
  }
  assert_int_equal(s.h.nout, 1);
  double scale, e = error_of(&s, 0, ref, &scale);
  assert_true(e < 1e-6 && fabs(scale - 1) < 1e-4);
  scan_close(&s);
  free(ref);
}

/* 5/8 partial Fourier along e1 (the first 3/8 of the lines not acquired):
 * zero-filled by default, closer with homodyne (partial_fourier). */
static void partial_fourier_zero_filled_and_homodyne(void **state) {
  (void)state;
  float *ref = reference();
  int first = 3 * N / 8;
  double err[2];
  for (int homodyne = 0; homodyne < 2; homodyne++) {
    scan s;
    scan_open(&s, homodyne, first);
    counters n = {0};
    for (int y = first; y < N; y++)
      push(&s.h, scan_line(s.k, y, &n, 1, 0,
                           y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
    assert_int_equal(s.h.nout, 1);
    double scale;
    err[homodyne] = error_of(&s, 0, ref, &scale);
    print_message("5/8 partial Fourier, %s: NRMSE %.4f, intensity x%.3f\n",
                  homodyne ? "homodyne" : "zero-filled", err[homodyne], scale);
    assert_true(fabs(scale - 1) < 0.2); /* in place, not shifted or halved */
    scan_close(&s);
  }
  assert_true(err[0] < 0.35);
  assert_true(err[1] < 0.3 * err[0]);
  free(ref);
}

/* The real scan of issue 14: GRAPPA (R 2, 16 embedded ACS lines) and 5/8
 * partial Fourier through the installed grappa config; the lines the scan
 * left out stay out of the GRAPPA filling, for homodyne. */
static void grappa_with_partial_fourier(void **state) {
  (void)state;
  float *ref = reference_of("grappa");
  int first = 3 * N / 8, R = 2;
  double err[2];
  for (int homodyne = 0; homodyne < 2; homodyne++) {
    scan s;
    scan_open_config(&s, "grappa", homodyne, first, R);
    counters n = {0};
    for (int y = first; y < N; y++) {
      int acs = y >= N / 2 - 8 && y < N / 2 + 8, imaging = y % R == 0;
      if (!acs && !imaging)
        continue;
      uint64_t f = acs ? MR_FLAG(imaging ? ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING
                                         : ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)
                       : 0;
      push(&s.h, scan_line(s.k, y, &n, 1, 0,
                           f | (y == N - R ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0)));
    }
    assert_int_equal(s.h.nout, 1);
    double scale;
    err[homodyne] = error_of(&s, 0, ref, &scale);
    print_message("GRAPPA R 2 and 5/8 partial Fourier, %s: NRMSE %.4f, intensity x%.3f\n",
                  homodyne ? "homodyne" : "zero-filled", err[homodyne], scale);
    assert_true(fabs(scale - 1) < 0.2);
    scan_close(&s);
  }
  assert_true(err[0] < 0.35);
  assert_true(err[1] < 0.5 * err[0]);
  free(ref);
}

/* An asymmetric echo: the readout starts at N / 4, its centre sample is
 * N / 4 (placed at N / 2); the missing start is zero-filled. */
static void asymmetric_echo(void **state) {
  (void)state;
  float *ref = reference();
  scan s;
  scan_open(&s, 0, 0);
  int first = N / 4, ns = N - first;
  for (int y = 0; y < N; y++) {
    line_src l = {s.k, y, first, 1, 0};
    mr_message *m = mr_harness_acquisition(
        ns, NC, y, 0, y == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0, line_value, &l);
    m->u.acq.head.center_sample = (uint16_t)(N / 2 - first);
    push(&s.h, m);
  }
  assert_int_equal(s.h.nout, 1);
  double scale, e = error_of(&s, 0, ref, &scale);
  print_message("asymmetric echo (3/4 of the readout): NRMSE %.4f, intensity x%.3f\n", e, scale);
  assert_true(e < 0.35 && fabs(scale - 1) < 0.2);
  scan_close(&s);
  free(ref);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(slices_interleaved),
      cmocka_unit_test(echoes_one_image_each),
      cmocka_unit_test(sets_one_image_each),
      cmocka_unit_test(averages_are_averaged),
      cmocka_unit_test(navigators_and_phase_correction_kept_out),
      cmocka_unit_test(partial_fourier_zero_filled_and_homodyne),
      cmocka_unit_test(grappa_with_partial_fourier),
      cmocka_unit_test(asymmetric_echo),
  };
  return cmocka_run_group_tests_name("gadgets_scans", tests, NULL, NULL);
}
