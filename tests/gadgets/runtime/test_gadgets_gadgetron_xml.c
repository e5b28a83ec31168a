/* Gadgetron XML configs as CONFIG_SCRIPT (gadgets/runtime/gadgetron_xml.h): the
 * stock chains whose every gadget has a counterpart become our chains
 * (both XML forms), the others are refused with a line naming the gadget;
 * the dependency query is recognised and its measurement id read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gadgetron_xml.h"
#include "pipeline_config.h"

#define V1_OPEN                                                                                  \
  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                                                 \
  "<gadgetronStreamConfiguration xsi:schemaLocation=\"http://gadgetron.sf.net/gadgetron "        \
  "gadgetron.xsd\" xmlns=\"http://gadgetron.sf.net/gadgetron\" "                                 \
  "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\n"                                   \
  "<reader><slot>1008</slot><dll>gadgetron_mricore</dll>"                                        \
  "<classname>GadgetIsmrmrdAcquisitionMessageReader</classname></reader>\n"                      \
  "<writer><slot>1022</slot><dll>gadgetron_mricore</dll>"                                        \
  "<classname>MRIImageWriter</classname></writer>\n"
#define V1_CLOSE "</gadgetronStreamConfiguration>\n"
#define GADGET(name, cls, props)                                                                 \
  "<gadget><name>" name "</name><dll>gadgetron_mricore</dll><classname>" cls "</classname>"     \
  props "</gadget>\n"
#define PROP(k, v) "<property><name>" k "</name><value>" v "</value></property>"

/* The chain a config translates to: "accumulate,noise_adjust,...", and
 * each gadget's entry as JSON. */
static void chain_of(const char *xml, char *names, size_t size, char *json, size_t jsize) {
  mr_pipeline_config *cfg = NULL;
  mr_err e = {0};
  int rc = mr_gadgetron_xml_translate(xml, strlen(xml), &cfg, &e);
  if (rc < 0)
    fail_msg("refused: %s", e.msg);
  names[0] = '\0';
  for (const cJSON *g = cfg->gadgets->child; g != NULL; g = g->next) {
    size_t used = strlen(names);
    snprintf(names + used, size - used, "%s%s", used ? "," : "",
             cJSON_GetObjectItem(g, "gadget")->valuestring);
  }
  char *text = cJSON_PrintUnformatted(cfg->gadgets);
  snprintf(json, jsize, "%s", text);
  free(text);
  mr_pipeline_config_free(cfg);
}

static const char *refusal(const char *xml) {
  static mr_err e;
  mr_pipeline_config *cfg = NULL;
  memset(&e, 0, sizeof e);
  int rc = mr_gadgetron_xml_translate(xml, strlen(xml), &cfg, &e);
  assert_int_equal(rc, MR_ECONFIG);
  assert_null(cfg);
  return e.msg;
}

static void translates_default_xml_v2(void **state) {
  (void)state;
  /* Gadgetron's default.xml in the version-2 form. */
  static const char xml[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration><version>2</version><stream>"
      GADGET("RemoveROOversampling", "RemoveROOversamplingGadget", "")
      GADGET("AccTrig", "AcquisitionAccumulateTriggerGadget",
             PROP("trigger_dimension", "repetition") PROP("sorting_dimension", "slice"))
      GADGET("Buff", "BucketToBufferGadget",
             PROP("N_dimension", "") PROP("S_dimension", "") PROP("split_slices", "true"))
      GADGET("SimpleRecon", "SimpleReconGadget", "")
      GADGET("ImageArraySplit", "ImageArraySplitGadget", "")
      GADGET("Extract", "ExtractGadget", "")
      "</stream></configuration>\n";
  char names[256], json[1024];
  chain_of(xml, names, sizeof names, json, sizeof json);
  assert_string_equal(names, "accumulate,remove_oversampling,fft,coil_combine,image_out");
  assert_non_null(strstr(json, "\"method\":\"rss\""));
  assert_non_null(strstr(json, "\"type\":\"magnitude\""));
}

static void translates_grappa_chain(void **state) {
  (void)state;
  static const char xml[] =
      V1_OPEN GADGET("NoiseAdjust", "NoiseAdjustGadget", "")
      GADGET("RemoveROOversampling", "RemoveROOversamplingGadget", "")
      GADGET("AccTrig", "AcquisitionAccumulateTriggerGadget", PROP("trigger_dimension", ""))
      GADGET("BucketToBuffer", "BucketToBufferGadget", PROP("N_dimension", "contrast"))
      GADGET("PrepRef", "GenericReconCartesianReferencePrepGadget", "")
      GADGET("Recon", "GenericReconCartesianGrappaGadget", PROP("image_series", "7"))
      GADGET("ImageArraySplit", "ImageArraySplitGadget", "")
      GADGET("ComplexToFloatAttrib", "ComplexToFloatGadget", "")
      GADGET("ImageFinish", "ImageFinishGadget", "") V1_CLOSE;
  char names[256], json[1024];
  chain_of(xml, names, sizeof names, json, sizeof json);
  assert_string_equal(names, "accumulate,noise_adjust,remove_oversampling,grappa,fft,"
                             "coil_combine,image_out");
  assert_non_null(strstr(json, "\"method\":\"weighted\""));
  assert_non_null(strstr(json, "\"series\":7"));
}

static void extract_picks_the_image_type(void **state) {
  (void)state;
  static const struct {
    const char *extract, *type;
  } cases[] = {
      {GADGET("E", "ExtractGadget", PROP("extract_mask", "8")), "\"type\":\"phase\""},
      {GADGET("E", "ExtractGadget", PROP("extract_real", "true")), "\"type\":\"real\""},
      {"", "\"type\":\"complex\""}, /* no extraction: Gadgetron sends complex images */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char xml[2048], names[256], json[1024];
    snprintf(xml, sizeof xml, "%s%s%s%s%s", V1_OPEN,
             GADGET("A", "AcquisitionAccumulateTriggerGadget", ""),
             GADGET("R", "SimpleReconGadget", ""), cases[i].extract, V1_CLOSE);
    chain_of(xml, names, sizeof names, json, sizeof json);
    assert_non_null(strstr(json, cases[i].type));
  }
  const char *why = refusal(V1_OPEN GADGET("A", "AcquisitionAccumulateTriggerGadget", "")
                                GADGET("R", "SimpleReconGadget", "")
                                    GADGET("E", "ExtractGadget", PROP("extract_mask", "9"))
                                        V1_CLOSE);
  assert_non_null(strstr(why, "more than one image type"));
}

static void noise_alone_stores_dump_alone_dumps(void **state) {
  (void)state;
  /* default_measurement_dependencies.xml */
  char names[256], json[1024];
  chain_of(V1_OPEN GADGET("NoiseAdjust", "NoiseAdjustGadget",
                          PROP("pass_nonconformant_data", "true")) V1_CLOSE,
           names, sizeof names, json, sizeof json);
  assert_string_equal(names, "noise_adjust,discard");
  assert_non_null(strstr(json, "\"store\":true"));
  /* ismrmrd_dump.xml */
  chain_of(V1_OPEN GADGET("IsmrmrdDump", "IsmrmrdDumpGadget",
                          PROP("file_prefix", "") PROP("folder", "")) V1_CLOSE,
           names, sizeof names, json, sizeof json);
  assert_string_equal(names, "raw_dump");
}

static void refuses_what_has_no_counterpart(void **state) {
  (void)state;
  /* Gadgetron's Generic_Cartesian_Grappa.xml asks for asymmetric echo
   * handling, coil compression, filters and scaling. */
  const char *why = refusal(V1_OPEN GADGET("NoiseAdjust", "NoiseAdjustGadget", "")
                                GADGET("AsymmetricEcho", "AsymmetricEchoAdjustROGadget", "")
                                    V1_CLOSE);
  assert_non_null(strstr(why, "gadget 1 'AsymmetricEcho' (AsymmetricEchoAdjustROGadget) has "
                              "no counterpart"));
  /* default_short.xml: unsigned short images. */
  why = refusal(V1_OPEN GADGET("A", "AcquisitionAccumulateTriggerGadget", "")
                    GADGET("R", "SimpleReconGadget", "")
                        GADGET("FloatToShort", "FloatToUShortGadget", "") V1_CLOSE);
  assert_non_null(strstr(why, "'FloatToShort' (FloatToUShortGadget)"));
  why = refusal("<configuration><version>2</version><stream><parallel/></stream></configuration>");
  assert_non_null(strstr(why, "<parallel> has no counterpart"));
  why = refusal(V1_OPEN GADGET("R", "SimpleReconGadget", "") V1_CLOSE);
  assert_non_null(strstr(why, "no AcquisitionAccumulateTriggerGadget"));
  why = refusal(V1_OPEN GADGET("A", "AcquisitionAccumulateTriggerGadget", "") V1_CLOSE);
  assert_non_null(strstr(why, "no gadget reconstructs images"));
  why = refusal(V1_OPEN GADGET("D", "IsmrmrdDumpGadget", "")
                    GADGET("N", "NoiseAdjustGadget", "") V1_CLOSE);
  assert_non_null(strstr(why, "IsmrmrdDumpGadget with other gadgets"));
  why = refusal("<notGadgetron/>");
  assert_non_null(strstr(why, "expected <gadgetronStreamConfiguration>"));
  why = refusal("<gadgetronStreamConfiguration><gadget>");
  assert_non_null(strstr(why, "CONFIG_SCRIPT is not XML"));
  /* Issue 27 item 1: an entity is refused before the text is parsed. */
  why = refusal("<!DOCTYPE c [<!ENTITY a \"AcquisitionAccumulateTriggerGadget\">]>" V1_OPEN
                    GADGET("A", "&a;", "") V1_CLOSE);
  assert_non_null(strstr(why, "CONFIG_SCRIPT declares a DTD or an entity"));
}

static void reads_the_dependency_query(void **state) {
  (void)state;
  /* As Gadgetron's client writes it (get_noise_statistics). */
  static const char query[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "      <gadgetronStreamConfiguration xsi:schemaLocation=\"http://gadgetron.sf.net/"
      "gadgetron gadgetron.xsd\"\n"
      "        xmlns=\"http://gadgetron.sf.net/gadgetron\"\n"
      "      xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\n\n"
      "    <writer>\n      <slot>1019</slot>\n      <dll>gadgetron_mricore</dll>\n"
      "      <classname>DependencyQueryWriter</classname>\n    </writer>\n\n"
      "    <gadget>\n      <name>NoiseSummary</name>\n      <dll>gadgetron_mricore</dll>\n"
      "      <classname>NoiseSummaryGadget</classname>\n\n      <property>\n"
      "         <name>noise_file</name>\n"
      "         <value>GadgetronNoiseCovarianceMatrix_42563_35189578_35189583_24</value>\n"
      "      </property>\n    </gadget>\n\n</gadgetronStreamConfiguration>\n";
  char id[160];
  assert_int_equal(mr_gadgetron_xml_noise_query(query, strlen(query), id, sizeof id), 1);
  assert_string_equal(id, "42563_35189578_35189583_24");
  static const char chain[] = V1_OPEN GADGET("N", "NoiseAdjustGadget", "") V1_CLOSE;
  assert_int_equal(mr_gadgetron_xml_noise_query(chain, strlen(chain), id, sizeof id), 0);
  assert_int_equal(mr_gadgetron_xml_noise_query("<a", 2, id, sizeof id), 0);
  /* An id longer than the caller keeps is no id: never a cut one. */
  char small[20];
  assert_int_equal(mr_gadgetron_xml_noise_query(query, strlen(query), small, sizeof small), 1);
  assert_string_equal(small, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(translates_default_xml_v2),
      cmocka_unit_test(translates_grappa_chain),
      cmocka_unit_test(extract_picks_the_image_type),
      cmocka_unit_test(noise_alone_stores_dump_alone_dumps),
      cmocka_unit_test(refuses_what_has_no_counterpart),
      cmocka_unit_test(reads_the_dependency_query),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
