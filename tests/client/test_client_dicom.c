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
#include "test_support.h"
#include "wire_client.h"

static mr_test_server server;
static char dir[256], port[16], client[512];
static char out[65536], err[65536];

static int setup(void **state) {
  (void)state;
  if (!mr_test_have_tool("ismrmrd_generate_cartesian_shepp_logan") || !mr_test_have_dcmdump()) {
    fprintf(stderr, "skipped: needs ismrmrd-tools and dcmtk (dcmdump)\n");
    exit(MR_TEST_SKIP);
  }
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("mr-client-dicom"));
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

/* The dump of dir/name, checked against image im (plane 0). */
static void check(const char *name, const ISMRMRD_Image *im) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
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
  snprintf(data, sizeof data, "%s/phantom.h5", dir);
  snprintf(result, sizeof result, "%s/out.h5", dir);
  snprintf(dcm, sizeof dcm, "%s/dcm", dir);
  const char *gen[] = {"ismrmrd_generate_cartesian_shepp_logan", "-m", "64", "-c", "4", "-r", "2",
                       "-o", data, NULL};
  assert_int_equal(mr_test_run(gen, dir, out, sizeof out, err, sizeof err), 0);
  const char *send[] = {client, "send",  data, "-p", port, "-c", "default_dicom.xml", "-o", result,
                        "-G",   "dicom", "--dicom", dcm, "--dicom-images", NULL};
  int rc = mr_test_run(send, dir, out, sizeof out, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "reconclient: %s", err);
  assert_int_equal(rc, 0);

  ISMRMRD_Dataset ds;
  assert_int_equal(ismrmrd_init_dataset(&ds, result, "dicom"), 0);
  assert_int_equal(ismrmrd_open_dataset(&ds, false), 0);
  assert_int_equal(ismrmrd_get_number_of_images(&ds, "image_1"), 2);
  ISMRMRD_Image im[2];
  for (int i = 0; i < 2; i++) {
    ismrmrd_init_image(&im[i]);
    assert_int_equal(ismrmrd_read_image(&ds, "image_1", (uint32_t)i, &im[i]), 0);
  }
  ismrmrd_close_dataset(&ds);
  free(ds.filename);
  free(ds.groupname);

  /* The server's files, in arrival order as Gadgetron's client names
   * them, with their meta; then the client's own from the images. */
  char name[600];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof name, "dcm/dicom_%06d.dcm", i);
    check(name, &im[i]);
    snprintf(name, sizeof name, "%s/dcm/dicom_%06d_attrib.xml", dir, i);
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
