/* capability.h: a scan that needs a step the chain does not have. EPI
 * (trajectory epi; a ConventionalEPI trajectoryDescription under a
 * cartesian trajectory, as siemens_to_ismrmrd writes it; a reversed
 * navigator line, not a plain phase-correction line)
 * sent to the cartesian chain is refused naming the config `epi`, and
 * accepted by the epi config; reversed lines need a step that reverses
 * them (accumulate does, frames does not); a header acceleration no step handles is a warning TEXT and the
 * scan goes on; grappa handles it; chains that reconstruct nothing are
 * never checked; a multiband header needs a step that splits slices (the
 * trajectoryDescription's parsing is tests/protocol/test_protocol_header's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gadget_harness.h"

static const char *const cartesian =
    "[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
    "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]";
static const char *const epi =
    "[{\"gadget\":\"epi\"},{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
    "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]";
static const char *const realtime =
    "[{\"gadget\":\"frames\"},{\"gadget\":\"gridding\"},"
    "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]";

/* A 32 x 16 header with the trajectory, description and acceleration given. */
static const char *header(const char *trajectory, const char *description, int accel) {
  static char xml[4096];
  char parallel[256] = "";
  if (accel > 1)
    snprintf(parallel, sizeof parallel,
             "<parallelImaging><accelerationFactor><kspace_encoding_step_1>%d"
             "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
             "</accelerationFactor><calibrationMode>embedded</calibrationMode>"
             "</parallelImaging>",
             accel);
  snprintf(xml, sizeof xml,
           "<ismrmrdHeader><encoding>"
           "<encodedSpace><matrixSize><x>32</x><y>16</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>32</x><y>16</y><z>1</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>16</x><y>16</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>16</x><y>16</y><z>1</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>15</maximum>"
           "<center>8</center></kspace_encoding_step_1></encodingLimits>"
           "<trajectory>%s</trajectory>%s%s</encoding></ismrmrdHeader>",
           trajectory, description, parallel);
  return xml;
}

static const char *const conventional_epi =
    "<trajectoryDescription><identifier>ConventionalEPI</identifier>"
    "<userParameterLong><name>rampUpTime</name><value>64</value></userParameterLong>"
    "<userParameterLong><name>numSamples</name><value>32</value></userParameterLong>"
    "<userParameterDouble><name>dwellTime</name><value>2.5</value></userParameterDouble>"
    "</trajectoryDescription>";

/* Configures chain with hdr: the return code, the error line in h. */
static int configure(mr_harness *h, const char *chain, const char *hdr) {
  assert_int_equal(mr_harness_open(h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  return mr_harness_configure(h, hdr);
}

static void epi_header_refused(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(configure(&h, cartesian, header("epi", "", 1)), MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "use the config 'epi'"));
  assert_non_null(strstr(h.err.msg, "trajectory is 'epi'"));
  mr_harness_close(&h);
  /* Siemens conversions: cartesian, and the description says EPI */
  assert_int_equal(configure(&h, cartesian, header("cartesian", conventional_epi, 1)), MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "ConventionalEPI"));
  assert_non_null(strstr(h.err.msg, "use the config 'epi'"));
  mr_harness_close(&h);
  /* the EPI chain takes both */
  assert_int_equal(configure(&h, epi, header("epi", "", 1)), 0);
  mr_harness_close(&h);
  assert_int_equal(configure(&h, epi, header("cartesian", conventional_epi, 1)), 0);
  mr_harness_close(&h);
  /* a chain that reconstructs nothing is not checked */
  assert_int_equal(configure(&h, "[{\"gadget\":\"discard\"}]", header("epi", "", 1)), 0);
  mr_harness_close(&h);
}

/* A multiband section in the header's parallelImaging: refused by chains
 * that do not split slices, naming epi_sms. */
static void multiband_refused(void **state) {
  (void)state;
  const char *mb = "<parallelImaging><accelerationFactor><kspace_encoding_step_1>1"
                   "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
                   "</accelerationFactor><multiband><spacing><dZ>1</dZ></spacing>"
                   "<deltaKz>0.33</deltaKz><multiband_factor>4</multiband_factor>"
                   "<calibration>separable2D</calibration><calibration_encoding>0"
                   "</calibration_encoding></multiband></parallelImaging>";
  mr_harness h;
  assert_int_equal(configure(&h, epi, header("epi", mb, 1)), MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "multiband 4"));
  assert_non_null(strstr(h.err.msg, "use the config 'sms' (Cartesian) or 'epi_sms'"));
  mr_harness_close(&h);
  assert_int_equal(configure(&h, cartesian, header("epi", mb, 1)), MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "'epi_sms'"));
  mr_harness_close(&h);
  const char *sms = "[{\"gadget\":\"epi\"},{\"gadget\":\"accumulate\"},"
                    "{\"gadget\":\"slice_grappa\"},{\"gadget\":\"fft\"},"
                    "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]";
  /* slice_grappa's own check: the reference (encoding 0, calibration_encoding
   * 0) has the factor's 4 slices */
  char four[4096];
  const char *xml = header("epi", mb, 1), *limits = strstr(xml, "</encodingLimits>");
  snprintf(four, sizeof four, "%.*s<slice><minimum>0</minimum><maximum>3</maximum></slice>%s",
           (int)(limits - xml), xml, limits);
  assert_int_equal(configure(&h, sms, four), 0);
  mr_harness_close(&h);
}

static void epi_flags_refused(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(configure(&h, cartesian, header("cartesian", "", 1)), 0);
  /* a phase-correction line alone (TSE's) is kept out by accumulate */
  uint64_t phasecorr = MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(32, 2, 8, 0, phasecorr, NULL, NULL)),
                   0);
  /* a reversed one is EPI's */
  int rc = mr_harness_push(&h, mr_harness_acquisition(
                                   32, 2, 8, 0, phasecorr | MR_FLAG(ISMRMRD_ACQ_IS_REVERSE),
                                   NULL, NULL));
  assert_int_equal(rc, MR_EDATA);
  assert_non_null(strstr(h.err.msg, "IS_PHASECORR_DATA"));
  assert_non_null(strstr(h.err.msg, "use the config 'epi'"));
  mr_harness_close(&h);
  /* accumulate reverses IS_REVERSE lines (bipolar multi-echo scans) */
  assert_int_equal(configure(&h, cartesian, header("cartesian", "", 1)), 0);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(
                                           32, 2, 8, 0, MR_FLAG(ISMRMRD_ACQ_IS_REVERSE), NULL,
                                           NULL)),
                   0);
  mr_harness_close(&h);
  /* the real-time chain (frames, gridding) does not */
  assert_int_equal(configure(&h, realtime, header("radial", "", 1)), 0);
  rc = mr_harness_push(&h, mr_harness_acquisition(32, 2, 8, 0, MR_FLAG(ISMRMRD_ACQ_IS_REVERSE),
                                                  NULL, NULL));
  assert_int_equal(rc, MR_EDATA);
  assert_non_null(strstr(h.err.msg, "IS_REVERSE"));
  mr_harness_close(&h);
}

static int warnings(const mr_harness *h) {
  int n = 0;
  for (int i = 0; i < h->nout; i++)
    if (h->out[i]->kind == MR_MSG_TEXT && strstr(h->out[i]->u.text, "WARNING") != NULL &&
        strstr(h->out[i]->u.text, "acceleration 2 x 1") != NULL)
      n++;
  return n;
}

static void acceleration_warned(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(configure(&h, cartesian, header("cartesian", "", 2)), 0);
  assert_int_equal(warnings(&h), 1);
  assert_non_null(strstr(h.out[0]->u.text, "grappa"));
  mr_harness_close(&h);
  const char *grappa = "[{\"gadget\":\"accumulate\"},{\"gadget\":\"grappa\"},{\"gadget\":\"fft\"},"
                       "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]";
  assert_int_equal(configure(&h, grappa, header("cartesian", "", 2)), 0);
  assert_int_equal(warnings(&h), 0);
  mr_harness_close(&h);
  assert_int_equal(configure(&h, cartesian, header("cartesian", "", 1)), 0);
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(epi_header_refused),
      cmocka_unit_test(multiband_refused),
      cmocka_unit_test(epi_flags_refused),
      cmocka_unit_test(acceleration_warned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
