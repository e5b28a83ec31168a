/* server/conn.c in process, in libuv's test style: one uv_loop_t runs the
 * connection under test (mr_conn_accept on one end of a socketpair, with a
 * hand-built mr_server around it) and its client (a uv_pipe_t on the other
 * end); the test counts the client's callbacks and reads its messages. No
 * server process, no sleeps: the loop ends when every handle is closed,
 * which is itself the proof that the connection let go of everything (and
 * ASan's leak check that it freed it). A watchdog, unreferenced so that it
 * never keeps the loop alive, aborts a test that hangs. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <uv.h>

#include "config_dir.h"
#include "conn.h"
#include "decode.h"
#include "encode.h"
#include "error.h"
#include "gadget_harness.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "conn_host.h"

#define WATCHDOG_MS 20000

typedef struct client {
  uv_pipe_t pipe;
  mr_decoder *dec;
  /* What came back. */
  int images, texts, closes, eofs, read_errors;
  char first_text[300];
  char order[64]; /* the kinds in the order they came: I(mage), T(ext), C(lose), ? */
  /* What went out. */
  int writes_queued, writes_done, write_errors;
  int shutdowns;          /* uv_shutdown callbacks */
  int closed;             /* uv_close callbacks */
  void (*after_last_write)(struct client *cl); /* once every queued write is done */
  int stay_after_eof;     /* the server's EOF does not close its end (a client that goes on sending) */
  char rbuf[65536];
} client;

typedef struct fixture {
  uv_loop_t loop;
  mr_conn_host host; /* the server, as the connection sees it */
  mr_server_env env;
  int nopen;    /* slots taken under host.max_connections */
  int stopping; /* the server drains: ... */
  int drained;  /* ... and its last connection is gone (host.closed) */
  mr_limits limits;
  uv_timer_t watchdog;
  client cl;
  client other; /* a second client, when a test connects one (connect_other) */
  /* The server's log (stderr) while a test captures it (capture_log). */
  FILE *log;
  int saved_stderr;
} fixture;

static mr_config_dir configs;
static mr_pool *pool;
static fixture *current; /* the test being run, for the client's callbacks */

/* ---- the client ---- */

typedef struct client_write {
  uv_write_t req;
  client *cl;
  uint8_t *bytes;
} client_write;

static void on_client_closed(uv_handle_t *h) {
  client *cl = h->data;
  cl->closed++;
}

static void client_close(client *cl) {
  if (!uv_is_closing((uv_handle_t *)&cl->pipe))
    uv_close((uv_handle_t *)&cl->pipe, on_client_closed);
}

static void on_client_written(uv_write_t *req, int status) {
  client_write *w = (client_write *)req;
  client *cl = w->cl;
  free(w->bytes);
  free(w);
  if (status < 0)
    cl->write_errors++;
  else
    cl->writes_done++;
  if (cl->writes_done + cl->write_errors == cl->writes_queued && cl->after_last_write != NULL) {
    void (*then)(client *) = cl->after_last_write;
    cl->after_last_write = NULL;
    then(cl);
  }
}

/* Queues raw bytes (takes them). */
static void client_send_bytes(client *cl, uint8_t *bytes, size_t len) {
  client_write *w = calloc(1, sizeof *w);
  assert_non_null(w);
  w->cl = cl;
  w->bytes = bytes;
  uv_buf_t buf = uv_buf_init((char *)bytes, (unsigned)len);
  assert_int_equal(uv_write(&w->req, (uv_stream_t *)&cl->pipe, &buf, 1, on_client_written), 0);
  cl->writes_queued++;
}

/* Queues msg's encoding (takes msg). */
static void client_send(client *cl, mr_message *msg) {
  assert_non_null(msg);
  uint8_t *bytes;
  size_t len;
  assert_int_equal(mr_encode_flat(msg, &bytes, &len), 0);
  mr_message_unref(msg);
  client_send_bytes(cl, bytes, len);
}

static int on_reply(void *ctx, mr_message *msg) {
  client *cl = ctx;
  cl->images += msg->kind == MR_MSG_IMAGE;
  cl->closes += msg->kind == MR_MSG_CLOSE;
  size_t n = strlen(cl->order);
  if (n + 1 < sizeof cl->order)
    cl->order[n] = msg->kind == MR_MSG_IMAGE ? 'I'
                   : msg->kind == MR_MSG_TEXT ? 'T'
                   : msg->kind == MR_MSG_CLOSE ? 'C'
                                               : '?';
  if (msg->kind == MR_MSG_TEXT && cl->texts++ == 0)
    snprintf(cl->first_text, sizeof cl->first_text, "%s", msg->u.text);
  mr_message_unref(msg);
  return 0;
}

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  client *cl = h->data;
  *buf = uv_buf_init(cl->rbuf, sizeof cl->rbuf);
}

/* Reads until the server's EOF, then lets go of its end. */
static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  client *cl = s->data;
  if (nread == UV_EOF) {
    cl->eofs++;
    if (!cl->stay_after_eof)
      client_close(cl);
  } else if (nread < 0) {
    cl->read_errors++;
    client_close(cl);
  } else if (nread > 0) {
    assert_int_equal(mr_decoder_feed(cl->dec, buf->base, (size_t)nread), 0);
  }
}

static void client_read(client *cl) {
  assert_int_equal(uv_read_start((uv_stream_t *)&cl->pipe, on_client_alloc, on_client_read), 0);
}

static void on_client_shutdown(uv_shutdown_t *req, int status) {
  client *cl = req->data;
  free(req);
  assert_int_equal(status, 0);
  cl->shutdowns++;
}

/* After its CLOSE: shuts its side and goes on reading (socat, nc -N). */
static void client_half_close(client *cl) {
  uv_shutdown_t *req = malloc(sizeof *req);
  assert_non_null(req);
  req->data = cl;
  assert_int_equal(uv_shutdown(req, (uv_stream_t *)&cl->pipe, on_client_shutdown), 0);
}

static void client_send_header(client *cl, int nx, int ny) {
  const char *xml = mr_harness_cartesian_header(nx, ny, 1, nx / 2, ny, 1);
  client_send(cl, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)));
}

/* Repetition rep of an nx x ny single-coil scan: one image back, when
 * `last` flags its last line. */
static void client_send_lines(client *cl, int nx, int ny, int rep, int lines, int last) {
  for (int e1 = 0; e1 < lines; e1++) {
    mr_message *m = mr_harness_acquisition(
        nx, 1, e1, 0, last && e1 == ny - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
        mr_harness_smooth_line, &e1);
    assert_non_null(m);
    m->u.acq.head.idx.repetition = (uint16_t)rep;
    client_send(cl, m);
  }
}

/* CONFIG_FILE default.xml, the header, reps whole repetitions. */
static void client_send_scan(client *cl, int nx, int ny, int reps) {
  client_send(cl, mr_message_new_config_file("default.xml"));
  client_send_header(cl, nx, ny);
  for (int rep = 0; rep < reps; rep++)
    client_send_lines(cl, nx, ny, rep, ny, 1);
}

/* ---- the server around the connection ---- */

/* A hang: the connection would hold its handles, and the teardown could
 * not end the loop either, so stop here. */
static void on_watchdog(uv_timer_t *t) {
  (void)t;
  fprintf(stderr, "the loop still runs after %d ms: a connection did not close\n", WATCHDOG_MS);
  abort();
}

static int group_setup(void **state) {
  (void)state;
  mr_log_set_level(MR_LOG_WARN);
  signal(SIGPIPE, SIG_IGN); /* as mr_server_run: a vanished peer costs an EPIPE */
  mr_err err = {0};
  const char *src = getenv("MR_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/configs", src != NULL ? src : ".");
  if (mr_config_dir_load(path, &configs, &err) < 0)
    fail_msg("configs: %s", err.msg);
  mr_pool_opts popts = {.gpus = "none", .cpu_threads = 1};
  if (mr_pool_create(&popts, &pool, &err) < 0)
    fail_msg("pool: %s", err.msg);
  mr_metrics_init(&configs, 4);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  mr_pool_destroy(pool);
  mr_config_dir_free(&configs);
  return 0;
}

/* The host's callbacks: the server's slots and its drain, counted here. */
static int host_admit(void *ctx) {
  fixture *f = ctx;
  if (f->nopen >= f->host.max_connections)
    return 0;
  f->nopen++;
  return 1;
}

static void host_release(void *ctx) { ((fixture *)ctx)->nopen--; }

static int host_open_count(void *ctx) { return ((fixture *)ctx)->nopen; }

static void host_closed(void *ctx) {
  fixture *f = ctx;
  if (f->stopping && f->host.nconns == 0)
    f->drained = 1;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->limits = mr_limits_default;
  f->env = (mr_server_env){.configs = &configs, .pool = pool, .limits = &f->limits,
                           .version = "test", .handshake_timeout_ms = 30000,
                           .idle_timeout_ms = 30000, .error_grace_ms = 100};
  f->host = (mr_conn_host){.loop = &f->loop, .env = &f->env, .max_connections = 4,
                           .drain_timeout_ms = 1000, .close_grace_ms = 5000,
                           .write_timeout_ms = 10000, .admit = host_admit,
                           .release = host_release, .open_count = host_open_count,
                           .closed = host_closed, .ctx = f};
  uv_timer_init(&f->loop, &f->watchdog);
  uv_timer_start(&f->watchdog, on_watchdog, WATCHDOG_MS, 0);
  uv_unref((uv_handle_t *)&f->watchdog);
  mr_decoder_callbacks cb = {on_reply, NULL, &f->cl};
  assert_int_equal(mr_decoder_create(NULL, &cb, &f->cl.dec), 0);
  current = f;
  *state = f;
  return 0;
}

/* Connects the client to a new connection: the seam is mr_conn_accept on
 * any connected stream socket, here one end of a socketpair. */
static void connect_client(fixture *f) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  mr_conn_accept(&f->host, sv[0]);
  assert_int_equal(f->host.nconns, 1);
  assert_int_equal(uv_pipe_init(&f->loop, &f->cl.pipe, 0), 0);
  assert_int_equal(uv_pipe_open(&f->cl.pipe, sv[1]), 0);
  f->cl.pipe.data = &f->cl;
}

/* A second client on a second connection, beside the first. */
static void connect_other(fixture *f) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  mr_decoder_callbacks cb = {on_reply, NULL, &f->other};
  assert_int_equal(mr_decoder_create(NULL, &cb, &f->other.dec), 0);
  mr_conn_accept(&f->host, sv[0]);
  assert_int_equal(uv_pipe_init(&f->loop, &f->other.pipe, 0), 0);
  assert_int_equal(uv_pipe_open(&f->other.pipe, sv[1]), 0);
  f->other.pipe.data = &f->other;
}

/* Runs the loop until every handle but the watchdog is closed: the
 * connection is freed (and counted out of the host's list). */
static void run_to_the_end(fixture *f) {
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(f->host.nconns, 0);
  assert_null(f->host.conns);
  assert_int_equal(f->nopen, 0);
  assert_int_equal(f->cl.closed, 1);
}

/* What a client that read to the end got: images, TEXTs (the first one
 * containing `text` when given), CLOSEs, and then the server's EOF. */
static void expect_reply(const client *cl, int images, int texts, const char *text, int closes) {
  assert_int_equal(cl->images, images);
  assert_int_equal(cl->texts, texts);
  if (text != NULL && strstr(cl->first_text, text) == NULL)
    fail_msg("TEXT: '%s', not '%s'", cl->first_text, text);
  assert_int_equal(cl->closes, closes);
  assert_int_equal(cl->eofs, 1);
  assert_int_equal(cl->read_errors, 0);
}

/* The server's log goes to a file until the test ends (cmocka's own
 * failure lines too: capture only where a log line is asserted). */
static void capture_log(fixture *f, mr_log_level level) {
  mr_log_set_level(level);
  f->log = tmpfile();
  assert_non_null(f->log);
  fflush(stderr);
  f->saved_stderr = dup(STDERR_FILENO);
  assert_true(f->saved_stderr >= 0);
  assert_true(dup2(fileno(f->log), STDERR_FILENO) >= 0);
}

static void end_log_capture(fixture *f) {
  if (f->log == NULL)
    return;
  fflush(stderr);
  dup2(f->saved_stderr, STDERR_FILENO);
  close(f->saved_stderr);
  fclose(f->log);
  f->log = NULL;
  mr_log_set_level(MR_LOG_WARN);
}

/* Everything logged since capture_log (malloc'ed); the log goes back to
 * stderr, so that a failure after this is seen. */
static char *captured_log(fixture *f) {
  fflush(stderr);
  long n = ftell(f->log);
  assert_true(n >= 0);
  char *text = calloc(1, (size_t)n + 1);
  assert_non_null(text);
  rewind(f->log);
  assert_int_equal(fread(text, 1, (size_t)n, f->log), (size_t)n);
  end_log_capture(f);
  return text;
}

/* The last connection's summary line (the one with " duration="), which
 * must contain each of the `n` words. */
static void expect_log_line(fixture *f, int n, const char *const *words) {
  char *log = captured_log(f), *found = NULL;
  for (char *p = log; (p = strstr(p, " duration=")) != NULL; p++)
    found = p;
  assert_non_null(found);
  while (found > log && found[-1] != '\n')
    found--;
  char *end = strchr(found, '\n');
  if (end != NULL)
    *end = '\0';
  for (int i = 0; i < n; i++)
    if (strstr(found, words[i]) == NULL)
      fail_msg("no '%s' in the connection's log line: %s", words[i], found);
  free(log);
}

static int teardown(void **state) {
  fixture *f = *state;
  end_log_capture(f);
  uv_close((uv_handle_t *)&f->watchdog, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  mr_decoder_destroy(f->cl.dec);
  mr_decoder_destroy(f->other.dec);
  free(f);
  current = NULL;
  return 0;
}

/* ---- tests ---- */

/* Rule 2 as socat and nc -N speak it: the client half-closes right after
 * its CLOSE and still reads every image and the server's CLOSE; the log's
 * image count is what reached the socket. */
static void test_close_then_half_close_gets_every_image(void **state) {
  fixture *f = *state;
  capture_log(f, MR_LOG_INFO);
  connect_client(f);
  client_read(&f->cl);
  client_send_scan(&f->cl, 32, 16, 4);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  f->cl.after_last_write = client_half_close;
  run_to_the_end(f);
  assert_int_equal(f->cl.write_errors, 0);
  assert_int_equal(f->cl.shutdowns, 1);
  expect_reply(&f->cl, 4, 0, NULL, 1);
  expect_log_line(f, 2, (const char *const[]){" images=4 ", " errors=0"});
}

/* The client goes away mid-scan, without its CLOSE: its EOF alone (no
 * answer was due, so no failed write) cancels the session at once, not at
 * the 30 s idle timeout, which the watchdog would see; the connection
 * frees everything. */
static void test_a_peer_vanishing_mid_scan_cancels_the_session(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  client_send_header(&f->cl, 32, 16);
  client_send_lines(&f->cl, 32, 16, 0, 8, 0); /* half a slice: no image to fail on */
  f->cl.after_last_write = client_close;
  run_to_the_end(f);
  assert_int_equal(f->cl.write_errors, 0);
  assert_int_equal(f->cl.eofs, 0); /* it never read */
}

/* A message id nobody knows: the stream cannot be followed (its CLOSE
 * behind the junk is never read), the client hears why, then CLOSE, and
 * the connection closes in order. */
static void test_a_malformed_message_is_answered_and_closed(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  client_send_header(&f->cl, 32, 16);
  uint8_t *junk = malloc(64);
  assert_non_null(junk);
  memset(junk, 0x77, 64); /* id 0x7777 */
  client_send_bytes(&f->cl, junk, 64);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "unknown message id 30583", 1);
}

/* An unknown config name is answered at once, not after the dataset the
 * client goes on uploading (nor at the end of the error grace, 10 s
 * here): the client has the error and our CLOSE while it is still
 * sending, and the connection drains the rest and closes. */
static void test_an_unknown_config_is_answered_at_once(void **state) {
  fixture *f = *state;
  f->env.error_grace_ms = 10000;
  f->host.close_grace_ms = 300;
  connect_client(f);
  client_read(&f->cl);
  uint64_t start = uv_now(&f->loop);
  client_send(&f->cl, mr_message_new_config_file("nosuch"));
  client_send_header(&f->cl, 32, 16);
  client_send_lines(&f->cl, 32, 16, 0, 16, 1); /* no CLOSE: the client is still uploading */
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "nosuch", 1);
  assert_true(uv_now(&f->loop) - start < 2000);
}

/* A CONFIG_SCRIPT of `steps` steps: accumulate, then partial_fourier
 * (each one a pipeline stage of its own: a thread), then the rest of a
 * Cartesian chain. */
static mr_message *long_script(int steps) {
  size_t size = 256 + (size_t)steps * 40;
  char *text = malloc(size);
  assert_non_null(text);
  size_t n = (size_t)snprintf(text, size, "{\"name\":\"long\",\"gadgets\":["
                                          "{\"gadget\":\"accumulate\"}");
  for (int i = 0; i < steps - 4; i++)
    n += (size_t)snprintf(text + n, size - n, ",{\"gadget\":\"partial_fourier\"}");
  snprintf(text + n, size - n, ",{\"gadget\":\"fft\"},{\"gadget\":\"coil_combine\"},"
                               "{\"gadget\":\"image_out\"}]}");
  mr_message *m = mr_message_new_text(MR_MSG_CONFIG_SCRIPT, text, strlen(text));
  free(text);
  return m;
}

/* Steps per chain and pipeline threads per session are bounded (wire
 * limits chain_steps and session_threads): a script over either is
 * refused when it is read, saying which limit and how to raise it, and
 * no thread is started for it. */
static void test_a_script_over_the_step_limit_is_refused(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, long_script(1000));
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "1000 steps per chain, over the limit of 64 (chain_steps", 1);
}

static void test_a_script_over_the_thread_limit_is_refused(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, long_script(40)); /* 36 partial_fourier stages */
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "threads per session, over the limit of 16 (session_threads", 1);
}

/* A gadget's own worker threads count too: GRAPPA asked for 64 slices at
 * once in a 7-step chain (6 stage threads and 64 workers). */
static void test_a_script_whose_workers_are_over_the_thread_limit_is_refused(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  static const char text[] =
      "{\"name\":\"wide\",\"gadgets\":[{\"gadget\":\"accumulate\"},"
      "{\"gadget\":\"noise_adjust\"},{\"gadget\":\"remove_oversampling\"},"
      "{\"gadget\":\"grappa\",\"slices\":64},{\"gadget\":\"fft\"},"
      "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]}";
  client_send(&f->cl, mr_message_new_text(MR_MSG_CONFIG_SCRIPT, text, strlen(text)));
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "threads per session, over the limit of 16 (session_threads", 1);
}

static void test_a_script_within_the_limits_is_served(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, long_script(12));
  client_send_header(&f->cl, 32, 16);
  client_send_lines(&f->cl, 32, 16, 0, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 0, NULL, 1);
}

/* Real clients send the config name in a fixed 1024-byte field with
 * whatever follows its NUL: that garbage is not part of the name. */
static void test_garbage_after_the_nul_of_a_config_name(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  mr_message *config = mr_message_new_config_file("default.xml");
  uint8_t *bytes;
  size_t len;
  assert_int_equal(mr_encode_flat(config, &bytes, &len), 0);
  mr_message_unref(config);
  size_t name_end = 2 + strlen("default.xml") + 1; /* id, name, NUL */
  assert_true(len > name_end);
  memset(bytes + name_end, 0xA5, len - name_end);
  client_send_bytes(&f->cl, bytes, len);
  client_send_header(&f->cl, 32, 16);
  client_send_lines(&f->cl, 32, 16, 0, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 0, NULL, 1);
}

/* A CONFIG_FILE as ISMRMRD's ismrmrd_hdf5_to_stream -c NAME writes it:
 * the name, its NUL, and whatever was in the rest of the 1024-byte field. */
static void client_send_config_field(client *cl, const char *name, uint8_t filler) {
  uint8_t *b = malloc(2 + 1024);
  assert_non_null(b);
  b[0] = 1; /* CONFIG_FILE */
  b[1] = 0;
  memset(b + 2, filler, 1024);
  memcpy(b + 2, name, strlen(name) + 1);
  client_send_bytes(cl, b, 2 + 1024);
}

/* A config name that is empty or names a path is refused, whatever fills
 * the rest of its 1024-byte field: each on a connection of its own. */
static void expect_name_refused(const char *name, const char *error) {
  void *st = NULL;
  assert_int_equal(setup(&st), 0);
  fixture *f = st;
  connect_client(f);
  client_read(&f->cl);
  client_send_config_field(&f->cl, name, 'x');
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, error, 1);
  teardown(&st);
}

static void test_a_config_name_that_is_a_path_is_refused(void **state) {
  (void)state;
  expect_name_refused("", "ERROR: empty config name");
  expect_name_refused("../default.xml", "a config name is not a path");
  expect_name_refused("configs/default.xml", "a config name is not a path");
  expect_name_refused("default.xml", "a config name is not a path");
}

/* ---- what the log says of a connection ---- */

/* Acquisitions of 0 samples (sync lines of converted Siemens files) do not
 * fail the scan: the image comes back, the client is warned once, and the
 * connection's log line counts them. */
static void test_empty_acquisitions_are_skipped_and_counted(void **state) {
  fixture *f = *state;
  capture_log(f, MR_LOG_INFO);
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  client_send_header(&f->cl, 32, 16);
  for (int i = 0; i < 2; i++) {
    ISMRMRD_AcquisitionHeader h;
    ismrmrd_init_acquisition_header(&h);
    h.scan_counter = (uint32_t)(100 + i);
    client_send(&f->cl, mr_message_new_acquisition(&h));
  }
  client_send_lines(&f->cl, 32, 16, 0, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 1, "skipped 2 acquisitions with no samples", 1);
  expect_log_line(f, 2, (const char *const[]){" empty_acquisitions=2", " errors=0"});
}

/* A config name with a newline and a timestamp cannot start a log line,
 * and ESC never reaches the log. */
static void test_client_bytes_cannot_forge_log_lines(void **state) {
  fixture *f = *state;
  capture_log(f, MR_LOG_INFO);
  connect_client(f);
  client_read(&f->cl);
  client_send_config_field(&f->cl, "cartesian\n2099-01-01T00:00:00.000Z info  FORGED\x1b[31m", 0);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  assert_int_equal(f->cl.closes, 1);
  char *log = captured_log(f);
  assert_non_null(strstr(log, "cartesian\\n2099-01-01T00:00:00.000Z info  FORGED\\x1b[31m"));
  assert_null(strstr(log, "\n2099-"));
  assert_null(strchr(log, 0x1b));
  free(log);
}

/* 10,000 TEXT messages are one log line (a count and the first), and
 * bytes_in counts the bytes received. */
static void test_a_text_flood_is_summarised(void **state) {
  fixture *f = *state;
  enum { TEXTS = 10000 };
  mr_message *t = mr_message_new_text(MR_MSG_TEXT, "hello", 5);
  uint8_t *one;
  size_t one_len;
  assert_int_equal(mr_encode_flat(t, &one, &one_len), 0);
  mr_message_unref(t);
  assert_int_equal(one_len, 11);
  uint8_t *all = malloc(one_len * TEXTS);
  assert_non_null(all);
  for (int i = 0; i < TEXTS; i++)
    memcpy(all + i * one_len, one, one_len);
  free(one);
  capture_log(f, MR_LOG_INFO);
  connect_client(f);
  client_read(&f->cl);
  client_send_bytes(&f->cl, all, one_len * TEXTS);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 0, NULL, 1);
  char *log = captured_log(f);
  assert_non_null(strstr(log, " texts=10000 first_text=\"hello\""));
  assert_non_null(strstr(log, " bytes_in=110002 "));
  const char *hello = strstr(log, "hello");
  assert_null(strstr(hello + 1, "hello")); /* one line, not 10,000 */
  free(log);
}

/* A health check (QUERY, CLOSE) logs at debug level only: monitoring every
 * few seconds must not fill the log. */
static void test_a_health_check_is_logged_at_debug_only(void **state) {
  fixture *f = *state;
  capture_log(f, MR_LOG_DEBUG);
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18));
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  assert_int_equal(f->cl.closes, 1);
  expect_log_line(f, 2, (const char *const[]){" debug ", " config=- "});
}

/* A declared length over its limit is answered when it arrives: the body
 * (4 GiB, 2^63 bytes) is never waited for. */
static void expect_answered_at_once(const uint8_t *bytes, size_t len, const char *error) {
  void *st = NULL;
  assert_int_equal(setup(&st), 0);
  fixture *f = st;
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  uint8_t *copy = malloc(len);
  assert_non_null(copy);
  memcpy(copy, bytes, len);
  client_send_bytes(&f->cl, copy, len);
  uint64_t start = uv_now(&f->loop);
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, error, 1);
  assert_true(uv_now(&f->loop) - start < 1000); /* it waits for nothing: not the idle 30 s */
  teardown(&st);
}

static void test_an_over_limit_length_is_answered_at_once(void **state) {
  (void)state;
  const uint8_t text[6] = {5, 0, 0xff, 0xff, 0xff, 0xff};
  uint8_t query[26] = {6, 0};
  query[10] = 1;    /* correlation id */
  query[25] = 0x80; /* length 2^63 */
  expect_answered_at_once(text, sizeof text,
                          "TEXT of 4294967295 bytes is over the limit text_bytes = 1048576");
  expect_answered_at_once(query, sizeof query,
                          "QUERY of 9223372036854775808 bytes is over the limit query_bytes = 65536");
}

/* ---- backpressure ---- */

#define BP_REPS 64
#define BP_QUIET_TICKS 10
#define BP_TICK_MS 20

typedef struct stall_watch {
  uv_timer_t timer;
  int last_done, quiet;
  size_t queued_at_stall; /* client bytes not yet taken when it began to read */
} stall_watch;

/* The client sends a scan whose images outgrow the connection's outbox
 * and the socket buffers, reading nothing: the connection stops receiving,
 * so the client's writes stop completing. Once none has for a while, it
 * reads; receiving resumes and everything arrives. */
static void on_stall_tick(uv_timer_t *t) {
  stall_watch *w = t->data;
  client *cl = &current->cl;
  if (cl->writes_done != w->last_done) {
    w->last_done = cl->writes_done;
    w->quiet = 0;
    return;
  }
  if (++w->quiet < BP_QUIET_TICKS)
    return;
  w->queued_at_stall = uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe);
  uv_close((uv_handle_t *)t, NULL);
  client_read(cl);
}

static void test_a_client_that_does_not_read_pauses_receiving(void **state) {
  fixture *f = *state;
  f->limits.connection_bytes = 128 * 1024; /* 64 KiB outbox: four 16 KiB images */
  connect_client(f);
  stall_watch w = {0};
  uv_timer_init(&f->loop, &w.timer);
  w.timer.data = &w;
  uv_timer_start(&w.timer, on_stall_tick, BP_TICK_MS, BP_TICK_MS);
  client_send_scan(&f->cl, 128, 64, BP_REPS); /* 64 x 64 float images back */
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  assert_true(w.queued_at_stall > 0); /* backpressure reached the client */
  assert_int_equal(f->cl.write_errors, 0);
  assert_int_equal(f->cl.writes_done, f->cl.writes_queued);
  expect_reply(&f->cl, BP_REPS, 0, NULL, 1);
}

/* A client that never reads past --write-timeout is dropped: the socket
 * closed under its running session (whose pipeline thread waits on the
 * full outbox), its writes fail, and once the session thread has noticed
 * the cancel everything is freed. */
static void test_a_client_that_never_reads_is_dropped(void **state) {
  fixture *f = *state;
  f->limits.connection_bytes = 128 * 1024;
  f->host.write_timeout_ms = 200;
  connect_client(f);
  client_send_scan(&f->cl, 128, 64, BP_REPS);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  f->cl.after_last_write = client_close;
  run_to_the_end(f);
  assert_true(f->cl.write_errors > 0); /* the socket was closed on it */
  assert_true(f->cl.writes_done < f->cl.writes_queued);
}

/* Messages after the CLOSE start a second session, which is not served:
 * the first is answered in full, then the client is told, then CLOSE;
 * a client that half-closed after sending all that still reads it. */
static void test_a_second_session_after_close_is_told(void **state) {
  fixture *f = *state;
  connect_client(f);
  client_read(&f->cl);
  client_send_scan(&f->cl, 32, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  f->cl.after_last_write = client_half_close;
  run_to_the_end(f);
  assert_int_equal(f->cl.shutdowns, 1);
  /* CLOSE twice: the first session's, then the connection's */
  expect_reply(&f->cl, 1, 1, "ERROR: a second session on one connection", 2);
  assert_string_equal(f->cl.order, "ICTC"); /* the first answer in full, then word of the second */
}

/* At --max-connections with no connection that has answered in full, a
 * newcomer is told so (ERROR once) and let go, and its log line says why;
 * the connection holding the slot is served on. */
static void test_a_client_over_the_limit_is_told_busy(void **state) {
  fixture *f = *state;
  f->host.max_connections = 1;
  capture_log(f, MR_LOG_INFO);
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_config_file("default.xml")); /* served: holds the slot */
  connect_other(f);
  client_read(&f->other);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->other, 0, 1, NULL, 1);
  assert_string_equal(f->other.first_text,
                      "ERROR: server busy: 1 connections open (--max-connections 1)");
  assert_int_equal(f->other.closed, 1);
  expect_reply(&f->cl, 0, 0, NULL, 1);
  /* Said once: the refused connection's line, not the served one's. */
  char *log = captured_log(f);
  const char *first = strstr(log, "first_error=server busy: 1 connections open");
  assert_non_null(first);
  assert_null(strstr(first + 1, "first_error=server busy"));
  free(log);
}

/* ---- a client that goes on sending after our CLOSE ---- */

#define LINGER_TICK_MS 10

typedef struct linger_watch {
  uv_timer_t timer;
  int cut_at_eof;              /* the drain deadline passes as the server's EOF arrives */
  int other_at_tick;           /* a second client connects at this tick (0: none) */
  int ticks_open, ticks_uncounted; /* while the connection was still open */
  uint64_t eof_ms, closed_ms;
} linger_watch;

/* Every tick after the server's EOF the client sends more junk, and looks
 * whether the connection still counts against --max-connections; once
 * the server has closed its socket the client lets go too. */
static void on_linger_tick(uv_timer_t *t) {
  linger_watch *w = t->data;
  fixture *f = current;
  client *cl = &f->cl;
  if (cl->eofs == 0)
    return;
  if (w->eof_ms == 0) {
    w->eof_ms = uv_now(&f->loop);
    if (w->cut_at_eof)
      mr_conn_cancel_all(&f->host);
  }
  if (f->host.nconns == 0 || cl->write_errors > 0) {
    w->closed_ms = uv_now(&f->loop);
    uv_close((uv_handle_t *)t, NULL);
    client_close(cl);
    return;
  }
  w->ticks_open++;
  w->ticks_uncounted += f->nopen == 0;
  if (w->other_at_tick > 0 && w->ticks_open == w->other_at_tick) {
    connect_other(f); /* a health check: CLOSE alone, answered with CLOSE */
    client_read(&f->other);
    client_send(&f->other, mr_message_new(MR_MSG_CLOSE));
  }
  uint8_t *junk = malloc(512);
  assert_non_null(junk);
  memset(junk, 0x77, 512);
  client_send_bytes(cl, junk, 512);
}

static void start_linger_watch(fixture *f, linger_watch *w) {
  f->cl.stay_after_eof = 1;
  uv_timer_init(&f->loop, &w->timer);
  w->timer.data = w;
  uv_timer_start(&w->timer, on_linger_tick, LINGER_TICK_MS, LINGER_TICK_MS);
}

/* A client that never stops sending after our CLOSE: its bytes are
 * drained for one grace period, not a grace period after each of them
 * (which kept it open until --idle-timeout), and all that while it counts
 * against --max-connections (it holds a descriptor). */
static void test_a_client_sending_after_our_close_counts_and_is_closed(void **state) {
  fixture *f = *state;
  f->host.close_grace_ms = 300;
  f->env.idle_timeout_ms = 5000;
  connect_client(f);
  client_read(&f->cl);
  linger_watch w = {0};
  start_linger_watch(f, &w);
  client_send_scan(&f->cl, 32, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 0, NULL, 1);
  assert_true(w.ticks_open > 5);      /* it lingered, fed every tick */
  assert_int_equal(w.ticks_uncounted, 0);
  assert_true(w.closed_ms - w.eof_ms < 2000); /* the grace (300 ms), not the idle limit (5 s) */
}

/* At --max-connections, a new client makes a connection that only waits
 * for its client's EOF close, instead of being turned away: a client that
 * reconnects as soon as it has read our CLOSE finds room. */
static void test_a_new_client_at_the_limit_closes_a_lingering_one(void **state) {
  fixture *f = *state;
  f->host.max_connections = 1;
  f->host.close_grace_ms = 5000;
  connect_client(f);
  client_read(&f->cl);
  linger_watch w = {.other_at_tick = 3};
  start_linger_watch(f, &w);
  client_send_scan(&f->cl, 32, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 0, NULL, 1);
  assert_true(w.closed_ms - w.eof_ms < 2000); /* closed for the newcomer, not by the grace */
  expect_reply(&f->other, 0, 0, NULL, 1);     /* served: no "server busy" */
  assert_int_equal(f->other.closed, 1);
}

/* ---- drain ---- */

/* A stopping server: the connection closing last tells the host
 * (host.closed), which is what ends a loop thread (loops.c). */
static void stop_the_server(fixture *f) { f->stopping = 1; }

static void cut_at_the_deadline(client *cl) {
  (void)cl;
  mr_conn_cancel_all(&current->host);
}

/* SIGTERM's deadline passes under a running session: the client is told
 * the session was cut, then CLOSE; the last connection gone, the host
 * hears of it. */
static void test_the_drain_deadline_cuts_a_running_session(void **state) {
  fixture *f = *state;
  stop_the_server(f);
  connect_client(f);
  client_read(&f->cl);
  client_send(&f->cl, mr_message_new_config_file("default.xml"));
  client_send_header(&f->cl, 32, 16);
  client_send_lines(&f->cl, 32, 16, 0, 8, 0); /* no CLOSE: it would run on */
  f->cl.after_last_write = cut_at_the_deadline;
  capture_log(f, MR_LOG_INFO);
  run_to_the_end(f);
  expect_reply(&f->cl, 0, 1, "ERROR: server shutting down: ", 1);
  assert_int_equal(f->drained, 1);
  /* Its log line counts the cut as an error. */
  expect_log_line(f, 2, (const char *const[]){" errors=1", "first_error=server shutting down"});
}

/* Answered connections waiting for their client's EOF do not hold a
 * stopping server past its drain deadline: they close when it passes,
 * not at the end of their grace period. */
static void test_the_drain_deadline_closes_lingering_connections(void **state) {
  fixture *f = *state;
  f->host.close_grace_ms = 5000;
  f->env.idle_timeout_ms = 10000;
  stop_the_server(f);
  connect_client(f);
  client_read(&f->cl);
  linger_watch w = {.cut_at_eof = 1};
  start_linger_watch(f, &w);
  client_send_scan(&f->cl, 32, 16, 1);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 1, 0, NULL, 1);
  assert_true(w.closed_ms - w.eof_ms < 1000);
  assert_int_equal(f->drained, 1);
}

/* A session that ends before the deadline is served in full while the
 * server drains. */
static void test_a_draining_server_finishes_a_session(void **state) {
  fixture *f = *state;
  stop_the_server(f);
  connect_client(f);
  client_read(&f->cl);
  client_send_scan(&f->cl, 32, 16, 2);
  client_send(&f->cl, mr_message_new(MR_MSG_CLOSE));
  run_to_the_end(f);
  expect_reply(&f->cl, 2, 0, NULL, 1);
  assert_int_equal(f->drained, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_close_then_half_close_gets_every_image, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_peer_vanishing_mid_scan_cancels_the_session, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_malformed_message_is_answered_and_closed, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_garbage_after_the_nul_of_a_config_name, setup,
                                      teardown),
      cmocka_unit_test(test_a_config_name_that_is_a_path_is_refused),
      cmocka_unit_test_setup_teardown(test_empty_acquisitions_are_skipped_and_counted, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_bytes_cannot_forge_log_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_text_flood_is_summarised, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_health_check_is_logged_at_debug_only, setup,
                                      teardown),
      cmocka_unit_test(test_an_over_limit_length_is_answered_at_once),
      cmocka_unit_test_setup_teardown(test_an_unknown_config_is_answered_at_once, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_script_over_the_step_limit_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_script_whose_workers_are_over_the_thread_limit_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_script_over_the_thread_limit_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_script_within_the_limits_is_served, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_client_that_does_not_read_pauses_receiving, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_client_that_never_reads_is_dropped, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_second_session_after_close_is_told, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_client_sending_after_our_close_counts_and_is_closed,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_new_client_at_the_limit_closes_a_lingering_one,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_client_over_the_limit_is_told_busy, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_the_drain_deadline_cuts_a_running_session, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_the_drain_deadline_closes_lingering_connections,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_draining_server_finishes_a_session, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
