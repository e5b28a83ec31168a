/* coil_combine: root sum of squares against a direct computation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <math.h>

#include "gadget_harness.h"
#include "image_array.h"

static void test_rss(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"coil_combine\",\"method\":\"rss\"}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_image_array *a = mr_image_array_new(5, 4, 2, 6, NULL);
  size_t per = 5 * 4 * 2;
  for (size_t i = 0; i < per * 6; i++)
    a->data[i] = (float)(i % 7) - 3.0f + I * (float)(i % 5);
  a->ref.idx.repetition = 2;
  a->fov_mm.y = 123;
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), 0);
  const mr_image_array *b = h.out[0]->u.object.ptr;
  assert_int_equal(b->nch, 1);
  assert_int_equal(b->nx * b->ny * b->nz, per);
  assert_int_equal(b->ref.idx.repetition, 2);
  assert_float_equal(b->fov_mm.y, 123, 0);
  for (size_t p = 0; p < per; p++) {
    double sum = 0;
    for (size_t c = 0; c < 6; c++) {
      double re = (double)((c * per + p) % 7) - 3.0, im = (double)((c * per + p) % 5);
      sum += re * re + im * im;
    }
    assert_float_equal(crealf(b->data[p]), sqrt(sum), 1e-4 * sqrt(sum));
    assert_float_equal(cimagf(b->data[p]), 0, 0);
  }
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rss)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
