#include "stream_header.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/tree.h>

#include "xml_doc.h"

/* Walks the tree by local element names, ignoring namespaces (headers in
 * the wild carry the ISMRMRD namespace, or none). */

static int is(const xmlNode *n, const char *name) {
  return n != NULL && n->type == XML_ELEMENT_NODE &&
         strcmp((const char *)n->name, name) == 0;
}

static xmlNode *child(const xmlNode *parent, const char *name) {
  if (parent == NULL)
    return NULL;
  for (xmlNode *c = parent->children; c != NULL; c = c->next)
    if (is(c, name))
      return c;
  return NULL;
}

typedef struct parse_ctx {
  mr_err *err;
} parse_ctx;

/* The element's text content, trimmed, copied into buf; "" when absent.
 * MR_EHEADER when it does not fit: an identifier or a number is never
 * cut (two long measurement ids cut alike would name one noise file). */
static int text_of(parse_ctx *pc, const xmlNode *n, const char *what, char *buf, size_t size) {
  buf[0] = '\0';
  xmlChar *t = n != NULL ? xmlNodeGetContent(n) : NULL;
  if (t == NULL)
    return 0;
  const char *s = (const char *)t;
  s += strspn(s, " \t\r\n");
  size_t len = strlen(s);
  while (len > 0 && strchr(" \t\r\n", s[len - 1]) != NULL)
    len--;
  int rc = 0;
  if (len >= size) {
    rc = mr_err_set(pc->err, MR_EHEADER,
                    "ISMRMRD header: %s is %zu bytes long; at most %zu are accepted", what, len,
                    size - 1);
  } else {
    memcpy(buf, s, len);
    buf[len] = '\0';
  }
  xmlFree(t);
  return rc;
}

/* Reads an unsigned integer element into *out (range [0, max]). Returns 1
 * when read, 0 when the element is absent (*out untouched), MR_EHEADER when
 * it does not parse. */
static int read_uint(parse_ctx *pc, const xmlNode *n, const char *what,
                     unsigned long max, unsigned long *out) {
  char buf[64];
  if (n == NULL)
    return 0;
  if (text_of(pc, n, what, buf, sizeof buf) < 0)
    return MR_EHEADER;
  char *end;
  errno = 0;
  unsigned long v = strtoul(buf, &end, 10);
  if (buf[0] == '\0' || buf[0] == '-' || *end != '\0' || errno != 0 || v > max)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: %s is \"%s\", not an integer in 0..%lu",
                      what, buf, max);
  *out = v;
  return 1;
}

static int read_u16(parse_ctx *pc, const xmlNode *n, const char *what,
                    uint16_t *out) {
  unsigned long v = 0;
  int rc = read_uint(pc, n, what, 65535, &v);
  if (rc > 0)
    *out = (uint16_t)v;
  return rc;
}

static int read_double(parse_ctx *pc, const xmlNode *n, const char *what,
                       double *out) {
  char buf[64];
  if (n == NULL)
    return 0;
  if (text_of(pc, n, what, buf, sizeof buf) < 0)
    return MR_EHEADER;
  char *end;
  errno = 0;
  double v = strtod(buf, &end);
  if (buf[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v))
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: %s is \"%s\", not a number", what, buf);
  *out = v;
  return 1;
}

static int read_float(parse_ctx *pc, const xmlNode *n, const char *what,
                      float *out) {
  double v = 0;
  int rc = read_double(pc, n, what, &v);
  if (rc > 0)
    *out = (float)v;
  return rc;
}

static int read_space(parse_ctx *pc, const xmlNode *n, const char *what,
                      mr_encoding_space *s) {
  char name[96];
  const xmlNode *m = child(n, "matrixSize"), *f = child(n, "fieldOfView_mm");
  if (n == NULL || m == NULL || f == NULL)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: encoding lacks %s/matrixSize and fieldOfView_mm",
                      what);
  s->matrix.z = 1;
  const char *axes[3] = {"x", "y", "z"};
  uint16_t *mv[3] = {&s->matrix.x, &s->matrix.y, &s->matrix.z};
  float *fv[3] = {&s->fov_mm.x, &s->fov_mm.y, &s->fov_mm.z};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s/matrixSize/%s", what, axes[i]);
    const xmlNode *c = child(m, axes[i]);
    if (c == NULL && i < 2)
      return mr_err_set(pc->err, MR_EHEADER, "ISMRMRD header: %s is missing", name);
    if (read_u16(pc, c, name, mv[i]) < 0)
      return MR_EHEADER;
    snprintf(name, sizeof name, "%s/fieldOfView_mm/%s", what, axes[i]);
    if (read_float(pc, child(f, axes[i]), name, fv[i]) < 0)
      return MR_EHEADER;
  }
  if (s->matrix.x == 0 || s->matrix.y == 0 || s->matrix.z == 0)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: %s/matrixSize is %ux%ux%u (zero size)",
                      what, s->matrix.x, s->matrix.y, s->matrix.z);
  return 0;
}

static int read_limit(parse_ctx *pc, const xmlNode *limits, const char *name,
                      mr_limit *l) {
  const xmlNode *n = child(limits, name);
  if (n == NULL)
    return 0;
  char what[96];
  snprintf(what, sizeof what, "encodingLimits/%s/minimum", name);
  if (read_u16(pc, child(n, "minimum"), what, &l->minimum) < 0)
    return MR_EHEADER;
  snprintf(what, sizeof what, "encodingLimits/%s/maximum", name);
  if (read_u16(pc, child(n, "maximum"), what, &l->maximum) < 0)
    return MR_EHEADER;
  snprintf(what, sizeof what, "encodingLimits/%s/center", name);
  if (read_u16(pc, child(n, "center"), what, &l->center) < 0)
    return MR_EHEADER;
  if (l->maximum < l->minimum)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: encodingLimits/%s has maximum %u < minimum %u",
                      name, l->maximum, l->minimum);
  l->present = 1;
  return 0;
}

static const struct {
  const char *name;
  mr_trajectory value;
} trajectories[] = {
    {"cartesian", MR_TRAJ_CARTESIAN}, {"epi", MR_TRAJ_EPI},
    {"radial", MR_TRAJ_RADIAL},       {"goldenangle", MR_TRAJ_GOLDENANGLE},
    {"spiral", MR_TRAJ_SPIRAL},       {"other", MR_TRAJ_OTHER},
};

const char *mr_trajectory_name(mr_trajectory t) {
  for (size_t i = 0; i < sizeof trajectories / sizeof *trajectories; i++)
    if (trajectories[i].value == t)
      return trajectories[i].name;
  return "other";
}

static int read_float_list(parse_ctx *pc, const xmlNode *parent,
                           const char *name, float *out, int *count);

static int read_multiband(parse_ctx *pc, const xmlNode *n, mr_multiband *m) {
  if (n == NULL)
    return 0;
  m->present = 1;
  if (read_u16(pc, child(n, "multiband_factor"), "multiband/multiband_factor", &m->factor) < 0 ||
      read_float_list(pc, child(n, "spacing"), "dZ", m->spacing_mm, &m->nspacing) < 0 ||
      read_float(pc, child(n, "deltaKz"), "multiband/deltaKz", &m->delta_kz) < 0 ||
      text_of(pc, child(n, "calibration"), "multiband/calibration", m->calibration,
              sizeof m->calibration) < 0 ||
      read_u16(pc, child(n, "calibration_encoding"), "multiband/calibration_encoding",
               &m->calibration_encoding) < 0)
    return MR_EHEADER;
  if (m->factor == 0)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: parallelImaging/multiband lacks multiband_factor");
  return 0;
}

static int read_parallel(parse_ctx *pc, const xmlNode *n,
                         mr_parallel_imaging *p) {
  p->accel_e1 = p->accel_e2 = 1;
  if (n == NULL)
    return 0;
  p->present = 1;
  const xmlNode *a = child(n, "accelerationFactor");
  if (read_u16(pc, child(a, "kspace_encoding_step_1"),
               "parallelImaging/accelerationFactor/kspace_encoding_step_1",
               &p->accel_e1) < 0 ||
      read_u16(pc, child(a, "kspace_encoding_step_2"),
               "parallelImaging/accelerationFactor/kspace_encoding_step_2",
               &p->accel_e2) < 0)
    return MR_EHEADER;
  if (p->accel_e1 == 0 || p->accel_e2 == 0)
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: parallelImaging/accelerationFactor is 0");
  char mode[32];
  if (text_of(pc, child(n, "calibrationMode"), "parallelImaging/calibrationMode", mode,
              sizeof mode) < 0 ||
      text_of(pc, child(n, "interleavingDimension"), "parallelImaging/interleavingDimension",
              p->interleaving_dimension, sizeof p->interleaving_dimension) < 0)
    return MR_EHEADER;
  static const struct {
    const char *name;
    mr_calibration_mode value;
  } modes[] = {{"embedded", MR_CALIB_EMBEDDED},
               {"interleaved", MR_CALIB_INTERLEAVED},
               {"separate", MR_CALIB_SEPARATE},
               {"external", MR_CALIB_EXTERNAL},
               {"other", MR_CALIB_OTHER}};
  if (read_multiband(pc, child(n, "multiband"), &p->multiband) < 0)
    return MR_EHEADER;
  p->calibration = mode[0] != '\0' ? MR_CALIB_OTHER : MR_CALIB_NONE;
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (strcmp(mode, modes[i].name) == 0)
      p->calibration = modes[i].value;
  return 0;
}

/* trajectoryDescription (n may be NULL: none). */
static int read_description(parse_ctx *pc, const xmlNode *n, mr_trajectory_description *d) {
  if (n == NULL)
    return 0;
  d->present = 1;
  if (text_of(pc, child(n, "identifier"), "trajectoryDescription/identifier", d->identifier,
              sizeof d->identifier) < 0)
    return MR_EHEADER;
  for (const xmlNode *p = n->children; p != NULL; p = p->next) {
    int is_long = is(p, "userParameterLong");
    if ((!is_long && !is(p, "userParameterDouble")) || d->nparams == MR_TRAJ_PARAMS)
      continue;
    mr_trajectory_param *t = &d->params[d->nparams];
    const char *kind = is_long ? "userParameterLong" : "userParameterDouble";
    char what[128];
    snprintf(what, sizeof what, "trajectoryDescription/%s/name", kind);
    if (text_of(pc, child(p, "name"), what, t->name, sizeof t->name) < 0)
      return MR_EHEADER;
    if (t->name[0] == '\0')
      return mr_err_set(pc->err, MR_EHEADER,
                        "ISMRMRD header: a trajectoryDescription %s has no name", kind);
    if (mr_trajectory_description_param(d, t->name) != NULL)
      return mr_err_set(pc->err, MR_EHEADER,
                        "ISMRMRD header: trajectoryDescription parameter '%s' is given twice",
                        t->name);
    snprintf(what, sizeof what, "trajectoryDescription parameter '%s'", t->name);
    int got = read_double(pc, child(p, "value"), what, &t->value);
    if (got < 0)
      return MR_EHEADER;
    if (got == 0)
      return mr_err_set(pc->err, MR_EHEADER, "ISMRMRD header: %s has no value", what);
    d->nparams++;
  }
  return 0;
}

const mr_trajectory_param *mr_trajectory_description_param(const mr_trajectory_description *d,
                                                           const char *name) {
  for (int i = 0; i < d->nparams; i++)
    if (strcmp(d->params[i].name, name) == 0)
      return &d->params[i];
  return NULL;
}

int mr_trajectory_description_is_epi(const mr_trajectory_description *d) {
  return d->present && strcasecmp(d->identifier, "ConventionalEPI") == 0;
}

static int read_encoding(parse_ctx *pc, const xmlNode *n, mr_encoding *e) {
  if (read_space(pc, child(n, "encodedSpace"), "encodedSpace", &e->encoded) < 0 ||
      read_space(pc, child(n, "reconSpace"), "reconSpace", &e->recon) < 0)
    return MR_EHEADER;
  const xmlNode *l = child(n, "encodingLimits");
  static const char *names[] = {"kspace_encoding_step_0", "kspace_encoding_step_1",
                                "kspace_encoding_step_2", "average", "slice",
                                "contrast", "phase", "repetition", "set",
                                "segment"};
  mr_limit *dst[] = {&e->limits.e0,       &e->limits.e1,    &e->limits.e2,
                     &e->limits.average,  &e->limits.slice, &e->limits.contrast,
                     &e->limits.phase,    &e->limits.repetition,
                     &e->limits.set,      &e->limits.segment};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (read_limit(pc, l, names[i], dst[i]) < 0)
      return MR_EHEADER;
  if (text_of(pc, child(n, "trajectory"), "trajectory", e->trajectory_name,
              sizeof e->trajectory_name) < 0)
    return MR_EHEADER;
  if (e->trajectory_name[0] == '\0')
    return mr_err_set(pc->err, MR_EHEADER, "ISMRMRD header: encoding lacks trajectory");
  e->trajectory = MR_TRAJ_OTHER;
  for (size_t i = 0; i < sizeof trajectories / sizeof *trajectories; i++)
    if (strcmp(e->trajectory_name, trajectories[i].name) == 0)
      e->trajectory = trajectories[i].value;
  if (read_description(pc, child(n, "trajectoryDescription"), &e->description) < 0 ||
      read_parallel(pc, child(n, "parallelImaging"), &e->parallel) < 0 ||
      read_u16(pc, child(n, "echoTrainLength"), "echoTrainLength",
               &e->echo_train_length) < 0)
    return MR_EHEADER;
  return 0;
}

/* Every <name> child of parent as floats, up to MR_MAX_SEQ_VALUES. */
static int read_float_list(parse_ctx *pc, const xmlNode *parent,
                           const char *name, float *out, int *count) {
  *count = 0;
  if (parent == NULL)
    return 0;
  for (xmlNode *c = parent->children; c != NULL; c = c->next) {
    if (!is(c, name) || *count == MR_MAX_SEQ_VALUES)
      continue;
    if (read_float(pc, c, name, &out[*count]) < 0)
      return MR_EHEADER;
    (*count)++;
  }
  return 0;
}

static int read_document(parse_ctx *pc, const xmlNode *root,
                         mr_stream_header *h) {
  if (!is(root, "ismrmrdHeader"))
    return mr_err_set(pc->err, MR_EHEADER,
                      "ISMRMRD header: root element is <%s>, not <ismrmrdHeader>",
                      root != NULL ? (const char *)root->name : "");
  unsigned long v = 0;
  if (read_uint(pc, child(root, "version"), "version", 1000000, &v) < 0)
    return MR_EHEADER;
  h->version = (int)v;

  const xmlNode *mi = child(root, "measurementInformation");
  if (text_of(pc, child(mi, "measurementID"), "measurementID", h->measurement_id,
              sizeof h->measurement_id) < 0)
    return MR_EHEADER;
  for (xmlNode *c = mi != NULL ? mi->children : NULL; c != NULL; c = c->next) {
    if (!is(c, "measurementDependency") || h->ndependencies == MR_MAX_DEPENDENCIES)
      continue;
    mr_dependency *d = &h->dependencies[h->ndependencies++];
    if (text_of(pc, child(c, "dependencyType"), "measurementDependency/dependencyType",
                d->type, sizeof d->type) < 0 ||
        text_of(pc, child(c, "measurementID"), "measurementDependency/measurementID",
                d->measurement_id, sizeof d->measurement_id) < 0)
      return MR_EHEADER;
  }

  const xmlNode *asi = child(root, "acquisitionSystemInformation");
  if (read_u16(pc, child(asi, "receiverChannels"), "receiverChannels",
               &h->receiver_channels) < 0 ||
      read_float(pc, child(asi, "relativeReceiverNoiseBandwidth"),
                 "relativeReceiverNoiseBandwidth", &h->relative_noise_bandwidth) < 0 ||
      read_double(pc, child(child(root, "experimentalConditions"),
                            "H1resonanceFrequency_Hz"),
                  "H1resonanceFrequency_Hz", &h->h1_resonance_hz) < 0)
    return MR_EHEADER;

  for (xmlNode *c = root->children; c != NULL; c = c->next) {
    if (!is(c, "encoding"))
      continue;
    if (h->nencodings == MR_MAX_ENCODINGS)
      return mr_err_set(pc->err, MR_EHEADER,
                        "ISMRMRD header: more than %d encodings", MR_MAX_ENCODINGS);
    if (read_encoding(pc, c, &h->encoding[h->nencodings]) < 0)
      return MR_EHEADER;
    h->nencodings++;
  }
  if (h->nencodings == 0)
    return mr_err_set(pc->err, MR_EHEADER, "ISMRMRD header has no <encoding>");

  const xmlNode *sp = child(root, "sequenceParameters");
  if (read_float_list(pc, sp, "TR", h->tr_ms, &h->ntr) < 0 ||
      read_float_list(pc, sp, "TE", h->te_ms, &h->nte) < 0 ||
      read_float_list(pc, sp, "TI", h->ti_ms, &h->nti) < 0 ||
      read_float_list(pc, sp, "flipAngle_deg", h->flip_deg, &h->nflip) < 0)
    return MR_EHEADER;
  return 0;
}

int mr_stream_header_parse(const char *xml, size_t len, mr_stream_header *h,
                           mr_err *err) {
  memset(h, 0, sizeof *h);
  xmlDoc *doc;
  int rc = mr_xml_doc_read(xml, len, "ISMRMRD header", &doc, err);
  if (rc < 0)
    return rc;
  parse_ctx pc = {.err = err};
  rc = read_document(&pc, xmlDocGetRootElement(doc), h);
  xmlFreeDoc(doc);
  if (rc < 0)
    return rc;
  h->xml = malloc(len + 1);
  if (h->xml == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory keeping the ISMRMRD header");
  memcpy(h->xml, xml, len);
  h->xml[len] = '\0';
  h->xml_len = len;
  return 0;
}

void mr_stream_header_free(mr_stream_header *h) {
  free(h->xml);
  h->xml = NULL;
}
