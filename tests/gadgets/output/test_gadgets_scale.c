/* scale: a constant factor, each image to a largest magnitude, headers and
 * meta kept, shared input left alone, other pixel types, overflow and bad
 * parameters refused; the chain of docs/writing-a-gadget.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "image_array.h"

/* A 3 x 2 image of data_type with pixels values[] (two floats a pixel when
 * complex), image_index 9 and one meta attribute. */
static mr_message *image(uint16_t data_type, const float *values) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = data_type;
  h.matrix_size[0] = 3;
  h.matrix_size[1] = 2;
  h.matrix_size[2] = 1;
  h.channels = 1;
  h.image_index = 9;
  mr_message *m = mr_message_new_image(&h, "<ismrmrdMeta/>");
  assert_non_null(m);
  if (values != NULL)
    memcpy(m->u.image.data, values, m->u.image.data_bytes);
  return m;
}

static void open_scale(mr_harness *h, const char *params) {
  char gadgets[256];
  snprintf(gadgets, sizeof gadgets, "[{\"gadget\":\"scale\"%s}]", params);
  assert_int_equal(mr_harness_open(h, gadgets, MR_KIND_BIT(MR_MSG_IMAGE)), 0);
  assert_int_equal(mr_harness_configure(h, NULL), 0);
}

static void test_factor(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, ",\"factor\":2.5");
  static const float px[6] = {1, -2, 0, 4, 0.5f, 8};
  assert_int_equal(mr_harness_push(&h, image(ISMRMRD_FLOAT, px)), 0);
  assert_int_equal(h.nout, 1);
  const mr_image *out = &h.out[0]->u.image;
  assert_int_equal(out->head.image_index, 9);
  assert_int_equal(out->head.data_type, ISMRMRD_FLOAT);
  assert_string_equal(out->attributes, "<ismrmrdMeta/>");
  const float *v = out->data;
  for (int i = 0; i < 6; i++)
    assert_float_equal(v[i], 2.5 * px[i], 1e-6);
  mr_harness_close(&h);
}

static void test_max_complex(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, ",\"mode\":\"max\",\"max\":10");
  /* magnitudes 5, 1, 0, 2.5, 1, 2: the largest, 5, becomes 10 */
  static const float px[12] = {3, 4, 1, 0, 0, 0, 1.5f, 2, 0, -1, 2, 0};
  assert_int_equal(mr_harness_push(&h, image(ISMRMRD_CXFLOAT, px)), 0);
  assert_int_equal(h.nout, 1);
  const float *v = h.out[0]->u.image.data;
  for (int i = 0; i < 12; i++)
    assert_float_equal(v[i], 2 * px[i], 1e-6);
  mr_harness_close(&h);
}

static void test_zero_image_unchanged(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, ",\"mode\":\"max\"");
  assert_int_equal(mr_harness_push(&h, image(ISMRMRD_FLOAT, NULL)), 0);
  assert_int_equal(h.nout, 1);
  const float *v = h.out[0]->u.image.data;
  for (int i = 0; i < 6; i++)
    assert_float_equal(v[i], 0, 0);
  mr_harness_close(&h);
}

/* Another holder of the input message still sees its own pixels. */
static void test_shared_input_untouched(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, ",\"factor\":3");
  static const float px[6] = {1, 2, 3, 4, 5, 6};
  mr_message *in = image(ISMRMRD_FLOAT, px);
  mr_message_ref(in);
  assert_int_equal(mr_harness_push(&h, in), 0);
  assert_memory_equal(in->u.image.data, px, sizeof px);
  assert_float_equal(((const float *)h.out[0]->u.image.data)[5], 18, 1e-6);
  mr_message_unref(in);
  mr_harness_close(&h);
}

static void test_other_pixel_type_refused(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, "");
  assert_int_equal(mr_harness_push(&h, image(ISMRMRD_USHORT, NULL)), MR_ENOTSUP);
  assert_non_null(strstr(h.err.msg, "scale"));
  assert_non_null(strstr(h.err.msg, "data type 1"));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

static void test_overflow_refused(void **state) {
  (void)state;
  mr_harness h;
  open_scale(&h, ",\"factor\":1e12");
  static const float px[6] = {1, 2, 3e30f, 4, 5, 6};
  assert_int_equal(mr_harness_push(&h, image(ISMRMRD_FLOAT, px)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "overflows"));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

static void test_bad_parameters(void **state) {
  (void)state;
  static const char *const bad[] = {
      "[{\"gadget\":\"scale\",\"factor\":0}]",
      "[{\"gadget\":\"scale\",\"factor\":\"2\"}]",
      "[{\"gadget\":\"scale\",\"mode\":\"percentile\"}]",
      "[{\"gadget\":\"scale\",\"max\":-1}]",
      "[{\"gadget\":\"scale\",\"gain\":2}]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, bad[i], MR_KIND_BIT(MR_MSG_IMAGE)), MR_ECONFIG);
    assert_non_null(strstr(h.err.msg, "scale"));
    mr_harness_close(&h);
  }
}

/* The chain of the guide: image_out, then scale to a largest magnitude of
 * 4095; the image array's magnitudes 5 and 2.5 come out as 4095 and 2047.5. */
static void test_after_image_out(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h,
                                   "[{\"gadget\":\"image_out\",\"type\":\"magnitude\"},"
                                   " {\"gadget\":\"scale\",\"mode\":\"max\",\"max\":4095}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(4, 4, 1, 4, 4, 1)), 0);
  mr_image_array *a = mr_image_array_new(2, 1, 1, 1, NULL);
  assert_non_null(a);
  a->data[0] = 3 + 4 * I;
  a->data[1] = 1.5f + 2 * I;
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), 0);
  assert_int_equal(h.nout, 1);
  const float *v = h.out[0]->u.image.data;
  assert_float_equal(v[0], 4095, 1e-3);
  assert_float_equal(v[1], 2047.5, 1e-3);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_factor),
      cmocka_unit_test(test_max_complex),
      cmocka_unit_test(test_zero_image_unchanged),
      cmocka_unit_test(test_shared_input_untouched),
      cmocka_unit_test(test_other_pixel_type_refused),
      cmocka_unit_test(test_overflow_refused),
      cmocka_unit_test(test_bad_parameters),
      cmocka_unit_test(test_after_image_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
