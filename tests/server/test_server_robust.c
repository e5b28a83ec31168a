/* reconserver against clients nobody here wrote and abusive sessions
 * (issue 12), where a process is what is tested: 64 concurrent clients at
 * the default --max-connections (its loop threads) are all served; QUERY
 * flooders that never read keep the server's memory (RSS) bounded;
 * running out of file descriptors is logged. What one connection does
 * (half-close, config names, the busy refusal, a second session after
 * CLOSE, the drain cut, an over-limit length, what its log line says) is
 * tested in process: test_server_conn.c. */
#include <complex.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "encode.h"
#include "gadget_harness.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"
#include "wire_scan.h"

static mr_test_server server; /* default options */

static int ping(int fd);

static int start(void **state) {
  (void)state;
  mr_test_server_start(&server, NULL);
  /* The start-up probe (a connection that says nothing) counts against
   * --max-connections until the server has closed it; a health check
   * after it, answered, leaves the loop time to, before the tests that
   * count every slot. */
  assert_true(ping(mr_test_connect(server.port)));
  return 0;
}

static int stop(void **state) {
  (void)state;
  assert_int_equal(mr_test_server_stop(&server), 0);
  return 0;
}

/* A health check on fd (QUERY gadgetron::version, CLOSE; closes fd):
 * 1 when it was answered. */
static int ping(int fd) {
  /* A client turned away (out of descriptors, while another loop thread
   * has yet to close the sockets just let go) may find its socket reset
   * mid-send: not answered, which the caller may try again. */
  mr_message *q = mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18);
  mr_message *c = mr_message_new(MR_MSG_CLOSE);
  int sent = fd >= 0 && q != NULL && c != NULL && mr_test_send(fd, q) == 0 &&
             mr_test_send(fd, c) == 0;
  mr_message_unref(q);
  mr_message_unref(c);
  mr_test_reply r;
  memset(&r, 0, sizeof r);
  if (sent)
    mr_test_receive(fd, &r, 5000);
  if (fd >= 0)
    close(fd);
  int answered = mr_test_reply_count(&r, MR_MSG_RESPONSE) == 1;
  mr_test_reply_free(&r);
  return answered;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The whole log (malloc'ed, NUL-terminated). */
static char *read_log(const mr_test_server *s) {
  FILE *f = fopen(s->log, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  assert_non_null(text);
  size_t got = fread(text, 1, (size_t)n, f);
  text[got] = '\0';
  fclose(f);
  return text;
}

/* Item 3: never more than 64 connections open at once, the default
 * --max-connections: every scan is served. */
typedef struct scanner {
  int served, refused;
  char why[256];
} scanner;

static void *scanner_main(void *arg) {
  scanner *sc = arg;
  for (int scan = 0; scan < 3; scan++) {
    int fd = mr_test_connect(server.port);
    if (fd < 0) {
      sc->refused++;
      continue;
    }
    mr_test_send_scan(fd, "default.xml", 16, 8, 2);
    mr_test_reply r;
    mr_test_receive(fd, &r, 60000);
    close(fd);
    if (r.got_close && mr_test_reply_count(&r, MR_MSG_IMAGE) == 1 &&
        mr_test_reply_count(&r, MR_MSG_TEXT) == 0) {
      sc->served++;
    } else {
      sc->refused++;
      snprintf(sc->why, sizeof sc->why, "%s",
               mr_test_reply_count(&r, MR_MSG_TEXT) ? mr_test_reply_text(&r, "") : "no answer");
    }
    mr_test_reply_free(&r);
  }
  return NULL;
}

static void test_sixty_four_concurrent_clients_are_all_served(void **state) {
  (void)state;
  enum { CLIENTS = 64 };
  static scanner sc[CLIENTS];
  pthread_t t[CLIENTS];
  memset(sc, 0, sizeof sc);
  for (int i = 0; i < CLIENTS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, scanner_main, &sc[i]), 0);
  int served = 0;
  const char *why = NULL;
  for (int i = 0; i < CLIENTS; i++) {
    pthread_join(t[i], NULL);
    served += sc[i].served;
    if (sc[i].refused > 0 && why == NULL)
      why = sc[i].why;
  }
  if (served != CLIENTS * 3)
    fail_msg("%d of %d scans served; one answer: %s", served, CLIENTS * 3, why);
}

/* Item 4: clients that flood QUERY and never read. Each connection holds
 * at most --limit connection_bytes (its read-ahead and unsent answers,
 * counted as memory), plus what one 64 KiB read decodes into. (Counting
 * wire bytes, 4 such clients at 16 MiB took the server up by 218 MiB.) */
static void test_query_flooders_keep_memory_bounded(void **state) {
  (void)state;
  enum { FLOODERS = 4, LIMIT_KIB = 16384 };
  mr_test_server s;
  const char *const args[] = {"--limit", "connection_bytes=16777216", NULL};
  mr_test_server_start(&s, args);
  long before = mr_test_server_rss_kib(&s);
  mr_message *q = mr_message_new_query(MR_MSG_QUERY, 7, "gadgetron::version", 18);
  uint8_t *one;
  size_t one_len;
  assert_int_equal(mr_encode_flat(q, &one, &one_len), 0);
  mr_message_unref(q);
  enum { BATCH = 256 };
  uint8_t *batch = malloc(one_len * BATCH);
  for (int i = 0; i < BATCH; i++)
    memcpy(batch + i * one_len, one, one_len);
  int fds[FLOODERS];
  double sent_mib = 0;
  for (int i = 0; i < FLOODERS; i++) {
    /* Small socket buffers, set before connecting so that the window
     * they imply is the one advertised: the answers back up at once. */
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    fcntl(fds[i], F_SETFL, O_NONBLOCK);
  }
  /* Until none of them can send for half a second: the server stopped
   * reading every one. */
  int64_t quiet_since = now_ms();
  while (now_ms() - quiet_since < 500) {
    int progressed = 0;
    for (int i = 0; i < FLOODERS; i++) {
      ssize_t n = send(fds[i], batch, one_len * BATCH, MSG_NOSIGNAL);
      if (n > 0) {
        progressed = 1;
        sent_mib += (double)n / 1048576.0;
      }
    }
    if (progressed)
      quiet_since = now_ms();
    else
      usleep(20000);
  }
  long during = mr_test_server_rss_kib(&s);
  print_message("%d flooders sent %.1f MiB of QUERY; server RSS %ld -> %ld KiB\n", FLOODERS,
                sent_mib, before, during);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine and shadow memory make RSS meaningless */
  /* Each: its bound and one read's worth of decoded queries. */
  assert_true(during - before < FLOODERS * (LIMIT_KIB + 2048));
#endif
  assert_true(mr_test_server_alive(&s));
  for (int i = 0; i < FLOODERS; i++)
    close(fds[i]);
  free(batch);
  free(one);
  assert_true(ping(mr_test_connect(s.port))); /* and the next client is served */
  assert_int_equal(mr_test_server_stop(&s), 0);
}

static int open_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  int n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return n;
}

/* Item 12: out of file descriptors, a client is told so and the log says
 * it (once for a burst, not once per client); once descriptors are free
 * again the next client is served. */
static void test_out_of_file_descriptors_is_logged(void **state) {
  (void)state;
  enum { LIMIT = 40, MAX_HELD = LIMIT + 8 };
  struct rlimit saved, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
  low = saved;
  low.rlim_cur = LIMIT;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0); /* the server inherits it */
  mr_test_server s;
  mr_test_server_start(&s, NULL);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
  usleep(100000);
  int spare = LIMIT - open_fds(s.pid);
  assert_true(spare > 0 && spare + 3 <= MAX_HELD);
  int held[MAX_HELD], n = 0, turned_away = 0;
  for (int i = 0; i < spare + 3; i++) {
    held[n] = mr_test_connect(s.port);
    assert_true(held[n] >= 0);
    n++;
  }
  /* The last ones were turned away: TEXT, CLOSE. */
  for (int i = spare; i < n; i++) {
    mr_test_reply r;
    mr_test_receive(held[i], &r, 2000);
    turned_away += mr_test_reply_text(&r, "ERROR: server out of file descriptors") != NULL;
    mr_test_reply_free(&r);
  }
  assert_true(turned_away >= 1);
  char *log = read_log(&s);
  int records = 0;
  for (const char *p = log; (p = strstr(p, "out of file descriptors (")) != NULL; p++)
    records++;
  free(log);
  assert_int_equal(records, 1);
  for (int i = 0; i < n; i++)
    close(held[i]);
  int served = 0;
  for (int i = 0; i < 100 && !(served = ping(mr_test_connect(s.port))); i++)
    usleep(50000);
  assert_true(served);
  assert_int_equal(mr_test_server_stop(&s), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sixty_four_concurrent_clients_are_all_served),
      cmocka_unit_test(test_query_flooders_keep_memory_bounded),
      cmocka_unit_test(test_out_of_file_descriptors_is_logged),
  };
  return cmocka_run_group_tests(tests, start, stop);
}
