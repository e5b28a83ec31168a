/* The server's sessions driven by a plain protocol client (blocking
 * sockets, wire_client.h), served in this process over socketpairs:
 * queries, CONFIG_SCRIPT, TEXT mid-stream, NUL-terminated strings, the
 * header-less CLOSE, the noise-dependency query, errors reaching only
 * their client. A spawned reconserver for SIGTERM only (a running scan
 * finishes; past the deadline it is cut and the server exits 0). A
 * vanishing client, a malformed message and --max-connections are tested
 * on the connection itself: test_server_conn.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>

#include "encode.h"
#include "gadget_harness.h"
#include "inproc_server.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"

/* The sessions: served in this process (inproc_server.h); the SIGTERM
 * tests spawn a server of their own. */
static mr_inproc_server server;

static int start(void **state) {
  (void)state;
  mr_inproc_server_init(&server);
  mr_inproc_server_start(&server);
  return 0;
}

static int stop(void **state) {
  (void)state;
  mr_inproc_server_stop(&server); /* returns once every connection is gone */
  return 0;
}

static int connect_or_fail(void) { return mr_inproc_server_connect(&server); }

/* Text messages as Python clients send them: with a trailing NUL. */
static mr_message *text_nul(mr_message_kind kind, const char *s) {
  return mr_message_new_text(kind, s, strlen(s) + 1);
}

static const char *header_xml(void) { return mr_harness_cartesian_header(32, 16, 1, 16, 16, 1); }

/* Lines from..to-1 of a slice whose last line is 15. */
static void send_lines(int fd, int from, int to, int ns, int nch) {
  for (int e1 = from; e1 < to; e1++) {
    uint64_t flags = e1 == 15 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0;
    mr_test_send_msg(fd,
                     mr_harness_acquisition(ns, nch, e1, 0, flags, mr_harness_smooth_line, &e1));
  }
}

static const mr_message *response(const mr_test_reply *r, uint64_t id) {
  for (int i = 0; i < r->n; i++)
    if (r->msgs[i]->kind == MR_MSG_RESPONSE && r->msgs[i]->u.query.correlation_id == id)
      return r->msgs[i];
  return NULL;
}

static void test_queries_without_a_scan(void **state) {
  (void)state;
  int fd = connect_or_fail();
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 2, "gadgetron::info", 15));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 3, "mrrecon::configs\0", 17));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 4, "gadgetron::cuda::devices", 24));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 5, "no::such::key", 13));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_RESPONSE), 5);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_TEXT), 0);
  assert_string_equal(response(&r, 1)->u.query.text, "0.1.0");
  assert_non_null(strstr(response(&r, 2)->u.query.text, "reconserver"));
  assert_non_null(strstr(response(&r, 2)->u.query.text, "cpu"));
  assert_non_null(strstr(response(&r, 3)->u.query.text, "\"name\":\"cartesian\""));
  assert_non_null(strstr(response(&r, 3)->u.query.text, "default.xml"));
  assert_non_null(strstr(response(&r, 4)->u.query.text, "\"devices\""));
  assert_non_null(strstr(response(&r, 5)->u.query.text, "unknown query key 'no::such::key'"));
  assert_int_equal(r.msgs[r.n - 1]->kind, MR_MSG_CLOSE);
  mr_test_reply_free(&r);
}

static void test_config_script_text_and_query_mid_stream(void **state) {
  (void)state;
  int fd = connect_or_fail();
  mr_test_send_msg(fd, text_nul(MR_MSG_CONFIG_SCRIPT,
                        "{\"name\":\"inline\",\"gadgets\":[{\"gadget\":\"remove_oversampling\"},"
                        "{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
                        "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\",\"series\":3}]}"));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 10, "gadgetron::version\0", 19));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, header_xml()));
  send_lines(fd, 0, 8, 32, 4);
  mr_test_send_msg(fd, text_nul(MR_MSG_TEXT, "a note from the scanner"));
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 11, "gadgetron::version", 18));
  send_lines(fd, 8, 16, 32, 4);
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 10000);
  close(fd);
  assert_true(r.got_close);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_TEXT), 0);
  assert_non_null(response(&r, 10));
  assert_non_null(response(&r, 11));
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 1);
  for (int i = 0; i < r.n; i++) {
    if (r.msgs[i]->kind != MR_MSG_IMAGE)
      continue;
    const mr_image *im = &r.msgs[i]->u.image;
    assert_int_equal(im->head.matrix_size[0], 16);
    assert_int_equal(im->head.matrix_size[1], 16);
    assert_int_equal(im->head.image_series_index, 3);
    assert_int_equal(im->head.data_type, ISMRMRD_FLOAT);
    const float *px = im->data;
    double sum = 0;
    for (int p = 0; p < 256; p++)
      sum += px[p];
    assert_true(sum > 0);
  }
  assert_int_equal(r.msgs[r.n - 1]->kind, MR_MSG_CLOSE);
  mr_test_reply_free(&r);
}

static void test_header_less_close(void **state) {
  (void)state;
  /* Rule 6: CONFIG then CLOSE runs the chain on empty input. */
  int fd = connect_or_fail();
  char name[1024] = "default.xml";
  mr_test_send_msg(fd, mr_message_new_config_file(name));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_int_equal(r.n, 1);
  mr_test_reply_free(&r);
}

static void test_noise_dependency_query(void **state) {
  (void)state;
  int fd = connect_or_fail();
  static const char script[] =
                   "<?xml version=\"1.0\"?><gadgetronStreamConfiguration>"
                   "<writer><slot>1019</slot><dll>gadgetron_mricore</dll>"
                   "<classname>DependencyQueryWriter</classname></writer>"
                   "<gadget><name>NoiseSummary</name><dll>gadgetron_mricore</dll>"
                   "<classname>NoiseSummaryGadget</classname><property><name>noise_file</name>"
                   "<value>id1</value></property></gadget></gadgetronStreamConfiguration>";
  /* As Gadgetron's C++ client sends it: no trailing NUL. */
  mr_test_send_msg(fd, mr_message_new_text(MR_MSG_CONFIG_SCRIPT, script, sizeof script - 1));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.msgs[0]->kind, MR_MSG_DEPENDENCY_QUERY);
  assert_non_null(strstr(r.msgs[0]->u.text, "<name>status</name><value>failed</value>"));
  assert_int_equal(r.msgs[1]->kind, MR_MSG_CLOSE);
  mr_test_reply_free(&r);
}

/* Each error reaches its client as TEXT then CLOSE, and only then. */
typedef void (*scenario)(int fd);

static void unknown_config(int fd) { mr_test_send_msg(fd, mr_message_new_config_file("nope.xml")); }
static void escaping_config(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("../../etc/passwd"));
}
static void acquisition_first(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  send_lines(fd, 0, 1, 16, 1);
}
static void second_config(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
}
static void gadgetron_xml_chain(int fd) {
  mr_test_send_msg(fd, text_nul(MR_MSG_CONFIG_SCRIPT,
                                "<gadgetronStreamConfiguration><gadget><name>PCA</name>"
                                "<classname>PCACoilGadget</classname></gadget>"
                                "</gadgetronStreamConfiguration>"));
}
static void wrong_json_types(int fd) {
  mr_test_send_msg(fd, text_nul(MR_MSG_CONFIG_SCRIPT,
                        "{\"name\":\"j\",\"gadgets\":[{\"gadget\":\"accumulate\",\"trigger\":7},"
                        "{\"gadget\":\"fft\"},{\"gadget\":\"image_out\"}]}"));
}
static void not_xml_header(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, "not xml at all"));
}
static void header_without_encoding(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd,
                   text_nul(MR_MSG_HEADER, "<ismrmrdHeader><version>2</version></ismrmrdHeader>"));
}
static float complex nan_value(int c, int s, void *arg) {
  (void)c, (void)arg;
  return s == 5 ? NAN : 1.0f;
}
static void nan_samples(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, header_xml()));
  mr_test_send_msg(fd, mr_harness_acquisition(32, 2, 3, 0, 0, nan_value, NULL));
}
static void line_outside_matrix(int fd) {
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, header_xml()));
  mr_test_send_msg(fd, mr_harness_acquisition(32, 2, 99, 0, 0, NULL, NULL));
}
/* The external gadget connects anywhere and starts programs: a default
 * server lets only its installed configs use it. */
static void script_with_external(int fd) {
  mr_test_send_msg(fd, text_nul(MR_MSG_CONFIG_SCRIPT,
                                "{\"name\":\"x\",\"gadgets\":[{\"gadget\":\"external\","
                                "\"connect\":\"127.0.0.1:9\"}]}"));
}
static void response_from_client(int fd) {
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_RESPONSE, 1, "x", 1));
}

static void test_errors_reach_their_client(void **state) {
  (void)state;
  static const struct {
    const char *name;
    scenario run;
    const char *error;
  } cases[] = {
      {"unknown config", unknown_config, "ERROR: no config named 'nope.xml' (installed: "},
      {"config name as a path", escaping_config, "refused: a config name is not a path"},
      {"acquisition before header", acquisition_first, "ERROR: ACQUISITION before the HEADER"},
      {"second config", second_config, "a second config (CONFIG_FILE) in one session"},
      {"Gadgetron XML chain", gadgetron_xml_chain, "gadget 0 'PCA' (PCACoilGadget) has no counterpart"},
      {"JSON config with wrong types", wrong_json_types,
       "gadget 0 'accumulate', key 'trigger': expected one of"},
      {"header that is not XML", not_xml_header, "ISMRMRD header is not XML"},
      {"header without encoding", header_without_encoding, "ISMRMRD header has no <encoding>"},
      {"NaN samples", nan_samples, "acquisition 0 has a NaN sample (channel 0, sample 5)"},
      {"line outside the matrix", line_outside_matrix,
       "'accumulate': acquisition 0: line (99, 0) is outside"},
      {"CONFIG_SCRIPT with the external gadget", script_with_external,
       "a CONFIG_SCRIPT may not use the external gadget"},
      {"server message from a client", response_from_client,
       "RESPONSE is a server-to-client message"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    print_message("case: %s\n", cases[i].name);
    int fd = connect_or_fail();
    cases[i].run(fd);
    mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
    mr_test_reply r;
    mr_test_receive(fd, &r, 5000);
    close(fd);
    assert_true(r.got_close);
    assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 0);
    if (mr_test_reply_text(&r, cases[i].error) == NULL) {
      const char *got = mr_test_reply_count(&r, MR_MSG_TEXT) > 0 ? mr_test_reply_text(&r, "") : "";
      fail_msg("case '%s': no TEXT with '%s' (got '%s')", cases[i].name, cases[i].error, got);
    }
    assert_int_equal(r.msgs[r.n - 1]->kind, MR_MSG_CLOSE);
    mr_test_reply_free(&r);
  }
}

static void test_sigterm_lets_a_running_scan_finish(void **state) {
  (void)state;
  mr_test_server s;
  mr_test_server_start(&s, NULL);
  int fd = mr_test_connect(s.port);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, header_xml()));
  send_lines(fd, 0, 8, 32, 2);
  kill(s.pid, SIGTERM);
  int refused = 0; /* no new connections once the signal is handled */
  for (int i = 0; i < 200 && !refused; i++) {
    int probe = mr_test_connect(s.port);
    refused = probe < 0;
    if (probe >= 0)
      close(probe);
    else
      break;
    usleep(10000);
  }
  assert_true(refused);
  assert_true(mr_test_server_alive(&s));
  send_lines(fd, 8, 16, 32, 2);
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 10000);
  close(fd);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 1);
  assert_true(r.got_close);
  mr_test_reply_free(&r);
  /* Drained, it exits by itself (a second SIGTERM would race its exit). */
  assert_int_equal(mr_test_server_wait(&s), 0);
}

/* Past --drain-timeout a running session is cut (what the client is told
 * and what the log says: test_server_conn's drain tests, in process), and
 * the server, its connections gone, exits by itself with 0. */
static void test_sigterm_past_the_deadline_cuts_and_exits(void **state) {
  (void)state;
  mr_test_server s;
  const char *const args[] = {"--drain-timeout", "300", NULL};
  mr_test_server_start(&s, args);
  int fd = mr_test_connect(s.port);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text_nul(MR_MSG_HEADER, header_xml()));
  send_lines(fd, 0, 4, 32, 2);
  /* Answered: the session runs and has taken the lines before. */
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18));
  mr_message *answer = mr_test_receive_kind(fd, MR_MSG_RESPONSE, 5000);
  assert_non_null(answer);
  mr_message_unref(answer);
  kill(s.pid, SIGTERM);
  mr_test_reply r;
  mr_test_receive(fd, &r, 10000); /* no CLOSE of ours: only the deadline ends it */
  close(fd);
  assert_true(r.got_close);
  assert_non_null(mr_test_reply_text(&r, "ERROR: server shutting down"));
  mr_test_reply_free(&r);
  /* A second SIGTERM could meet it past its handlers, in its exit path. */
  assert_int_equal(mr_test_server_wait(&s), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_queries_without_a_scan),
      cmocka_unit_test(test_config_script_text_and_query_mid_stream),
      cmocka_unit_test(test_header_less_close),
      cmocka_unit_test(test_noise_dependency_query),
      cmocka_unit_test(test_errors_reach_their_client),
      cmocka_unit_test(test_sigterm_lets_a_running_scan_finish),
      cmocka_unit_test(test_sigterm_past_the_deadline_cuts_and_exits),
  };
  return cmocka_run_group_tests(tests, start, stop);
}
