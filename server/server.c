#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "conn.h"
#include "http.h"
#include "encode.h"
#include "log.h"
#include "loops.h"
#include "metrics.h"
#include "pool.h"
#include "warm.h"

/* How often running out of file descriptors is logged, at most. */
#define FD_REPORT_MS 10000
/* Out of descriptors with none held in reserve: accepting pauses this long. */
#define ACCEPT_PAUSE_MS 200

/* Out of file descriptors (EMFILE / ENFILE): the pending client would
 * wait in the backlog with nobody to serve it. The reserve descriptor is
 * given up to accept it, tell it why (TEXT, CLOSE) and let it go, then
 * taken again; the log says so, at most every FD_REPORT_MS. Returns 0 when
 * a client was turned away, -1 when there was no descriptor to do it. */
static int turn_away_one(mr_server *server, int why) {
  uint64_t now = uv_now(server->loop);
  server->fd_turned_away++;
  if (server->fd_report_ms == 0 || now - server->fd_report_ms >= FD_REPORT_MS) {
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    mr_log(MR_LOG_ERROR,
           "out of file descriptors (%s; open files limit %llu): %u connection(s) turned away",
           strerror(why), (unsigned long long)rl.rlim_cur, server->fd_turned_away);
    server->fd_report_ms = now;
    server->fd_turned_away = 0;
  }
  if (server->reserve_fd < 0)
    return -1;
  close(server->reserve_fd);
  server->reserve_fd = -1;
  int fd = accept4(server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    static const char text[] = "ERROR: server out of file descriptors; try again later";
    mr_message *msgs[2] = {mr_message_new_text(MR_MSG_TEXT, text, sizeof text - 1),
                           mr_message_new(MR_MSG_CLOSE)};
    for (int i = 0; i < 2; i++) {
      uint8_t *bytes;
      size_t len;
      if (msgs[i] != NULL && mr_encode_flat(msgs[i], &bytes, &len) == 0) {
        ssize_t sent = send(fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)sent; /* best effort: the client is turned away either way */
        free(bytes);
      }
      mr_message_unref(msgs[i]);
    }
    close(fd);
  }
  server->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd >= 0 ? 0 : -1;
}

static void on_listen_readable(uv_poll_t *poll, int status, int events);

static void on_accept_pause_end(uv_timer_t *t) {
  mr_server *server = t->data;
  if (!server->stopping)
    uv_poll_start(&server->listener, UV_READABLE, on_listen_readable);
}

static void on_listen_readable(uv_poll_t *poll, int status, int events) {
  (void)events;
  mr_server *server = poll->data;
  if (status < 0) {
    mr_log(MR_LOG_WARN, "accept failed: %s", uv_strerror(status));
    return;
  }
  while (!server->stopping) {
    int fd = accept4(server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      mr_loops_hand(server->loops, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    if ((errno == EMFILE || errno == ENFILE) && turn_away_one(server, errno) == 0)
      continue;
    if (errno == EMFILE || errno == ENFILE) {
      /* Nothing to turn a client away with: do not spin on the backlog. */
      uv_poll_stop(&server->listener);
      uv_timer_start(&server->accept_pause, on_accept_pause_end, ACCEPT_PAUSE_MS, 0);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      mr_log(MR_LOG_WARN, "accept failed: %s", strerror(errno));
    }
    return;
  }
}

static void close_signals(mr_server *server) {
  if (!uv_is_closing((uv_handle_t *)&server->sigterm)) {
    uv_close((uv_handle_t *)&server->sigterm, NULL);
    uv_close((uv_handle_t *)&server->sigint, NULL);
    uv_close((uv_handle_t *)&server->drain_timer, NULL);
  }
}

static void on_listener_closed(uv_handle_t *h) {
  mr_server *server = h->data;
  close(server->listen_fd);
  server->listen_fd = -1;
}

/* No new connections: the listening socket and the accept pause go. */
static void stop_listening(mr_server *server) {
  uv_close((uv_handle_t *)&server->accept_pause, NULL);
  uv_close((uv_handle_t *)&server->listener, on_listener_closed);
}

int mr_server_admit(mr_server *server) {
  /* Taken first, then checked: two loops at the last slot cannot both
   * have it. */
  if (atomic_fetch_add(&server->nopen, 1) < server->opt.max_connections)
    return 1;
  atomic_fetch_sub(&server->nopen, 1);
  return 0;
}

void mr_server_release(mr_server *server) { atomic_fetch_sub(&server->nopen, 1); }

int mr_server_open_count(const mr_server *server) { return atomic_load(&server->nopen); }

/* Every loop thread has ended: the acceptor's loop may end too. */
static void on_loops_ended(mr_server *server) { close_signals(server); }

static void on_drain_deadline(uv_timer_t *t) {
  mr_server *server = t->data;
  mr_log(MR_LOG_WARN, "drain deadline passed: cutting what is left of %d session(s)",
         mr_server_open_count(server));
  mr_loops_cut(server->loops);
}

static void on_signal(uv_signal_t *sig, int signum) {
  mr_server *server = sig->data;
  if (server->stopping) {
    mr_log(MR_LOG_WARN, "second %s: cutting running sessions now", strsignal(signum));
    on_drain_deadline(&server->drain_timer);
    return;
  }
  server->stopping = 1;
  mr_metrics_set_state(MR_STATE_DRAINING);
  mr_log(MR_LOG_INFO, "%s: no new connections; %d session(s) may finish within %d ms",
         strsignal(signum), mr_server_open_count(server), server->opt.drain_timeout_ms);
  stop_listening(server);
  /* Each loop ends once its connections are gone; when all have,
   * on_loops_ended closes what keeps this loop running. */
  mr_loops_stop(server->loops);
  uv_timer_start(&server->drain_timer, on_drain_deadline, (uint64_t)server->opt.drain_timeout_ms,
                 0);
}

int mr_server_run(const mr_server_options *opt, const mr_server_env *env, mr_err *err) {
  mr_server server = {.opt = *opt, .env = env};
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  int rc = mr_addr_parse("--listen", opt->listen, &addr, err);
  if (rc < 0)
    return rc;
  mr_metrics_init(env->configs, opt->max_connections);
  /* The health and metrics listener first: it says "starting" until the
   * protocol port listens, and goes last, so that a drain is seen. */
  mr_http *http = NULL;
  if (opt->http != NULL) {
    if ((rc = mr_http_start(opt->http, env->pool, &http, err)) < 0)
      return rc;
    mr_log(MR_LOG_INFO, "health and metrics on http://%s (/healthz, /readyz, /metrics)",
           mr_http_address(http));
  }
  /* A client that vanishes mid-write must cost an EPIPE, not the server. */
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  server.loop = &loop;
  /* Signals first: a client that can connect must find a server that
   * drains on SIGTERM, never one the default action kills. */
  uv_signal_init(&loop, &server.sigterm);
  uv_signal_init(&loop, &server.sigint);
  uv_timer_init(&loop, &server.drain_timer);
  server.sigterm.data = server.sigint.data = server.drain_timer.data = &server;
  uv_signal_start(&server.sigterm, on_signal, SIGTERM);
  uv_signal_start(&server.sigint, on_signal, SIGINT);
  /* The loop threads that will serve what is accepted. */
  if ((rc = mr_loops_start(&server, opt->loops, on_loops_ended, err)) < 0) {
    close_signals(&server);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    mr_http_stop(http);
    return rc;
  }
  /* Our own listening socket, so that accept's EMFILE reaches us (libuv
   * would turn such clients away silently). */
  server.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  server.listen_fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  int ok = server.listen_fd >= 0 &&
           setsockopt(server.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
           bind(server.listen_fd, (const struct sockaddr *)&addr,
                addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in)) == 0 &&
           listen(server.listen_fd, 128) == 0;
  int why = errno;
  uv_timer_init(&loop, &server.accept_pause);
  server.accept_pause.data = &server;
  if (!ok || uv_poll_init_socket(&loop, &server.listener, server.listen_fd) != 0) {
    rc = mr_err_set(err, MR_EIO, "cannot listen on %s: %s", opt->listen, strerror(why));
    if (server.listen_fd >= 0)
      close(server.listen_fd);
    if (server.reserve_fd >= 0)
      close(server.reserve_fd);
    uv_close((uv_handle_t *)&server.accept_pause, NULL);
    /* The loops end at once (no connections), then the signals close. */
    mr_loops_stop(server.loops);
    uv_run(&loop, UV_RUN_DEFAULT);
    mr_loops_join(server.loops);
    uv_loop_close(&loop);
    mr_http_stop(http);
    return rc;
  }
  server.listener.data = &server;
  uv_poll_start(&server.listener, UV_READABLE, on_listen_readable);
  char bound[128] = "";
  struct sockaddr_storage name = addr; /* getsockname fills in the port */
  socklen_t len = sizeof name;
  if (getsockname(server.listen_fd, (struct sockaddr *)&name, &len) == 0)
    mr_addr_format(&name, bound, sizeof bound);
  mr_log(MR_LOG_INFO,
         "reconserver %s listening on %s (%d configs, max %d connections, %d loop thread%s)",
         env->version, bound, env->configs->n, opt->max_connections, opt->loops,
         opt->loops == 1 ? "" : "s");
  /* Ready at once, or once the warm-up has prepared what the recorded
   * sessions need: one copy per GPU at a time, so each GPU gets one. */
  mr_warm *warm = NULL;
  if (opt->warm_dir != NULL) {
    int gpus = env->pool != NULL ? mr_pool_gpu_count(env->pool) : 0;
    mr_metrics_set_state(MR_STATE_WARMING);
    warm = mr_warm_start(opt->warm_dir, &name, gpus > 0 ? gpus : 1);
  }
  if (warm == NULL)
    mr_metrics_set_state(MR_STATE_ACCEPTING);
  uv_run(&loop, UV_RUN_DEFAULT);
  mr_warm_join(warm); /* its sessions ended with the drain */
  /* Drained: the loop ended because the signal handles closed, and libuv
   * gave SIGTERM and SIGINT back their default action, which would turn a
   * late second signal (an orchestrator repeating itself) into a kill
   * while the rest shuts down (the GPU lanes' teardown takes a while).
   * The loop's last iteration, between the handles' closing and here,
   * stays such a window. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  mr_loops_join(server.loops); /* every one has ended: on_loops_ended */
  uv_loop_close(&loop);
  mr_http_stop(http);
  if (server.reserve_fd >= 0)
    close(server.reserve_fd);
  mr_log(MR_LOG_INFO, "reconserver stopped");
  return 0;
}
