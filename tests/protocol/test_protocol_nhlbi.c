/* protocol/nhlbi.c: the NHLBI decoder against a block packed by hand (the
 * bit order), the test compressor's two modes (error within the
 * tolerance), and every field it reads checked. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nhlbi.h"
#include "nhlbi_encode.h"

/* A 13-byte header: elements, scale, bits. */
static void put_header(uint8_t *b, uint64_t elements, float scale, uint8_t bits) {
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(elements >> (8 * i));
  memcpy(b + 8, &scale, 4);
  b[12] = bits;
}

/* 1, -2 and 15 as 5-bit two's complement integers, least significant bit
 * first: 00001 | 11110 | 01111 -> bytes 0xC1 0x3F; scale 2. */
static void test_hand_packed_block(void **state) {
  (void)state;
  uint8_t b[15];
  put_header(b, 3, 2.0f, 5);
  b[13] = 0xC1;
  b[14] = 0x3F;
  float out[3];
  mr_err e = {0};
  assert_int_equal(mr_nhlbi_decode(b, sizeof b, out, 3, &e), 0);
  assert_true(out[0] == 0.5f);
  assert_true(out[1] == -1.0f);
  assert_true(out[2] == 7.5f);
}

static void test_32_bit_values(void **state) {
  (void)state;
  uint8_t b[13 + 8];
  put_header(b, 2, 1.0f, 32);
  int32_t v[2] = {INT32_MIN, 123456789};
  memcpy(b + 13, v, 8);
  float out[2];
  assert_int_equal(mr_nhlbi_decode(b, sizeof b, out, 2, NULL), 0);
  assert_true(out[0] == (float)INT32_MIN);
  assert_true(out[1] == (float)123456789);
}

static float *test_signal(size_t n) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = (float)(1000.0 * sin(0.37 * (double)i) * exp(-(double)i / (double)n));
  return v;
}

static void test_precision_mode_error_bound(void **state) {
  (void)state;
  const size_t n = 2 * 256 * 4;
  float *v = test_signal(n), *out = malloc(n * sizeof *out);
  const unsigned widths[] = {4, 8, 12, 16, 20, 24, 31};
  for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
    unsigned bits = widths[w];
    uint8_t *block;
    size_t len;
    assert_int_equal(mr_test_nhlbi_precision(v, n, bits, &block, &len), 0);
    assert_int_equal(len, 13 + (n * bits + 7) / 8);
    assert_int_equal(mr_nhlbi_decode(block, len, out, n, NULL), 0);
    float scale;
    memcpy(&scale, block + 8, 4);
    for (size_t i = 0; i < n; i++)
      assert_true(fabsf(out[i] - v[i]) <= 0.5f / scale * 1.001f + fabsf(v[i]) * 1e-6f);
    free(block);
  }
  free(v);
  free(out);
}

static void test_tolerance_mode_error_bound(void **state) {
  (void)state;
  const size_t n = 2 * 128 * 3;
  float *v = test_signal(n), *out = malloc(n * sizeof *out);
  const float tolerances[] = {0.001f, 0.1f, 5.0f, 2000.0f};
  for (size_t t = 0; t < sizeof tolerances / sizeof *tolerances; t++) {
    uint8_t *block;
    size_t len;
    assert_int_equal(mr_test_nhlbi_tolerance(v, n, tolerances[t], &block, &len), 0);
    assert_int_equal(mr_nhlbi_decode(block, len, out, n, NULL), 0);
    for (size_t i = 0; i < n; i++)
      assert_true(fabsf(out[i] - v[i]) <= tolerances[t] * 1.001f + fabsf(v[i]) * 1e-6f);
    free(block);
  }
  free(v);
  free(out);
}

/* An all-zero line in precision mode: the scale is infinite, values 0. */
static void test_zero_line_infinite_scale(void **state) {
  (void)state;
  float v[8] = {0}, out[8];
  uint8_t *block;
  size_t len;
  assert_int_equal(mr_test_nhlbi_precision(v, 8, 16, &block, &len), 0);
  for (int i = 0; i < 8; i++)
    out[i] = 1.0f;
  assert_int_equal(mr_nhlbi_decode(block, len, out, 8, NULL), 0);
  for (int i = 0; i < 8; i++)
    assert_true(out[i] == 0.0f);
  free(block);
}

static void expect_refused(const uint8_t *b, size_t len, uint64_t count, const char *needle) {
  float out[64];
  mr_err e = {0};
  assert_int_equal(mr_nhlbi_decode(b, len, out, count, &e), MR_EDATA);
  assert_non_null(strstr(e.msg, needle));
}

static void test_every_field_checked(void **state) {
  (void)state;
  uint8_t b[13 + 64];
  put_header(b, 4, 1.0f, 8);
  memset(b + 13, 0, 64);
  expect_refused(b, 12, 4, "shorter than");
  expect_refused(b, 13 + 4, 5, "holds 4 values");
  expect_refused(b, 13 + 4, 3, "holds 4 values");
  put_header(b, 4, 1.0f, 0);
  expect_refused(b, 13, 4, "0 bits");
  put_header(b, 4, 1.0f, 33);
  expect_refused(b, 13 + 17, 4, "33 bits");
  put_header(b, 4, 0.0f, 8);
  expect_refused(b, 13 + 4, 4, "scale");
  put_header(b, 4, -1.0f, 8);
  expect_refused(b, 13 + 4, 4, "scale");
  put_header(b, 4, NAN, 8);
  expect_refused(b, 13 + 4, 4, "scale");
  put_header(b, 4, 1.0f, 8);
  expect_refused(b, 13 + 3, 4, "need 4");
  expect_refused(b, 13 + 5, 4, "need 4");
  put_header(b, 5, 1.0f, 3); /* 15 bits: 2 bytes, not 1 or 3 */
  expect_refused(b, 13 + 1, 5, "need 2");
  expect_refused(b, 13 + 3, 5, "need 2");
  /* A count whose bit total does not fit in 64 bits. */
  put_header(b, UINT64_MAX / 8, 1.0f, 32);
  expect_refused(b, 13 + 4, UINT64_MAX / 8, "too large");
}

static void test_acquisition_decompressed_in_place(void **state) {
  (void)state;
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = 16;
  h.active_channels = 2;
  h.available_channels = 2;
  h.scan_counter = 7;
  mr_message *m = mr_message_new_acquisition(&h);
  float *f = (float *)m->u.acq.data;
  for (int i = 0; i < 64; i++)
    f[i] = (float)(i - 32);
  assert_int_equal(mr_test_nhlbi_compress_acquisition(m, 0, 0.25f), 0);
  assert_true(m->u.acq.head.flags & MR_ACQ_COMPRESSED);
  assert_null(m->u.acq.data);
  mr_err e = {0};
  assert_int_equal(mr_acquisition_decompress(&m->u.acq, &e), 0);
  assert_false(m->u.acq.head.flags & MR_ACQ_COMPRESSED);
  assert_null(m->u.acq.compressed);
  assert_int_equal(m->u.acq.compressed_bytes, 0);
  f = (float *)m->u.acq.data;
  for (int i = 0; i < 64; i++)
    assert_true(f[i] == (float)(i - 32));
  /* A block for another channel count is refused and the line kept. */
  m->u.acq.head.active_channels = 2;
  assert_int_equal(mr_test_nhlbi_compress_acquisition(m, 12, 0), 0);
  m->u.acq.head.active_channels = 1;
  assert_int_equal(mr_acquisition_decompress(&m->u.acq, &e), MR_EDATA);
  assert_non_null(strstr(e.msg, "announces 32"));
  assert_non_null(m->u.acq.compressed);
  assert_true(m->u.acq.head.flags & MR_ACQ_COMPRESSED);
  mr_message_unref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_packed_block),
      cmocka_unit_test(test_32_bit_values),
      cmocka_unit_test(test_precision_mode_error_bound),
      cmocka_unit_test(test_tolerance_mode_error_bound),
      cmocka_unit_test(test_zero_line_infinite_scale),
      cmocka_unit_test(test_every_field_checked),
      cmocka_unit_test(test_acquisition_decompressed_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
