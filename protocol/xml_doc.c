#include "xml_doc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>

/* Without XML_PARSE_NOENT (entities stay references), XML_PARSE_DTDLOAD
 * (no external subset is read) and XML_PARSE_HUGE (libxml2's own size
 * caps stay); XML_PARSE_IGNORE_ENC with the UTF-8 we pass makes the
 * parser read exactly the bytes the DTD check saw. */
#define OPTIONS                                                                        \
  (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_IGNORE_ENC)

/* libxml2's globals (its mutexes, the dictionaries' seed) are set up by its
 * first use unless xmlInitParser ran before: two sessions' threads parsing
 * their first headers at once both set them up, and one set leaks (the
 * sanitizer build's load test saw it). */
static pthread_once_t parser_once = PTHREAD_ONCE_INIT;

static void init_parser(void) { xmlInitParser(); }

int mr_xml_doc_read(const char *text, size_t len, const char *what, xmlDoc **doc, mr_err *err) {
  *doc = NULL;
  pthread_once(&parser_once, init_parser);
  if (len > INT32_MAX)
    return mr_err_set(err, MR_EHEADER, "%s of %zu bytes is too large", what, len);
  /* In UTF-8 '<' and '!' are never part of another character, so a byte
   * search finds every declaration the parser would. */
  if (memmem(text, len, "<!DOCTYPE", 9) != NULL || memmem(text, len, "<!ENTITY", 8) != NULL)
    return mr_err_set(err, MR_EHEADER, "%s declares a DTD or an entity: refused", what);
  xmlParserCtxt *ctxt = xmlNewParserCtxt();
  if (ctxt == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory parsing the %s", what);
  *doc = xmlCtxtReadMemory(ctxt, text, (int)len, "peer.xml", "UTF-8", OPTIONS);
  int rc = 0;
  if (*doc == NULL) {
    const xmlError *e = xmlCtxtGetLastError(ctxt);
    char line[200];
    snprintf(line, sizeof line, "%s", e != NULL && e->message ? e->message : "unreadable");
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
      line[--n] = '\0';
    rc = mr_err_set(err, MR_EHEADER, "%s is not XML (line %d: %s)", what,
                    e != NULL ? e->line : 0, line);
  }
  xmlFreeParserCtxt(ctxt);
  return rc;
}
