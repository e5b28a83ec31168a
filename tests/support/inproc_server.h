/* reconserver's loop threads in this process (server/loops.h: sockets
 * handed to a loop thread, each served through a mr_conn_host), with the
 * server's defaults (the source tree's configs, a CPU pool), serving one
 * end of a socketpair per client. A blocking client (wire_client.h) talks
 * to the other end as it would to a spawned server, without the fork, the
 * port or the start-up wait: what a test needs a process for (signals,
 * --http, RSS, descriptors, a restart) is left to mr_test_server_start.
 * One at a time in a process: start sets the process's metrics (their
 * config names point into this server's configs, freed by stop) and the
 * log level, which a second server's start would reset under the first's
 * threads. */
#ifndef MR_TEST_INPROC_SERVER_H
#define MR_TEST_INPROC_SERVER_H

#include <uv.h>

#include "config_dir.h"
#include "pool.h"
#include "server.h"
#include "wire_limits.h"

typedef struct mr_inproc_server {
  /* The server's settings: change them between init and start. */
  mr_server_env env;
  mr_limits limits;
  mr_server_options opt;
  /* Its own. */
  mr_config_dir configs;
  mr_pool *pool;
  uv_loop_t acceptor_loop; /* never run but to close what the loops leave */
  mr_server acceptor;
} mr_inproc_server;

/* reconserver's defaults (server/main.c), one loop thread. */
void mr_inproc_server_init(mr_inproc_server *s);
void mr_inproc_server_start(mr_inproc_server *s);
/* A new client: a loop thread serves one end, the caller gets the other (a
 * blocking stream socket; the caller closes it). From one thread. */
int mr_inproc_server_connect(mr_inproc_server *s);
/* Stops the loop threads, returning once every connection is gone (the
 * clients must have closed theirs, or be about to), and frees everything. */
void mr_inproc_server_stop(mr_inproc_server *s);

#endif
