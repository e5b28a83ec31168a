/* `reconclient simulate` then `reconclient send` to reconserver on
 * loopback: simulated radial and spiral datasets come back as one image
 * each through the radial.json and spiral.json pipelines, close to the
 * phantom (band-limited to the Cartesian square, coils combined), and a 3D
 * golden-angle dataset as one 3D image. On a machine with a GPU the server
 * grids there. */
#include <complex.h>
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

#include "phantom_support.h"
#include "test_support.h"
#include "wire_client.h"

static mr_test_server server;
static char dir[256], port[16], client[512];

/* Runs reconclient with args (NULL-terminated), output to the test's log. */
static int reconclient(const char *const *args) {
  const char *argv[32] = {client};
  int n = 1;
  for (int i = 0; args[i] != NULL && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  return mr_test_run(argv, NULL, NULL, 0, NULL, 0);
}

static void path_in(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
}

/* The one image of group/image_1 in path. */
static void read_image(const char *path, const char *group, ISMRMRD_Image *im) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  assert_int_equal(ismrmrd_get_number_of_images(&d, "image_1"), 1);
  ismrmrd_init_image(im);
  assert_int_equal(ismrmrd_read_image(&d, "image_1", 0, im), 0);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
}

/* Simulates, sends through config, and returns the NRMSE of the image
 * against the band-limited phantom. */
static double round_trip(const char *trajectory, const char *config, int n, int coils) {
  char data[512], out[512], nstr[16], cstr[16];
  path_in(data, sizeof data, trajectory);
  strcat(data, ".h5");
  path_in(out, sizeof out, trajectory);
  strcat(out, "-out.h5");
  snprintf(nstr, sizeof nstr, "%d", n);
  snprintf(cstr, sizeof cstr, "%d", coils);
  const char *sim[] = {"simulate", "--trajectory", trajectory, "--matrix", nstr, "--coils", cstr,
                       "--noise", "0.001", "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", port, "-c", config, "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Image im;
  read_image(out, config, &im);
  assert_int_equal(im.head.data_type, ISMRMRD_FLOAT);
  assert_int_equal(im.head.matrix_size[0], n);
  assert_int_equal(im.head.matrix_size[1], n);
  size_t npix = (size_t)n * n;
  float *want = malloc(npix * sizeof *want);
  phantom_test_band_limited_rss(n, coils, want);
  double e = mr_test_nrmse_scaled(im.data, want, npix);
  free(want);
  ismrmrd_cleanup_image(&im);
  return e;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("mr-simulate-e2e"));
  snprintf(client, sizeof client, "%s/bin/reconclient", mr_test_binary_dir());
  mr_test_server_start(&server, NULL);
  snprintf(port, sizeof port, "%d", server.port);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_test_server_stop(&server);
  return 0;
}

static void radial(void **state) {
  (void)state;
  double e = round_trip("radial", "radial", 64, 4);
  print_message("radial 64x64 through the server: NRMSE vs the phantom %.3f\n", e);
  assert_true(e < 0.2);
}

static void spiral(void **state) {
  (void)state;
  double e = round_trip("spiral", "spiral", 64, 4);
  print_message("spiral 64x64 through the server: NRMSE vs the phantom %.3f\n", e);
  assert_true(e < 0.4);
}

static void golden_3d(void **state) {
  (void)state;
  char data[512], out[512];
  path_in(data, sizeof data, "golden3d.h5");
  path_in(out, sizeof out, "golden3d-out.h5");
  const char *sim[] = {"simulate", "--trajectory", "golden", "--3d", "--matrix", "16",
                       "--coils", "2", "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", port, "-c", "radial", "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Image im;
  read_image(out, "radial", &im);
  assert_int_equal(im.head.matrix_size[2], 16);
  ismrmrd_cleanup_image(&im);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(radial),
      cmocka_unit_test(spiral),
      cmocka_unit_test(golden_3d),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
