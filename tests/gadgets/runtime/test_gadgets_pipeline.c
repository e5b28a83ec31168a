/* The pipelined chain (chain.h, mr_chain_set_pipelined): the installed
 * Cartesian chain gives the same images in the same order as the
 * synchronous chain; a failure in a later stage reaches the pusher with
 * the failing gadget's name; an abandoned stream stops at once. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"

#define NX 64 /* readout, oversampled 2x */
#define NY 32
#define NCH 4
#define SLICES 3
#define REPS 4

static const char cartesian[] =
    "[{\"gadget\":\"remove_oversampling\"},{\"gadget\":\"accumulate\",\"trigger\":\"slice\"},"
    "{\"gadget\":\"fft\"},{\"gadget\":\"coil_combine\",\"method\":\"weighted\"},"
    "{\"gadget\":\"image_out\",\"type\":\"magnitude\",\"series\":1}]";

/* Smooth, coil- and slice-dependent k-space: every image differs. */
static float complex sample(int c, int s, void *arg) {
  const int *line = arg; /* {e1, slice, rep} */
  double kx = (s - NX / 2) / (double)NX, ky = (line[0] - NY / 2) / (double)NY;
  double a = exp(-40 * (kx * kx + ky * ky)) * (1 + 0.1 * line[1] + 0.01 * line[2]);
  return (float complex)(a * cexp(I * (0.3 * c + 0.7 * line[1] + 2 * kx)));
}

static mr_message *line_of(int e1, int slice, int rep) {
  int arg[3] = {e1, slice, rep};
  mr_message *m = mr_harness_acquisition(NX, NCH, e1, 0,
                                         e1 == NY - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                         sample, arg);
  m->u.acq.head.idx.slice = (uint16_t)slice;
  m->u.acq.head.idx.repetition = (uint16_t)rep;
  return m;
}

static void run(mr_harness *h, const char *gadgets, size_t depth) {
  assert_int_equal(mr_harness_open(h, gadgets, MR_CHAIN_WIRE_INPUT), 0);
  assert_int_equal(mr_harness_set_pipelined(h, depth), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(NX, NY, 1, NX / 2, NY, 1)),
                   0);
  for (int rep = 0; rep < REPS; rep++)
    for (int slice = 0; slice < SLICES; slice++)
      for (int e1 = 0; e1 < NY; e1++)
        assert_int_equal(mr_harness_push(h, line_of(e1, slice, rep)), 0);
  assert_int_equal(mr_harness_flush(h), 0);
}

static void test_same_images_in_the_same_order(void **state) {
  (void)state;
  mr_harness sync, piped;
  run(&sync, cartesian, 0);
  run(&piped, cartesian, 2);
  assert_int_equal(sync.nout, SLICES * REPS);
  assert_int_equal(piped.nout, sync.nout);
  for (int i = 0; i < sync.nout; i++) {
    const mr_image *a = &sync.out[i]->u.image, *b = &piped.out[i]->u.image;
    assert_int_equal(a->head.slice, b->head.slice);
    assert_int_equal(a->head.repetition, b->head.repetition);
    assert_int_equal(a->head.image_index, b->head.image_index);
    assert_int_equal(a->data_bytes, b->data_bytes);
    assert_memory_equal(a->data, b->data, a->data_bytes); /* same arithmetic, same bits */
  }
  mr_harness_close(&sync);
  mr_harness_close(&piped);
}

static void test_later_stage_failure_reaches_the_pusher(void **state) {
  (void)state;
  /* fft (stage 1) refuses k-space with a trajectory. */
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
                                       "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]",
                                   MR_CHAIN_WIRE_INPUT),
                   0);
  assert_int_equal(mr_harness_set_pipelined(&h, 2), 0);
  char radial[2048];
  snprintf(radial, sizeof radial, "%s", mr_harness_cartesian_header(8, 8, 1, 8, 8, 1));
  char *t = strstr(radial, "<trajectory>cartesian");
  assert_non_null(t);
  memcpy(t, "<trajectory>radial</trajectory></encoding></ismrmrdHeader>",
         sizeof "<trajectory>radial</trajectory></encoding></ismrmrdHeader>");
  assert_int_equal(mr_harness_configure(&h, radial), 0);
  int rc = 0;
  for (int e1 = 0; e1 < 8 && rc == 0; e1++) {
    mr_message *m = mr_message_new_acquisition(&(ISMRMRD_AcquisitionHeader){
        .version = 1, .number_of_samples = 8, .active_channels = 1, .available_channels = 1,
        .trajectory_dimensions = 2, .idx.kspace_encode_step_1 = (uint16_t)e1,
        .flags = e1 == 7 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0});
    assert_non_null(m);
    rc = mr_harness_push(&h, m);
  }
  if (rc == 0)
    rc = mr_harness_flush(&h);
  assert_true(rc < 0);
  assert_non_null(strstr(h.err.msg, "'fft'"));
  assert_non_null(strstr(h.err.msg, "non-Cartesian"));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

static void test_abandoned_stream_stops(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, cartesian, MR_CHAIN_WIRE_INPUT), 0);
  assert_int_equal(mr_harness_set_pipelined(&h, 2), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(NX, NY, 1, NX / 2, NY, 1)),
                   0);
  for (int slice = 0; slice < SLICES; slice++)
    for (int e1 = 0; e1 < NY; e1++)
      assert_int_equal(mr_harness_push(&h, line_of(e1, slice, 0)), 0);
  mr_chain_abandon(h.chain);
  int seen = h.nout; /* whatever was through before; nothing after */
  assert_true(seen <= SLICES);
  assert_true(mr_harness_push(&h, line_of(0, 0, 1)) < 0);
  assert_true(mr_harness_flush(&h) < 0);
  assert_int_equal(h.nout, seen);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_images_in_the_same_order),
      cmocka_unit_test(test_later_stage_failure_reaches_the_pusher),
      cmocka_unit_test(test_abandoned_stream_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
