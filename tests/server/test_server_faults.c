/* Faults: clients that disconnect at every phase of a session leave
 * nothing behind (RSS back to baseline after 1,000 of them); a failing
 * client does not disturb one running beside it; 500 sequential sessions
 * do not grow the server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "encode.h"
#include "gadget_harness.h"
#include "test_support.h"
#include "wire_client.h"
#include "wire_scan.h"

static mr_test_server server;

static int start(void **state) {
  (void)state;
  mr_test_server_start(&server, NULL);
  return 0;
}

static int stop(void **state) {
  (void)state;
  assert_int_equal(mr_test_server_stop(&server), 0);
  return 0;
}

/* Under AddressSanitizer freed memory sits in quarantine, so RSS says
 * nothing about leaks there (LeakSanitizer does that job instead). */
#ifdef __SANITIZE_ADDRESS__
static const int rss_meaningful = 0;
#else
static const int rss_meaningful = 1;
#endif

/* One whole session's bytes: config, header, a 32x16 4-coil slice, CLOSE.
 * ends[] receives the offset where each message ends. */
static uint8_t *session_bytes(size_t *len, size_t *ends, int *nends) {
  mr_message *msgs[24];
  int n = 0;
  msgs[n++] = mr_message_new_config_file("default.xml");
  const char *xml = mr_harness_cartesian_header(32, 16, 1, 16, 16, 1);
  msgs[n++] = mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml));
  for (int e1 = 0; e1 < 16; e1++)
    msgs[n++] = mr_harness_acquisition(32, 4, e1, 0,
                                       e1 == 15 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                       mr_harness_smooth_line, &e1);
  msgs[n++] = mr_message_new(MR_MSG_CLOSE);
  uint8_t *all = mr_test_encode_all(msgs, n, len, ends);
  for (int i = 0; i < n; i++)
    mr_message_unref(msgs[i]);
  *nends = n;
  return all;
}

/* Sends the first `cut` bytes of a session and goes away. */
static void vanish_after(const uint8_t *bytes, size_t cut) {
  int fd = mr_test_connect(server.port);
  assert_true(fd >= 0);
  if (cut > 0)
    mr_test_send_bytes(fd, bytes, cut);
  close(fd);
}

static void run_full_session(const uint8_t *bytes, size_t len) {
  int fd = mr_test_connect(server.port);
  assert_int_equal(mr_test_send_bytes(fd, bytes, len), 0);
  mr_test_reply r;
  mr_test_receive(fd, &r, 10000);
  close(fd);
  if (!r.got_close || mr_test_reply_count(&r, MR_MSG_IMAGE) != 1 ||
      mr_test_reply_count(&r, MR_MSG_TEXT) != 0)
    fail_msg("session: %d messages, close %d, eof %d, images %d, first TEXT '%s'", r.n,
             r.got_close, r.eof, mr_test_reply_count(&r, MR_MSG_IMAGE),
             mr_test_reply_count(&r, MR_MSG_TEXT) ? mr_test_reply_text(&r, "") : "");
  mr_test_reply_free(&r);
}

/* Waits until the server has let go of the connections before: closing
 * them is asynchronous, and a burst can briefly reach --max-connections.
 * Done when a query is answered (not refused as busy) twice in a row. */
static void settle(void) {
  int served = 0;
  for (int i = 0; i < 500 && served < 2; i++) {
    int fd = mr_test_connect(server.port);
    mr_message *q = mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18);
    mr_message *c = mr_message_new(MR_MSG_CLOSE);
    mr_test_send(fd, q);
    mr_test_send(fd, c);
    mr_message_unref(q);
    mr_message_unref(c);
    mr_test_reply r;
    mr_test_receive(fd, &r, 5000);
    close(fd);
    served = mr_test_reply_count(&r, MR_MSG_RESPONSE) == 1 ? served + 1 : 0;
    mr_test_reply_free(&r);
    usleep(50000);
  }
  assert_int_equal(served, 2);
}

static void test_disconnects_at_every_phase_leave_nothing(void **state) {
  (void)state;
  size_t len, ends[24];
  int nends;
  uint8_t *bytes = session_bytes(&len, ends, &nends);
  /* Phases: before anything, inside and after each message, and after
   * CLOSE without reading the answer. */
  size_t cuts[64];
  int ncuts = 0;
  cuts[ncuts++] = 0;
  for (int i = 0; i < nends; i++) {
    size_t begin = i == 0 ? 0 : ends[i - 1];
    cuts[ncuts++] = begin + 1;                   /* mid-id */
    cuts[ncuts++] = begin + (ends[i] - begin) / 2; /* mid-body */
    cuts[ncuts++] = ends[i];                       /* whole */
  }
  /* In bursts of 40, so that every one reaches a session rather than the
   * --max-connections refusal. */
  /* Warm up the allocator's arenas with the same pattern as measured:
   * glibc keeps up to 8 arenas per core, and on a 64-core host after 120
   * the measured 1000 grew the RSS by 1.9 and 3.2 MiB in two runs (the 500
   * sequential sessions after them by 0.24 MiB); after this warm-up, the
   * next 1000 grew it by 0.38 MiB there. */
  for (int i = 0; i < 1000; i++) {
    vanish_after(bytes, cuts[i % ncuts]);
    if (i % 40 == 39)
      settle();
  }
  run_full_session(bytes, len);
  settle();
  long baseline = mr_test_server_rss_kib(&server);
  for (int i = 0; i < 1000; i++) {
    vanish_after(bytes, cuts[i % ncuts]);
    if (i % 40 == 39)
      settle();
  }
  settle();
  run_full_session(bytes, len);
  settle();
  long after = mr_test_server_rss_kib(&server);
  print_message("RSS after warm-up %ld KiB, after 1000 disconnects %ld KiB (%+ld)\n", baseline,
                after, after - baseline);
  assert_true(mr_test_server_alive(&server));
  if (rss_meaningful)
    assert_true(after - baseline < 2048);
  free(bytes);
}

typedef struct worker {
  int bad;
  int images, errors;
} worker;

static void *client_thread(void *arg) {
  worker *w = arg;
  for (int round = 0; round < 10; round++) {
    int fd = mr_test_connect(server.port);
    mr_test_send_scan(fd, w->bad ? "nope.xml" : "default.xml", 32, 16, 4);
    mr_test_reply r;
    mr_test_receive(fd, &r, 10000);
    close(fd);
    w->images += mr_test_reply_count(&r, MR_MSG_IMAGE);
    w->errors += mr_test_reply_count(&r, MR_MSG_TEXT);
    mr_test_reply_free(&r);
  }
  return NULL;
}

static void test_a_failing_client_does_not_disturb_its_neighbour(void **state) {
  (void)state;
  settle();
  worker good = {0}, bad = {.bad = 1};
  pthread_t a, b;
  pthread_create(&a, NULL, client_thread, &good);
  pthread_create(&b, NULL, client_thread, &bad);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  assert_int_equal(good.images, 10);
  assert_int_equal(good.errors, 0);
  assert_int_equal(bad.images, 0);
  assert_int_equal(bad.errors, 10);
}

static void test_soak_500_sequential_sessions(void **state) {
  (void)state;
  size_t len, ends[24];
  int nends;
  uint8_t *bytes = session_bytes(&len, ends, &nends);
  for (int i = 0; i < 50; i++)
    run_full_session(bytes, len);
  settle();
  long baseline = mr_test_server_rss_kib(&server);
  for (int i = 0; i < 500; i++)
    run_full_session(bytes, len);
  settle();
  long after = mr_test_server_rss_kib(&server);
  print_message("RSS after 50 sessions %ld KiB, after 500 more %ld KiB (%+ld)\n", baseline, after,
                after - baseline);
  if (rss_meaningful)
    assert_true(after - baseline < 1024);
  free(bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_disconnects_at_every_phase_leave_nothing),
      cmocka_unit_test(test_a_failing_client_does_not_disturb_its_neighbour),
      cmocka_unit_test(test_soak_500_sequential_sessions),
  };
  return cmocka_run_group_tests(tests, start, stop);
}
