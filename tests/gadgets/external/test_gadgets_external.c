/* The external gadget (gadgets/external/external.c): the example Python step
 * (examples/external/mrd_step.py) in both modes against the phantom, its
 * images compared with our own chain's; peers that die mid-scan, never
 * answer, answer garbage or flood images, each ending the session with a
 * line naming the step and leaving no process behind; `execute` refusing
 * names outside --external-dir. Runs pipelined, as in a server. */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "encode.h"
#include "budget.h"
#include "external_program.h"
#include "gadget_harness.h"
#include "phantom.h"
#include "test_support.h"

#define N 32     /* image side; the readout is oversampled 2x */
#define NCH 4
#define SLICES 2
#define DEPTH 2  /* stage inbox, as in the server */

static char example_dir[1024];

/* ---- data ----------------------------------------------------------- */

static float complex phantom_sample(int c, int s, void *arg) {
  int e1 = *(const int *)arg;
  double k[3] = {(s - N) / (2.0 * N), (e1 - N / 2) / (double)N, 0};
  double complex out[NCH];
  mr_phantom_kspace(2, N, NCH, k, out);
  return (float complex)out[c];
}

static mr_message *phantom_line(int e1, int slice) {
  mr_message *m = mr_harness_acquisition(2 * N, NCH, e1, 0,
                                         e1 == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                         phantom_sample, &e1);
  m->u.acq.head.idx.slice = (uint16_t)slice;
  return m;
}

/* The installed cartesian config's gadgets, with `extra` (a gadget entry,
 * or NULL) appended or, with alone, only `extra`. Malloc'ed. */
static char *chain_text(const char *extra, int alone) {
  if (alone) {
    size_t n = strlen(extra) + 3;
    char *t = malloc(n);
    snprintf(t, n, "[%s]", extra);
    return t;
  }
  cJSON *cfg = mr_harness_installed_config("cartesian");
  assert_non_null(cfg);
  cJSON *gadgets = cJSON_GetObjectItem(cfg, "gadgets");
  if (extra != NULL)
    cJSON_AddItemToArray(gadgets, cJSON_Parse(extra));
  char *t = cJSON_PrintUnformatted(gadgets);
  cJSON_Delete(cfg);
  return t;
}

/* Runs the phantom through a chain; returns the flush's code (0 when every
 * push and the flush succeeded, else the first error). */
static int run_phantom(mr_harness *h, const char *gadgets) {
  assert_int_equal(mr_harness_open(h, gadgets, MR_CHAIN_WIRE_INPUT), 0);
  assert_int_equal(mr_harness_set_pipelined(h, DEPTH), 0);
  int rc = mr_harness_configure(h, mr_harness_cartesian_header(2 * N, N, 1, N, N, 1));
  for (int slice = 0; rc == 0 && slice < SLICES; slice++)
    for (int e1 = 0; rc == 0 && e1 < N; e1++)
      rc = mr_harness_push(h, phantom_line(e1, slice));
  return rc == 0 ? mr_harness_flush(h) : rc;
}

static void run_ok(mr_harness *h, const char *gadgets) {
  int rc = run_phantom(h, gadgets);
  if (rc != 0)
    fail_msg("chain failed: %s", h->err.msg);
}

/* Largest pixel difference over the largest reference pixel. */
static double relative_error(const mr_message *ref, const mr_message *got) {
  const mr_image *a = &ref->u.image, *b = &got->u.image;
  assert_int_equal(a->head.matrix_size[0], b->head.matrix_size[0]);
  assert_int_equal(a->head.matrix_size[1], b->head.matrix_size[1]);
  assert_int_equal(a->data_bytes, b->data_bytes);
  const float *x = a->data, *y = b->data;
  double top = 0, diff = 0;
  for (size_t i = 0; i < a->data_bytes / sizeof(float); i++) {
    top = fmax(top, fabs(x[i]));
    diff = fmax(diff, fabs(x[i] - y[i]));
  }
  assert_true(top > 0);
  return diff / top;
}

static void expect_same_images(mr_harness *ref, mr_harness *got, double tolerance) {
  assert_int_equal(ref->nout, SLICES);
  assert_int_equal(got->nout, ref->nout);
  for (int i = 0; i < ref->nout; i++) {
    assert_int_equal(got->out[i]->kind, MR_MSG_IMAGE);
    assert_int_equal(got->out[i]->u.image.head.slice, ref->out[i]->u.image.head.slice);
    double e = relative_error(ref->out[i], got->out[i]);
    if (!(e <= tolerance))
      fail_msg("image %d differs by %g of its maximum", i, e);
  }
}

/* 3x3 mean of a float image, neighbours inside the image only (the
 * example's "smooth"). */
static void smooth(const float *in, float *out, int nx, int ny) {
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) {
      double sum = 0;
      int n = 0;
      for (int jj = j - 1; jj <= j + 1; jj++)
        for (int ii = i - 1; ii <= i + 1; ii++)
          if (ii >= 0 && ii < nx && jj >= 0 && jj < ny)
            sum += in[jj * nx + ii], n++;
      out[j * nx + i] = (float)(sum / n);
    }
}

/* ---- the example in a process of its own (connect mode) ------------- */

typedef struct listener {
  pid_t pid;
  int port;
} listener;

static void start_example_server(listener *l) {
  int out[2];
  assert_int_equal(pipe(out), 0);
  char script[1200];
  snprintf(script, sizeof script, "%s/mrd_step.py", example_dir);
  l->pid = fork();
  if (l->pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execlp("python3", "python3", script, "--listen", "127.0.0.1:0", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  char line[64] = "";
  FILE *f = fdopen(out[0], "r");
  assert_non_null(fgets(line, sizeof line, f));
  fclose(f);
  assert_int_equal(sscanf(line, "listening on %d", &l->port), 1);
}

static void stop_example_server(listener *l) {
  kill(l->pid, SIGKILL);
  waitpid(l->pid, NULL, 0);
}

/* ---- misbehaving peers (connect mode), in a thread ------------------ */

enum behaviour {
  DIES_MID_SCAN,
  NEVER_ANSWERS,
  GARBAGE,
  FLOODS,
  WRONG_KIND,
  EARLY_CLOSE,
  BIG_IMAGE
};

/* Sends one message (takes it). */
static void send_message(int fd, mr_message *m) {
  uint8_t *bytes;
  size_t len;
  assert_int_equal(mr_encode_flat(m, &bytes, &len), 0);
  mr_message_unref(m);
  send(fd, bytes, len, MSG_NOSIGNAL);
  free(bytes);
}

typedef struct fake_peer {
  enum behaviour how;
  int listen_fd, port;
  atomic_int stop; /* NEVER_ANSWERS holds the connection open until then */
  pthread_t thread;
  /* NEVER_ANSWERS: it has read our CLOSE (and our EOF): we wait on it now. */
  pthread_mutex_t mu;
  pthread_cond_t changed;
  int heard_all;
} fake_peer;

/* Reads until EOF, or until `limit` bytes (0: no limit). */
static void drain(int fd, size_t limit) {
  char buf[65536];
  size_t got = 0;
  ssize_t n;
  while ((limit == 0 || got < limit) && (n = recv(fd, buf, sizeof buf, 0)) > 0)
    got += (size_t)n;
}

static void *fake_peer_main(void *arg) {
  fake_peer *p = arg;
  int fd = accept(p->listen_fd, NULL, NULL);
  if (fd < 0)
    return NULL;
  switch (p->how) {
  case DIES_MID_SCAN: /* config, header and a few lines, then gone */
    drain(fd, 1024 + 2 + 8 * 1024);
    break;
  case NEVER_ANSWERS: /* reads everything, even our CLOSE, and stays silent */
    drain(fd, 0);
    pthread_mutex_lock(&p->mu);
    p->heard_all = 1;
    pthread_cond_broadcast(&p->changed);
    while (!atomic_load(&p->stop))
      pthread_cond_wait(&p->changed, &p->mu);
    pthread_mutex_unlock(&p->mu);
    break;
  case GARBAGE: {
    static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL);
    drain(fd, 0);
    break;
  }
  case WRONG_KIND: { /* an acquisition, where images are expected */
    ISMRMRD_AcquisitionHeader a;
    ismrmrd_init_acquisition_header(&a);
    a.number_of_samples = 4;
    a.active_channels = a.available_channels = 1;
    send_message(fd, mr_message_new_acquisition(&a));
    drain(fd, 0);
    break;
  }
  case BIG_IMAGE: /* a 16 MiB image as soon as it has our HEADER */
    drain(fd, 1026 + 6 + strlen(mr_harness_cartesian_header(2 * N, N, 1, N, N, 1)));
    send_message(fd, mr_test_image(ISMRMRD_FLOAT, 2048, 2048, NULL));
    drain(fd, 0);
    break;
  case EARLY_CLOSE: /* done before it has heard anything */
    send_message(fd, mr_message_new(MR_MSG_CLOSE));
    drain(fd, 0);
    break;
  case FLOODS: { /* once it has our HEADER: small images, without end, without reading */
    drain(fd, 1026 + 6 + strlen(mr_harness_cartesian_header(2 * N, N, 1, N, N, 1)));
    mr_message *m = mr_test_image(ISMRMRD_FLOAT, 4, 4, NULL);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(mr_encode_flat(m, &bytes, &len), 0);
    mr_message_unref(m);
    while (send(fd, bytes, len, MSG_NOSIGNAL) == (ssize_t)len)
      ;
    free(bytes);
    break;
  }
  }
  close(fd);
  return NULL;
}

static void start_fake_peer(fake_peer *p, enum behaviour how) {
  p->how = how;
  atomic_init(&p->stop, 0);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->changed, NULL);
  p->heard_all = 0;
  p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(p->listen_fd, 1), 0);
  getsockname(p->listen_fd, (struct sockaddr *)&a, &len);
  p->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&p->thread, NULL, fake_peer_main, p), 0);
}

static void stop_fake_peer(fake_peer *p) {
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->changed);
}

/* ---- tests ---------------------------------------------------------- */

static void test_execute_recon_matches_our_chain(void **state) {
  (void)state;
  assert_int_equal(mr_external_dir_set(example_dir, &(mr_err){0}), 0);
  mr_harness ref, ext;
  char *ours = chain_text(NULL, 0);
  char *theirs = chain_text("{\"gadget\":\"external\",\"execute\":\"mrd_step.py\","
                            "\"send\":\"acquisitions\",\"expect\":\"images\"}", 1);
  run_ok(&ref, ours);
  run_ok(&ext, theirs);
  expect_same_images(&ref, &ext, 1e-4);
  mr_harness_close(&ref);
  mr_harness_close(&ext);
  free(ours);
  free(theirs);
}

static void test_connect_recon_matches_our_chain(void **state) {
  (void)state;
  listener l;
  start_example_server(&l);
  char entry[200];
  snprintf(entry, sizeof entry, "{\"gadget\":\"external\",\"connect\":\"127.0.0.1:%d\"}", l.port);
  mr_harness ref, ext;
  char *ours = chain_text(NULL, 0), *theirs = chain_text(entry, 1);
  run_ok(&ref, ours);
  run_ok(&ext, theirs);
  expect_same_images(&ref, &ext, 1e-4);
  mr_harness_close(&ref);
  mr_harness_close(&ext);
  free(ours);
  free(theirs);
  stop_example_server(&l);
}

/* Our images to the peer for post-processing, in both modes. */
static void test_images_post_processed_in_both_modes(void **state) {
  (void)state;
  assert_int_equal(mr_external_dir_set(example_dir, &(mr_err){0}), 0);
  listener l;
  start_example_server(&l);
  char connect[200];
  snprintf(connect, sizeof connect,
           "{\"gadget\":\"external\",\"connect\":\"127.0.0.1:%d\",\"send\":\"images\","
           "\"config\":\"passthrough\"}", l.port);
  char *ours = chain_text(NULL, 0), *passed = chain_text(connect, 0);
  char *smoothed = chain_text("{\"gadget\":\"external\",\"execute\":\"mrd_step.py\","
                              "\"send\":\"images\",\"config\":\"smooth\"}", 0);
  mr_harness ref, pass, smooth_h;
  run_ok(&ref, ours);
  run_ok(&pass, passed);
  run_ok(&smooth_h, smoothed);
  expect_same_images(&ref, &pass, 0); /* untouched: the same bits */
  for (int i = 0; i < ref.nout; i++) {
    const mr_image *a = &ref.out[i]->u.image;
    float want[N * N];
    smooth(a->data, want, a->head.matrix_size[0], a->head.matrix_size[1]);
    memcpy(a->data, want, sizeof want); /* the reference, smoothed */
  }
  expect_same_images(&ref, &smooth_h, 1e-5);
  mr_harness_close(&ref);
  mr_harness_close(&pass);
  mr_harness_close(&smooth_h);
  free(ours);
  free(passed);
  free(smoothed);
  stop_example_server(&l);
}

/* An answer is passed on as soon as it comes, not when the next message
 * for the peer does: one image in, its copy out while nothing else moves. */
static atomic_int answers;

static int count_answer(void *ctx, mr_message *msg) {
  (void)ctx;
  mr_message_unref(msg);
  atomic_fetch_add(&answers, 1);
  return 0;
}

static void test_answers_flow_without_more_input(void **state) {
  (void)state;
  assert_int_equal(mr_external_dir_set(example_dir, &(mr_err){0}), 0);
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"external\",\"execute\":\"mrd_step.py\","
                                       "\"send\":\"images\",\"config\":\"passthrough\"}]",
                                   MR_CHAIN_WIRE_INPUT),
                   0);
  mr_chain_set_sink(h.chain, count_answer, NULL, NULL);
  atomic_store(&answers, 0);
  assert_int_equal(mr_harness_set_pipelined(&h, DEPTH), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(2 * N, N, 1, N, N, 1)),
                   0);
  ISMRMRD_ImageHeader head;
  ismrmrd_init_image_header(&head);
  head.data_type = ISMRMRD_FLOAT;
  head.matrix_size[0] = head.matrix_size[1] = 4;
  head.matrix_size[2] = head.channels = 1;
  assert_int_equal(mr_harness_push(&h, mr_message_new_image(&head, NULL)), 0);
  for (int waited = 0; atomic_load(&answers) == 0 && waited < 10000; waited += 10)
    usleep(10000);
  assert_int_equal(atomic_load(&answers), 1);
  assert_int_equal(mr_harness_flush(&h), 0);
  mr_harness_close(&h);
}

/* A failure of the peer: the chain fails with a line naming the external
 * step and containing `why`. */
static void expect_failure(const char *entry, const char *why) {
  mr_harness h;
  char *gadgets = chain_text(entry, 1);
  int rc = run_phantom(&h, gadgets);
  assert_true(rc < 0);
  if (strstr(h.err.msg, "'external'") == NULL || strstr(h.err.msg, why) == NULL)
    fail_msg("expected an error naming the step and '%s', got: %s", why, h.err.msg);
  mr_harness_close(&h);
  free(gadgets);
}

static void fake_peer_case(enum behaviour how, const char *extra, const char *why) {
  fake_peer p;
  start_fake_peer(&p, how);
  char entry[300];
  snprintf(entry, sizeof entry, "{\"gadget\":\"external\",\"connect\":\"127.0.0.1:%d\"%s}",
           p.port, extra);
  expect_failure(entry, why);
  stop_fake_peer(&p); /* its thread ended: our side let go of the connection */
}

typedef struct peer_case {
  enum behaviour how;
  const char *extra, *why; /* more keys for the step; what the error says */
} peer_case;

static const peer_case dies_mid_scan = {DIES_MID_SCAN, "", "closed the connection before its CLOSE"};
static const peer_case never_answers = {NEVER_ANSWERS, ",\"idle_timeout_ms\":300",
                                        "idle_timeout_ms"};
static const peer_case takes_too_long = {NEVER_ANSWERS, ",\"total_timeout_ms\":300",
                                         "no CLOSE within 300 ms (total_timeout_ms)"};
static const peer_case answers_garbage = {GARBAGE, "", "not the MRD protocol"};
static const peer_case floods_images = {FLOODS, ",\"max_replies\":20", "max_replies"};
static const peer_case sends_a_kind_not_expected = {
    WRONG_KIND, "", "sent ACQUISITION, but this step expects images"};
static const peer_case closes_before_us = {EARLY_CLOSE, "", "sent CLOSE before it had our CLOSE"};

static void test_misbehaving_peer(void **state) {
  const peer_case *c = *state;
  fake_peer_case(c->how, c->extra, c->why);
}

typedef struct canceller {
  fake_peer *peer;
  mr_harness *h;
  atomic_int flag;
} canceller;

/* Once the peer has read everything, our CLOSE included (the step now
 * waits for its answer): what a session does when its client leaves. */
static void *cancel_when_waiting(void *arg) {
  canceller *c = arg;
  pthread_mutex_lock(&c->peer->mu);
  while (!c->peer->heard_all)
    pthread_cond_wait(&c->peer->changed, &c->peer->mu);
  pthread_mutex_unlock(&c->peer->mu);
  atomic_store(&c->flag, 1);
  mr_chain_interrupt(c->h->chain);
  return NULL;
}

/* A session that ends while the step waits on a silent peer (timeouts of
 * ten minutes) ends the wait at once: the chain closes the link's channel,
 * nothing is polled. The flush then fails with MR_ECANCELED and no line of
 * the step's (the session is over: there is nobody to tell). */
static void test_a_cancel_ends_a_wait_on_the_peer(void **state) {
  (void)state;
  fake_peer p;
  start_fake_peer(&p, NEVER_ANSWERS);
  char entry[300];
  snprintf(entry, sizeof entry,
           "{\"gadget\":\"external\",\"connect\":\"127.0.0.1:%d\","
           "\"idle_timeout_ms\":600000,\"total_timeout_ms\":600000}",
           p.port);
  char *gadgets = chain_text(entry, 1);
  mr_harness h;
  canceller c = {.peer = &p, .h = &h};
  atomic_init(&c.flag, 0);
  assert_int_equal(mr_harness_open(&h, gadgets, MR_CHAIN_WIRE_INPUT), 0);
  assert_int_equal(mr_harness_set_pipelined(&h, DEPTH), 0);
  mr_harness_set_cancel(&h, &c.flag);
  int rc = mr_harness_configure(&h, mr_harness_cartesian_header(2 * N, N, 1, N, N, 1));
  for (int e1 = 0; rc == 0 && e1 < N; e1++)
    rc = mr_harness_push(&h, phantom_line(e1, 0));
  assert_int_equal(rc, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, cancel_when_waiting, &c), 0);
  assert_int_equal(mr_harness_flush(&h), MR_ECANCELED); /* sends CLOSE, waits, is cancelled */
  pthread_join(t, NULL);
  mr_harness_close(&h);
  free(gadgets);
  stop_fake_peer(&p);
}

/* What the peer sends counts against the memory budget while it waits to
 * be delivered: a 16 MiB answer beside an 8 MiB budget ends the step. */
static void test_a_peer_answer_over_the_budget(void **state) {
  (void)state;
  mr_budget_set(8u << 20);
  fake_peer_case(BIG_IMAGE, "", "memory budget");
  mr_budget_set(0);
  assert_int_equal(mr_budget_used(), 0); /* every reservation given back */
}

static void test_nobody_listening(void **state) {
  (void)state;
  fake_peer p;
  start_fake_peer(&p, NEVER_ANSWERS);
  int port = p.port;
  shutdown(p.listen_fd, SHUT_RDWR); /* its accept returns: nobody listens */
  stop_fake_peer(&p);
  char entry[200];
  snprintf(entry, sizeof entry, "{\"gadget\":\"external\",\"connect\":\"127.0.0.1:%d\"}", port);
  expect_failure(entry, "cannot connect");
}

/* A program of a scratch --external-dir made of a shell script. */
static const char *program_dir(const char *name, const char *script) {
  static char dir[512];
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("external"));
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s\n", script);
  fclose(f);
  chmod(path, 0755);
  assert_int_equal(mr_external_dir_set(dir, &(mr_err){0}), 0);
  return dir;
}

/* Fails naming the program's pid; once the chain is gone that process no
 * longer exists (killed and reaped). */
static void expect_program_failure(const char *extra, const char *why) {
  mr_harness h;
  char entry[300];
  snprintf(entry, sizeof entry, "{\"gadget\":\"external\",\"execute\":\"step\"%s}", extra);
  char *gadgets = chain_text(entry, 1);
  assert_true(run_phantom(&h, gadgets) < 0);
  if (strstr(h.err.msg, "'external'") == NULL || strstr(h.err.msg, why) == NULL)
    fail_msg("expected an error naming the step and '%s', got: %s", why, h.err.msg);
  const char *pid_at = strstr(h.err.msg, "(pid ");
  assert_non_null(pid_at);
  pid_t pid = (pid_t)atoi(pid_at + 5);
  mr_harness_close(&h);
  free(gadgets);
  assert_int_equal(kill(pid, 0), -1); /* neither running nor a zombie */
  assert_int_equal(errno, ESRCH);
}

static void test_program_crash_shows_its_stderr(void **state) {
  (void)state;
  program_dir("step", "echo 'step: out of cheese' >&2\nexit 3");
  expect_program_failure("", "exited with status 3; its last stderr line: step: out of cheese");
}

static void test_program_that_hangs_is_killed_and_reaped(void **state) {
  (void)state;
  program_dir("step", "exec sleep 60");
  expect_program_failure(",\"idle_timeout_ms\":300", "idle_timeout_ms");
}

/* A program whose child leaves its process group (setsid, as a daemon
 * would): killing the group misses that child, but it is inherited by
 * this process (the subreaper) when the program dies, found by its
 * environment's id, killed and reaped. */
static void test_a_program_that_leaves_a_daemon_behind(void **state) {
  (void)state;
  char pidfile[600], script[2048];
  snprintf(pidfile, sizeof pidfile, "%s/daemon.pid", mr_test_tmpdir("external-daemon"));
  unlink(pidfile);
  snprintf(script, sizeof script,
           "setsid sleep 60 </dev/null >/dev/null 2>&1 &\necho $! > %s.tmp\n"
           "mv %s.tmp %s\nexec sleep 60",
           pidfile, pidfile, pidfile);
  program_dir("step", script);
  expect_program_failure(",\"idle_timeout_ms\":300", "idle_timeout_ms");
  FILE *f = fopen(pidfile, "r");
  assert_non_null(f);
  int daemon = 0;
  assert_int_equal(fscanf(f, "%d", &daemon), 1);
  fclose(f);
  assert_true(daemon > 0);
  assert_int_equal(kill(daemon, 0), -1); /* neither running nor a zombie */
  assert_int_equal(errno, ESRCH);
}

/* A server that is SIGKILLed takes its programs with it (their
 * PR_SET_PDEATHSIG): a child process plays the server, starts a program
 * and is killed; the program dies of SIGKILL too (and, this process being
 * a subreaper, is reaped here). */
static void test_a_killed_server_takes_its_program_along(void **state) {
  (void)state;
  program_dir("step", "exec sleep 60");
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  pid_t server = fork();
  assert_true(server >= 0);
  if (server == 0) {
    mr_program p;
    int fd;
    if (mr_program_start("step", "", &p, &fd, &(mr_err){0}) < 0)
      _exit(1);
    ssize_t w = write(pipefd[1], &p.pid, sizeof p.pid);
    (void)w;
    pause();
    _exit(0);
  }
  pid_t program = 0;
  assert_int_equal(read(pipefd[0], &program, sizeof program), (ssize_t)sizeof program);
  close(pipefd[0]);
  close(pipefd[1]);
  kill(server, SIGKILL);
  assert_int_equal(waitpid(server, NULL, 0), server);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 300 && (got = waitpid(program, &status, WNOHANG)) == 0; i++)
    usleep(10000);
  if (got != program) {
    kill(program, SIGKILL); /* do not leave it behind */
    fail_msg("the program outlived its server by 3 s");
  }
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void test_program_answering_garbage(void **state) {
  (void)state;
  program_dir("step", "printf 'garbage!garbage!' >&3\nexec sleep 60");
  expect_program_failure("", "not the MRD protocol");
}

static void test_execute_refuses_names_outside_the_directory(void **state) {
  (void)state;
  program_dir("step", "exit 0");
  static const char *const names[][2] = {
      {"../step", "refused"}, {"/bin/sh", "refused"}, {"step/..", "refused"},
      {"..", "refused"},      {"", "exactly one"},    {"sh", "no executable program 'sh'"},
  };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char entry[200];
    snprintf(entry, sizeof entry, "{\"gadget\":\"external\",\"execute\":\"%s\"}", names[i][0]);
    expect_failure(entry, names[i][1]);
  }
}

static void test_execute_needs_an_external_dir(void **state) {
  (void)state;
  assert_int_equal(mr_external_dir_set(NULL, NULL), 0);
  expect_failure("{\"gadget\":\"external\",\"execute\":\"mrd_step.py\"}", "no --external-dir");
}

static void test_exactly_one_mode(void **state) {
  (void)state;
  expect_failure("{\"gadget\":\"external\"}", "exactly one of connect and execute");
  expect_failure("{\"gadget\":\"external\",\"connect\":\"a:1\",\"execute\":\"x\"}",
                 "exactly one of connect and execute");
}

/* Text parameters (MR_PARAM_TEXT): a string, shorter than its buffer. */
static void test_text_parameters_are_checked(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"external\",\"connect\":9020}]",
                                   MR_CHAIN_WIRE_INPUT),
                   MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "key 'connect': expected a string"));
  mr_harness_close(&h);
  char entry[400] = "[{\"gadget\":\"external\",\"execute\":\"";
  memset(entry + strlen(entry), 'x', 200); /* the name buffer holds 127 */
  strcat(entry, "\"}]");
  assert_int_equal(mr_harness_open(&h, entry, MR_CHAIN_WIRE_INPUT), MR_ECONFIG);
  assert_non_null(strstr(h.err.msg, "key 'execute': longer than 127 bytes"));
  mr_harness_close(&h);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(example_dir, sizeof example_dir, "%s/examples/external", mr_test_source_dir());
  const struct CMUnitTest misbehaving[] = {
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&dies_mid_scan),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&never_answers),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&takes_too_long),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&answers_garbage),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&floods_images),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&sends_a_kind_not_expected),
      cmocka_unit_test_prestate(test_misbehaving_peer, (void *)&closes_before_us),
      cmocka_unit_test(test_nobody_listening),
      cmocka_unit_test(test_a_cancel_ends_a_wait_on_the_peer),
      cmocka_unit_test(test_a_peer_answer_over_the_budget),
      cmocka_unit_test(test_program_crash_shows_its_stderr),
      cmocka_unit_test(test_program_that_hangs_is_killed_and_reaped),
      cmocka_unit_test(test_a_program_that_leaves_a_daemon_behind),
      cmocka_unit_test(test_a_killed_server_takes_its_program_along),
      cmocka_unit_test(test_program_answering_garbage),
      cmocka_unit_test(test_execute_refuses_names_outside_the_directory),
      cmocka_unit_test(test_execute_needs_an_external_dir),
      cmocka_unit_test(test_exactly_one_mode),
      cmocka_unit_test(test_text_parameters_are_checked),
  };
  int failed = cmocka_run_group_tests_name("external: misbehaving peers", misbehaving, NULL, NULL);
  if (!mr_test_have_tool("python3")) {
    printf("skipped: the example step needs python3\n");
    return failed;
  }
  const struct CMUnitTest example[] = {
      cmocka_unit_test(test_execute_recon_matches_our_chain),
      cmocka_unit_test(test_connect_recon_matches_our_chain),
      cmocka_unit_test(test_images_post_processed_in_both_modes),
      cmocka_unit_test(test_answers_flow_without_more_input),
  };
  return failed + cmocka_run_group_tests_name("external: the example step", example, NULL, NULL);
}
