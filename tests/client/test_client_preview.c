/* client/preview: PNGs decoded with libpng have the image's size, use the
 * full 8-bit range with the window from the data (outliers clipped), one
 * file per plane for 3D and multi-channel images, any pixel type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "preview.h"
#include "test_client_png_read.h"
#include "test_support.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("mr-preview"));
  return 0;
}

static mr_message *new_image(uint16_t type, uint16_t nx, uint16_t ny, uint16_t nz, uint16_t nc) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = type;
  h.matrix_size[0] = nx;
  h.matrix_size[1] = ny;
  h.matrix_size[2] = nz;
  h.channels = nc;
  mr_message *m = mr_message_new_image(&h, NULL);
  assert_non_null(m);
  return m;
}

static uint8_t *read_png(const char *name, uint32_t w, uint32_t h) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  uint8_t *px = NULL;
  uint32_t pw = 0, ph = 0;
  assert_int_equal(mr_test_png_read_gray(path, &px, &pw, &ph), 0);
  assert_int_equal(pw, w);
  assert_int_equal(ph, h);
  return px;
}

/* A 2D ramp whose last pixel is a huge outlier: the 99.5th percentile
 * window must keep the ramp spread over 0..255 and clip the outlier. */
static void test_window_and_size(void **state) {
  (void)state;
  const uint16_t nx = 40, ny = 30;
  mr_message *m = new_image(ISMRMRD_FLOAT, nx, ny, 1, 1);
  float *v = m->u.image.data;
  for (int i = 0; i < nx * ny; i++)
    v[i] = (float)i;
  v[nx * ny - 1] = 1e9f;
  mr_err err = {0};
  assert_int_equal(mr_preview_write(dir, "ramp", &m->u.image, &err), 0);
  uint8_t *px = read_png("ramp.png", nx, ny);
  assert_int_equal(px[0], 0); /* below the 1st percentile */
  assert_int_equal(px[nx * ny - 1], 255);
  /* Rows go top to bottom in y: pixel (x=5, y=20) is value 20 nx + 5. */
  int mid = px[20 * nx + 5];
  /* The window: 1st percentile of 1200 values is value 11, the 99.5th is
   * value 1193. */
  double expect = 255.0 * (20.0 * nx + 5 - 11) / (1193 - 11);
  assert_true(abs(mid - (int)(expect + 0.5)) <= 1);
  /* Most of the range is used: no squashing by the outlier. */
  assert_true(px[nx * ny - 2] >= 254);
  free(px);
  mr_message_unref(m);
}

static void test_planes(void **state) {
  (void)state;
  mr_message *m = new_image(ISMRMRD_CXFLOAT, 8, 6, 3, 2);
  float complex *v = m->u.image.data;
  for (size_t i = 0; i < 8 * 6 * 3 * 2; i++)
    v[i] = I * (float)(i / 48); /* plane k is all k (as a magnitude) */
  mr_err err = {0};
  assert_int_equal(mr_preview_write(dir, "vol", &m->u.image, &err), 0);
  const char *names[] = {"vol_z000_c00.png", "vol_z001_c00.png", "vol_z002_c00.png",
                         "vol_z000_c01.png", "vol_z001_c01.png", "vol_z002_c01.png"};
  int last = -1;
  for (int k = 0; k < 6; k++) {
    uint8_t *px = read_png(names[k], 8, 6);
    for (int i = 1; i < 48; i++)
      assert_int_equal(px[i], px[0]); /* each plane is flat */
    assert_true(px[0] > last || k == 0); /* and brighter than the one before */
    last = px[0];
    free(px);
  }
  char path[512];
  snprintf(path, sizeof path, "%s/vol.png", dir);
  assert_int_not_equal(access(path, F_OK), 0);
  mr_message_unref(m);
}

static void test_flat_and_integer(void **state) {
  (void)state;
  mr_message *m = new_image(ISMRMRD_USHORT, 5, 4, 1, 1);
  uint16_t *v = m->u.image.data;
  for (int i = 0; i < 20; i++)
    v[i] = 7;
  mr_err err = {0};
  assert_int_equal(mr_preview_write(dir, "flat", &m->u.image, &err), 0);
  uint8_t *px = read_png("flat.png", 5, 4);
  for (int i = 0; i < 20; i++)
    assert_int_equal(px[i], 0);
  free(px);
  mr_message_unref(m);
}

static void test_unwritable(void **state) {
  (void)state;
  mr_message *m = new_image(ISMRMRD_FLOAT, 4, 4, 1, 1);
  memset(m->u.image.data, 0, m->u.image.data_bytes);
  mr_err err = {0};
  assert_int_equal(mr_preview_write("/nonexistent-dir", "x", &m->u.image, &err), MR_EIO);
  assert_non_null(strstr(err.msg, "cannot write /nonexistent-dir/x.png"));
  mr_message_unref(m);
}

/* Issue 12, item 13: a header whose x * y * z * channels * 4 wraps to
 * 34,940,864 bytes in 64 bits, with a buffer of that size (what a decoder
 * trusting the product would have made): refused before a pixel is read,
 * not walked for 2^64 pixels past the buffer. */
static void test_header_bigger_than_data(void **state) {
  (void)state;
  mr_image im = {.data_bytes = MR_TEST_WRAPPED_IMAGE_BYTES};
  mr_test_wrapped_image_header(&im.head);
  im.data = calloc(1, im.data_bytes);
  assert_non_null(im.data);
  mr_err err = {0};
  assert_int_equal(mr_preview_write(dir, "wrapped", &im, &err), MR_EDATA);
  assert_non_null(strstr(err.msg, "do not match its 34940864 bytes"));
  /* A header that says less than the buffer holds is refused too. */
  im.head.matrix_size[0] = im.head.matrix_size[1] = 4;
  im.head.matrix_size[2] = im.head.channels = 1;
  assert_int_equal(mr_preview_write(dir, "short", &im, &(mr_err){0}), MR_EDATA);
  free(im.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_and_size),
      cmocka_unit_test(test_planes),
      cmocka_unit_test(test_flat_and_integer),
      cmocka_unit_test(test_unwritable),
      cmocka_unit_test(test_header_bigger_than_data),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
