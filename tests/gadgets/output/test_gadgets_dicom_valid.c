/* The DICOM files dicom_out makes pass a DICOM validator (issue 27 item
 * 14): dciodvfy (Debian's dicom3tools) reports no error for a header with
 * a patient and a study, one with none (Type 2 attributes present and
 * empty), and one with an inversion time. Exits 77 (skipped) where
 * dciodvfy is not installed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "test_support.h"

static const char *const headers[] = {
    /* everything a scanner's header carries */
    "<subjectInformation><patientName>Doe^Jane</patientName><patientID>PID-7</patientID>"
    "<patientBirthdate>1980-02-29</patientBirthdate><patientGender>F</patientGender>"
    "<patientWeight_kg>61.5</patientWeight_kg></subjectInformation>"
    "<studyInformation><studyDate>2024-05-17</studyDate><studyTime>14:03:27</studyTime>"
    "<studyID>S1</studyID><accessionNumber>A1</accessionNumber>"
    "<studyInstanceUID>1.2.3.4.5</studyInstanceUID></studyInformation>"
    "<measurementInformation><measurementID>M1</measurementID>"
    "<seriesDate>2024-05-17</seriesDate><seriesTime>14:05:00</seriesTime>"
    "<patientPosition>HFS</patientPosition><protocolName>t1</protocolName>"
    "<seriesDescription>T1 \xc3\xa9t\xc3\xa9</seriesDescription></measurementInformation>"
    "<acquisitionSystemInformation><systemVendor>V</systemVendor>"
    "<systemFieldStrength_T>2.89</systemFieldStrength_T></acquisitionSystemInformation>"
    "<sequenceParameters><TR>4.5</TR><TE>2.1</TE><flipAngle_deg>15</flipAngle_deg>"
    "</sequenceParameters>",
    /* nothing at all: every Type 2 attribute present and empty */
    "",
    /* an inversion recovery */
    "<sequenceParameters><TR>2000</TR><TE>10</TE><TI>800</TI></sequenceParameters>",
};

/* The harness's Cartesian header with `inside` after its opening tag. */
static char *header(const char *inside) {
  const char *base = mr_harness_cartesian_header(8, 8, 1, 8, 8, 1);
  const char *end = strchr(strstr(base, "<ismrmrdHeader"), '>') + 1;
  size_t n = strlen(base) + strlen(inside) + 1;
  char *x = malloc(n);
  assert_non_null(x);
  snprintf(x, n, "%.*s%s%s", (int)(end - base), base, inside, end);
  return x;
}

static mr_message *image(uint16_t nz) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = ISMRMRD_FLOAT;
  h.image_type = ISMRMRD_IMTYPE_MAGNITUDE;
  h.matrix_size[0] = 8;
  h.matrix_size[1] = 8;
  h.matrix_size[2] = nz;
  h.channels = 1;
  h.field_of_view[0] = h.field_of_view[1] = 200;
  h.field_of_view[2] = 5.0f * nz;
  const float read[3] = {1, 0, 0}, phase[3] = {0, 1, 0}, slice[3] = {0, 0, 1};
  memcpy(h.read_dir, read, sizeof read);
  memcpy(h.phase_dir, phase, sizeof phase);
  memcpy(h.slice_dir, slice, sizeof slice);
  h.image_series_index = 1;
  h.image_index = 1;
  mr_message *m = mr_message_new_image(&h, "<ismrmrdMeta></ismrmrdMeta>");
  assert_non_null(m);
  float *px = m->u.image.data;
  for (size_t i = 0; i < (size_t)64 * nz; i++)
    px[i] = (float)(1000.0 * fabs(sin(0.7 * (double)i)));
  return m;
}

/* dciodvfy's verdict on the file: its output, and whether it has an error. */
static int validate(const mr_message *dcm, const char *dir, int n) {
  char path[600], cmd[1400], line[1024];
  snprintf(path, sizeof path, "%s/file_%d.dcm", dir, n);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(dcm->u.dicom.bytes, 1, dcm->u.dicom.nbytes, f), dcm->u.dicom.nbytes);
  fclose(f);
  snprintf(cmd, sizeof cmd, "dciodvfy '%s' 2>&1", path);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  int errors = 0;
  while (fgets(line, sizeof line, p) != NULL) {
    fprintf(stderr, "header %d: %s", n, line);
    if (strncmp(line, "Error", 5) == 0)
      errors++;
  }
  pclose(p);
  return errors;
}

static void test_files_pass_dciodvfy(void **state) {
  (void)state;
  const char *dir = mr_test_tmpdir("dicom-valid");
  int errors = 0;
  for (size_t i = 0; i < sizeof headers / sizeof *headers; i++) {
    mr_harness h;
    assert_int_equal(
        mr_harness_open(&h, "[{\"gadget\": \"dicom_out\"}]", MR_KIND_BIT(MR_MSG_IMAGE)), 0);
    char *xml = header(headers[i]);
    assert_int_equal(mr_harness_configure(&h, xml), 0);
    free(xml);
    assert_int_equal(mr_harness_push(&h, image(i == 0 ? 1 : 2)), 0);
    assert_true(h.nout >= 1);
    errors += validate(h.out[0], dir, (int)i);
    mr_harness_close(&h);
  }
  mr_test_remove_tree(dir);
  assert_int_equal(errors, 0);
}

int main(void) {
  if (system("command -v dciodvfy >/dev/null 2>&1") != 0) {
    fprintf(stderr, "dciodvfy (dicom3tools) is not installed: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_files_pass_dciodvfy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
