/* Small helpers over libxml2's element trees, for the runtime's readers of
 * XML (the Gadgetron chain translation, the header's trajectoryDescription). */
#ifndef MR_GADGETS_XML_NODE_H
#define MR_GADGETS_XML_NODE_H

#include <stddef.h>

#include <libxml/tree.h>

/* 1 when n is an element called name. */
int mr_xml_is(const xmlNode *n, const char *name);
/* The first child element of parent called name, or NULL. */
const xmlNode *mr_xml_child(const xmlNode *parent, const char *name);
/* The element's text, trimmed, into buf ("" when n is NULL); returns buf. */
const char *mr_xml_text(const xmlNode *n, char *buf, size_t size);

#endif
