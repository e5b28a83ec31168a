/* dicom_out (and protocol/dicom_image.h): images through the gadget, each
 * DICOM file read back with dcmdump (skipped without it): patient, study
 * and series from the header, geometry from the image header, pixel values
 * within half a rescale step of the image's, one file per plane, one
 * series UID per image series. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dcmdump.h"
#include "dicom_study.h"
#include "gadget_harness.h"
#include "wire_limits.h"

static const char subject[] =
    "<subjectInformation><patientName>Doe^Jane</patientName><patientID>PID-7</patientID>"
    "<patientBirthdate>1980-02-29</patientBirthdate><patientGender>F</patientGender>"
    "</subjectInformation><studyInformation><studyDate>2024-05-17</studyDate>"
    "<studyTime>14:03:27</studyTime><studyID>S1</studyID>"
    "<studyInstanceUID>1.2.3.4.5</studyInstanceUID></studyInformation>"
    "<measurementInformation><measurementID>M1</measurementID>"
    "<patientPosition>HFS</patientPosition><protocolName>t1\\evil\t</protocolName>"
    "<seriesInstanceUIDRoot>1.2.3.9</seriesInstanceUIDRoot></measurementInformation>";

/* The harness's Cartesian header with the patient and study inserted. */
static char *header(void) {
  const char *base = mr_harness_cartesian_header(8, 8, 1, 8, 8, 1);
  const char *open = strstr(base, "<ismrmrdHeader");
  const char *end = strchr(open, '>') + 1;
  size_t n = strlen(base) + sizeof subject;
  char *x = malloc(n);
  snprintf(x, n, "%.*s%s%s", (int)(end - base), base, subject, end);
  return x;
}

static mr_message *image(uint16_t nx, uint16_t ny, uint16_t nz, uint16_t series, uint16_t index) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = ISMRMRD_FLOAT;
  h.image_type = ISMRMRD_IMTYPE_MAGNITUDE;
  h.matrix_size[0] = nx;
  h.matrix_size[1] = ny;
  h.matrix_size[2] = nz;
  h.channels = 1;
  h.field_of_view[0] = 10.0f * nx;
  h.field_of_view[1] = 20.0f * ny;
  h.field_of_view[2] = 5.0f * nz;
  const float pos[3] = {10, -20, 30}, read[3] = {0, 1, 0}, phase[3] = {0, 0, -1},
              slice[3] = {-1, 0, 0};
  memcpy(h.position, pos, sizeof pos);
  memcpy(h.read_dir, read, sizeof read);
  memcpy(h.phase_dir, phase, sizeof phase);
  memcpy(h.slice_dir, slice, sizeof slice);
  h.image_series_index = series;
  h.image_index = index;
  mr_message *m = mr_message_new_image(&h, "<ismrmrdMeta></ismrmrdMeta>");
  float *px = m->u.image.data;
  for (size_t i = 0; i < (size_t)nx * ny * nz; i++)
    px[i] = (float)(1000.0 * fabs(sin(0.7 * (double)i + index)));
  return m;
}

static void check_file(const mr_message *dcm, const mr_message *img, unsigned plane) {
  char *d = mr_test_dcmdump_bytes(dcm->u.dicom.bytes, dcm->u.dicom.nbytes);
  assert_non_null(d);
  const struct {
    const char *tag, *want;
  } strings[] = {
      {"(0010,0010)", "Doe^Jane"}, {"(0010,0020)", "PID-7"},       {"(0010,0030)", "19800229"},
      {"(0010,0040)", "F"},        {"(0008,0020)", "20240517"},    {"(0008,0030)", "140327"},
      {"(0020,000d)", "1.2.3.4.5"}, {"(0018,5100)", "HFS"},        {"(0008,0060)", "MR"},
      {"(0008,0016)", "=MRImageStorage"},
      {"(0018,1030)", "t1evil"}, /* the separator and the control byte dropped */
  };
  char v[256];
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) {
    assert_int_equal(mr_test_dcm_value(d, strings[i].tag, v, sizeof v), 0);
    assert_string_equal(v, strings[i].want);
  }
  char want[64];
  snprintf(want, sizeof want, "1.2.3.9.%u", img->u.image.head.image_series_index);
  assert_int_equal(mr_test_dcm_value(d, "(0020,000e)", v, sizeof v), 0);
  assert_string_equal(v, want);
  const char *why = mr_test_dcm_matches(d, &img->u.image.head, img->u.image.data, plane);
  if (why != NULL)
    fail_msg("%s", why);
  free(d);
}

static void test_images_to_dicom_files(void **state) {
  (void)state;
  if (!mr_test_have_dcmdump())
    skip();
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\": \"dicom_out\", \"images\": true}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE)),
                   0);
  char *xml = header();
  assert_int_equal(mr_harness_configure(&h, xml), 0);
  free(xml);
  mr_message *a = image(6, 4, 1, 3, 2), *b = image(4, 4, 2, 3, 3), *c = image(5, 3, 1, 4, 1);
  mr_message_ref(a);
  mr_message_ref(b);
  mr_message_ref(c);
  assert_int_equal(mr_harness_push(&h, a), 0);
  assert_int_equal(mr_harness_push(&h, b), 0);
  assert_int_equal(mr_harness_push(&h, c), 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  /* a: 1 file, b: 2 planes, c: 1 file; each image passed on after its files. */
  assert_int_equal(h.nout, 4 + 3);
  const mr_message *files[4];
  int nf = 0;
  for (int i = 0; i < h.nout; i++)
    if (h.out[i]->kind == MR_MSG_DICOM)
      files[nf++] = h.out[i];
  assert_int_equal(nf, 4);
  check_file(files[0], a, 0);
  check_file(files[1], b, 0);
  check_file(files[2], b, 1);
  check_file(files[3], c, 0);
  assert_string_equal(files[0]->u.dicom.name, "image_3_000002");
  assert_string_equal(files[2]->u.dicom.name, "image_3_000003_1");
  assert_string_equal(files[0]->u.dicom.attributes, "<ismrmrdMeta></ismrmrdMeta>");
  mr_message_unref(a);
  mr_message_unref(b);
  mr_message_unref(c);
  mr_harness_close(&h);
}

/* A pixel that is not finite is an error naming the image, not a file. */
static void test_non_finite_pixel_refused(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\": \"dicom_out\"}]", MR_KIND_BIT(MR_MSG_IMAGE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, NULL), 0);
  mr_message *m = image(4, 4, 1, 1, 9);
  ((float *)m->u.image.data)[5] = NAN;
  assert_int_equal(mr_harness_push(&h, m), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "image 9 has a pixel that is not finite"));
  mr_harness_close(&h);
}

/* The study read from a header whose subjectInformation and
 * studyInformation are as given. */
static void study_of(mr_dicom_study *st, const char *subject_info, const char *study_info) {
  char xml[1024];
  snprintf(xml, sizeof xml,
           "<ismrmrdHeader><subjectInformation>%s</subjectInformation>"
           "<studyInformation>%s</studyInformation></ismrmrdHeader>",
           subject_info, study_info);
  mr_err e = {0};
  assert_int_equal(mr_dicom_study_init(st, xml, &e), 0);
}

/* Issue 27 item 14: a value cut to its VR's length is cut between UTF-8
 * characters (the files declare UTF-8), and a UID that is not valid is
 * replaced by a fresh one, never edited into another valid-looking one. */
static void test_study_values_cut_whole_and_uids_never_edited(void **state) {
  (void)state;
  static mr_dicom_study st;
  char name[128], a62[63];
  memset(a62, 'a', 62);
  a62[62] = '\0';
  /* 62 + 2 bytes fit the 64 of a PN; 63 + 2 do not: the é goes whole. */
  snprintf(name, sizeof name, "<patientName>%s\xc3\xa9</patientName>", a62);
  study_of(&st, name, "");
  assert_int_equal(strlen(st.patient_name), 64);
  snprintf(name, sizeof name, "<patientName>a%s\xc3\xa9</patientName>", a62);
  study_of(&st, name, "");
  assert_int_equal(strlen(st.patient_name), 63);
  snprintf(name, sizeof name, "<patientName>%s\xe2\x82\xac</patientName>", a62); /* euro */
  study_of(&st, name, "");
  assert_int_equal(strlen(st.patient_name), 62);

  study_of(&st, "", "<studyInstanceUID>1.2.3\\4</studyInstanceUID>");
  assert_string_not_equal(st.study_uid, "1.2.34");
  assert_memory_equal(st.study_uid, "2.25.", 5);
  study_of(&st, "", "<studyInstanceUID> 1.2.3 </studyInstanceUID>");
  assert_string_equal(st.study_uid, "1.2.3");
  char long_uid[160] = "<studyInstanceUID>1.";
  for (int i = 0; i < 70; i++)
    strcat(long_uid, "1");
  strcat(long_uid, "</studyInstanceUID>");
  study_of(&st, "", long_uid); /* cut to 64 it would be valid */
  assert_memory_equal(st.study_uid, "2.25.", 5);
}

/* Issue 27 item 12: a client's own 1x1x4000 image is not 4000 DICOM
 * files: past the dicom_planes limit it is refused, naming the limit; the
 * installed limits decide. */
static void test_planes_over_the_limit_refused(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\": \"dicom_out\"}]", MR_KIND_BIT(MR_MSG_IMAGE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, NULL), 0);
  assert_int_equal(mr_harness_push(&h, image(1, 1, 4000, 1, 7)), MR_ELIMIT);
  assert_non_null(strstr(h.err.msg, "image 7 of series 1 has 4000 planes"));
  assert_non_null(strstr(h.err.msg, "dicom_planes limit of 1024"));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);

  mr_limits lower = mr_limits_default;
  assert_int_equal(mr_limits_set(&lower, "dicom_planes", "2"), 0);
  mr_limits_install(&lower);
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\": \"dicom_out\"}]", MR_KIND_BIT(MR_MSG_IMAGE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, NULL), 0);
  assert_int_equal(mr_harness_push(&h, image(4, 4, 2, 1, 1)), 0);
  assert_int_equal(mr_harness_push(&h, image(4, 4, 3, 1, 2)), MR_ELIMIT);
  assert_int_equal(h.nout, 2);
  mr_harness_close(&h);
  mr_limits_install(&mr_limits_default);
}

/* Without DCMTK's data dictionary the chain fails when it is configured,
 * with a line naming the dictionary (in a child, and before this process
 * has used DCMTK: the dictionary is loaded once per process). */
static void test_missing_dictionary_is_a_config_error(void **state) {
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("DCMDICTPATH", "/nonexistent/dicom.dic", 1);
    mr_harness h;
    int ok = mr_harness_open(&h, "[{\"gadget\": \"dicom_out\"}]", MR_KIND_BIT(MR_MSG_IMAGE)) == 0 &&
             mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)) == MR_EIO &&
             strstr(h.err.msg, "data dictionary is not loaded (DCMDICTPATH=/nonexistent") != NULL;
    if (!ok)
      fprintf(stderr, "child: %s\n", h.err.msg);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* First: before this process loads the dictionary. */
      cmocka_unit_test(test_missing_dictionary_is_a_config_error),
      cmocka_unit_test(test_images_to_dicom_files),
      cmocka_unit_test(test_non_finite_pixel_refused),
      cmocka_unit_test(test_planes_over_the_limit_refused),
      cmocka_unit_test(test_study_values_cut_whole_and_uids_never_edited),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
