#include "trajectory_description.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/tree.h>

#include "xml_doc.h"
#include "xml_node.h"

static int read_description(const xmlNode *d, mr_trajectory_description *out, mr_err *err) {
  out->present = 1;
  mr_xml_text(mr_xml_child(d, "identifier"), out->identifier, sizeof out->identifier);
  for (const xmlNode *p = d->children; p != NULL; p = p->next) {
    if (!mr_xml_is(p, "userParameterLong") && !mr_xml_is(p, "userParameterDouble"))
      continue;
    if (out->nparams == MR_TRAJ_PARAMS)
      break;
    mr_trajectory_param *t = &out->params[out->nparams];
    char value[64], *end;
    mr_xml_text(mr_xml_child(p, "name"), t->name, sizeof t->name);
    mr_xml_text(mr_xml_child(p, "value"), value, sizeof value);
    t->value = strtod(value, &end);
    if (value[0] == '\0' || *end != '\0' || !isfinite(t->value))
      return mr_err_set(err, MR_EHEADER,
                        "ISMRMRD header: trajectoryDescription parameter '%s' is '%s', not a "
                        "number", t->name, value);
    out->nparams++;
  }
  return 0;
}

int mr_trajectory_description_read(const mr_stream_header *hdr, int encoding,
                                   mr_trajectory_description *out, mr_err *err) {
  memset(out, 0, sizeof *out);
  if (hdr == NULL || hdr->xml == NULL)
    return 0;
  xmlDoc *doc = NULL;
  int read = mr_xml_doc_read(hdr->xml, hdr->xml_len, "ISMRMRD header", &doc, err);
  if (read < 0)
    return read;
  int rc = 0, at = 0;
  const xmlNode *root = xmlDocGetRootElement(doc);
  for (const xmlNode *e = root != NULL ? root->children : NULL; e != NULL; e = e->next) {
    if (!mr_xml_is(e, "encoding") || at++ != encoding)
      continue;
    const xmlNode *d = mr_xml_child(e, "trajectoryDescription");
    if (d != NULL)
      rc = read_description(d, out, err);
    break;
  }
  xmlFreeDoc(doc);
  return rc;
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
