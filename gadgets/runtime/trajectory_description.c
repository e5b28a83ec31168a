#include "trajectory_description.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

static int is(const xmlNode *n, const char *name) {
  return n != NULL && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static const xmlNode *child(const xmlNode *parent, const char *name) {
  for (const xmlNode *c = parent != NULL ? parent->children : NULL; c != NULL; c = c->next)
    if (is(c, name))
      return c;
  return NULL;
}

/* The element's text, trimmed, into buf ("" when absent). */
static void text_of(const xmlNode *n, char *buf, size_t size) {
  buf[0] = '\0';
  xmlChar *t = n != NULL ? xmlNodeGetContent(n) : NULL;
  if (t == NULL)
    return;
  const char *s = (const char *)t;
  s += strspn(s, " \t\r\n");
  size_t len = strlen(s);
  while (len > 0 && strchr(" \t\r\n", s[len - 1]) != NULL)
    len--;
  snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), s);
  xmlFree(t);
}

static int read_description(const xmlNode *d, mr_trajectory_description *out, mr_err *err) {
  out->present = 1;
  text_of(child(d, "identifier"), out->identifier, sizeof out->identifier);
  for (const xmlNode *p = d->children; p != NULL; p = p->next) {
    if (!is(p, "userParameterLong") && !is(p, "userParameterDouble"))
      continue;
    if (out->nparams == MR_TRAJ_PARAMS)
      break;
    mr_trajectory_param *t = &out->params[out->nparams];
    char value[64], *end;
    text_of(child(p, "name"), t->name, sizeof t->name);
    text_of(child(p, "value"), value, sizeof value);
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
  xmlDoc *doc = xmlReadMemory(hdr->xml, (int)hdr->xml_len, "header.xml", NULL,
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == NULL)
    return mr_err_set(err, MR_EHEADER, "ISMRMRD header: not XML");
  int rc = 0, at = 0;
  const xmlNode *root = xmlDocGetRootElement(doc);
  for (const xmlNode *e = root != NULL ? root->children : NULL; e != NULL; e = e->next) {
    if (!is(e, "encoding") || at++ != encoding)
      continue;
    const xmlNode *d = child(e, "trajectoryDescription");
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
