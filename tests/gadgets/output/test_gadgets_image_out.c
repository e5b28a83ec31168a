/* image_out: ImageHeader fields from the acquisitions, pixel types, image
 * indices, series, and the meta attributes; images with pixels that are not
 * finite refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "gadget_harness.h"
#include "image_array.h"

static mr_image_array *sample(void) {
  mr_image_array *a = mr_image_array_new(4, 3, 1, 2, NULL);
  for (size_t i = 0; i < 24; i++)
    a->data[i] = 3.0f + 4.0f * I * (float)(i % 2);
  a->fov_mm = (mr_xyz_f){250, 200, 5};
  ISMRMRD_AcquisitionHeader *r = &a->ref;
  r->measurement_uid = 77;
  r->position[0] = 1.5f;
  r->read_dir[0] = 1;
  r->phase_dir[1] = 1;
  r->slice_dir[2] = 1;
  r->patient_table_position[2] = -10;
  r->idx.slice = 3;
  r->idx.contrast = 1;
  r->idx.repetition = 2;
  r->idx.set = 1;
  r->idx.phase = 4;
  r->idx.average = 5;
  r->acquisition_time_stamp = 12345;
  r->physiology_time_stamp[0] = 99;
  return a;
}

static void test_header_from_acquisitions(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"image_out\",\"series\":7}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_harness_push(&h, mr_image_array_message(sample()));
  mr_harness_push(&h, mr_image_array_message(sample()));
  assert_int_equal(h.nout, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(h.out[i]->kind, MR_MSG_IMAGE);
    const ISMRMRD_ImageHeader *ih = &h.out[i]->u.image.head;
    assert_int_equal(ih->data_type, ISMRMRD_FLOAT);
    assert_int_equal(ih->image_type, ISMRMRD_IMTYPE_MAGNITUDE);
    assert_int_equal(ih->matrix_size[0], 4);
    assert_int_equal(ih->matrix_size[1], 3);
    assert_int_equal(ih->matrix_size[2], 1);
    assert_int_equal(ih->channels, 2);
    assert_float_equal(ih->field_of_view[0], 250, 0);
    assert_float_equal(ih->field_of_view[1], 200, 0);
    assert_float_equal(ih->position[0], 1.5, 0);
    assert_float_equal(ih->read_dir[0], 1, 0);
    assert_float_equal(ih->phase_dir[1], 1, 0);
    assert_float_equal(ih->slice_dir[2], 1, 0);
    assert_float_equal(ih->patient_table_position[2], -10, 0);
    assert_int_equal(ih->slice, 3);
    assert_int_equal(ih->contrast, 1);
    assert_int_equal(ih->repetition, 2);
    assert_int_equal(ih->set, 1);
    assert_int_equal(ih->phase, 4);
    assert_int_equal(ih->average, 5);
    assert_int_equal(ih->measurement_uid, 77);
    assert_int_equal(ih->acquisition_time_stamp, 12345);
    assert_int_equal(ih->physiology_time_stamp[0], 99);
    assert_int_equal(ih->image_series_index, 7);
    assert_int_equal(ih->image_index, i + 1);
    const float *px = h.out[i]->u.image.data;
    assert_float_equal(px[0], 3, 1e-6);
    assert_float_equal(px[1], 5, 1e-6);
    const char *attr = h.out[i]->u.image.attributes;
    assert_non_null(strstr(attr, "<meta><name>DataRole</name><value>Image</value></meta>"));
    assert_non_null(strstr(attr, "<name>ImageProcessingHistory</name><value>image_out</value>"));
    assert_non_null(strstr(attr, "<name>WindowWidth</name><value>2</value>"));
  }
  mr_harness_close(&h);
}

static void test_pixel_types(void **state) {
  (void)state;
  static const struct {
    const char *type;
    uint16_t data_type, image_type;
    float first, second;
  } cases[] = {
      {"complex", ISMRMRD_CXFLOAT, ISMRMRD_IMTYPE_COMPLEX, 3, 0},
      {"phase", ISMRMRD_FLOAT, ISMRMRD_IMTYPE_PHASE, 0, 0.927295218f},
      {"real", ISMRMRD_FLOAT, ISMRMRD_IMTYPE_REAL, 3, 3},
      {"imag", ISMRMRD_FLOAT, ISMRMRD_IMTYPE_IMAG, 0, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char json[96];
    snprintf(json, sizeof json, "[{\"gadget\":\"image_out\",\"type\":\"%s\"}]", cases[i].type);
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, json, MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)), 0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
    mr_harness_push(&h, mr_image_array_message(sample()));
    const mr_image *im = &h.out[0]->u.image;
    assert_int_equal(im->head.data_type, cases[i].data_type);
    assert_int_equal(im->head.image_type, cases[i].image_type);
    const float *px = im->data;
    assert_float_equal(px[0], cases[i].first, 1e-6);
    assert_float_equal(px[1], cases[i].second, 1e-6);
    mr_harness_close(&h);
  }
}

/* An image with a NaN or an infinite pixel is refused, naming it; nothing
 * goes out; a finite one after it still does. */
static void test_non_finite_refused(void **state) {
  (void)state;
  const float bad[] = {NAN, INFINITY, -INFINITY};
  for (int b = 0; b < 3; b++) {
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"image_out\"}]",
                                     MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                     0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)),
                     0);
    mr_image_array *a = sample();
    a->data[4 * 3 + 2 * 4 + 1] = bad[b] + I * 1.0f; /* channel 1, x 1, y 2 */
    a->data[23] = 1.0f + I * bad[b];
    assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), MR_EDATA);
    print_message("%s\n", h.err.msg);
    assert_non_null(strstr(h.err.msg, "2 pixels that are not finite"));
    assert_non_null(strstr(h.err.msg, "x 1, y 2, z 0, channel 1"));
    assert_int_equal(h.nout, 0);
    assert_int_equal(mr_harness_push(&h, mr_image_array_message(sample())), 0);
    assert_int_equal(h.nout, 1);
    mr_harness_close(&h);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_from_acquisitions),
      cmocka_unit_test(test_pixel_types),
      cmocka_unit_test(test_non_finite_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
