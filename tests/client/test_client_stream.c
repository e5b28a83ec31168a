/* client/stream and client/query against a scripted fake server on
 * loopback: answers, server errors, silence (timeout), a server that
 * vanishes, protocol violations, an early CLOSE, and full duplex (an image
 * is received while the sender is still producing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "decode.h"
#include "encode.h"
#include "net.h"
#include "query.h"
#include "stream.h"
#include "test_support.h"

/* ---- the fake server: one connection, one scripted behaviour ---- */

typedef void (*behaviour)(int fd);

typedef struct fake {
  int listen_fd, port;
  behaviour fn;
  pthread_t thread;
} fake;

static void *fake_run(void *arg) {
  fake *f = arg;
  int fd = accept(f->listen_fd, NULL, NULL);
  if (fd >= 0) {
    f->fn(fd);
    close(fd);
  }
  return NULL;
}

static void fake_start(fake *f, behaviour fn) {
  f->fn = fn;
  f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(f->listen_fd, 1), 0);
  assert_int_equal(getsockname(f->listen_fd, (struct sockaddr *)&a, &len), 0);
  f->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&f->thread, NULL, fake_run, f), 0);
}

static void fake_join(fake *f) {
  pthread_join(f->thread, NULL);
  close(f->listen_fd);
}

/* Sends msg and drops it. */
static void put(int fd, mr_message *msg) {
  uint8_t *bytes;
  size_t len;
  assert_non_null(msg);
  assert_int_equal(mr_encode_flat(msg, &bytes, &len), 0);
  for (size_t off = 0; off < len;) {
    ssize_t n = send(fd, bytes + off, len - off, MSG_NOSIGNAL);
    if (n <= 0)
      break; /* the client is gone: its side of the test says what happened */
    off += (size_t)n;
  }
  free(bytes);
  mr_message_unref(msg);
}

static void put_text(int fd, const char *text) {
  put(fd, mr_message_new_text(MR_MSG_TEXT, text, strlen(text)));
}

typedef struct serving {
  int fd;
  int answer; /* answer QUERY with RESPONSE "answer to <key>" */
  int closed; /* the client's CLOSE arrived */
} serving;

static int serve_message(void *ctx, mr_message *m) {
  serving *s = ctx;
  if (m->kind == MR_MSG_QUERY && s->answer) {
    char text[256];
    int n = snprintf(text, sizeof text, "answer to %s", m->u.query.text);
    put(s->fd, mr_message_new_query(MR_MSG_RESPONSE, m->u.query.correlation_id, text, (size_t)n));
  }
  if (m->kind == MR_MSG_CLOSE)
    s->closed = 1;
  mr_message_unref(m);
  return s->closed;
}

/* Reads the client's messages until its CLOSE (answering queries if
 * asked) or until it disconnects. Returns whether CLOSE arrived. */
static int serve(int fd, int answer) {
  serving s = {.fd = fd, .answer = answer};
  mr_decoder_callbacks cb = {.on_message = serve_message, .ctx = &s};
  mr_decoder *dec;
  assert_int_equal(mr_decoder_create(NULL, &cb, &dec), 0);
  uint8_t buf[65536];
  while (!s.closed) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0 || mr_decoder_feed(dec, buf, (size_t)n) < 0)
      break;
  }
  mr_decoder_destroy(dec);
  return s.closed;
}

static void until_gone(int fd) {
  char buf[4096];
  while (recv(fd, buf, sizeof buf, 0) > 0) {
  }
}

/* ---- the client side ---- */

static const char *const keys[] = {"gadgetron::version", "mrrecon::configs"};

typedef struct collected {
  int responses, images;
  pthread_mutex_t lock;
  pthread_cond_t changed;
} collected;

static int collect(void *ctx, const mr_message *m, mr_err *err) {
  (void)err;
  collected *c = ctx;
  pthread_mutex_lock(&c->lock);
  if (m->kind == MR_MSG_IMAGE)
    c->images++;
  else
    c->responses++;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

/* A source of n TEXT messages (n < 0: endless). */
typedef struct texts {
  int n, sent;
} texts;

static int next_text(void *ctx, mr_message **out, mr_err *err) {
  (void)err;
  texts *t = ctx;
  *out = t->n >= 0 && t->sent >= t->n ? NULL : mr_message_new_text(MR_MSG_TEXT, "hello", 5);
  t->sent++;
  return 0;
}

/* Runs a stream of n texts against the fake server's behaviour. */
static int run_against(behaviour fn, int n, int timeout_ms, mr_stream_result *res, mr_err *err) {
  fake f;
  fake_start(&f, fn);
  mr_net net;
  assert_int_equal(mr_net_connect(&net, "127.0.0.1", f.port, timeout_ms, err), 0);
  texts t = {.n = n};
  collected c = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  mr_stream_source src = {.next = next_text, .ctx = &t};
  mr_stream_sink sink = {.on_message = collect, .ctx = &c};
  int rc = mr_stream_run(&net, &src, &sink, NULL, res, err);
  mr_net_close(&net);
  fake_join(&f);
  return rc;
}

/* ---- behaviours and tests ---- */

static void answer_then_close(int fd) {
  if (serve(fd, 1))
    put(fd, mr_message_new(MR_MSG_CLOSE));
}

static void test_query_answers(void **state) {
  (void)state;
  fake f;
  fake_start(&f, answer_then_close);
  char *answers[2];
  mr_err err = {0};
  assert_int_equal(mr_query_ask("127.0.0.1", f.port, 5000, keys, 2, answers, &err), 0);
  fake_join(&f);
  assert_string_equal(answers[0], "answer to gadgetron::version");
  assert_string_equal(answers[1], "answer to mrrecon::configs");
  free(answers[0]);
  free(answers[1]);
}

/* A source that fails after two messages, like a dataset that breaks. */
static int next_then_fail(void *ctx, mr_message **out, mr_err *err) {
  texts *t = ctx;
  *out = NULL;
  if (t->sent++ >= 2)
    return mr_err_set(err, MR_EIO, "disk broke");
  *out = mr_message_new_text(MR_MSG_TEXT, "hello", 5);
  return 0;
}

static void test_source_error(void **state) {
  (void)state;
  fake f;
  fake_start(&f, answer_then_close);
  mr_net net;
  mr_err err = {0};
  assert_int_equal(mr_net_connect(&net, "127.0.0.1", f.port, 5000, &err), 0);
  texts t = {.n = -1};
  collected c = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  mr_stream_source src = {.next = next_then_fail, .ctx = &t};
  mr_stream_sink sink = {.on_message = collect, .ctx = &c};
  mr_stream_result res;
  /* CLOSE still goes out (the fake server answers it), and the source's
   * error is the result. */
  assert_int_equal(mr_stream_run(&net, &src, &sink, NULL, &res, &err), MR_EIO);
  assert_string_equal(err.msg, "disk broke");
  mr_net_close(&net);
  fake_join(&f);
}

static void errors_then_close(int fd) {
  if (serve(fd, 0)) {
    put_text(fd, "a note");
    put_text(fd, "ERROR: no config named 'x'\n");
    put_text(fd, "ERROR: second");
    put(fd, mr_message_new(MR_MSG_CLOSE));
  }
}

static void test_server_errors(void **state) {
  (void)state;
  mr_stream_result res;
  mr_err err = {0};
  assert_int_equal(run_against(errors_then_close, 3, 5000, &res, &err), 0);
  assert_int_equal(res.server_errors, 2);
  assert_string_equal(res.first_error, "no config named 'x'");

  /* mr_query_ask turns a server error into a failure. */
  fake f;
  fake_start(&f, errors_then_close);
  char *answers[1];
  assert_int_equal(mr_query_ask("127.0.0.1", f.port, 5000, keys, 1, answers, &err), MR_EPROTO);
  fake_join(&f);
  assert_string_equal(err.msg, "the server reported an error: no config named 'x'");
  assert_null(answers[0]);
}

static void hostile_texts(int fd) {
  if (serve(fd, 0)) {
    put_text(fd, "retitled\033]0;owned\007 and \033[2Jcleared \xc3\xa9t\xc3\xa9\n");
    put_text(fd, "ERROR: first\033[31m red");
    put_text(fd, "ERROR: second");
    put(fd, mr_message_new(MR_MSG_CLOSE));
  }
}

/* Runs the client against fn with its stderr caught into caught. */
static void run_caught(behaviour fn, mr_stream_result *res, char *caught, size_t size) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  mr_err err = {0};
  int rc = run_against(fn, 1, 5000, res, &err);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  assert_int_equal(rc, 0);
  rewind(tmp);
  size_t n = fread(caught, 1, size - 1, tmp);
  caught[n] = '\0';
  fclose(tmp);
}

/* Issue 27 items 13 and 17: a server's TEXT is shown escaped (no escape
 * sequence reaches the terminal; UTF-8 stays), and the first error is
 * left to the command's failure line, not printed twice. */
static void test_server_text_is_escaped(void **state) {
  (void)state;
  mr_stream_result res;
  char caught[4096];
  run_caught(hostile_texts, &res, caught, sizeof caught);
  assert_null(strchr(caught, '\033'));
  assert_null(strchr(caught, '\007'));
  assert_non_null(strstr(caught, "server: retitled\\x1b]0;owned\\x07 and \\x1b[2Jcleared "
                                 "\xc3\xa9t\xc3\xa9\n"));
  assert_null(strstr(caught, "first"));
  assert_non_null(strstr(caught, "server: ERROR: second\n"));
  assert_int_equal(res.server_errors, 2);
  assert_string_equal(res.first_error, "first\\x1b[31m red");
}

/* The configs answer: names, aliases and descriptions escaped. */
static void test_config_list_is_escaped(void **state) {
  (void)state;
  const char *json = "[{\"name\":\"a\\u001b]0;x\\u0007\",\"aliases\":[\"b\\u001b[2J\"],"
                     "\"description\":\"line\\nnext \\u009b\"}]";
  FILE *out = tmpfile();
  assert_non_null(out);
  mr_err err = {0};
  assert_int_equal(mr_query_print_configs(json, out, &err), 0);
  rewind(out);
  char text[512];
  size_t n = fread(text, 1, sizeof text - 1, out);
  text[n] = '\0';
  fclose(out);
  assert_string_equal(text, "a\\x1b]0;x\\x07  (also: b\\x1b[2J)\n    line\\nnext \\xc2\\x9b\n");
}

static void silent(int fd) {
  serve(fd, 0);
  until_gone(fd);
}

static void test_timeout(void **state) {
  (void)state;
  mr_stream_result res;
  mr_err err = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(run_against(silent, 2, 200, &res, &err), MR_ETIMEDOUT);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(secs >= 0.19 && secs < 3.0);
  assert_non_null(strstr(err.msg, "was silent for 200 ms"));
}

static void vanish(int fd) { serve(fd, 0); }

static void test_close_without_close(void **state) {
  (void)state;
  mr_stream_result res;
  mr_err err = {0};
  assert_int_equal(run_against(vanish, 2, 5000, &res, &err), MR_ECONN);
  assert_non_null(strstr(err.msg, "closed the connection without CLOSE"));
}

static void send_acquisition(int fd) {
  ISMRMRD_AcquisitionHeader h;
  memset(&h, 0, sizeof h);
  h.number_of_samples = 2;
  h.active_channels = h.available_channels = 1;
  put(fd, mr_message_new_acquisition(&h));
  until_gone(fd);
}

static void send_garbage(int fd) {
  static const uint8_t junk[] = {0x34, 0x12, 0, 0};
  send(fd, junk, sizeof junk, MSG_NOSIGNAL);
  until_gone(fd);
}

static void test_protocol_violations(void **state) {
  (void)state;
  mr_stream_result res;
  mr_err err = {0};
  assert_int_equal(run_against(send_acquisition, -1, 5000, &res, &err), MR_EPROTO);
  assert_non_null(strstr(err.msg, "protocol violation: the server sent ACQUISITION (id 1008)"));
  mr_err_clear(&err);
  assert_int_equal(run_against(send_garbage, -1, 5000, &res, &err), MR_EPROTO);
  assert_non_null(strstr(err.msg, "protocol violation: "));
  assert_non_null(strstr(err.msg, "4660")); /* 0x1234 */
}

static void close_at_once(int fd) {
  put(fd, mr_message_new(MR_MSG_CLOSE));
  until_gone(fd);
}

static void test_early_close(void **state) {
  (void)state;
  mr_stream_result res;
  mr_err err = {0};
  /* The client has endless data: the server's CLOSE must stop it. */
  assert_int_equal(run_against(close_at_once, -1, 5000, &res, &err), MR_EPROTO);
  assert_non_null(strstr(err.msg, "sent CLOSE before the client had sent everything"));
}

/* Full duplex: the image goes out before the server reads anything, and
 * the client's source holds its CLOSE back until the sink has the image.
 * A client that only reads after sending would wait forever. */
static void image_first(int fd) {
  mr_message *im = mr_test_image(ISMRMRD_FLOAT, 8, 8, NULL);
  assert_non_null(im);
  put(fd, im);
  if (serve(fd, 0))
    put(fd, mr_message_new(MR_MSG_CLOSE));
}

typedef struct after_image {
  collected *c;
  int sent;
} after_image;

static int next_after_image(void *ctx, mr_message **out, mr_err *err) {
  after_image *a = ctx;
  *out = NULL;
  if (a->sent++ > 0)
    return 0;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&a->c->lock);
  while (a->c->images == 0)
    if (pthread_cond_timedwait(&a->c->changed, &a->c->lock, &until) != 0)
      break;
  int images = a->c->images;
  pthread_mutex_unlock(&a->c->lock);
  if (images == 0)
    return mr_err_set(err, MR_ETIMEDOUT, "no image while sending");
  *out = mr_message_new_text(MR_MSG_TEXT, "got it", 6);
  return 0;
}

static void test_full_duplex(void **state) {
  (void)state;
  fake f;
  fake_start(&f, image_first);
  mr_net net;
  mr_err err = {0};
  assert_int_equal(mr_net_connect(&net, "127.0.0.1", f.port, 10000, &err), 0);
  collected c = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  after_image a = {.c = &c};
  mr_stream_source src = {.next = next_after_image, .ctx = &a};
  mr_stream_sink sink = {.on_message = collect, .ctx = &c};
  mr_stream_stats stats;
  memset(&stats, 0, sizeof stats);
  mr_stream_result res;
  assert_int_equal(mr_stream_run(&net, &src, &sink, &stats, &res, &err), 0);
  mr_net_close(&net);
  fake_join(&f);
  assert_int_equal(c.images, 1);
  assert_int_equal(atomic_load(&stats.images), 1);
}

static void test_connect_refused(void **state) {
  (void)state;
  /* A port that was free a moment ago. */
  fake f;
  fake_start(&f, silent);
  int port = f.port;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  close(fd);
  fake_join(&f);
  mr_net net;
  mr_err err = {0};
  assert_int_equal(mr_net_connect(&net, "127.0.0.1", port, 1000, &err), MR_ECONN);
  char want[128];
  snprintf(want, sizeof want, "cannot connect to 127.0.0.1:%d: Connection refused", port);
  assert_string_equal(err.msg, want);
  mr_err_clear(&err);
  assert_int_equal(mr_net_connect(&net, "no-such-host.invalid", port, 1000, &err), MR_ECONN);
  assert_non_null(strstr(err.msg, "cannot resolve 'no-such-host.invalid'"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_query_answers),
      cmocka_unit_test(test_source_error),
      cmocka_unit_test(test_server_errors),
      cmocka_unit_test(test_server_text_is_escaped),
      cmocka_unit_test(test_config_list_is_escaped),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_close_without_close),
      cmocka_unit_test(test_protocol_violations),
      cmocka_unit_test(test_early_close),
      cmocka_unit_test(test_full_duplex),
      cmocka_unit_test(test_connect_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
