/* The one way XML from a peer is parsed (the ISMRMRD header, a Gadgetron
 * XML config, the header again for DICOM).
 *
 * A document with a DTD or an entity declaration is refused before libxml2
 * sees it: an internal entity referenced many times grows quadratically
 * when the tree's text is read (a 157 kB header could cost a gigabyte),
 * and nothing we read needs one. The text is read as UTF-8 whatever its
 * declaration says (so the check sees every byte as it will be parsed),
 * and the parser never loads an external entity or touches the network. */
#ifndef MR_PROTOCOL_XML_DOC_H
#define MR_PROTOCOL_XML_DOC_H

#include <stddef.h>

#include <libxml/tree.h>

#include "error.h"

/* Parses len bytes of text into *doc (free it with xmlFreeDoc). what
 * names the text in the error ("ISMRMRD header", ...). MR_EHEADER when the
 * text is not XML, is not UTF-8, or declares a DTD or an entity; MR_ENOMEM
 * when out of memory. */
int mr_xml_doc_read(const char *text, size_t len, const char *what, xmlDoc **doc, mr_err *err);

#endif
