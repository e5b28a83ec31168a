/* The daemon: the main libuv loop listens, accepts and hands each accepted
 * socket to one of --loops loop threads (loops.h), each of which serves its
 * connections with a mr_server of its own (its uv loop, its connection
 * list); SIGTERM / SIGINT stop accepting and let running scans finish
 * within a deadline. --max-connections is counted server-wide. */
#ifndef MR_SERVER_SERVER_H
#define MR_SERVER_SERVER_H

#include <stdatomic.h>
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
  int loops;               /* loop threads serving connections (>= 1) */
  const char *warm_dir;    /* recorded sessions to replay before ready (warm.h), or NULL */
} mr_server_options;

struct mr_loops;

/* The acceptor (the main loop). The loop threads (loops.c) serve its
 * connections, each through a mr_conn_host of its own (conn_host.h). */
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
  /* Connections served and not yet answered in full, server-wide. Taken
   * and given back with mr_server_admit / mr_server_release. */
  atomic_int nopen;
  struct mr_loops *loops; /* the loop threads */
  int stopping;
} mr_server;

/* Listens on opt->listen and serves until SIGTERM / SIGINT and the drain
 * that follows; returns 0 then, or an error (err says which) when it could
 * not start. Borrows env. */
int mr_server_run(const mr_server_options *opt, const mr_server_env *env, mr_err *err);

/* A slot under --max-connections for a new connection: 1 when taken, 0
 * when the server is full. Any thread. */
int mr_server_admit(mr_server *server);
/* Gives a slot back. */
void mr_server_release(mr_server *server);
/* Connections holding a slot now. */
int mr_server_open_count(const mr_server *server);

#endif
