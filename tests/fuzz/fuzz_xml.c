/* libFuzzer target: every reader of XML a peer sends (protocol/xml_doc.h
 * underneath all of them): the ISMRMRD header parser, the DICOM study
 * reader, and the Gadgetron XML config's dependency query and
 * translation. Besides not crashing, a text that declares a DTD or an
 * entity must never parse (issue 27 item 1). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dicom_study.h"
#include "gadgetron_xml.h"
#include "pipeline_config.h"
#include "stream_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1); /* the DICOM reader takes a C string */
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int declares = memmem(text, size, "<!DOCTYPE", 9) != NULL ||
                 memmem(text, size, "<!ENTITY", 8) != NULL;

  mr_stream_header h;
  mr_err err = {0};
  int rc = mr_stream_header_parse(text, size, &h, &err);
  if (rc == 0)
    mr_stream_header_free(&h);
  if (declares && rc == 0)
    abort();

  mr_dicom_study *st = malloc(sizeof *st);
  if (st != NULL && mr_dicom_study_init(st, text, NULL) == 0 && declares &&
      memchr(data, '\0', size) == NULL)
    abort();
  free(st);

  char id[160];
  mr_gadgetron_xml_noise_query(text, size, id, sizeof id);
  mr_pipeline_config *cfg = NULL;
  if (mr_gadgetron_xml_translate(text, size, &cfg, NULL) == 0) {
    if (declares)
      abort();
    mr_pipeline_config_free(cfg);
  }
  free(text);
  return 0;
}
