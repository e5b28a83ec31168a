#include "xml_node.h"

#include <stdio.h>
#include <string.h>

int mr_xml_is(const xmlNode *n, const char *name) {
  return n != NULL && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

const xmlNode *mr_xml_child(const xmlNode *parent, const char *name) {
  for (const xmlNode *c = parent != NULL ? parent->children : NULL; c != NULL; c = c->next)
    if (mr_xml_is(c, name))
      return c;
  return NULL;
}

const char *mr_xml_text(const xmlNode *n, char *buf, size_t size) {
  buf[0] = '\0';
  xmlChar *t = n != NULL ? xmlNodeGetContent(n) : NULL;
  if (t == NULL)
    return buf;
  const char *s = (const char *)t;
  s += strspn(s, " \t\r\n");
  size_t len = strlen(s);
  while (len > 0 && strchr(" \t\r\n", s[len - 1]) != NULL)
    len--;
  snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), s);
  xmlFree(t);
  return buf;
}
