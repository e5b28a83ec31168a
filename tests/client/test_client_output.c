/* client/output: images land under /<group>/image_<series> as libismrmrd
 * writes them (read back here with ismrmrd_read_image: same header, same
 * attributes, same pixels), and an existing group or a non-HDF5 file is
 * refused rather than appended to or overwritten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <ismrmrd/dataset.h>

#include "output.h"
#include "test_support.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("mr-output"));
  return 0;
}

/* A message image of series, data_type and size, pixels i * scale. */
static mr_message *make_image(uint16_t series, uint16_t index, uint16_t type, uint16_t nx,
                              uint16_t ny, uint16_t nz, uint16_t nc, float scale) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = type;
  h.matrix_size[0] = nx;
  h.matrix_size[1] = ny;
  h.matrix_size[2] = nz;
  h.channels = nc;
  h.image_series_index = series;
  h.image_index = index;
  h.repetition = index;
  h.field_of_view[0] = 300.0f;
  h.position[2] = -12.5f;
  h.read_dir[0] = 1.0f;
  h.user_int[3] = 42;
  char attrs[128];
  snprintf(attrs, sizeof attrs,
           "<ismrmrdMeta><meta><name>index</name><value>%u</value></meta></ismrmrdMeta>", index);
  /* What the decoder hands over: attribute_string_len counts the NUL that
   * Gadgetron sends. */
  h.attribute_string_len = (uint32_t)strlen(attrs) + 1;
  mr_message *m = mr_message_new_image(&h, attrs);
  assert_non_null(m);
  size_t n = (size_t)nx * ny * nz * nc;
  for (size_t i = 0; i < n; i++) {
    if (type == ISMRMRD_CXFLOAT)
      ((float complex *)m->u.image.data)[i] = (float)i * scale + I * (float)i;
    else
      ((float *)m->u.image.data)[i] = (float)i * scale;
  }
  return m;
}

/* Reads image index of var in path:/group and compares it with m. */
static void expect_image(const char *path, const char *group, const char *var, uint32_t index,
                         const mr_message *m) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  ISMRMRD_Image im;
  ismrmrd_init_image(&im);
  assert_int_equal(ismrmrd_read_image(&d, var, index, &im), 0);
  assert_memory_equal(&im.head, &m->u.image.head, sizeof im.head);
  assert_string_equal(im.attribute_string, m->u.image.attributes);
  assert_int_equal(ismrmrd_size_of_image_data(&im), m->u.image.data_bytes);
  assert_memory_equal(im.data, m->u.image.data, m->u.image.data_bytes);
  ismrmrd_cleanup_image(&im);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
}

static uint32_t count_images(const char *path, const char *group, const char *var) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  uint32_t n = ismrmrd_get_number_of_images(&d, var);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return n;
}

static void test_layout(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/layout.h5", dir);
  mr_message *im[3] = {
      make_image(1, 0, ISMRMRD_FLOAT, 4, 3, 1, 1, 1.0f),
      make_image(2, 0, ISMRMRD_CXFLOAT, 2, 2, 2, 2, -1.0f),
      make_image(1, 1, ISMRMRD_FLOAT, 4, 3, 1, 1, 2.0f),
  };
  mr_output *out = NULL;
  mr_err err = {0};
  assert_int_equal(mr_output_open(path, "recon", &out, &err), 0);
  uint32_t index[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(mr_output_write(out, &im[i]->u.image, &index[i], &err), 0);
  assert_int_equal(index[0], 0);
  assert_int_equal(index[1], 0);
  assert_int_equal(index[2], 1);
  assert_int_equal(mr_output_count(out), 3);
  assert_int_equal(mr_output_close(out, &err), 0);

  assert_int_equal(count_images(path, "recon", "image_1"), 2);
  assert_int_equal(count_images(path, "recon", "image_2"), 1);
  expect_image(path, "recon", "image_1", 0, im[0]);
  expect_image(path, "recon", "image_1", 1, im[2]);
  expect_image(path, "recon", "image_2", 0, im[1]);
  for (int i = 0; i < 3; i++)
    mr_message_unref(im[i]);
}

static void test_refuses_existing_group(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/twice.h5", dir);
  mr_message *im = make_image(1, 0, ISMRMRD_FLOAT, 4, 4, 1, 1, 1.0f);
  mr_output *out = NULL;
  mr_err err = {0};
  assert_int_equal(mr_output_open(path, "first", &out, &err), 0);
  assert_int_equal(mr_output_write(out, &im->u.image, NULL, &err), 0);
  assert_int_equal(mr_output_close(out, &err), 0);

  assert_int_equal(mr_output_open(path, "first", &out, &err), MR_EINVAL);
  assert_null(out);
  assert_non_null(strstr(err.msg, "already has a group 'first'; not appending"));
  mr_err_clear(&err);
  assert_int_equal(mr_output_open(path, "/first", &out, &err), MR_EINVAL);

  /* Another group in the same file is fine and leaves the first alone. */
  mr_err_clear(&err);
  assert_int_equal(mr_output_open(path, "second/run", &out, &err), 0);
  assert_int_equal(mr_output_write(out, &im->u.image, NULL, &err), 0);
  assert_int_equal(mr_output_close(out, &err), 0);
  assert_int_equal(count_images(path, "first", "image_1"), 1);
  assert_int_equal(count_images(path, "second/run", "image_1"), 1);
  mr_message_unref(im);
}

static void test_refuses_other_files(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/notes.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("keep me\n", f);
  fclose(f);
  mr_output *out = NULL;
  mr_err err = {0};
  assert_int_equal(mr_output_open(path, "recon", &out, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "is not a readable HDF5 file; not overwriting it"));
  char text[32] = "";
  f = fopen(path, "r");
  assert_non_null(fgets(text, sizeof text, f));
  fclose(f);
  assert_string_equal(text, "keep me\n");
}

static void test_no_image_no_file(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/never.h5", dir);
  mr_output *out = NULL;
  mr_err err = {0};
  assert_int_equal(mr_output_open(path, "recon", &out, &err), 0);
  assert_int_equal(mr_output_close(out, &err), 0);
  assert_int_not_equal(access(path, F_OK), 0);
}

/* Issue 12, item 13: libismrmrd writes as many bytes as the header says; a
 * header whose size wraps in 64 bits to the buffer's 34,940,864 bytes is
 * refused before anything is written. */
static void test_header_bigger_than_data(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/wrapped.h5", dir);
  mr_output *out = NULL;
  mr_err err = {0};
  assert_int_equal(mr_output_open(path, "recon", &out, &err), 0);
  mr_image im = {.data_bytes = MR_TEST_WRAPPED_IMAGE_BYTES};
  mr_test_wrapped_image_header(&im.head);
  im.data = calloc(1, im.data_bytes);
  assert_non_null(im.data);
  assert_int_equal(mr_output_write(out, &im, NULL, &err), MR_EDATA);
  assert_non_null(strstr(err.msg, "does not match its 34940864 bytes"));
  assert_int_equal(mr_output_count(out), 0);
  assert_int_equal(mr_output_close(out, &err), 0);
  free(im.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_refuses_existing_group),
      cmocka_unit_test(test_refuses_other_files),
      cmocka_unit_test(test_no_image_no_file),
      cmocka_unit_test(test_header_bigger_than_data),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
