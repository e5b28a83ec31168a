/* reconserver --http (issue 13, item 3), scraped over real sockets:
 * /healthz and /readyz answer, other paths and methods are refused; after
 * a Cartesian scan /metrics counts its session, acquisitions, images,
 * bytes and gadget times, and an unknown config counts as a config error;
 * at --max-connections /readyz says busy and the refused client is
 * counted; after SIGTERM /readyz says draining (503) while a session
 * still runs and /healthz stays 200; what /metrics serves passes
 * `promtool check metrics` where Debian's prometheus package is installed;
 * --info names the memory budget; with GPUs (MR_TEST_GPUS), each GPU's
 * memory and sessions are served. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "gadget_harness.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"
#include "wire_scan.h"

/* The HTTP port the server's log names, waiting up to 10 s for it. */
static int http_port(const mr_test_server *s) {
  for (int i = 0; i < 1000; i++) {
    int port = mr_test_logged_port(s->log, "health and metrics on http://127.0.0.1:");
    if (port > 0)
      return port;
    usleep(10000);
  }
  fail_msg("no HTTP port in %s", s->log);
  return -1;
}

/* One request; returns the status code and the body (NUL-terminated, cut
 * to size). */
static int http(int port, const char *method, const char *path, char *body, size_t size) {
  int status = mr_test_http(port, method, path, body, size);
  assert_true(status > 0);
  return status;
}

static char page[1 << 20];

/* The value of the sample `series` in a /metrics page, or -1. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p != NULL && *p != '\0';) {
    if (strncmp(p, series, n) == 0 && p[n] == ' ')
      return strtod(p + n + 1, NULL);
    p = strchr(p, '\n');
    p = p != NULL ? p + 1 : NULL;
  }
  return -1;
}

/* Scrapes until series reaches want (the server counts a session when
 * its connection is closed, just after the client saw CLOSE), up to 10 s. */
static double scrape_until(int port, const char *series, double want) {
  double v = -1;
  for (int i = 0; i < 500; i++) {
    assert_int_equal(http(port, "GET", "/metrics", page, sizeof page), 200);
    if ((v = sample(page, series)) >= want)
      return v;
    usleep(20000);
  }
  return v;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Slowloris: 40 connections that send a request a few bytes at a time,
 * never finishing it (so no inactivity timeout trips). /healthz still
 * answers at once, and every slow connection is closed by the server
 * within the request deadline (2 s), however it keeps sending. */
static void slow_clients_do_not_block_probes(void **state) {
  (void)state;
  enum { SLOW = 40 };
  mr_test_server s;
  const char *args[] = {"--http", "127.0.0.1:0", NULL};
  mr_test_server_start(&s, args);
  int port = http_port(&s);
  int fds[SLOW], closed_at[SLOW];
  for (int i = 0; i < SLOW; i++) {
    fds[i] = mr_test_connect(port);
    assert_true(fds[i] >= 0);
    assert_int_equal(mr_test_send_bytes(fds[i], "GET /healthz HTTP/1.1\r\nHo", 26), 0);
    closed_at[i] = -1;
  }
  usleep(100000); /* every slow connection is in */
  int64_t t0 = now_ms();
  char body[256];
  assert_int_equal(http(port, "GET", "/healthz", body, sizeof body), 200);
  int64_t probe_ms = now_ms() - t0;
  print_message("/healthz beside %d slow clients: %lld ms\n", SLOW, (long long)probe_ms);
  assert_true(probe_ms < 1000);
  /* A byte every 200 ms on each: all are closed within the deadline. */
  int open = SLOW;
  for (int tick = 0; tick < 25 && open > 0; tick++) {
    usleep(200000);
    for (int i = 0; i < SLOW; i++) {
      if (closed_at[i] >= 0)
        continue;
      char b;
      ssize_t got = recv(fds[i], &b, 1, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(fds[i], "s", 1, MSG_NOSIGNAL) < 0) {
        closed_at[i] = (int)(now_ms() - t0);
        open--;
      }
    }
  }
  for (int i = 0; i < SLOW; i++)
    close(fds[i]);
  assert_int_equal(open, 0);
  for (int i = 0; i < SLOW; i++)
    assert_true(closed_at[i] < 4000);
  assert_int_equal(mr_test_server_stop(&s), 0);
}

static void probes_and_refusals(void **state) {
  (void)state;
  mr_test_server s;
  const char *args[] = {"--http", "127.0.0.1:0", NULL};
  mr_test_server_start(&s, args);
  int port = http_port(&s);
  char body[256];
  assert_int_equal(http(port, "GET", "/healthz", body, sizeof body), 200);
  assert_string_equal(body, "ok\n");
  assert_int_equal(http(port, "GET", "/readyz", body, sizeof body), 200);
  assert_string_equal(body, "ready\n");
  assert_int_equal(http(port, "HEAD", "/readyz", body, sizeof body), 200);
  assert_int_equal(http(port, "GET", "/nothing", body, sizeof body), 404);
  assert_int_equal(http(port, "POST", "/metrics", body, sizeof body), 405);
  assert_int_equal(mr_test_server_stop(&s), 0);
}

static void a_scan_is_counted(void **state) {
  (void)state;
  mr_test_server s;
  const char *args[] = {"--http", "127.0.0.1:0", NULL};
  mr_test_server_start(&s, args);
  int port = http_port(&s);

  int fd = mr_test_connect(s.port);
  assert_int_equal(mr_test_send_scan(fd, "cartesian", 64, 32, 4), 0);
  mr_test_reply r;
  mr_test_receive(fd, &r, 30000);
  close(fd);
  assert_true(r.got_close);
  int images = mr_test_reply_count(&r, MR_MSG_IMAGE);
  assert_true(images >= 1);
  mr_test_reply_free(&r);

  assert_true(
      scrape_until(port, "mrrecon_sessions_total{config=\"cartesian\",outcome=\"ok\"}", 1) == 1);
  assert_true(sample(page, "mrrecon_acquisitions_total") == 32);
  assert_true(sample(page, "mrrecon_images_total") == images);
  /* 32 lines of 64 samples x 4 coils of complex floats, at least. */
  assert_true(sample(page, "mrrecon_received_bytes_total") > 32 * 64 * 4 * 8);
  assert_true(sample(page, "mrrecon_sent_bytes_total") > 32 * 32 * 4);
  assert_true(sample(page, "mrrecon_gadget_seconds_count{gadget=\"fft\"}") == 1);
  assert_true(sample(page, "mrrecon_gadget_seconds_count{gadget=\"accumulate\"}") == 1);
  assert_true(sample(page, "mrrecon_session_duration_seconds_count{config=\"cartesian\"}") == 1);
  assert_true(sample(page, "mrrecon_sessions_active") == 0);
  assert_true(sample(page, "mrrecon_queue_bytes{queue=\"inbox\"}") == 0);
  assert_true(sample(page, "mrrecon_queue_bytes{queue=\"outbox\"}") == 0);

  /* An unknown config: the client's error, counted by kind. */
  fd = mr_test_connect(s.port);
  mr_test_send_msg(fd, mr_message_new_config_file("no-such-config"));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_receive(fd, &r, 10000);
  close(fd);
  assert_non_null(mr_test_reply_text(&r, "no-such-config"));
  mr_test_reply_free(&r);
  assert_true(scrape_until(port, "mrrecon_errors_total{kind=\"config\"}", 1) == 1);
  assert_true(scrape_until(port, "mrrecon_sessions_total{config=\"other\",outcome=\"error\"}", 1) ==
              1);

  if (mr_test_have_tool("promtool")) {
    const char *dir = mr_test_tmpdir("mr-http");
    char path[600], cmd[700], out[4096], err[4096];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(page, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    if (mr_test_run(argv, dir, out, sizeof out, err, sizeof err) != 0)
      fail_msg("promtool check metrics: %s%s", out, err);
  }
  assert_int_equal(mr_test_server_stop(&s), 0);
}

static void busy_and_draining(void **state) {
  (void)state;
  mr_test_server s;
  const char *args[] = {"--http", "127.0.0.1:0", "--max-connections", "1", "--drain-timeout",
                        "20000",  NULL};
  mr_test_server_start(&s, args);
  int port = http_port(&s);
  char body[256];
  /* The start-up probe (a connection that says nothing) must be gone
   * before one session can hold the only slot. */
  for (int i = 0; i < 500; i++) {
    assert_int_equal(http(port, "GET", "/metrics", page, sizeof page), 200);
    if (sample(page, "mrrecon_sessions_total{config=\"none\",outcome=\"ok\"}") +
            sample(page, "mrrecon_sessions_total{config=\"none\",outcome=\"error\"}") >=
        1)
      break;
    usleep(20000);
  }

  /* One session holds the only slot: a config, no CLOSE yet. */
  int held = mr_test_connect(s.port);
  mr_test_send_msg(held, mr_message_new_config_file("cartesian"));
  assert_true(scrape_until(port, "mrrecon_sessions_active", 1) == 1);
  assert_int_equal(http(port, "GET", "/readyz", body, sizeof body), 503);
  assert_non_null(strstr(body, "busy"));

  int refused = mr_test_connect(s.port);
  mr_test_reply r;
  mr_test_receive(refused, &r, 10000);
  close(refused);
  assert_non_null(mr_test_reply_text(&r, "server busy"));
  mr_test_reply_free(&r);
  assert_true(scrape_until(port, "mrrecon_errors_total{kind=\"busy\"}", 1) == 1);
  assert_true(
      scrape_until(port, "mrrecon_sessions_total{config=\"none\",outcome=\"refused\"}", 1) == 1);

  /* SIGTERM: not ready any more, still alive while the session drains. */
  kill(s.pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 500; i++) {
    status = http(port, "GET", "/readyz", body, sizeof body);
    if (strstr(body, "draining") != NULL)
      break;
    usleep(10000);
  }
  assert_int_equal(status, 503);
  assert_non_null(strstr(body, "draining"));
  assert_int_equal(http(port, "GET", "/healthz", body, sizeof body), 200);
  assert_true(mr_test_server_alive(&s));

  mr_test_send_msg(held, mr_message_new(MR_MSG_CLOSE));
  mr_test_receive(held, &r, 10000);
  close(held);
  assert_true(r.got_close);
  mr_test_reply_free(&r);
  /* Drained, it exits 0 by itself (mr_test_server_stop's second SIGTERM
   * could land after the server let go of its handlers). */
  int exit_status = -1;
  for (int i = 0; i < 1000 && exit_status < 0; i++) {
    int wstatus;
    if (waitpid(s.pid, &wstatus, WNOHANG) == s.pid)
      exit_status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    else
      usleep(10000);
  }
  assert_int_equal(exit_status, 0);
}

/* With GPUs (MR_TEST_GPUS, ctest test_server_http_cuda): each GPU's memory
 * and sessions, memory read from the driver at scrape time. */
static void gpu_series(void **state) {
  (void)state;
  if (getenv("MR_TEST_GPUS") == NULL || strcmp(getenv("MR_TEST_GPUS"), "none") == 0)
    skip();
  mr_test_server s;
  const char *args[] = {"--http", "127.0.0.1:0", NULL};
  mr_test_server_start(&s, args);
  int port = http_port(&s);
  assert_int_equal(http(port, "GET", "/metrics", page, sizeof page), 200);
  double total = sample(page, "mrrecon_gpu_memory_total_bytes{gpu=\"0\"}");
  double used = sample(page, "mrrecon_gpu_memory_used_bytes{gpu=\"0\"}");
  assert_true(total > 1e9);
  assert_true(used > 0 && used <= total);
  assert_true(sample(page, "mrrecon_gpu_sessions{gpu=\"0\"}") == 0);
  /* Every lane's busy counter (the start-up's own tasks may have run). */
  assert_true(sample(page, "mrrecon_gpu_lane_busy_seconds_total{gpu=\"0\",lane=\"0\"}") >= 0);
  assert_true(sample(page, "mrrecon_gpu_lane_busy_seconds_total{gpu=\"0\",lane=\"3\"}") >= 0);
  assert_int_equal(mr_test_server_stop(&s), 0);
}

/* What the server sized itself to is visible: --info names the memory
 * budget (in a container, half its cgroup's limit by default). The config
 * directory is named: the compiled-in default is the build machine's
 * source tree, absent where a staged build runs (the device host), which
 * is what made this fail there, not the host's size. */
static void info_shows_the_memory_budget(void **state) {
  (void)state;
  char bin[512], configs[512], out[8192], err[4096];
  snprintf(bin, sizeof bin, "%s/bin/reconserver", mr_test_binary_dir());
  snprintf(configs, sizeof configs, "%s/configs", mr_test_source_dir());
  const char *argv[] = {bin,           "--gpus", "none", "--configs", configs, "--memory-budget",
                        "300",         "--info", NULL};
  int rc = mr_test_run(argv, mr_test_tmpdir("mr-info"), out, sizeof out, err, sizeof err);
  if (rc != 0)
    fail_msg("reconserver --info exited %d: %s", rc, err);
  assert_non_null(strstr(out, "memory budget: 300 MiB\n"));
  /* The configs by name, not just their number. */
  assert_non_null(strstr(out, "\n  cartesian\n"));
  assert_non_null(strstr(out, "\n  radial\n"));
}

/* A machine without an NVIDIA driver: the log says so in those words,
 * not the CUDA runtime's "driver version is insufficient", and that the
 * server runs on the CPU. */
static void no_driver_is_named(void **state) {
  (void)state;
  if (access("/proc/driver/nvidia/version", F_OK) == 0)
    skip(); /* a driver is loaded here */
  char bin[512], configs[512], out[8192], err[4096];
  snprintf(bin, sizeof bin, "%s/bin/reconserver", mr_test_binary_dir());
  snprintf(configs, sizeof configs, "%s/configs", mr_test_source_dir());
  const char *argv[] = {bin, "--configs", configs, "--info", NULL};
  int rc = mr_test_run(argv, mr_test_tmpdir("mr-nodriver"), out, sizeof out, err, sizeof err);
  if (rc != 0)
    fail_msg("reconserver --info exited %d: %s", rc, err);
  assert_null(strstr(err, "insufficient"));
  assert_non_null(strstr(err, "running on the CPU"));
#ifdef MR_HAVE_CUDA
  if (strstr(err, "no NVIDIA driver found") == NULL)
    fail_msg("log: %s", err);
#endif
}

int main(void) {
  const char *gpus = getenv("MR_TEST_GPUS");
  if (gpus != NULL && strcmp(gpus, "none") != 0 && !mr_harness_have_gpu()) {
    printf("skipped: no GPU\n");
    return MR_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(info_shows_the_memory_budget),
      cmocka_unit_test(no_driver_is_named),
      cmocka_unit_test(gpu_series),
      cmocka_unit_test(probes_and_refusals),
      cmocka_unit_test(slow_clients_do_not_block_probes),
      cmocka_unit_test(a_scan_is_counted),
      cmocka_unit_test(busy_and_draining),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
