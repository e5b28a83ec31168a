/* fft: k-space buffers to coil images, 2D and 3D, against a double-
 * precision centered DFT, and the crop to the recon matrix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "image_array.h"
#include "kspace.h"
#include "test_support.h"

/* Runs fft on a buffer filled with k = DFT(image) per coil and checks the
 * output against the (cropped) image. */
static void check(int nx, int ny, int nz, int nch, int rx, int ry, int rz) {
  size_t per = (size_t)nx * ny * nz;
  double complex *img = malloc(per * nch * sizeof *img);
  double complex *ksp = malloc(per * nch * sizeof *ksp);
  srand(11);
  for (size_t i = 0; i < per * nch; i++)
    img[i] = (rand() / (double)RAND_MAX) + I * (rand() / (double)RAND_MAX - 0.5);
  for (int c = 0; c < nch; c++)
    mr_test_centered_dft(img + c * per, ksp + c * per, nx, ny, nz, -1);

  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"fft\",\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(nx, ny, nz, rx, ry, rz)), 0);
  mr_kspace *k = mr_kspace_new(nx, ny, nz, nch, 0, NULL);
  for (size_t i = 0; i < per * nch; i++)
    k->data[i] = (float complex)ksp[i];
  k->recon = h.hdr.encoding[0].recon;
  k->ref.idx.slice = 4;
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), 0);
  assert_int_equal(h.nout, 1);
  assert_int_equal(h.out[0]->kind, MR_MSG_IMAGE_ARRAY);
  const mr_image_array *a = h.out[0]->u.object.ptr;
  assert_int_equal(a->nx, rx);
  assert_int_equal(a->ny, ry);
  assert_int_equal(a->nz, rz);
  assert_int_equal(a->nch, nch);
  assert_int_equal(a->ref.idx.slice, 4);
  assert_float_equal(a->fov_mm.x, rx, 1e-6);
  size_t rper = (size_t)rx * ry * rz;
  float complex *want = malloc(rper * nch * sizeof *want);
  for (int c = 0; c < nch; c++)
    for (int z = 0; z < rz; z++)
      for (int y = 0; y < ry; y++)
        for (int x = 0; x < rx; x++)
          want[c * rper + ((size_t)z * ry + y) * rx + x] =
              (float complex)img[c * per +
                                 ((size_t)(z + nz / 2 - rz / 2) * ny + (y + ny / 2 - ry / 2)) * nx +
                                 (x + nx / 2 - rx / 2)];
  double err = mr_test_rel_error_c(a->data, want, rper * nch);
  print_message("%dx%dx%d x %d coils -> %dx%dx%d: rel error %.2e\n", nx, ny, nz, nch, rx, ry, rz,
                err);
  assert_true(err < 1e-5);
  free(want);
  free(img);
  free(ksp);
  mr_harness_close(&h);
}

static void test_2d(void **state) {
  (void)state;
  check(16, 12, 1, 3, 16, 12, 1);
}

static void test_3d(void **state) {
  (void)state;
  check(8, 6, 4, 2, 8, 6, 4);
}

static void test_crop_to_recon_matrix(void **state) {
  (void)state;
  check(16, 12, 1, 2, 8, 10, 1);
}

static void test_non_cartesian_is_refused(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"fft\",\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_kspace *k = mr_kspace_new(8, 8, 1, 1, 2, NULL);
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "non-Cartesian"));
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_2d),
      cmocka_unit_test(test_3d),
      cmocka_unit_test(test_crop_to_recon_matrix),
      cmocka_unit_test(test_non_cartesian_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
