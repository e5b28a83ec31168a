/* What a connection (conn.c) needs of the server that serves it, and all it
 * sees of it: its loop, the settings and the shared environment, the list
 * of the loop's connections, and the server-wide slots under
 * --max-connections. Each loop thread (loops.c) fills one; so does
 * tests/server/test_server_conn.c, by hand, to drive the real connection
 * over a socketpair without a server. */
#ifndef MR_SERVER_CONN_HOST_H
#define MR_SERVER_CONN_HOST_H

#include <uv.h>

#include "session.h"

struct mr_conn;

typedef struct mr_conn_host {
  uv_loop_t *loop;
  const mr_server_env *env;
  int max_connections;  /* for the "server busy" line */
  int drain_timeout_ms; /* for the line of a session the drain deadline cut */
  int close_grace_ms;   /* after our CLOSE, waiting for the peer's EOF */
  int write_timeout_ms; /* a client that reads none of our output that long is dropped */
  struct mr_conn *conns; /* live connections, newest first (conn.c owns the list) */
  int nconns;            /* in the list: until their sockets are closed */
  /* A slot under --max-connections (any thread, server-wide): admit says
   * 1 when it took one, 0 when the server is full. */
  int (*admit)(void *ctx);
  void (*release)(void *ctx);
  int (*open_count)(void *ctx); /* slots held now */
  /* A connection is gone (already out of the list): a stopping loop may
   * end once nconns is 0. May be NULL. */
  void (*closed)(void *ctx);
  void *ctx;
} mr_conn_host;

#endif
