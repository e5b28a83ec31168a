#include "dicom_study.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <libxml/xpath.h>

#include "xml_doc.h"

/* Copies src into dst (size bytes) without control characters or `\`
 * (DICOM's value separator), at most size - 1 bytes and never part of a
 * UTF-8 character (libxml2 hands out UTF-8; the files declare it). */
static void clean(char *dst, size_t size, const char *src) {
  size_t n = 0;
  for (; src != NULL && *src != '\0'; src++) {
    unsigned char c = (unsigned char)*src;
    if (c < 0x20 || c == 0x7f || c == '\\')
      continue;
    if (n + 1 == size) {
      if ((c & 0xc0) == 0x80) { /* full inside a character: drop its bytes */
        while (n > 0 && ((unsigned char)dst[n - 1] & 0xc0) == 0x80)
          n--;
        if (n > 0 && (unsigned char)dst[n - 1] >= 0xc0)
          n--;
      }
      break;
    }
    dst[n++] = (char)c;
  }
  dst[n] = '\0';
  while (n > 0 && dst[n - 1] == ' ') /* DICOM pads with spaces: keep none */
    dst[--n] = '\0';
}

static int valid_uid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64 || s[0] == '.' || s[n - 1] == '.')
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!(isdigit((unsigned char)s[i]) || (s[i] == '.' && s[i + 1] != '.')))
      return 0;
  return 1;
}

void mr_dicom_new_uid(char *out) {
  unsigned __int128 v = 0;
  uint8_t r[16];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
    /* No entropy source: time and address still make a collision unlikely. */
    uint64_t a = (uint64_t)time(NULL), b = (uint64_t)(uintptr_t)out ^ (uint64_t)clock();
    memcpy(r, &a, 8);
    memcpy(r + 8, &b, 8);
  }
  for (int i = 0; i < 16; i++)
    v = v << 8 | r[i];
  char digits[48];
  int n = 0;
  do {
    digits[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v != 0);
  int len = snprintf(out, MR_DICOM_UID_MAX, "2.25.");
  while (n > 0 && len + 1 < MR_DICOM_UID_MAX)
    out[len++] = digits[--n];
  out[len] = '\0';
}

/* The text of the first element at path (local names, namespace
 * ignored), or NULL. The caller frees it with xmlFree. */
static char *text_at(xmlXPathContext *ctx, const char *path) {
  char expr[256];
  char *o = expr;
  size_t left = sizeof expr;
  /* "a/b": the element b inside a inside the root ismrmrdHeader, each
   * matched by its local name. */
  int n = snprintf(o, left, "/*[local-name()='ismrmrdHeader']");
  o += n, left -= (size_t)n;
  for (const char *p = path; *p != '\0';) {
    const char *slash = strchr(p, '/');
    size_t len = slash != NULL ? (size_t)(slash - p) : strlen(p);
    n = snprintf(o, left, "/*[local-name()='%.*s']", (int)len, p);
    o += n, left -= (size_t)n;
    p += len + (slash != NULL);
  }
  xmlXPathObject *r = xmlXPathEvalExpression((const xmlChar *)expr, ctx);
  char *v = NULL;
  if (r != NULL && r->nodesetval != NULL && r->nodesetval->nodeNr > 0)
    v = (char *)xmlNodeGetContent(r->nodesetval->nodeTab[0]);
  xmlXPathFreeObject(r);
  return v;
}

static void get(xmlXPathContext *ctx, const char *path, char *dst, size_t size) {
  char *v = text_at(ctx, path);
  clean(dst, size, v);
  xmlFree(v);
}

static double get_number(xmlXPathContext *ctx, const char *path) {
  char *v = text_at(ctx, path);
  double d = v != NULL ? strtod(v, NULL) : 0;
  xmlFree(v);
  return d == d ? d : 0; /* NaN: absent */
}

/* "2024-05-17" -> "20240517"; anything else -> "". */
static void get_date(xmlXPathContext *ctx, const char *path, char *dst) {
  char v[16];
  get(ctx, path, v, sizeof v);
  dst[0] = '\0';
  int y, m, d;
  if (sscanf(v, "%4d-%2d-%2d", &y, &m, &d) == 3 && y >= 0 && y <= 9999 && m >= 1 && m <= 12 &&
      d >= 1 && d <= 31)
    snprintf(dst, 9, "%04d%02d%02d", y, m, d);
}

/* "14:03:27(.5)" -> "140327"; anything else -> "". */
static void get_time(xmlXPathContext *ctx, const char *path, char *dst) {
  char v[32];
  get(ctx, path, v, sizeof v);
  dst[0] = '\0';
  int h, m, s;
  if (sscanf(v, "%2d:%2d:%2d", &h, &m, &s) == 3 && h >= 0 && h < 24 && m >= 0 && m < 60 &&
      s >= 0 && s < 61)
    snprintf(dst, 17, "%02d%02d%02d", h, m, s);
}

/* The UID as written (spaces around it aside), or "" when it is not a
 * valid one: never an edited one (`1.2.3\4` is not `1.2.34`). */
static void get_uid(xmlXPathContext *ctx, const char *path, char *dst) {
  char *v = text_at(ctx, path);
  const char *s = v != NULL ? v + strspn(v, " \t\r\n") : "";
  size_t len = strcspn(s, " \t\r\n");
  dst[0] = '\0';
  if (len < MR_DICOM_UID_MAX && s[len + strspn(s + len, " \t\r\n")] == '\0') {
    memcpy(dst, s, len);
    dst[len] = '\0';
    if (!valid_uid(dst))
      dst[0] = '\0';
  }
  xmlFree(v);
}

static void read_header(mr_dicom_study *st, xmlXPathContext *c) {
  get(c, "subjectInformation/patientName", st->patient_name, sizeof st->patient_name);
  get(c, "subjectInformation/patientID", st->patient_id, sizeof st->patient_id);
  get_date(c, "subjectInformation/patientBirthdate", st->patient_birth_date);
  get(c, "subjectInformation/patientGender", st->patient_sex, sizeof st->patient_sex);
  if (strcmp(st->patient_sex, "M") != 0 && strcmp(st->patient_sex, "F") != 0 &&
      strcmp(st->patient_sex, "O") != 0)
    st->patient_sex[0] = '\0';
  st->patient_weight_kg = get_number(c, "subjectInformation/patientWeight_kg");
  get_date(c, "studyInformation/studyDate", st->study_date);
  get_time(c, "studyInformation/studyTime", st->study_time);
  get(c, "studyInformation/studyID", st->study_id, sizeof st->study_id);
  get(c, "studyInformation/accessionNumber", st->accession_number, sizeof st->accession_number);
  get(c, "studyInformation/studyDescription", st->study_description,
      sizeof st->study_description);
  get(c, "studyInformation/referringPhysicianName", st->referring_physician,
      sizeof st->referring_physician);
  get_uid(c, "studyInformation/studyInstanceUID", st->study_uid);
  get_date(c, "measurementInformation/seriesDate", st->series_date);
  get_time(c, "measurementInformation/seriesTime", st->series_time);
  get(c, "measurementInformation/protocolName", st->protocol_name, sizeof st->protocol_name);
  get(c, "measurementInformation/seriesDescription", st->series_description,
      sizeof st->series_description);
  get(c, "measurementInformation/patientPosition", st->patient_position,
      sizeof st->patient_position);
  get_uid(c, "measurementInformation/frameOfReferenceUID", st->frame_of_reference_uid);
  get_uid(c, "measurementInformation/seriesInstanceUIDRoot", st->series_uid_root);
  get(c, "acquisitionSystemInformation/systemVendor", st->manufacturer, sizeof st->manufacturer);
  get(c, "acquisitionSystemInformation/systemModel", st->model, sizeof st->model);
  get(c, "acquisitionSystemInformation/institutionName", st->institution,
      sizeof st->institution);
  get(c, "acquisitionSystemInformation/stationName", st->station, sizeof st->station);
  st->field_strength_t = get_number(c, "acquisitionSystemInformation/systemFieldStrength_T");
  st->frequency_hz = get_number(c, "experimentalConditions/H1resonanceFrequency_Hz");
  st->tr_ms = get_number(c, "sequenceParameters/TR");
  st->te_ms = get_number(c, "sequenceParameters/TE");
  st->ti_ms = get_number(c, "sequenceParameters/TI");
  st->flip_deg = get_number(c, "sequenceParameters/flipAngle_deg");
  double etl = get_number(c, "encoding/echoTrainLength");
  st->echo_train_length = etl >= 1 && etl <= 65535 ? (unsigned)etl : 0;
}

int mr_dicom_study_init(mr_dicom_study *st, const char *xml, mr_err *err) {
  memset(st, 0, sizeof *st);
  if (xml != NULL && xml[0] != '\0') {
    xmlDoc *doc;
    int rc = mr_xml_doc_read(xml, strlen(xml), "ISMRMRD header", &doc, err);
    if (rc < 0)
      return rc;
    xmlXPathContext *ctx = xmlXPathNewContext(doc);
    if (ctx == NULL) {
      xmlFreeDoc(doc);
      return mr_err_set(err, MR_ENOMEM, "out of memory reading the ISMRMRD header");
    }
    read_header(st, ctx);
    xmlXPathFreeContext(ctx);
    xmlFreeDoc(doc);
  }
  if (st->study_uid[0] == '\0')
    mr_dicom_new_uid(st->study_uid);
  if (st->frame_of_reference_uid[0] == '\0')
    mr_dicom_new_uid(st->frame_of_reference_uid);
  return 0;
}

const char *mr_dicom_series_uid(mr_dicom_study *st, uint16_t series_index) {
  for (int i = 0; i < st->nseries; i++)
    if (st->series[i].index == series_index)
      return st->series[i].uid;
  int slot = st->nseries < MR_DICOM_SERIES_MAX ? st->nseries++ : MR_DICOM_SERIES_MAX - 1;
  char *uid = st->series[slot].uid;
  st->series[slot].index = series_index;
  if (st->series_uid_root[0] == '\0' ||
      snprintf(uid, MR_DICOM_UID_MAX, "%s.%u", st->series_uid_root, series_index) >=
          MR_DICOM_UID_MAX)
    mr_dicom_new_uid(uid);
  return uid;
}
