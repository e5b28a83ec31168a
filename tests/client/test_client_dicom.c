/* DICOM end to end: reconclient sends a Shepp-Logan phantom (two
 * repetitions) to reconserver with the cartesian_dicom config, saves the
 * server's DICOM files (1018) as Gadgetron's client names them and makes
 * DICOM files of the ISMRMRD images too (--dicom-images); dcmdump reads
 * every file and each one's geometry and pixel values match the image in
 * the HDF5 output. Skips (77) without the ISMRMRD tools or dcmdump. */
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

#include "dcmdump.h"
#include "client_env.h"
#include "test_support.h"

static mr_test_client_env env;
static char out[65536], err[65536];

static int setup(void **state) {
  (void)state;
  if (!mr_test_have_tool("ismrmrd_generate_cartesian_shepp_logan") || !mr_test_have_dcmdump()) {
    fprintf(stderr, "skipped: needs ismrmrd-tools and dcmtk (dcmdump)\n");
    exit(MR_TEST_SKIP);
  }
  mr_test_client_env_start(&env, "mr-client-dicom");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_test_client_env_stop(&env);
  return 0;
}

/* The dump of dir/name, checked against image im (plane 0). */
static void check(const char *name, const ISMRMRD_Image *im) {
  char path[600];
  mr_test_client_path(&env, path, sizeof path, name);
  char *d = mr_test_dcmdump(path);
  if (d == NULL)
    fail_msg("dcmdump cannot read %s", path);
  const char *why = mr_test_dcm_matches(d, &im->head, im->data, 0);
  if (why != NULL)
    fail_msg("%s: %s", name, why);
  char v[64];
  assert_int_equal(mr_test_dcm_value(d, "(0008,0080)", v, sizeof v), 0);
  assert_string_equal(v, "ISMRM Synthetic Imaging Lab"); /* the phantom's header */
  free(d);
}

static void test_dicom_files_match_the_hdf5_images(void **state) {
  (void)state;
  char data[512], result[512], dcm[512];
  mr_test_client_path(&env, data, sizeof data, "phantom.h5");
  mr_test_client_path(&env, result, sizeof result, "out.h5");
  mr_test_client_path(&env, dcm, sizeof dcm, "dcm");
  const char *gen[] = {"ismrmrd_generate_cartesian_shepp_logan", "-m", "64", "-c", "4", "-r", "2",
                       "-o", data, NULL};
  assert_int_equal(mr_test_run(gen, env.dir, out, sizeof out, err, sizeof err), 0);
  const char *send[] = {"send", data, "-p", env.port, "-c", "default_dicom.xml", "-o", result,
                        "-G", "dicom", "--dicom", dcm, "--dicom-images", NULL};
  int rc = mr_test_reconclient(&env, send, out, sizeof out, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "reconclient: %s", err);
  assert_int_equal(rc, 0);

  ISMRMRD_Image im[2];
  assert_int_equal(mr_test_read_images(result, "dicom", "image_1", im, 2), 2);

  /* The server's files, in arrival order as Gadgetron's client names
   * them, with their meta; then the client's own from the images. */
  char name[600];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof name, "dcm/dicom_%06d.dcm", i);
    check(name, &im[i]);
    snprintf(name, sizeof name, "%s/dcm/dicom_%06d_attrib.xml", env.dir, i);
    assert_int_equal(access(name, R_OK), 0);
    snprintf(name, sizeof name, "dcm/dicom_image_1_%u.dcm", im[i].head.image_index);
    check(name, &im[i]);
  }
  for (int i = 0; i < 2; i++)
    ismrmrd_cleanup_image(&im[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dicom_files_match_the_hdf5_images),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
