#include "gadgetron_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libxml/tree.h>

#include "xml_doc.h"
#include "xml_node.h"

/* What a Gadgetron gadget contributes to our chain. */
enum role {
  NOISE = 1 << 0,
  OVERSAMPLING = 1 << 1,
  ACCUMULATE = 1 << 2,
  FFT_RSS = 1 << 3,   /* fft + rss combination */
  COMBINE_RSS = 1 << 4,
  GRAPPA = 1 << 5,    /* grappa + fft + weighted combination */
  IMAGE_SPLIT = 1 << 6,
  EXTRACT = 1 << 7,
  DUMP = 1 << 8,
};

static const struct {
  const char *classname;
  unsigned role;
} counterparts[] = {
    {"NoiseAdjustGadget", NOISE},
    {"RemoveROOversamplingGadget", OVERSAMPLING},
    {"AcquisitionAccumulateTriggerGadget", ACCUMULATE},
    {"BucketToBufferGadget", ACCUMULATE},
    {"SimpleReconGadget", FFT_RSS},
    {"FFTGadget", FFT_RSS},
    {"GenericReconCartesianFFTGadget", FFT_RSS},
    {"CombineGadget", COMBINE_RSS},
    {"GenericReconCartesianReferencePrepGadget", GRAPPA},
    {"GenericReconCartesianGrappaGadget", GRAPPA},
    {"ImageArraySplitGadget", IMAGE_SPLIT},
    {"ImageFinishGadget", IMAGE_SPLIT},
    {"ExtractGadget", EXTRACT},
    {"ComplexToFloatGadget", EXTRACT},
    {"IsmrmrdDumpGadget", DUMP},
};

/* A gadget's property value (trimmed), "" when absent. */
static const char *property(const xmlNode *gadget, const char *name, char *buf, size_t size) {
  char key[128];
  for (const xmlNode *p = gadget->children; p != NULL; p = p->next)
    if (mr_xml_is(p, "property") && strcmp(mr_xml_text(mr_xml_child(p, "name"), key, sizeof key), name) == 0)
      return mr_xml_text(mr_xml_child(p, "value"), buf, size);
  buf[0] = '\0';
  return buf;
}

/* The element holding the gadgets: the root (4.x) or its <stream> (v2). */
static const xmlNode *gadget_parent(const xmlDoc *doc) {
  const xmlNode *root = xmlDocGetRootElement(doc);
  if (mr_xml_is(root, "gadgetronStreamConfiguration"))
    return root;
  if (mr_xml_is(root, "configuration"))
    return mr_xml_child(root, "stream");
  return NULL;
}

int mr_gadgetron_xml_noise_query(const char *text, size_t len, char *id, size_t size) {
  xmlDoc *doc;
  mr_xml_doc_read(text, len, "CONFIG_SCRIPT", &doc, NULL);
  const xmlNode *parent = doc != NULL ? gadget_parent(doc) : NULL;
  int found = 0;
  char cls[128];
  for (const xmlNode *g = parent != NULL ? parent->children : NULL; g != NULL && !found;
       g = g->next) {
    if (!mr_xml_is(g, "gadget") ||
        strcmp(mr_xml_text(mr_xml_child(g, "classname"), cls, sizeof cls), "NoiseSummaryGadget") != 0)
      continue;
    found = 1;
    char file[512];
    property(g, "noise_file", file, sizeof file);
    size_t skip = strncmp(file, MR_GADGETRON_NOISE_PREFIX, strlen(MR_GADGETRON_NOISE_PREFIX)) == 0
                      ? strlen(MR_GADGETRON_NOISE_PREFIX)
                      : 0;
    /* An id that does not fit is no id we stored (those are shorter):
     * never a cut one, which might be. */
    if (snprintf(id, size, "%s", file + skip) >= (int)size || strlen(file) + 1 == sizeof file)
      id[0] = '\0';
  }
  xmlFreeDoc(doc);
  return found;
}

/* The translation so far. */
typedef struct plan {
  unsigned roles;
  const char *image_type; /* image_out's type */
  int series;             /* image_out's series */
  char classes[512];      /* for the description */
} plan;

static unsigned role_of(const char *classname) {
  for (size_t i = 0; i < sizeof counterparts / sizeof *counterparts; i++)
    if (strcmp(counterparts[i].classname, classname) == 0)
      return counterparts[i].role;
  return 0;
}

/* ExtractGadget's choice (extract_mask, or the extract_* switches of newer
 * versions) as image_out's type; NULL when it asks for several. */
static const char *extract_type(const xmlNode *g) {
  static const struct {
    unsigned bit;
    const char *flag, *type;
  } kinds[] = {{1, "extract_magnitude", "magnitude"}, {2, "extract_real", "real"},
               {4, "extract_imag", "imag"},           {8, "extract_phase", "phase"}};
  char v[64];
  unsigned mask = (unsigned)strtoul(property(g, "extract_mask", v, sizeof v), NULL, 0);
  for (size_t i = 0; i < 4; i++)
    if (strcmp(property(g, kinds[i].flag, v, sizeof v), "true") == 0)
      mask |= kinds[i].bit;
  if (mask == 0)
    mask = 1; /* Gadgetron's default: magnitude */
  for (size_t i = 0; i < 4; i++)
    if (mask == kinds[i].bit)
      return kinds[i].type;
  return NULL;
}

static int read_gadget(const xmlNode *g, int index, plan *p, mr_err *err) {
  char cls[128], name[128];
  mr_xml_text(mr_xml_child(g, "classname"), cls, sizeof cls);
  mr_xml_text(mr_xml_child(g, "name"), name, sizeof name);
  unsigned role = role_of(cls);
  if (role == 0)
    return mr_err_set(err, MR_ECONFIG,
                      "Gadgetron XML config: gadget %d '%.60s' (%.100s) has no counterpart here; "
                      "name an installed config (CONFIG_FILE) or send a JSON config",
                      index, name, cls[0] != '\0' ? cls : "no classname");
  p->roles |= role;
  if (role == EXTRACT && strcmp(cls, "ExtractGadget") == 0 &&
      (p->image_type = extract_type(g)) == NULL)
    return mr_err_set(err, MR_ECONFIG,
                      "Gadgetron XML config: gadget %d '%.60s' (ExtractGadget) asks for more "
                      "than one image type; one image_out sends one", index, name);
  if (role == EXTRACT && strcmp(cls, "ComplexToFloatGadget") == 0)
    p->image_type = "magnitude";
  char series[32];
  if (role == GRAPPA && property(g, "image_series", series, sizeof series)[0] != '\0') {
    char *end;
    long v = strtol(series, &end, 10);
    if (*end == '\0' && v >= 0 && v <= 65535)
      p->series = (int)v;
  }
  size_t used = strlen(p->classes);
  snprintf(p->classes + used, sizeof p->classes - used, "%s%s", used ? ", " : "", cls);
  return 0;
}

static cJSON *gadget(cJSON *list, const char *name) {
  cJSON *g = cJSON_CreateObject();
  cJSON_AddStringToObject(g, "gadget", name);
  cJSON_AddItemToArray(list, g);
  return g;
}

/* Our chain for the roles read, in our canonical order. */
static int build(const plan *p, cJSON *list, mr_err *err) {
  unsigned r = p->roles;
  if (r & DUMP) {
    if (r != DUMP)
      return mr_err_set(err, MR_ECONFIG, "Gadgetron XML config: IsmrmrdDumpGadget with other "
                                         "gadgets (%.200s): only a dump alone is translated",
                        p->classes);
    gadget(list, "raw_dump");
    return 0;
  }
  if (r == NOISE) { /* default_measurement_dependencies.xml: store the noise */
    cJSON_AddTrueToObject(gadget(list, "noise_adjust"), "store");
    gadget(list, "discard");
    return 0;
  }
  if (!(r & (FFT_RSS | GRAPPA)))
    return mr_err_set(err, MR_ECONFIG, "Gadgetron XML config: no gadget reconstructs images "
                                       "(%.200s)", r ? p->classes : "no gadgets");
  if (!(r & ACCUMULATE))
    return mr_err_set(err, MR_ECONFIG, "Gadgetron XML config: no AcquisitionAccumulateTrigger"
                                       "Gadget or BucketToBufferGadget before the recon");
  cJSON_AddStringToObject(gadget(list, "accumulate"), "trigger", "slice");
  if (r & NOISE)
    gadget(list, "noise_adjust");
  if (r & OVERSAMPLING)
    gadget(list, "remove_oversampling");
  if (r & GRAPPA)
    gadget(list, "grappa");
  gadget(list, "fft");
  cJSON_AddStringToObject(gadget(list, "coil_combine"), "method",
                          (r & GRAPPA) ? "weighted" : "rss");
  cJSON *out = gadget(list, "image_out");
  cJSON_AddStringToObject(out, "type", p->image_type);
  cJSON_AddNumberToObject(out, "series", p->series);
  return 0;
}

int mr_gadgetron_xml_translate(const char *text, size_t len, mr_pipeline_config **out,
                               mr_err *err) {
  xmlDoc *doc;
  mr_err why = {0};
  if (mr_xml_doc_read(text, len, "CONFIG_SCRIPT", &doc, &why) < 0)
    return mr_err_set(err, MR_ECONFIG, "%s", why.msg);
  const xmlNode *parent = gadget_parent(doc);
  int rc = 0;
  if (parent == NULL)
    rc = mr_err_set(err, MR_ECONFIG, "Gadgetron XML config: expected <gadgetronStreamConfiguration>"
                                     " or <configuration> with a <stream>");
  plan p = {.image_type = "complex", .series = 1};
  int index = 0;
  for (const xmlNode *n = parent != NULL ? parent->children : NULL; rc == 0 && n != NULL;
       n = n->next) {
    if (n->type != XML_ELEMENT_NODE || mr_xml_is(n, "reader") || mr_xml_is(n, "writer") ||
        mr_xml_is(n, "version") || mr_xml_is(n, "readers") || mr_xml_is(n, "writers"))
      continue;
    if (mr_xml_is(n, "gadget"))
      rc = read_gadget(n, index++, &p, err);
    else
      rc = mr_err_set(err, MR_ECONFIG, "Gadgetron XML config: <%.60s> has no counterpart here",
                      (const char *)n->name);
  }
  xmlFreeDoc(doc);
  cJSON *cfg = rc == 0 ? cJSON_CreateObject() : NULL;
  cJSON *list = cfg != NULL ? cJSON_AddArrayToObject(cfg, "gadgets") : NULL;
  if (rc == 0 && list == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory translating a Gadgetron XML config");
  if (rc == 0)
    rc = build(&p, list, err);
  char *json = NULL;
  if (rc == 0) {
    char description[700];
    snprintf(description, sizeof description, "translated from a Gadgetron XML chain: %s",
             p.classes);
    cJSON_AddStringToObject(cfg, "name", "gadgetron-xml");
    cJSON_AddStringToObject(cfg, "description", description);
    if ((json = cJSON_PrintUnformatted(cfg)) == NULL) {
      mr_err_set(err, MR_ENOMEM, "out of memory translating a Gadgetron XML config");
      rc = MR_ENOMEM;
    }
  }
  cJSON_Delete(cfg);
  if (rc == 0)
    rc = mr_pipeline_config_parse(json, strlen(json), "CONFIG_SCRIPT (Gadgetron XML)", out, err);
  free(json);
  return rc;
}
