/* The one XML reader (protocol/xml_doc.c): a document with a DTD or an
 * entity is refused before it is parsed, whatever encoding it claims, so
 * an entity referenced many times cannot grow into gigabytes when its
 * text is read (issue 27 item 1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "stream_header.h"
#include "xml_doc.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void refuses(const char *xml, size_t len) {
  xmlDoc *doc = (xmlDoc *)1;
  mr_err e = {0};
  assert_int_equal(mr_xml_doc_read(xml, len, "test document", &doc, &e), MR_EHEADER);
  assert_null(doc);
  assert_non_null(strstr(e.msg, "test document"));
}

static void test_refuses_dtds_and_entities(void **state) {
  (void)state;
  static const char *cases[] = {
      "<!DOCTYPE a [<!ENTITY x \"xxxxxxxx\">]><a>&x;&x;</a>",
      "<?xml version=\"1.0\"?>\n<!DOCTYPE a SYSTEM \"http://example.com/a.dtd\"><a/>",
      "<!DOCTYPE a><a/>",
      /* an encoding declaration does not change how the bytes are read */
      "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    refuses(cases[i], strlen(cases[i]));
  mr_err e = {0};
  xmlDoc *doc;
  const char *doctype = "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>";
  assert_int_equal(mr_xml_doc_read(doctype, strlen(doctype), "test document", &doc, &e),
                   MR_EHEADER);
  assert_non_null(strstr(e.msg, "declares a DTD or an entity"));
}

/* The same DTD in UTF-16 (bytes the search would not match) is read as
 * UTF-8 and fails there: never parsed as UTF-16. */
static void test_utf16_cannot_hide_a_dtd(void **state) {
  (void)state;
  const char *ascii = "<?xml version=\"1.0\" encoding=\"UTF-16\"?>"
                      "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>";
  size_t n = strlen(ascii);
  char *wide = malloc(2 * n + 2);
  assert_non_null(wide);
  wide[0] = (char)0xff, wide[1] = (char)0xfe; /* little-endian byte order mark */
  for (size_t i = 0; i < n; i++)
    wide[2 + 2 * i] = ascii[i], wide[3 + 2 * i] = '\0';
  refuses(wide, 2 * n + 2);
  free(wide);
}

static void test_reads_a_plain_document(void **state) {
  (void)state;
  const char *xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><a b=\"1\">&lt;&#233;</a>";
  xmlDoc *doc;
  mr_err e = {0};
  assert_int_equal(mr_xml_doc_read(xml, strlen(xml), "test document", &doc, &e), 0);
  assert_non_null(doc);
  xmlChar *t = xmlNodeGetContent(xmlDocGetRootElement(doc));
  assert_string_equal((const char *)t, "<\xc3\xa9");
  xmlFree(t);
  xmlFreeDoc(doc);
}

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* The attack of item 1: a 100 kB entity referenced a thousand times in
 * the measurementID (100 MB when expanded). Refused, and the peak
 * memory of the process does not move by more than the text itself. */
static void test_header_entity_blowup_is_refused(void **state) {
  (void)state;
  enum { ENTITY = 100000, REFS = 1000 };
  size_t cap = ENTITY + REFS * 4 + 1024;
  char *xml = malloc(cap);
  assert_non_null(xml);
  size_t n = (size_t)snprintf(xml, cap, "<!DOCTYPE ismrmrdHeader [<!ENTITY a \"");
  memset(xml + n, 'a', ENTITY);
  n += ENTITY;
  n += (size_t)snprintf(xml + n, cap - n,
                        "\">]><ismrmrdHeader><measurementInformation><measurementID>");
  for (int i = 0; i < REFS; i++)
    n += (size_t)snprintf(xml + n, cap - n, "&a;");
  n += (size_t)snprintf(xml + n, cap - n, "</measurementID></measurementInformation>"
                                          "</ismrmrdHeader>");
  long before = peak_rss_kib();
  mr_stream_header h;
  mr_err e = {0};
  assert_int_equal(mr_stream_header_parse(xml, n, &h, &e), MR_EHEADER);
  assert_non_null(strstr(e.msg, "declares a DTD or an entity"));
#ifndef UNDER_ASAN
  assert_true(peak_rss_kib() - before < 16 * 1024);
#else
  (void)before;
#endif
  free(xml);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refuses_dtds_and_entities),
      cmocka_unit_test(test_utf16_cannot_hide_a_dtd),
      cmocka_unit_test(test_reads_a_plain_document),
      cmocka_unit_test(test_header_entity_blowup_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
