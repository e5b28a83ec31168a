/* The ISMRMRD XML header parser: the fields gadgets use, the text kept as
 * received, and one clear error per kind of bad header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stream_header.h"

static const char full[] =
    "<?xml version=\"1.0\"?>\n"
    "<ismrmrdHeader xmlns=\"http://www.ismrm.org/ISMRMRD\">\n"
    " <version>2</version>\n"
    " <measurementInformation><measurementID>M1</measurementID>\n"
    "  <measurementDependency><dependencyType>Noise</dependencyType>"
    "<measurementID>N7</measurementID></measurementDependency>\n"
    " </measurementInformation>\n"
    " <acquisitionSystemInformation><receiverChannels>32</receiverChannels>"
    "<relativeReceiverNoiseBandwidth>0.793</relativeReceiverNoiseBandwidth>"
    "</acquisitionSystemInformation>\n"
    " <experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz>"
    "</experimentalConditions>\n"
    " <encoding>\n"
    "  <encodedSpace><matrixSize><x>512</x><y>256</y><z>1</z></matrixSize>"
    "<fieldOfView_mm><x>600</x><y>300</y><z>6</z></fieldOfView_mm></encodedSpace>\n"
    "  <reconSpace><matrixSize><x>256</x><y>256</y><z>1</z></matrixSize>"
    "<fieldOfView_mm><x>300</x><y>300</y><z>6</z></fieldOfView_mm></reconSpace>\n"
    "  <encodingLimits>"
    "<kspace_encoding_step_1><minimum>0</minimum><maximum>255</maximum><center>128</center>"
    "</kspace_encoding_step_1>"
    "<slice><minimum>0</minimum><maximum>19</maximum><center>0</center></slice>"
    "<repetition><minimum>0</minimum><maximum>3</maximum><center>0</center></repetition>"
    "</encodingLimits>\n"
    "  <trajectory>cartesian</trajectory>\n"
    "  <parallelImaging><accelerationFactor><kspace_encoding_step_1>4</kspace_encoding_step_1>"
    "<kspace_encoding_step_2>1</kspace_encoding_step_2></accelerationFactor>"
    "<calibrationMode>embedded</calibrationMode></parallelImaging>\n"
    " </encoding>\n"
    " <sequenceParameters><TR>4.5</TR><TE>2.1</TE><TE>4.2</TE><flipAngle_deg>15</flipAngle_deg>"
    "</sequenceParameters>\n"
    "</ismrmrdHeader>\n";

static void test_reads_the_fields_gadgets_use(void **state) {
  (void)state;
  mr_stream_header h;
  mr_err e = {0};
  assert_int_equal(mr_stream_header_parse(full, strlen(full), &h, &e), 0);
  assert_int_equal(h.version, 2);
  assert_string_equal(h.measurement_id, "M1");
  assert_int_equal(h.ndependencies, 1);
  assert_string_equal(h.dependencies[0].type, "Noise");
  assert_string_equal(h.dependencies[0].measurement_id, "N7");
  assert_int_equal(h.receiver_channels, 32);
  assert_float_equal(h.relative_noise_bandwidth, 0.793, 1e-6);
  assert_float_equal(h.h1_resonance_hz, 63500000.0, 0.5);
  assert_int_equal(h.nencodings, 1);
  const mr_encoding *enc = &h.encoding[0];
  assert_int_equal(enc->encoded.matrix.x, 512);
  assert_int_equal(enc->encoded.matrix.y, 256);
  assert_int_equal(enc->recon.matrix.x, 256);
  assert_float_equal(enc->encoded.fov_mm.x, 600, 1e-6);
  assert_float_equal(enc->recon.fov_mm.z, 6, 1e-6);
  assert_true(enc->limits.e1.present);
  assert_int_equal(enc->limits.e1.maximum, 255);
  assert_int_equal(enc->limits.e1.center, 128);
  assert_true(enc->limits.slice.present);
  assert_int_equal(enc->limits.slice.maximum, 19);
  assert_int_equal(enc->limits.repetition.maximum, 3);
  assert_false(enc->limits.e2.present);
  assert_int_equal(enc->trajectory, MR_TRAJ_CARTESIAN);
  assert_true(enc->parallel.present);
  assert_int_equal(enc->parallel.accel_e1, 4);
  assert_int_equal(enc->parallel.accel_e2, 1);
  assert_int_equal(enc->parallel.calibration, MR_CALIB_EMBEDDED);
  assert_int_equal(h.ntr, 1);
  assert_int_equal(h.nte, 2);
  assert_float_equal(h.te_ms[1], 4.2, 1e-6);
  assert_float_equal(h.flip_deg[0], 15, 1e-6);
  /* Kept byte for byte (rule 9). */
  assert_int_equal(h.xml_len, strlen(full));
  assert_string_equal(h.xml, full);
  mr_stream_header_free(&h);
}

static void test_minimal_header_defaults(void **state) {
  (void)state;
  static const char minimal[] =
      "<ismrmrdHeader><encoding>"
      "<encodedSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
      "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></encodedSpace>"
      "<reconSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
      "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></reconSpace>"
      "<encodingLimits/><trajectory>radial</trajectory></encoding></ismrmrdHeader>";
  mr_stream_header h;
  mr_err e = {0};
  assert_int_equal(mr_stream_header_parse(minimal, strlen(minimal), &h, &e), 0);
  assert_int_equal(h.encoding[0].encoded.matrix.z, 1);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_RADIAL);
  assert_false(h.encoding[0].parallel.present);
  assert_int_equal(h.encoding[0].parallel.accel_e1, 1);
  assert_int_equal(h.receiver_channels, 0);
  mr_stream_header_free(&h);
}

/* parallelImaging/multiband (ISMRMRD 1.14), as simultaneous multi-slice
 * scans carry it; a factor of 0 is refused. */
static void test_multiband(void **state) {
  (void)state;
  static const char fmt[] =
      "<ismrmrdHeader><encoding>"
      "<encodedSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
      "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></encodedSpace>"
      "<reconSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
      "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></reconSpace>"
      "<encodingLimits/><trajectory>cartesian</trajectory>"
      "<parallelImaging><accelerationFactor><kspace_encoding_step_1>2</kspace_encoding_step_1>"
      "<kspace_encoding_step_2>1</kspace_encoding_step_2></accelerationFactor>"
      "<multiband><spacing><dZ>24</dZ><dZ>25</dZ></spacing><deltaKz>0.0138</deltaKz>"
      "<multiband_factor>%d</multiband_factor><calibration>separable2D</calibration>"
      "<calibration_encoding>1</calibration_encoding></multiband></parallelImaging>"
      "</encoding></ismrmrdHeader>";
  char xml[2048];
  mr_stream_header h;
  mr_err e = {0};
  snprintf(xml, sizeof xml, fmt, 3);
  assert_int_equal(mr_stream_header_parse(xml, strlen(xml), &h, &e), 0);
  const mr_multiband *m = &h.encoding[0].parallel.multiband;
  assert_true(m->present);
  assert_int_equal(m->factor, 3);
  assert_int_equal(m->nspacing, 2);
  assert_float_equal(m->spacing_mm[1], 25, 1e-6);
  assert_float_equal(m->delta_kz, 0.0138, 1e-6);
  assert_string_equal(m->calibration, "separable2D");
  assert_int_equal(m->calibration_encoding, 1);
  assert_int_equal(h.encoding[0].parallel.accel_e1, 2);
  mr_stream_header_free(&h);
  snprintf(xml, sizeof xml, fmt, 0);
  assert_int_equal(mr_stream_header_parse(xml, strlen(xml), &h, &e), MR_EHEADER);
  assert_non_null(strstr(e.msg, "multiband_factor"));
}

/* A header whose encoding carries the trajectoryDescription `d`. */
static const char *with_description(const char *d) {
  static char xml[2048];
  snprintf(xml, sizeof xml,
           "<ismrmrdHeader><encoding>"
           "<encodedSpace><matrixSize><x>128</x><y>64</y></matrixSize>"
           "<fieldOfView_mm><x>400</x><y>200</y><z>5</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
           "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits/><trajectory>cartesian</trajectory>%s</encoding>"
           "<encoding>"
           "<encodedSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
           "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>64</x><y>64</y></matrixSize>"
           "<fieldOfView_mm><x>200</x><y>200</y><z>5</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits/><trajectory>cartesian</trajectory></encoding></ismrmrdHeader>",
           d);
  return xml;
}

/* The trajectoryDescription is parsed with the header, once: identifier
 * and parameters of both kinds per encoding; a malformed one refused with
 * a line naming what is wrong. */
static void test_trajectory_description(void **state) {
  (void)state;
  mr_stream_header h;
  mr_err e = {0};
  const char *xml = with_description(
      "<trajectoryDescription><identifier> ConventionalEPI </identifier>"
      "<userParameterLong><name>rampUpTime</name><value>64</value></userParameterLong>"
      "<userParameterLong><name>numSamples</name><value>128</value></userParameterLong>"
      "<userParameterDouble><name>dwellTime</name><value>2.5</value></userParameterDouble>"
      "<userParameterString><name>note</name><value>x</value></userParameterString>"
      "</trajectoryDescription>");
  assert_int_equal(mr_stream_header_parse(xml, strlen(xml), &h, &e), 0);
  const mr_trajectory_description *d = &h.encoding[0].description;
  assert_true(d->present);
  assert_string_equal(d->identifier, "ConventionalEPI");
  assert_true(mr_trajectory_description_is_epi(d));
  assert_int_equal(d->nparams, 3);
  assert_float_equal(mr_trajectory_description_param(d, "rampUpTime")->value, 64, 0);
  assert_float_equal(mr_trajectory_description_param(d, "numSamples")->value, 128, 0);
  assert_float_equal(mr_trajectory_description_param(d, "dwellTime")->value, 2.5, 0);
  assert_null(mr_trajectory_description_param(d, "flatTopTime"));
  assert_null(mr_trajectory_description_param(d, "note"));
  /* the second encoding has none */
  assert_false(h.encoding[1].description.present);
  assert_false(mr_trajectory_description_is_epi(&h.encoding[1].description));
  mr_stream_header_free(&h);

  xml = with_description("<trajectoryDescription><identifier>spiral</identifier>"
                         "</trajectoryDescription>");
  assert_int_equal(mr_stream_header_parse(xml, strlen(xml), &h, &e), 0);
  assert_true(h.encoding[0].description.present);
  assert_false(mr_trajectory_description_is_epi(&h.encoding[0].description));
  mr_stream_header_free(&h);

  static const struct {
    const char *description, *error;
  } bad[] = {
      {"<userParameterLong><name>numSamples</name><value>x</value></userParameterLong>",
       "trajectoryDescription parameter 'numSamples' is \"x\", not a number"},
      {"<userParameterDouble><name>dwellTime</name><value>inf</value></userParameterDouble>",
       "trajectoryDescription parameter 'dwellTime' is \"inf\", not a number"},
      {"<userParameterLong><name>numSamples</name><value></value></userParameterLong>",
       "trajectoryDescription parameter 'numSamples' is \"\", not a number"},
      {"<userParameterLong><name>numSamples</name></userParameterLong>",
       "trajectoryDescription parameter 'numSamples' has no value"},
      {"<userParameterLong><value>3</value></userParameterLong>",
       "a trajectoryDescription userParameterLong has no name"},
      {"<userParameterLong><name>etl</name><value>3</value></userParameterLong>"
       "<userParameterDouble><name>etl</name><value>3</value></userParameterDouble>",
       "trajectoryDescription parameter 'etl' is given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char d[512];
    snprintf(d, sizeof d,
             "<trajectoryDescription><identifier>ConventionalEPI</identifier>%s"
             "</trajectoryDescription>",
             bad[i].description);
    xml = with_description(d);
    memset(&e, 0, sizeof e);
    assert_int_equal(mr_stream_header_parse(xml, strlen(xml), &h, &e), MR_EHEADER);
    if (strstr(e.msg, bad[i].error) == NULL)
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, e.msg, bad[i].error);
  }
}

typedef struct bad_header {
  const char *xml;
  const char *error;
} bad_header;

static void test_bad_headers(void **state) {
  (void)state;
  static const bad_header cases[] = {
      {"this is not xml", "ISMRMRD header is not XML"},
      {"<ismrmrdHeader><encoding>", "ISMRMRD header is not XML"},
      {"<other/>", "root element is <other>, not <ismrmrdHeader>"},
      {"<ismrmrdHeader><version>2</version></ismrmrdHeader>", "has no <encoding>"},
      {"<ismrmrdHeader><encoding><trajectory>cartesian</trajectory></encoding></ismrmrdHeader>",
       "lacks encodedSpace/matrixSize"},
      {"<ismrmrdHeader><encoding><encodedSpace><matrixSize><x>abc</x><y>1</y></matrixSize>"
       "<fieldOfView_mm/></encodedSpace></encoding></ismrmrdHeader>",
       "encodedSpace/matrixSize/x is \"abc\", not an integer"},
      {"<ismrmrdHeader><encoding><encodedSpace><matrixSize><x>70000</x><y>1</y></matrixSize>"
       "<fieldOfView_mm/></encodedSpace></encoding></ismrmrdHeader>",
       "not an integer in 0..65535"},
      {"<ismrmrdHeader><encoding><encodedSpace><matrixSize><x>0</x><y>1</y></matrixSize>"
       "<fieldOfView_mm/></encodedSpace><reconSpace><matrixSize><x>1</x><y>1</y></matrixSize>"
       "<fieldOfView_mm/></reconSpace></encoding></ismrmrdHeader>",
       "zero size"},
      {"<ismrmrdHeader><encoding><encodedSpace><matrixSize><x>8</x><y>8</y></matrixSize>"
       "<fieldOfView_mm/></encodedSpace><reconSpace><matrixSize><x>8</x><y>8</y></matrixSize>"
       "<fieldOfView_mm/></reconSpace></encoding></ismrmrdHeader>",
       "encoding lacks trajectory"},
      {"<ismrmrdHeader><experimentalConditions><H1resonanceFrequency_Hz>nan</H1resonanceFrequency_Hz>"
       "</experimentalConditions></ismrmrdHeader>",
       "H1resonanceFrequency_Hz is \"nan\", not a number"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mr_stream_header h;
    mr_err e = {0};
    int rc = mr_stream_header_parse(cases[i].xml, strlen(cases[i].xml), &h, &e);
    assert_int_equal(rc, MR_EHEADER);
    if (strstr(e.msg, cases[i].error) == NULL)
      fail_msg("case %zu: '%s' lacks '%s'", i, e.msg, cases[i].error);
    assert_null(h.xml);
  }
}

/* A header whose measurementInformation is before, n bytes of 'A', after. */
static char *header_with(const char *before, size_t n, const char *after) {
  static const char tail[] =
      "</measurementInformation><encoding>"
      "<encodedSpace><matrixSize><x>8</x><y>8</y></matrixSize><fieldOfView_mm/></encodedSpace>"
      "<reconSpace><matrixSize><x>8</x><y>8</y></matrixSize><fieldOfView_mm/></reconSpace>"
      "<trajectory>cartesian</trajectory></encoding></ismrmrdHeader>";
  char *id = malloc(n + 1);
  assert_non_null(id);
  memset(id, 'A', n);
  id[n] = '\0';
  size_t cap = strlen(before) + n + strlen(after) + sizeof tail + 64;
  char *xml = malloc(cap);
  assert_non_null(xml);
  snprintf(xml, cap, "<ismrmrdHeader><measurementInformation>%s%s%s%s", before, id, after, tail);
  free(id);
  return xml;
}

/* Issue 27 item 11: identifiers are refused when they do not fit, never
 * cut (two ids cut alike would share one noise file). */
static void test_identifiers_are_never_cut(void **state) {
  (void)state;
  static const char *around[][2] = {
      {"<measurementID>", "</measurementID>"},
      {"<measurementDependency><dependencyType>Noise</dependencyType><measurementID>",
       "</measurementID></measurementDependency>"},
  };
  for (size_t i = 0; i < 2; i++) {
    mr_stream_header h;
    mr_err e = {0};
    char *fits = header_with(around[i][0], 127, around[i][1]);
    assert_int_equal(mr_stream_header_parse(fits, strlen(fits), &h, &e), 0);
    assert_int_equal(strlen(i == 0 ? h.measurement_id : h.dependencies[0].measurement_id), 127);
    mr_stream_header_free(&h);
    free(fits);
    char *too_long = header_with(around[i][0], 128, around[i][1]);
    assert_int_equal(mr_stream_header_parse(too_long, strlen(too_long), &h, &e), MR_EHEADER);
    assert_non_null(strstr(e.msg, "measurementID is 128 bytes long; at most 127"));
    free(too_long);
  }
  /* A number longer than its buffer is refused too, not read cut. */
  mr_stream_header h;
  mr_err e = {0};
  char number[200];
  snprintf(number, sizeof number,
           "<ismrmrdHeader><version>2%080d</version><encoding/></ismrmrdHeader>", 0);
  assert_int_equal(mr_stream_header_parse(number, strlen(number), &h, &e), MR_EHEADER);
  assert_non_null(strstr(e.msg, "version is 81 bytes long"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_the_fields_gadgets_use),
      cmocka_unit_test(test_minimal_header_defaults),
      cmocka_unit_test(test_bad_headers),
      cmocka_unit_test(test_multiband),
      cmocka_unit_test(test_trajectory_description),
      cmocka_unit_test(test_identifiers_are_never_cut),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
