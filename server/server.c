#include "server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "log.h"

/* "127.0.0.1:9002", "[::1]:9002", "0.0.0.0:9002" -> sockaddr. */
static int parse_listen(const char *spec, struct sockaddr_storage *ss, mr_err *err) {
  char host[128];
  const char *colon = strrchr(spec, ':');
  if (colon == NULL || colon[1] == '\0')
    return mr_err_set(err, MR_EINVAL, "--listen '%s': expected ADDR:PORT", spec);
  size_t hl = (size_t)(colon - spec);
  if (hl >= sizeof host)
    return mr_err_set(err, MR_EINVAL, "--listen '%s': address too long", spec);
  memcpy(host, spec, hl);
  host[hl] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    return mr_err_set(err, MR_EINVAL, "--listen '%s': port must be 0..65535", spec);
  if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
    host[hl - 1] = '\0';
    if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss) == 0)
      return 0;
  } else if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0) {
    return 0;
  }
  return mr_err_set(err, MR_EINVAL, "--listen '%s': '%s' is not an IP address", spec, host);
}

static void on_connection(uv_stream_t *listener, int status) {
  mr_server *server = listener->data;
  if (status < 0) {
    mr_log(MR_LOG_WARN, "accept failed: %s", uv_strerror(status));
    return;
  }
  if (server->stopping)
    return;
  mr_conn_accept(server);
}

static void close_signals(mr_server *server) {
  if (!uv_is_closing((uv_handle_t *)&server->sigterm)) {
    uv_close((uv_handle_t *)&server->sigterm, NULL);
    uv_close((uv_handle_t *)&server->sigint, NULL);
    uv_close((uv_handle_t *)&server->drain_timer, NULL);
  }
}

void mr_server_conn_closed(mr_server *server) {
  server->nconns--;
  if (server->stopping && server->nconns == 0)
    close_signals(server); /* the loop ends when nothing is left open */
}

static void on_drain_deadline(uv_timer_t *t) {
  mr_server *server = t->data;
  mr_log(MR_LOG_WARN, "drain deadline passed: cutting %d session(s)", server->nconns);
  mr_conn_cancel_all(server);
}

static void on_signal(uv_signal_t *sig, int signum) {
  mr_server *server = sig->data;
  if (server->stopping) {
    mr_log(MR_LOG_WARN, "second %s: cutting running sessions now", strsignal(signum));
    on_drain_deadline(&server->drain_timer);
    return;
  }
  server->stopping = 1;
  mr_log(MR_LOG_INFO, "%s: no new connections; %d session(s) may finish within %d ms",
         strsignal(signum), server->nconns, server->opt.drain_timeout_ms);
  uv_close((uv_handle_t *)&server->listener, NULL);
  if (server->nconns == 0) {
    close_signals(server);
    return;
  }
  uv_timer_start(&server->drain_timer, on_drain_deadline, (uint64_t)server->opt.drain_timeout_ms,
                 0);
}

int mr_server_run(const mr_server_options *opt, const mr_server_env *env, mr_err *err) {
  mr_server server = {.opt = *opt, .env = env};
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  int rc = parse_listen(opt->listen, &addr, err);
  if (rc < 0)
    return rc;
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
  uv_tcp_init(&loop, &server.listener);
  server.listener.data = &server;
  int uvrc = uv_tcp_bind(&server.listener, (const struct sockaddr *)&addr, 0);
  if (uvrc == 0)
    uvrc = uv_listen((uv_stream_t *)&server.listener, 128, on_connection);
  if (uvrc != 0) {
    rc = mr_err_set(err, MR_EIO, "cannot listen on %s: %s", opt->listen, uv_strerror(uvrc));
    uv_close((uv_handle_t *)&server.listener, NULL);
    close_signals(&server);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc;
  }
  char bound[128] = "";
  struct sockaddr_storage name;
  int len = sizeof name;
  if (uv_tcp_getsockname(&server.listener, (struct sockaddr *)&name, &len) == 0) {
    char host[64] = "";
    int port = 0;
    if (name.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&name, host, sizeof host);
      port = ntohs(((struct sockaddr_in6 *)&name)->sin6_port);
      snprintf(bound, sizeof bound, "[%s]:%d", host, port);
    } else {
      uv_ip4_name((struct sockaddr_in *)&name, host, sizeof host);
      port = ntohs(((struct sockaddr_in *)&name)->sin_port);
      snprintf(bound, sizeof bound, "%s:%d", host, port);
    }
  }
  mr_log(MR_LOG_INFO, "reconserver %s listening on %s (%d configs, max %d connections)",
         env->version, bound, env->configs->n, opt->max_connections);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  mr_log(MR_LOG_INFO, "reconserver stopped");
  return 0;
}
