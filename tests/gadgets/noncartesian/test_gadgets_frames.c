/* frames: readouts to one k-space buffer per frame of K (from the header or
 * the parameter), in order, numbered by frame, with the middle readout's
 * header; a sliding window; a frame cut short by LAST_IN_REPETITION; a
 * partial frame at the end emitted or dropped; noise lines kept out; the
 * refusals. */
#include <complex.h>
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

enum { NS = 6, COILS = 2 };

/* Readout t: sample i of coil c is t + i (100 c + i), its trajectory
 * (t / 1000, i / 100). */
static mr_message *readout(int t, uint64_t flags, int ns, int dims) {
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = (uint16_t)ns;
  h.active_channels = h.available_channels = COILS;
  h.trajectory_dimensions = (uint16_t)dims;
  h.scan_counter = (uint32_t)t;
  h.acquisition_time_stamp = (uint32_t)(1000 + t);
  h.flags = flags;
  mr_message *m = mr_message_new_acquisition(&h);
  assert_non_null(m);
  for (int c = 0; c < COILS; c++)
    for (int i = 0; i < ns; i++)
      m->u.acq.data[c * ns + i] = (float)t + I * (float)(100 * c + i);
  for (int i = 0; i < ns && dims > 0; i++) {
    m->u.acq.traj[i * dims] = (float)t / 1000.0f;
    m->u.acq.traj[i * dims + 1] = (float)i / 100.0f;
  }
  return m;
}

/* A harness of one frames gadget (extra: its parameters) configured with
 * a header whose kspace_encoding_step_1 limit is 0 .. e1 - 1. */
static void open_frames(mr_harness *h, const char *extra, int e1) {
  char gadgets[256];
  snprintf(gadgets, sizeof gadgets, "[{\"gadget\":\"frames\"%s}]", extra);
  assert_int_equal(mr_harness_open(h, gadgets, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  if (mr_harness_configure(h, mr_harness_cartesian_header(16, e1, 1, 16, e1, 1)) != 0)
    fail_msg("configure: %s", h->err.msg);
}

static void push(mr_harness *h, int from, int to) {
  for (int t = from; t < to; t++)
    if (mr_harness_push(h, readout(t, 0, NS, 2)) != 0)
      fail_msg("push %d: %s", t, h->err.msg);
}

/* Output `index` is frame `frame` of `lines` readouts first .. first +
 * lines - 1 (of K lines), in time order. */
static void check_frame(const mr_harness *h, int index, int frame, int first, int lines, int k) {
  assert_true(index < h->nout);
  assert_int_equal(h->out[index]->kind, MR_MSG_KSPACE);
  const mr_kspace *ks = h->out[index]->u.object.ptr;
  assert_int_equal(ks->nro, NS);
  assert_int_equal(ks->ne1, k);
  assert_int_equal(ks->ne2, 1);
  assert_int_equal(ks->nch, COILS);
  assert_int_equal(ks->traj_dims, 2);
  assert_int_equal(ks->ref.idx.repetition, frame);
  assert_int_equal(ks->ref.scan_counter, first + lines / 2);
  assert_int_equal(ks->ref.acquisition_time_stamp, 1000 + first + lines / 2);
  for (int l = 0; l < k; l++) {
    assert_int_equal(ks->sampled[l], l < lines);
    if (l >= lines)
      continue;
    int t = first + l;
    for (int c = 0; c < COILS; c++)
      for (int i = 0; i < NS; i++) {
        float complex v = ks->data[(size_t)c * mr_kspace_channel_size(ks) + (size_t)l * NS + i];
        assert_float_equal(crealf(v), t, 0);
        assert_float_equal(cimagf(v), 100 * c + i, 0);
      }
    assert_float_equal(ks->traj[(size_t)l * NS * 2], t / 1000.0f, 0);
    assert_float_equal(ks->traj[((size_t)l * NS + 3) * 2 + 1], 3 / 100.0f, 0);
  }
}

/* K from the header's limit: 12 readouts, 3 frames of 4, sent as each
 * completes; nothing left for the end. */
static void frames_from_header(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, "", 4);
  push(&h, 0, 3);
  assert_int_equal(h.nout, 0);
  push(&h, 3, 4);
  assert_int_equal(h.nout, 1);
  push(&h, 4, 12);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 3);
  for (int f = 0; f < 3; f++)
    check_frame(&h, f, f, 4 * f, 4, 4);
  mr_harness_close(&h);
}

/* "spokes" 4, "step" 2: frames at readouts 4, 6, 8, 10 over the last 4,
 * and at the end one more over the last 4 (a full window). */
static void sliding_window(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, ",\"spokes\":4,\"step\":2", 100);
  push(&h, 0, 11);
  assert_int_equal(h.nout, 4);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 5);
  for (int f = 0; f < 4; f++)
    check_frame(&h, f, f, 2 * f, 4, 4);
  check_frame(&h, 4, 4, 7, 4, 4);
  mr_harness_close(&h);
}

/* Fewer than K readouts at the end: a frame of them ("emit", the default)
 * or nothing ("drop"). */
static void partial_frame(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, ",\"spokes\":4", 100);
  push(&h, 0, 6);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 2);
  check_frame(&h, 0, 0, 0, 4, 4);
  check_frame(&h, 1, 1, 4, 2, 4);
  mr_harness_close(&h);

  open_frames(&h, ",\"spokes\":4,\"partial\":\"drop\"", 100);
  push(&h, 0, 6);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 1);
  check_frame(&h, 0, 0, 0, 4, 4);
  mr_harness_close(&h);

  /* sliding, fewer than K in all: the partial rule too */
  open_frames(&h, ",\"spokes\":4,\"step\":1,\"partial\":\"drop\"", 100);
  push(&h, 0, 3);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

/* LAST_IN_REPETITION ends a frame early (no sliding window); noise lines
 * are kept out. */
static void flagged_end_and_noise(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, ",\"spokes\":4", 100);
  push(&h, 0, 2);
  assert_int_equal(mr_harness_push(&h, readout(99, MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT),
                                               NS, 0)),
                   0);
  assert_int_equal(
      mr_harness_push(&h, readout(2, MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION), NS, 2)), 0);
  assert_int_equal(h.nout, 1);
  push(&h, 3, 7);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 2);
  check_frame(&h, 0, 0, 0, 3, 4);
  check_frame(&h, 1, 1, 3, 4, 4);
  mr_harness_close(&h);
}

/* Readouts of 0 samples or 0 channels (sync lines of converted files) are
 * skipped, not a failure: before the first real one too; one flagged
 * LAST_IN_REPETITION still ends its frame; one warning at the end. */
static void empty_readouts_are_skipped(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, ",\"spokes\":4", 100);
  assert_int_equal(mr_harness_push(&h, readout(50, 0, 0, 2)), 0);
  push(&h, 0, 2);
  assert_int_equal(
      mr_harness_push(&h, readout(51, MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION), 0, 2)), 0);
  assert_int_equal(h.nout, 1);
  check_frame(&h, 0, 0, 0, 2, 4);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 2);
  assert_int_equal(h.out[1]->kind, MR_MSG_TEXT);
  assert_non_null(strstr(h.out[1]->u.text, "WARNING: frames: skipped 2 acquisitions"));
  mr_harness_close(&h);
}

static void refusals(void **state) {
  (void)state;
  mr_harness h;
  open_frames(&h, ",\"spokes\":4", 100);
  assert_int_equal(mr_harness_push(&h, readout(0, 0, NS, 0)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "no trajectory"));
  mr_harness_close(&h);

  open_frames(&h, ",\"spokes\":4", 100);
  push(&h, 0, 1);
  assert_int_equal(mr_harness_push(&h, readout(1, 0, NS + 1, 2)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "earlier readouts"));
  mr_harness_close(&h);

  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"frames\",\"spokes\":4,\"step\":5}]",
                                   MR_KIND_BIT(MR_MSG_ACQUISITION)),
                   0);
  assert_int_not_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)),
                       0);
  assert_non_null(strstr(h.err.msg, "step 5"));
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frames_from_header), cmocka_unit_test(sliding_window),
      cmocka_unit_test(partial_frame),      cmocka_unit_test(flagged_end_and_noise),
      cmocka_unit_test(empty_readouts_are_skipped),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
