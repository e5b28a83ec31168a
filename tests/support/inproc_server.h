/* reconserver's connections in this process: a loop thread of its own
 * serving, through a mr_conn_host (server/conn_host.h), one end of a
 * socketpair per client, with the server's defaults (the source tree's
 * configs, a CPU pool). A blocking client (wire_client.h) talks to the
 * other end as it would to a spawned server, without the fork, the port
 * or the start-up wait: what a test needs a process for (signals, --http,
 * RSS, descriptors) is left to mr_test_server_start. */
#ifndef MR_TEST_INPROC_SERVER_H
#define MR_TEST_INPROC_SERVER_H

#include <stdatomic.h>

#include <uv.h>

#include "config_dir.h"
#include "conn_host.h"
#include "pool.h"
#include "wire_limits.h"

typedef struct mr_inproc_server {
  /* The server's settings: change them between init and start. */
  mr_server_env env;
  mr_limits limits;
  mr_conn_host host;
  /* Its own. */
  mr_config_dir configs;
  mr_pool *pool;
  uv_loop_t loop;
  uv_async_t wake;
  uv_thread_t thread;
  uv_mutex_t lock; /* fds, nfds, stop */
  int fds[64], nfds;
  int stop;     /* asked to stop */
  int stopping; /* the loop thread knows: it ends with its last connection */
  atomic_int nopen;
} mr_inproc_server;

/* The defaults of reconserver (max connections 64, grace 5 s, ...). */
void mr_inproc_server_init(mr_inproc_server *s);
void mr_inproc_server_start(mr_inproc_server *s);
/* A new client: the server serves one end, the caller gets the other (a
 * blocking stream socket; the caller closes it). */
int mr_inproc_server_connect(mr_inproc_server *s);
/* Waits until every connection is gone (the clients must have closed or
 * be closing theirs), then frees everything. */
void mr_inproc_server_stop(mr_inproc_server *s);

#endif
