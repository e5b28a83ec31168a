/* slice_grappa through the gadget list of configs/sms.json (on the CPU), on
 * scans of `reconclient simulate --multiband M --caipi S`: each separated
 * slice's image against the single-band reference reconstruction (the
 * reference lines alone through the same fft, coil_combine and image_out),
 * NRMSE <= 0.05; one image per slice with its slice index and position;
 * a single-band scan passing untouched; in-plane R 2 on top (GRAPPA after the separation),
 * its separation on the acquired lines alone against the whole k-space's; the target case (multiband 4, FOV/3, 32 coils) with the slice
 * leakage of its kernels; and the clear errors: no reference scan, a
 * multiband factor that does not fit the data, too few coils. */
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

#include "dataset.h"
#include "gadget_harness.h"
#include "cfloat.h"
#include "device.h"
#include "pool.h"
#include "kspace.h"
#include "simulate.h"
#include "slice_grappa.h"
#include "test_err.h"
#include "test_support.h"

#define CALIBRATION_FLAG (1ull << (ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION - 1))

static char dir[256];

static void simulate(const char *path, int n, int coils, int mb, int caipi) {
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = n, .coils = coils,
                      .multiband = mb, .caipi = caipi, .seed = 1, .path = path};
  mr_err err = {0};
  remove(path);
  if (mr_simulate(&o, &err) != 0)
    fail_msg("simulate: %s", err.msg);
}

/* The gadget list of configs/sms.json, as JSON text (malloc'd). */
static char *sms_chain(void) {
  cJSON *doc = mr_harness_installed_config("sms");
  assert_non_null(doc);
  char *out = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "gadgets"));
  cJSON_Delete(doc);
  return out;
}

/* ALL_R2: the collapsed acquisition's odd lines left out (in-plane R 2);
 * TWO_VOLUMES_R2: the same, its collapsed lines sent again as repetition 1
 * (a second fMRI volume, no new reference). */
enum feed { ALL, REFERENCE_ONLY, NO_REFERENCE, ALL_R2, TWO_VOLUMES_R2 };

typedef struct run {
  int rc;
  char error[512];
  int count;
  size_t pixels;
  float *images;
  ISMRMRD_ImageHeader heads[16];
} run;

enum { HEADER_BYTES = 16384 };

/* The scan h5 opened, its header copied into header with edits (NULL, or
 * from/to pairs ending in NULL) replacing text in it. */
static mr_dataset *open_edited(const char *h5, const char *const *edits,
                               char header[HEADER_BYTES]) {
  mr_err err = {0};
  mr_dataset *ds;
  if (mr_dataset_open(h5, "dataset", &ds, &err) != 0)
    fail_msg("%s", err.msg);
  snprintf(header, HEADER_BYTES, "%s", mr_dataset_header(ds));
  for (const char *const *e = edits; e != NULL && *e != NULL; e += 2) {
    char *at = strstr(header, e[0]), rest[HEADER_BYTES];
    assert_non_null(at);
    snprintf(rest, sizeof rest, "%s", at + strlen(e[0]));
    snprintf(at, HEADER_BYTES - (size_t)(at - header), "%s%s", e[1], rest);
  }
  return ds;
}

/* The scan through chain: every readout, or the reference's alone as plain
 * imaging lines (the single-band reconstruction), or all but the
 * reference. edits (NULL, or from/to pairs ending in NULL) replace text in
 * the header. With groups 2 the scan goes in twice as two slice groups of
 * a scan of twice the slices: reference slice j as slice 2 j + pass, the
 * collapsed lines as slice (group) `pass`. */
static run reconstruct(const char *h5, const char *chain, enum feed feed,
                       const char *const *edits, int groups) {
  run r = {0};
  mr_err err = {0};
  char header[HEADER_BYTES];
  mr_dataset *ds = open_edited(h5, edits, header);
  mr_harness h;
  if (mr_harness_open_gpus(&h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION), "none") != 0)
    fail_msg("open: %s", h.err.msg);
  r.rc = mr_harness_configure(&h, header);
  int passes = feed == TWO_VOLUMES_R2 ? 2 : groups;
  for (int pass = 0; pass < passes; pass++) {
    if (pass > 0 && mr_dataset_open(h5, "dataset", &ds, &err) != 0)
      fail_msg("%s", err.msg);
    mr_message *m;
    while (r.rc == 0 && mr_dataset_next(ds, &m, &err) == 0 && m != NULL) {
      int reference = m->kind == MR_MSG_ACQUISITION && (m->u.acq.head.flags & CALIBRATION_FLAG);
      if (m->kind != MR_MSG_ACQUISITION || (feed == REFERENCE_ONLY && !reference) ||
          (feed == NO_REFERENCE && reference) ||
          ((feed == ALL_R2 || feed == TWO_VOLUMES_R2) && !reference &&
           m->u.acq.head.idx.kspace_encode_step_1 % 2 == 1) ||
          (feed == TWO_VOLUMES_R2 && pass == 1 && reference)) {
        mr_message_unref(m);
        continue;
      }
      if (feed == REFERENCE_ONLY) {
        m->u.acq.head.flags &= ~CALIBRATION_FLAG;
        m->u.acq.head.encoding_space_ref = 0;
      }
      if (feed == TWO_VOLUMES_R2)
        m->u.acq.head.idx.repetition = (uint16_t)pass;
      else if (groups > 1)
        m->u.acq.head.idx.slice =
            (uint16_t)(reference ? m->u.acq.head.idx.slice * groups + pass : pass);
      r.rc = mr_harness_push(&h, m);
    }
    mr_dataset_close(ds);
  }
  if (r.rc == 0)
    r.rc = mr_harness_flush(&h);
  snprintf(r.error, sizeof r.error, "%s", h.err.msg);
  for (int i = 0; r.rc == 0 && i < h.nout; i++) {
    if (h.out[i]->kind != MR_MSG_IMAGE)
      continue;
    const mr_image *im = &h.out[i]->u.image;
    r.pixels = (size_t)im->head.matrix_size[0] * im->head.matrix_size[1];
    r.images = realloc(r.images, (r.count + 1) * r.pixels * sizeof *r.images);
    memcpy(r.images + r.count * r.pixels, im->data, r.pixels * sizeof *r.images);
    if (r.count < 16)
      r.heads[r.count] = im->head;
    r.count++;
  }
  mr_harness_close(&h);
  return r;
}

/* The single-band reference reconstruction: the reference lines alone,
 * as plain imaging lines of encoding 0 (same matrix) of a header that says
 * multiband factor 1 (single-band: a chain without slice_grappa takes it),
 * through accumulate, fft, coil_combine and image_out. */
static run reference(const char *h5, int mb) {
  static const char chain[] =
      "[{\"gadget\":\"accumulate\",\"trigger\":\"slice\"},{\"gadget\":\"fft\"},"
      "{\"gadget\":\"coil_combine\",\"method\":\"rss\"},"
      "{\"gadget\":\"image_out\",\"type\":\"magnitude\",\"series\":1}]";
  char factor[64];
  snprintf(factor, sizeof factor, "<multiband_factor>%d</multiband_factor>", mb);
  const char *const single[] = {factor, "<multiband_factor>1</multiband_factor>", NULL};
  return reconstruct(h5, chain, REFERENCE_ONLY, single, 1);
}

static double image_nrmse(const float *a, const float *b, size_t n) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    d += (a[i] - b[i]) * (double)(a[i] - b[i]);
    s += b[i] * (double)b[i];
  }
  return sqrt(d / s);
}

/* Each slice of the SMS scan against its reference image, by slice index;
 * with accel 2 the collapsed acquisition's odd lines are left out and the
 * header says R 2 (slice-GRAPPA, then GRAPPA on each slice's reference). */
static void check_scan(int n, int coils, int mb, int caipi, int accel) {
  char h5[320];
  snprintf(h5, sizeof h5, "%s/mb%d.h5", dir, mb);
  simulate(h5, n, coils, mb, caipi);
  char *chain = sms_chain();
  static const char *const r2[] = {"<kspace_encoding_step_1>1</kspace_encoding_step_1>",
                                   "<kspace_encoding_step_1>2</kspace_encoding_step_1>", NULL};
  /* with R 2, two volumes: the second's GRAPPA reuses the first's kernels */
  run sms = reconstruct(h5, chain, accel == 2 ? TWO_VOLUMES_R2 : ALL, accel == 2 ? r2 : NULL, 1);
  run ref = reference(h5, mb);
  free(chain);
  int volumes = accel == 2 ? 2 : 1;
  assert_int_equal(sms.rc, 0);
  assert_int_equal(ref.rc, 0);
  assert_int_equal(sms.count, mb * volumes);
  assert_int_equal(ref.count, mb);
  for (int j = 0; j < mb * volumes; j++) {
    int slice = sms.heads[j].slice;
    assert_true(slice < mb);
    assert_int_equal(ref.heads[slice].slice, slice);
    /* dZ = n / 4 mm apart, slice 0 at -(mb - 1) / 2 dZ */
    assert_float_equal(sms.heads[j].position[2], (slice - (mb - 1) / 2.0) * n / 4.0, 1e-3);
    double e = image_nrmse(sms.images + j * sms.pixels, ref.images + slice * ref.pixels,
                           sms.pixels);
    print_message("MB %d, FOV/%d, %d coils, %dx%d, R %d: volume %d slice %d NRMSE %.4f\n", mb,
                  caipi, coils, n, n, accel, sms.heads[j].repetition, slice, e);
    assert_true(e <= 0.05);
  }
  free(sms.images);
  free(ref.images);
  remove(h5);
}

static void mb2(void **state) {
  (void)state;
  check_scan(64, 16, 2, 2, 1);
}

static void mb3(void **state) {
  (void)state;
  check_scan(64, 16, 3, 3, 1);
}

static void mb2_in_plane(void **state) {
  (void)state;
  check_scan(64, 16, 2, 2, 2);
}

/* Two slice groups (the MB 2 scan sent twice as groups 0 and 1 of a
 * 4-slice scan): group g holds slices g and g + 2, each group calibrated
 * on its own reference slices; the images come out with those indices and
 * match the reference of the slice they were simulated from. */
static void two_groups(void **state) {
  (void)state;
  char h5[320];
  snprintf(h5, sizeof h5, "%s/groups.h5", dir);
  simulate(h5, 64, 16, 2, 2);
  /* the collapsed encoding (first in the header) gets 2 slices, the
   * reference 4 */
  static const char *const slices[] = {
      "<slice><minimum>0</minimum><maximum>0</maximum>",
      "<slice><minimum>0</minimum><maximum>1</maximum>",
      "<slice><minimum>0</minimum><maximum>1</maximum><center>0</center></slice></encodingLimits>"
      "<trajectory>cartesian</trajectory></encoding></ismrmrdHeader>",
      "<slice><minimum>0</minimum><maximum>3</maximum><center>0</center></slice></encodingLimits>"
      "<trajectory>cartesian</trajectory></encoding></ismrmrdHeader>",
      NULL};
  char *chain = sms_chain();
  run sms = reconstruct(h5, chain, ALL, slices, 2), ref = reference(h5, 2);
  free(chain);
  assert_int_equal(sms.rc, 0);
  assert_int_equal(sms.count, 4);
  int seen = 0;
  for (int i = 0; i < 4; i++) {
    int slice = sms.heads[i].slice, from = slice / 2; /* simulated as slice j: 2 j + group */
    seen |= 1 << slice;
    double e = image_nrmse(sms.images + i * sms.pixels, ref.images + from * ref.pixels,
                           sms.pixels);
    print_message("two groups: slice %d (group %d) NRMSE %.4f\n", slice, slice % 2, e);
    assert_true(e <= 0.05);
  }
  assert_int_equal(seen, 15);
  free(sms.images);
  free(ref.images);
  remove(h5);
}

/* The reference k-space of every slice from the scan's file:
 * [mb][coils][n][n]. */
static mr_cfloat *reference_kspace(const char *h5, int n, int coils, int mb) {
  mr_err err = {0};
  mr_dataset *ds;
  if (mr_dataset_open(h5, "dataset", &ds, &err) != 0)
    fail_msg("%s", err.msg);
  size_t plane = (size_t)coils * n * n;
  mr_cfloat *k = calloc(plane * mb, sizeof *k);
  assert_non_null(k);
  mr_message *m;
  while (mr_dataset_next(ds, &m, &err) == 0 && m != NULL) {
    const ISMRMRD_AcquisitionHeader *h = &m->u.acq.head;
    if (m->kind == MR_MSG_ACQUISITION && (h->flags & CALIBRATION_FLAG))
      for (int c = 0; c < coils; c++)
        memcpy(k + h->idx.slice * plane + ((size_t)c * n + h->idx.kspace_encode_step_1) * n,
               m->u.acq.data + (size_t)c * n, n * sizeof *k);
    mr_message_unref(m);
  }
  mr_dataset_close(ds);
  return k;
}

/* Leakage of the kernels the gadget calibrates (its default options): a
 * collapsed acquisition with only slice j lit, separated; the energy in
 * slice m over that in slice j, the worst pair. */
static double leakage(const mr_cfloat *ref, int n, int coils, int mb, int caipi) {
  mr_pool *pool = NULL;
  mr_device *cpu = NULL;
  mr_pool_opts po = {.gpus = "none", .cpu_threads = 2};
  mr_err err = {0};
  assert_int_equal(mr_pool_create(&po, &pool, &err), 0);
  assert_int_equal(mr_pool_acquire(pool, "cpu", &cpu, &err), 0);
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(coils, n, n, mb, caipi);
  mr_slice_grappa_plan *plan = NULL;
  size_t plane = (size_t)coils * n * n;
  mr_cfloat *w = malloc(mr_slice_grappa_weights_count(&o) * sizeof *w);
  mr_cfloat *one = malloc(plane * sizeof *one), *out = malloc(plane * mb * sizeof *out);
  assert_true(w != NULL && one != NULL && out != NULL);
  assert_int_equal(mr_slice_grappa_plan_create(cpu, &o, &plan, TERR), 0);
  assert_int_equal(mr_slice_grappa_calibrate(plan, ref, w, TERR), 0);
  double worst = 0;
  for (int j = 0; j < mb; j++) {
    memcpy(one, ref + j * plane, plane * sizeof *one);
    assert_int_equal(mr_slice_grappa_caipi(cpu, coils, n, n, caipi, j, 1, 1, one, TERR), 0);
    assert_int_equal(mr_slice_grappa_apply(plan, w, one, out, TERR), 0);
    double own = 0, other;
    for (size_t i = 0; i < plane; i++)
      own += cabsf(out[j * plane + i]) * cabsf(out[j * plane + i]);
    for (int m = 0; m < mb; m++) {
      if (m == j)
        continue;
      other = 0;
      for (size_t i = 0; i < plane; i++)
        other += cabsf(out[m * plane + i]) * cabsf(out[m * plane + i]);
      worst = sqrt(other / own) > worst ? sqrt(other / own) : worst;
    }
  }
  mr_slice_grappa_plan_destroy(plan);
  free(w);
  free(one);
  free(out);
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  return worst;
}

/* The target: multiband 4, CAIPI FOV/3, 32 coils (64 x 64). */
static void target_case(void **state) {
  (void)state;
  enum { N = 64, COILS = 32, MB = 4, CAIPI = 3 };
  check_scan(N, COILS, MB, CAIPI, 1);
  char h5[320];
  snprintf(h5, sizeof h5, "%s/target.h5", dir);
  simulate(h5, N, COILS, MB, CAIPI);
  mr_cfloat *ref = reference_kspace(h5, N, COILS, MB);
  double leak = leakage(ref, N, COILS, MB, CAIPI);
  print_message("MB %d, FOV/%d, %d coils: worst slice leakage %.5f\n", MB, CAIPI, COILS, leak);
  assert_true(leak <= 0.01);
  free(ref);
  remove(h5);
}

/* In-plane R 2 (every other line acquired): the gadget separates the
 * acquired lines alone (taps one line apart, the CAIPI shift undone on the
 * full k-space's lines after). Its separated k-spaces against the
 * separation of the whole k-space (taps two lines apart, the unacquired
 * lines zero) with the same kernels: the same on every line to float
 * rounding, the unacquired lines zero. MB 3 with FOV/3: the CAIPI phase of
 * an acquired line differs from its line's in the acquired lines alone. */
static void acquired_lines_alone(void **state) {
  (void)state;
  enum { N = 64, COILS = 16, MB = 3, CAIPI = 3 };
  char h5[320];
  snprintf(h5, sizeof h5, "%s/alone.h5", dir);
  simulate(h5, N, COILS, MB, CAIPI);
  mr_cfloat *ref = reference_kspace(h5, N, COILS, MB);
  size_t plane = (size_t)COILS * N * N;
  mr_cfloat *collapsed = calloc(plane, sizeof *collapsed);
  mr_cfloat *whole = malloc(plane * MB * sizeof *whole);
  assert_true(collapsed != NULL && whole != NULL);
  mr_err err = {0};
  char header[HEADER_BYTES];
  mr_dataset *ds = open_edited(h5,
                               (const char *const[]){
                                   "<kspace_encoding_step_1>1</kspace_encoding_step_1>",
                                   "<kspace_encoding_step_1>2</kspace_encoding_step_1>", NULL},
                               header);
  mr_harness h;
  if (mr_harness_open_gpus(&h,
                           "[{\"gadget\":\"accumulate\",\"trigger\":\"slice\"},"
                           "{\"gadget\":\"slice_grappa\"}]",
                           MR_KIND_BIT(MR_MSG_ACQUISITION), "none") != 0)
    fail_msg("open: %s", h.err.msg);
  assert_int_equal(mr_harness_configure(&h, header), 0);
  mr_message *m;
  int rc = 0;
  while (rc == 0 && mr_dataset_next(ds, &m, &err) == 0 && m != NULL) {
    const ISMRMRD_AcquisitionHeader *a = &m->u.acq.head;
    if (m->kind != MR_MSG_ACQUISITION ||
        (!(a->flags & CALIBRATION_FLAG) && a->idx.kspace_encode_step_1 % 2 == 1)) {
      mr_message_unref(m);
      continue;
    }
    if (!(a->flags & CALIBRATION_FLAG))
      for (int c = 0; c < COILS; c++)
        memcpy(collapsed + ((size_t)c * N + a->idx.kspace_encode_step_1) * N,
               m->u.acq.data + (size_t)c * N, N * sizeof *collapsed);
    rc = mr_harness_push(&h, m);
  }
  mr_dataset_close(ds);
  assert_int_equal(rc, 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  /* the gadget's defaults: 5 x 5, calibration 32 x 32, lambda 1e-3, leak-blocked */
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(COILS, N, N, MB, CAIPI);
  o.ystep = 2;
  mr_slice_grappa_plan *plan = NULL;
  mr_cfloat *w = malloc(mr_slice_grappa_weights_count(&o) * sizeof *w);
  assert_non_null(w);
  assert_int_equal(mr_slice_grappa_plan_create(h.device, &o, &plan, TERR), 0);
  assert_int_equal(mr_slice_grappa_calibrate_host(plan, ref, w, TERR), 0);
  assert_int_equal(mr_slice_grappa_apply_host(plan, w, collapsed, whole, TERR), 0);
  int seen = 0;
  for (int i = 0; i < h.nout; i++) {
    if (h.out[i]->kind != MR_MSG_KSPACE)
      continue;
    const mr_kspace *k = h.out[i]->u.object.ptr;
    int slice = k->ref.idx.slice;
    assert_true(slice < MB);
    seen |= 1 << slice;
    const mr_cfloat *expect = whole + (size_t)slice * plane;
    double d = 0, s = 0, off = 0;
    for (size_t v = 0; v < plane; v++) {
      size_t y = v / N % N;
      if (y % 2 == 1) {
        off += cabsf(k->data[v]);
        continue;
      }
      d += cabsf(k->data[v] - expect[v]) * cabsf(k->data[v] - expect[v]);
      s += cabsf(expect[v]) * cabsf(expect[v]);
    }
    print_message("acquired lines alone: slice %d, relative difference %.2e\n", slice,
                  sqrt(d / s));
    assert_true(sqrt(d / s) <= 1e-5);
    assert_true(off == 0);
  }
  assert_int_equal(seen, (1 << MB) - 1);
  mr_slice_grappa_plan_destroy(plan);
  mr_harness_close(&h);
  free(w);
  free(whole);
  free(collapsed);
  free(ref);
  remove(h5);
}

/* A single-band scan through the sms chain: the same image as without
 * slice_grappa (it passes the buffers untouched). */
static void single_band(void **state) {
  (void)state;
  char h5[320];
  snprintf(h5, sizeof h5, "%s/single.h5", dir);
  remove(h5);
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = 32, .coils = 4, .seed = 1,
                      .path = h5};
  mr_err err = {0};
  if (mr_simulate(&o, &err) != 0)
    fail_msg("simulate: %s", err.msg);
  static const char plain[] =
      "[{\"gadget\":\"accumulate\",\"trigger\":\"slice\"},{\"gadget\":\"fft\"},"
      "{\"gadget\":\"coil_combine\",\"method\":\"rss\"},"
      "{\"gadget\":\"image_out\",\"type\":\"magnitude\",\"series\":1}]";
  char *chain = sms_chain();
  run sms = reconstruct(h5, chain, ALL, NULL, 1), ref = reconstruct(h5, plain, ALL, NULL, 1);
  free(chain);
  assert_int_equal(sms.rc, 0);
  assert_int_equal(sms.count, 1);
  assert_int_equal(ref.count, 1);
  assert_memory_equal(sms.images, ref.images, sms.pixels * sizeof *sms.images);
  free(sms.images);
  free(ref.images);
  remove(h5);
}

static void expect_error(const char *h5, enum feed feed, const char *const *edits,
                         const char *needle) {
  char *chain = sms_chain();
  run r = reconstruct(h5, chain, feed, edits, 1);
  free(chain);
  print_message("error: %s\n", r.error);
  assert_true(r.rc < 0);
  assert_non_null(strstr(r.error, needle));
  free(r.images);
}

static void errors(void **state) {
  (void)state;
  char h5[320];
  snprintf(h5, sizeof h5, "%s/errors.h5", dir);
  simulate(h5, 32, 8, 2, 2);
  static const char *const factor3[] = {"<multiband_factor>2<", "<multiband_factor>3<", NULL};
  expect_error(h5, NO_REFERENCE, NULL, "no single-band reference scan of slice 0");
  expect_error(h5, ALL, factor3, "multiband factor 3 does not fit the data");
  simulate(h5, 32, 2, 3, 3);
  expect_error(h5, ALL, NULL, "2 coils cannot separate 3 slices");
  remove(h5);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("slice_grappa"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mb2),
      cmocka_unit_test(mb3),
      cmocka_unit_test(mb2_in_plane),
      cmocka_unit_test(acquired_lines_alone),
      cmocka_unit_test(two_groups),
      cmocka_unit_test(single_band),
      cmocka_unit_test(target_case),
      cmocka_unit_test(errors),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  mr_test_remove_tree(dir);
  return rc;
}
