/* The server's bounds over the wire, served in this process
 * (inproc_server.h): every limit gives a TEXT naming the limit and the
 * value, then CLOSE, and the next client is served; the memory budget;
 * the handshake, idle and error-grace timeouts. A spawned reconserver
 * where its memory (RSS) is measured: a client that stops reading is
 * dropped and costs bounded memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>

#include "encode.h"
#include "budget.h"
#include "gadget_harness.h"
#include "inproc_server.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"

/* Served in this process (inproc_server.h), as reconserver --limit NAME=N
 * ... --grace 300 would. */
static mr_inproc_server server;

static int start(void **state) {
  (void)state;
  static const char *const limits[][2] = {
      {"header_bytes", "4096"},   {"config_script_bytes", "2048"}, {"text_bytes", "64"},
      {"query_bytes", "64"},      {"channels", "8"},               {"samples", "512"},
      {"acquisition_bytes", "16384"}, {"image_bytes", "4096"},     {"attribute_bytes", "256"},
      {"waveform_bytes", "1024"}};
  mr_inproc_server_init(&server);
  for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
    assert_int_equal(mr_limits_set(&server.limits, limits[i][0], limits[i][1]), 0);
  server.env.error_grace_ms = server.opt.close_grace_ms = 300; /* --grace 300 */
  mr_inproc_server_start(&server);
  return 0;
}

static int stop(void **state) {
  (void)state;
  mr_inproc_server_stop(&server);
  return 0;
}

static mr_message *text(mr_message_kind kind, const char *s) {
  return mr_message_new_text(kind, s, strlen(s));
}

static const char *header_xml(void) { return mr_harness_cartesian_header(32, 16, 1, 16, 16, 1); }

/* Opens a session, sends `bad` after config and header, then CLOSE, and
 * expects `error` in a TEXT before the server's CLOSE. */
static void expect_rejection(mr_message *bad, const char *error) {
  int fd = mr_inproc_server_connect(&server);
  assert_true(fd >= 0);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text(MR_MSG_HEADER, header_xml()));
  mr_test_send_msg(fd, bad);
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  if (mr_test_reply_text(&r, error) == NULL)
    fail_msg("no TEXT with '%s' (first TEXT: '%s')", error,
             mr_test_reply_count(&r, MR_MSG_TEXT) ? mr_test_reply_text(&r, "") : "none");
  mr_test_reply_free(&r);
}

static mr_message *image_of(uint16_t nx, const char *attr) {
  return mr_test_image(ISMRMRD_FLOAT, nx, 1, attr);
}

static void test_every_limit_over_the_wire(void **state) {
  (void)state;
  char big[8192];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  expect_rejection(text(MR_MSG_TEXT, big), "TEXT of 8191 bytes is over the limit text_bytes = 64");
  expect_rejection(mr_message_new_query(MR_MSG_QUERY, 1, big, 100),
                   "QUERY of 100 bytes is over the limit query_bytes = 64");
  expect_rejection(mr_harness_acquisition(16, 9, 0, 0, 0, NULL, NULL),
                   "active_channels 9 is over the limit channels = 8");
  expect_rejection(mr_harness_acquisition(513, 1, 0, 0, 0, NULL, NULL),
                   "number_of_samples 513 is over the limit samples = 512");
  expect_rejection(mr_harness_acquisition(512, 8, 0, 0, 0, NULL, NULL),
                   "size in bytes 32768 is over the limit acquisition_bytes = 16384");
}

static void test_trajectory_dimensions(void **state) {
  (void)state;
  mr_message *m = mr_harness_acquisition(16, 1, 0, 0, 0, NULL, NULL);
  ISMRMRD_AcquisitionHeader h = m->u.acq.head;
  mr_message_unref(m);
  h.trajectory_dimensions = 4;
  m = mr_message_new_acquisition(&h);
  expect_rejection(m, "trajectory_dimensions 4 is over the limit trajectory_dims = 3");
}

static void test_other_message_limits(void **state) {
  (void)state;
  expect_rejection(image_of(1025, NULL), "IMAGE of 4100 bytes is over the limit image_bytes = 4096");
  char attr[300];
  memset(attr, 'a', sizeof attr - 1);
  attr[sizeof attr - 1] = '\0';
  expect_rejection(image_of(4, attr),
                   "IMAGE attributes of 300 bytes are over the limit attribute_bytes = 256");
  ISMRMRD_WaveformHeader wh;
  memset(&wh, 0, sizeof wh);
  wh.number_of_samples = 257;
  wh.channels = 1;
  expect_rejection(mr_message_new_waveform(&wh),
                   "WAVEFORM of 1028 bytes is over the limit waveform_bytes = 1024");
}

static void test_config_and_header_limits(void **state) {
  (void)state;
  char big[5000];
  memset(big, ' ', sizeof big);
  static const struct {
    mr_message_kind kind;
    size_t len;
    const char *error;
  } cases[] = {
      {MR_MSG_CONFIG_SCRIPT, 2049, "CONFIG_SCRIPT of 2049 bytes is over the limit "
                                   "config_script_bytes = 2048"},
      {MR_MSG_HEADER, 4097, "HEADER of 4097 bytes is over the limit header_bytes = 4096"},
  };
  for (size_t i = 0; i < 2; i++) {
    int fd = mr_inproc_server_connect(&server);
    if (cases[i].kind == MR_MSG_HEADER)
      mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
    mr_test_send_msg(fd, mr_message_new_text(cases[i].kind, big, cases[i].len));
    mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
    mr_test_reply r;
    mr_test_receive(fd, &r, 5000);
    close(fd);
    assert_true(r.got_close);
    assert_non_null(mr_test_reply_text(&r, cases[i].error));
    mr_test_reply_free(&r);
  }
}

static int64_t elapsed_ms(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* (A config that cannot be served is answered at once instead:
 * test_server_conn's test_an_unknown_config_is_answered_at_once.) */
static void test_no_close_after_an_error_is_answered_after_the_grace(void **state) {
  (void)state;
  int fd = mr_inproc_server_connect(&server);
  mr_test_send_msg(fd, mr_message_new_text(MR_MSG_HEADER, "<x/>", 4)); /* before a config */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_non_null(mr_test_reply_text(&r, "HEADER before a config"));
  int64_t ms = elapsed_ms(&t0);
  assert_true(ms >= 250 && ms < 3000);
  mr_test_reply_free(&r);
}

static void test_timeouts(void **state) {
  (void)state;
  mr_inproc_server s; /* --handshake-timeout 300 --idle-timeout 400 */
  mr_inproc_server_init(&s);
  s.env.handshake_timeout_ms = 300;
  s.env.idle_timeout_ms = 400;
  mr_inproc_server_start(&s);
  /* Silent from the start. */
  int fd = mr_inproc_server_connect(&s);
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_non_null(
      mr_test_reply_text(&r, "ERROR: no config within 300 ms of connecting (--handshake-timeout)"));
  mr_test_reply_free(&r);
  /* Silent mid-stream. */
  fd = mr_inproc_server_connect(&s);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text(MR_MSG_HEADER, header_xml()));
  mr_test_send_msg(fd, mr_harness_acquisition(32, 2, 0, 0, 0, NULL, NULL));
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_non_null(mr_test_reply_text(&r, "ERROR: no message for 400 ms (--idle-timeout)"));
  mr_test_reply_free(&r);
  mr_inproc_server_stop(&s);
}

static void test_memory_budget(void **state) {
  (void)state;
  mr_inproc_server s; /* the default limits, and --memory-budget 1 (the process's) */
  mr_inproc_server_init(&s);
  mr_inproc_server_start(&s);
  mr_budget_set(1u << 20);
  int fd = mr_inproc_server_connect(&s);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  /* 512 x 512 x 8 coils x 8 bytes = 16 MiB of k-space against 1 MiB. */
  mr_test_send_msg(fd, text(MR_MSG_HEADER, mr_harness_cartesian_header(512, 512, 1, 512, 512, 1)));
  mr_test_send_msg(fd, mr_harness_acquisition(512, 8, 0, 0, 0, NULL, NULL));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_true(r.got_close);
  assert_non_null(mr_test_reply_text(&r, "memory budget: a 512x512x1 x 8-channel k-space buffer "
                                         "needs 16.0 MiB; the server's budget (--memory-budget) "
                                         "is 1.0 MiB"));
  mr_test_reply_free(&r);
  mr_inproc_server_stop(&s);
  mr_budget_set(0); /* no budget again, as for the other tests */
}

/* A client that sends scans and never reads an image: the outbox fills,
 * the chain waits, the inbox fills, the server stops reading; after the
 * write timeout the client is dropped. Memory stays bounded throughout. */
static void test_client_that_never_reads(void **state) {
  (void)state;
  mr_test_server s;
  const char *const args[] = {"--write-timeout", "500", "--limit", "connection_bytes=262144",
                              NULL};
  mr_test_server_start(&s, args);
  long before = mr_test_server_rss_kib(&s);
  int fd = mr_test_connect(s.port);
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  mr_test_send_msg(fd, text(MR_MSG_HEADER, mr_harness_cartesian_header(256, 128, 1, 256, 128, 1)));
  fcntl(fd, F_SETFL, O_NONBLOCK);
  /* Each repetition is a 256x128 float image back (128 KiB). */
  size_t sent = 0;
  int blocked = 0;
  for (int rep = 0; rep < 400 && !blocked; rep++) {
    for (int e1 = 0; e1 < 128 && !blocked; e1++) {
      mr_message *m = mr_harness_acquisition(256, 2, e1, 0,
                                             e1 == 127 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                             NULL, NULL);
      m->u.acq.head.idx.repetition = (uint16_t)rep;
      uint8_t *b;
      size_t len, off = 0;
      mr_encode_flat(m, &b, &len);
      mr_message_unref(m);
      /* Blocked: the socket stays unwritable for a second. */
      while (off < len) {
        ssize_t n = send(fd, b + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
          off += (size_t)n;
          continue;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 1000) <= 0 || (p.revents & (POLLERR | POLLHUP)))
          break;
      }
      free(b);
      sent += off;
      blocked = off < len;
    }
  }
  assert_true(blocked); /* backpressure reached the client */
  long during = mr_test_server_rss_kib(&s);
  print_message("sent %.1f MiB before blocking; server RSS %ld -> %ld KiB\n",
                (double)sent / 1048576.0, before, during);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine holds freed memory */
  assert_true(during - before < 64 * 1024);
#endif
  /* Past the write timeout the server drops us: closing a socket it holds
   * unread bytes of resets the connection. */
  struct pollfd p = {fd, POLLRDHUP, 0};
  assert_int_equal(poll(&p, 1, 10000), 1);
  assert_true(p.revents & (POLLERR | POLLHUP | POLLRDHUP));
  assert_true(mr_test_server_alive(&s));
  char buf[4096];
  ssize_t n;
  int closed = 0;
  for (int i = 0; i < 1000 && !closed; i++) {
    n = recv(fd, buf, sizeof buf, 0);
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  assert_true(closed);
  close(fd);
  /* And the next client is served. */
  fd = mr_test_connect(s.port);
  mr_test_send_msg(fd, mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 5000);
  close(fd);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_RESPONSE), 1);
  mr_test_reply_free(&r);
  assert_int_equal(mr_test_server_stop(&s), 0);
}

int main(void) {
  /* On the shared server (start, stop). */
  const struct CMUnitTest shared[] = {
      cmocka_unit_test(test_every_limit_over_the_wire),
      cmocka_unit_test(test_trajectory_dimensions),
      cmocka_unit_test(test_other_message_limits),
      cmocka_unit_test(test_config_and_header_limits),
      cmocka_unit_test(test_no_close_after_an_error_is_answered_after_the_grace),
  };
  /* Each on a server of its own, once the shared one is gone (one
   * in-process server at a time: inproc_server.h). */
  const struct CMUnitTest own[] = {
      cmocka_unit_test(test_timeouts),
      cmocka_unit_test(test_memory_budget),
      cmocka_unit_test(test_client_that_never_reads),
  };
  int failed = cmocka_run_group_tests(shared, start, stop);
  return failed + cmocka_run_group_tests(own, NULL, NULL);
}
