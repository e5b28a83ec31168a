/* The daemon: a libuv loop that listens, accepts, and keeps the list of
 * live connections; SIGTERM / SIGINT stop accepting and let running scans
 * finish within a deadline. */
#ifndef MR_SERVER_SERVER_H
#define MR_SERVER_SERVER_H

#include <stddef.h>

#include <uv.h>

#include "session.h"

typedef struct mr_server_options {
  const char *listen;      /* "ADDR:PORT"; IPv4 or [IPv6]:PORT */
  int max_connections;
  int drain_timeout_ms;    /* after SIGTERM, before running sessions are cut */
  int close_grace_ms;      /* after our CLOSE, waiting for the peer's EOF */
  int write_timeout_ms;    /* a client that reads none of our output that long is dropped */
  const char *http;        /* "ADDR:PORT" of the health and metrics listener, or NULL */
} mr_server_options;

typedef struct mr_server {
  uv_loop_t *loop;
  int listen_fd;
  uv_poll_t listener;   /* readable: connections to accept (server.c accepts them) */
  uv_timer_t accept_pause; /* out of descriptors with none in reserve: wait, then accept again */
  int reserve_fd;       /* held so that one can be freed to turn a client away when out of them */
  uint64_t fd_report_ms;   /* the last "out of file descriptors" record */
  unsigned fd_turned_away; /* since then */
  uv_signal_t sigterm, sigint;
  uv_timer_t drain_timer;
  mr_server_options opt;
  const mr_server_env *env;
  struct mr_conn *conns; /* live connections (conn.c owns the list) */
  int nconns;            /* in the list: until their sockets are closed */
  int nopen;             /* of those, served (not refused): what --max-connections bounds */
  int stopping;
} mr_server;

/* Listens on opt->listen and serves until SIGTERM / SIGINT and the drain
 * that follows; returns 0 then, or an error (err says which) when it could
 * not start. Borrows env. */
int mr_server_run(const mr_server_options *opt, const mr_server_env *env, mr_err *err);

/* Called by conn.c when a connection is gone, so that a stopping server
 * can end once the last one is. */
void mr_server_conn_closed(mr_server *server);

#endif
