/* accumulate: placement by counters, triggers, what is kept out, the
 * calibration part, averaging, reversed and asymmetric readouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "kspace.h"

/* Sample s of channel c on line (e1) carries an identifiable value. */
static float complex tagged(int c, int s, void *arg) {
  int e1 = *(int *)arg;
  return (float)(1000 * c + s) + I * (float)e1;
}

static mr_message *line(int ns, int nch, int e1, int e2, uint64_t flags) {
  return mr_harness_acquisition(ns, nch, e1, e2, flags, tagged, &e1);
}

static mr_message *with_counters(mr_message *m, int slice, int rep) {
  m->u.acq.head.idx.slice = (uint16_t)slice;
  m->u.acq.head.idx.repetition = (uint16_t)rep;
  return m;
}

static const mr_kspace *kspace_of(const mr_harness *h, int i) {
  assert_true(i < h->nout);
  assert_int_equal(h->out[i]->kind, MR_MSG_KSPACE);
  return h->out[i]->u.object.ptr;
}

static void open_accumulate(mr_harness *h, const char *trigger, int ny, int nz) {
  char json[128];
  snprintf(json, sizeof json, "[{\"gadget\":\"accumulate\",\"trigger\":\"%s\"}]", trigger);
  assert_int_equal(mr_harness_open(h, json, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(8, ny, nz, 8, ny, nz)), 0);
}

static void test_places_lines_and_triggers_on_last_in_slice(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "slice", 6, 1);
  for (int e1 = 0; e1 < 6; e1 += 2) {
    uint64_t flags = e1 == 4 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0;
    assert_int_equal(mr_harness_push(&h, line(8, 3, e1, 0, flags)), 0);
    assert_int_equal(h.nout, e1 == 4 ? 1 : 0);
  }
  const mr_kspace *k = kspace_of(&h, 0);
  assert_int_equal(k->nro, 8);
  assert_int_equal(k->ne1, 6);
  assert_int_equal(k->ne2, 1);
  assert_int_equal(k->nch, 3);
  assert_null(k->calib);
  for (int e1 = 0; e1 < 6; e1++) {
    assert_int_equal(k->sampled[e1], e1 % 2 == 0);
    for (int c = 0; c < 3; c++)
      for (int s = 0; s < 8; s++) {
        float complex v = k->data[(c * 6 + e1) * 8 + s];
        float complex want = e1 % 2 == 0 ? (float)(1000 * c + s) + I * (float)e1 : 0;
        assert_true(v == want);
      }
  }
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 1); /* nothing left open */
  mr_harness_close(&h);
}

static void test_repetitions_and_slices_get_their_own_buffers(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "slice", 4, 1);
  for (int rep = 0; rep < 2; rep++)
    for (int slice = 0; slice < 2; slice++)
      for (int e1 = 0; e1 < 4; e1++)
        assert_int_equal(
            mr_harness_push(&h, with_counters(line(8, 1, e1, 0,
                                                   e1 == 3 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)
                                                           : 0),
                                              slice, rep)),
            0);
  assert_int_equal(h.nout, 4);
  for (int i = 0; i < 4; i++) {
    const mr_kspace *k = kspace_of(&h, i);
    assert_int_equal(k->ref.idx.repetition, i / 2);
    assert_int_equal(k->ref.idx.slice, i % 2);
  }
  mr_harness_close(&h);
}

static void test_trigger_end_and_repetition(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  for (int rep = 0; rep < 3; rep++)
    for (int e1 = 0; e1 < 4; e1++)
      mr_harness_push(&h, with_counters(line(8, 1, e1, 0, MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)),
                                        0, rep));
  assert_int_equal(h.nout, 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(kspace_of(&h, i)->ref.idx.repetition, i); /* oldest first */
  mr_harness_close(&h);

  open_accumulate(&h, "repetition", 4, 1);
  for (int e1 = 0; e1 < 4; e1++)
    mr_harness_push(&h, line(8, 1, e1, 0,
                             MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) |
                                 (e1 == 3 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION) : 0)));
  assert_int_equal(h.nout, 1);
  mr_harness_close(&h);
}

static mr_message *echo(int e1, int contrast, int set, uint64_t flags) {
  mr_message *m = line(8, 1, e1, 0, flags);
  m->u.acq.head.idx.contrast = (uint16_t)contrast;
  m->u.acq.head.idx.set = (uint16_t)set;
  return m;
}

/* Scanners flag only the last acquisition of a slice: on a multi-echo scan
 * the last echo of the last line. The other echoes' buffers hold that line
 * too and go with it, in their order; a set whose own flagged line is
 * still to come does not. */
static void test_last_in_slice_completes_the_other_echoes(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "slice", 4, 1);
  for (int slice = 0; slice < 2; slice++)
    for (int e1 = 0; e1 < 4; e1++)
      for (int c = 0; c < 3; c++)
        assert_int_equal(
            mr_harness_push(&h, with_counters(echo(e1, c, 0,
                                                   e1 == 3 && c == 2
                                                       ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)
                                                       : 0),
                                              slice, 0)),
            0);
  assert_int_equal(h.nout, 6);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(kspace_of(&h, i)->ref.idx.slice, i / 3);
    assert_int_equal(kspace_of(&h, i)->ref.idx.contrast, i % 3);
  }
  mr_harness_close(&h);

  /* two sets line by line, each set's last line flagged */
  open_accumulate(&h, "slice", 4, 1);
  for (int e1 = 0; e1 < 4; e1++)
    for (int set = 0; set < 2; set++) {
      assert_int_equal(
          mr_harness_push(&h, echo(e1, 0, set, e1 == 3 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0)),
          0);
      assert_int_equal(h.nout, e1 == 3 ? set + 1 : 0);
    }
  for (int i = 0; i < 2; i++) {
    assert_int_equal(kspace_of(&h, i)->ref.idx.set, i);
    for (int e1 = 0; e1 < 4; e1++)
      assert_true(kspace_of(&h, i)->sampled[e1]);
  }
  mr_harness_close(&h);
}

static void test_noise_and_navigators_are_kept_out(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  mr_harness_push(&h, line(8, 2, 0, 0, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)));
  mr_harness_push(&h, line(8, 2, 1, 0, MR_FLAG(ISMRMRD_ACQ_IS_NAVIGATION_DATA)));
  mr_harness_push(&h, line(8, 2, 2, 0, MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA)));
  mr_harness_push(&h, line(8, 2, 3, 0, 0));
  mr_harness_flush(&h);
  /* the noise line goes on as it is (for a noise_adjust after accumulate) */
  assert_int_equal(h.nout, 2);
  assert_int_equal(h.out[0]->kind, MR_MSG_ACQUISITION);
  assert_true(h.out[0]->u.acq.head.flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT));
  const mr_kspace *k = kspace_of(&h, 1);
  assert_int_equal(k->sampled[0] + k->sampled[1] + k->sampled[2], 0);
  assert_int_equal(k->sampled[3], 1);
  mr_harness_close(&h);
}

/* Noise-flagged lines of 0 samples x 0 channels (Pulseq-based tools) are
 * skipped and counted; the scan goes on, with one warning at the end. */
static void test_empty_noise_lines_are_skipped_with_one_warning(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  uint64_t noise = MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
  for (int i = 0; i < 3; i++)
    assert_int_equal(mr_harness_push(&h, line(0, 0, 0, 0, noise)), 0);
  assert_int_equal(mr_harness_push(&h, line(8, 2, 1, 0, 0)), 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 2);
  assert_int_equal(h.out[0]->kind, MR_MSG_KSPACE);
  assert_int_equal(kspace_of(&h, 0)->sampled[1], 1);
  assert_int_equal(h.out[1]->kind, MR_MSG_TEXT);
  assert_non_null(strstr(h.out[1]->u.text, "WARNING: accumulate: skipped 3 noise acquisitions"));
  mr_harness_close(&h);
}

/* Imaging lines of 0 samples or 0 channels (sync and navigator lines of
 * converted Siemens files) are skipped and counted, not a failure of the
 * scan; one that carries LAST_IN_SLICE still ends its slice; one warning
 * at the end. */
static void test_empty_imaging_lines_are_skipped_with_one_warning(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "slice", 4, 1);
  assert_int_equal(mr_harness_push(&h, line(0, 2, 0, 0, 0)), 0); /* before any buffer */
  assert_int_equal(mr_harness_push(&h, line(8, 2, 1, 0, 0)), 0);
  assert_int_equal(mr_harness_push(&h, line(8, 0, 2, 0, 0)), 0);
  assert_int_equal(h.nout, 0);
  assert_int_equal(mr_harness_push(&h, line(0, 0, 3, 0, MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE))), 0);
  assert_int_equal(h.nout, 1);
  const mr_kspace *k = kspace_of(&h, 0);
  assert_int_equal(k->sampled[0] + k->sampled[1] + k->sampled[2] + k->sampled[3], 1);
  assert_int_equal(k->sampled[1], 1);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 2);
  assert_int_equal(h.out[1]->kind, MR_MSG_TEXT);
  assert_non_null(strstr(h.out[1]->u.text, "WARNING: accumulate: skipped 3 acquisitions with no "
                                           "samples or no channels"));
  mr_harness_close(&h);
}

static void test_calibration_lines_go_to_calib(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 8, 1);
  mr_harness_push(&h, line(8, 2, 0, 0, 0));
  mr_harness_push(&h, line(8, 2, 3, 0, MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)));
  mr_harness_push(&h, line(8, 2, 4, 0, MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING)));
  mr_harness_flush(&h);
  const mr_kspace *k = kspace_of(&h, 0);
  assert_non_null(k->calib);
  assert_int_equal(k->sampled[0], 1);
  assert_int_equal(k->sampled[3], 0); /* calibration only */
  assert_int_equal(k->sampled[4], 1); /* both */
  assert_int_equal(k->calib->sampled[3], 1);
  assert_int_equal(k->calib->sampled[4], 1);
  assert_int_equal(k->calib->sampled[0], 0);
  assert_true(k->calib->data[3 * 8 + 1] == 1.0f + 3.0f * I);
  mr_harness_close(&h);
}

static float complex constant(int c, int s, void *arg) {
  (void)c;
  (void)s;
  return *(float *)arg;
}

static void test_averages_are_averaged(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  float values[3] = {1, 2, 6};
  for (int i = 0; i < 3; i++) {
    mr_message *m = mr_harness_acquisition(8, 1, 2, 0, 0, constant, &values[i]);
    m->u.acq.head.idx.average = (uint16_t)i;
    mr_harness_push(&h, m);
  }
  mr_harness_flush(&h);
  const mr_kspace *k = kspace_of(&h, 0);
  assert_float_equal(crealf(k->data[2 * 8 + 5]), 3.0, 1e-6);
  mr_harness_close(&h);
}

static void test_reversed_and_asymmetric_readouts(void **state) {
  (void)state;
  mr_harness h;
  int e1;
  mr_message *m;
  open_accumulate(&h, "end", 4, 1);
  e1 = 1;
  mr_harness_push(&h, line(8, 1, e1, 0, MR_FLAG(ISMRMRD_ACQ_IS_REVERSE)));
  mr_harness_flush(&h);
  const mr_kspace *k = kspace_of(&h, 0);
  for (int s = 0; s < 8; s++)
    assert_true(k->data[1 * 8 + s] == (float)(7 - s) + 1.0f * I);
  mr_harness_close(&h);

  open_accumulate(&h, "end", 4, 1);
  e1 = 2;
  m = line(6, 1, e1, 0, 0);
  m->u.acq.head.center_sample = 2;
  mr_harness_push(&h, m);
  mr_harness_flush(&h);
  k = kspace_of(&h, 0);
  assert_int_equal(k->nro, 8);
  assert_true(k->data[2 * 8 + 0] == 0);
  assert_true(k->data[2 * 8 + 1] == 0);
  assert_true(k->data[2 * 8 + 2] == 0.0f + 2.0f * I); /* sample 0 */
  assert_true(k->data[2 * 8 + 4] == 2.0f + 2.0f * I); /* the center sample at nro/2 */
  mr_harness_close(&h);
}

static void test_bad_lines_are_errors(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  mr_harness_push(&h, line(8, 2, 0, 0, 0));
  assert_int_equal(mr_harness_push(&h, line(8, 3, 1, 0, 0)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "has 3 channels, earlier lines had 2"));
  mr_harness_close(&h);
  open_accumulate(&h, "end", 4, 1);
  mr_harness_push(&h, line(8, 2, 0, 0, 0));
  assert_int_equal(mr_harness_push(&h, line(10, 2, 1, 0, 0)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "has 10 samples, the buffer holds 8"));
  mr_harness_close(&h);
  open_accumulate(&h, "end", 4, 1);
  mr_message *m = line(8, 2, 0, 0, 0);
  m->u.acq.head.encoding_space_ref = 3;
  assert_int_equal(mr_harness_push(&h, m), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "names encoding space 3; the header has 1"));
  mr_harness_close(&h);
}

static void test_3d_buffer(void **state) {
  (void)state;
  mr_harness h;
  open_accumulate(&h, "end", 4, 3);
  for (int e2 = 0; e2 < 3; e2++)
    for (int e1 = 0; e1 < 4; e1++)
      mr_harness_push(&h, line(8, 1, e1, e2, 0));
  mr_harness_flush(&h);
  const mr_kspace *k = kspace_of(&h, 0);
  assert_int_equal(k->ne2, 3);
  for (int i = 0; i < 12; i++)
    assert_int_equal(k->sampled[i], 1);
  mr_harness_close(&h);
}

static void test_cartesian_lines_with_coordinates(void **state) {
  (void)state;
  /* A Cartesian header rules: stored coordinates are not a trajectory. */
  mr_harness h;
  open_accumulate(&h, "end", 4, 1);
  for (int e1 = 0; e1 < 4; e1++) {
    mr_message *m = line(8, 1, e1, 0, 0);
    ISMRMRD_AcquisitionHeader head = m->u.acq.head;
    head.trajectory_dimensions = 2;
    mr_message *t = mr_message_new_acquisition(&head);
    memcpy(t->u.acq.data, m->u.acq.data, 8 * sizeof *t->u.acq.data);
    for (int i = 0; i < 16; i++)
      t->u.acq.traj[i] = (float)i;
    mr_message_unref(m);
    assert_int_equal(mr_harness_push(&h, t), 0);
  }
  assert_int_equal(mr_harness_flush(&h), 0);
  const mr_kspace *k = kspace_of(&h, 0);
  assert_null(k->traj);
  assert_int_equal(k->traj_dims, 0);
  assert_true(k->data[3 * 8 + 2] == 2.0f + 3.0f * I);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_places_lines_and_triggers_on_last_in_slice),
      cmocka_unit_test(test_repetitions_and_slices_get_their_own_buffers),
      cmocka_unit_test(test_trigger_end_and_repetition),
      cmocka_unit_test(test_last_in_slice_completes_the_other_echoes),
      cmocka_unit_test(test_noise_and_navigators_are_kept_out),
      cmocka_unit_test(test_empty_noise_lines_are_skipped_with_one_warning),
      cmocka_unit_test(test_empty_imaging_lines_are_skipped_with_one_warning),
      cmocka_unit_test(test_calibration_lines_go_to_calib),
      cmocka_unit_test(test_averages_are_averaged),
      cmocka_unit_test(test_reversed_and_asymmetric_readouts),
      cmocka_unit_test(test_bad_lines_are_errors),
      cmocka_unit_test(test_3d_buffer),
      cmocka_unit_test(test_cartesian_lines_with_coordinates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
