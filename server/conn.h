/* One client connection, the loop-thread side: moves bytes between the
 * socket and the session's inbox / outbox, and closes in the order the
 * protocol wants (our CLOSE written, write side shut, the peer's EOF or a
 * grace period, then the socket closed). Never runs math, never blocks. */
#ifndef MR_SERVER_CONN_H
#define MR_SERVER_CONN_H

#include <uv.h>

#include "conn_host.h"

/* Serves the accepted socket fd (takes it) on host's loop. When the
 * server is at --max-connections the client is told so (TEXT, CLOSE) and
 * let go. Any connected stream socket will do, and the connection sees of
 * the server only its host (conn_host.h), so tests/server/test_server_conn.c
 * serves one end of a socketpair from a hand-filled host. */
void mr_conn_accept(mr_conn_host *host, int fd);

/* Ends every connection's session early (server shutting down past its
 * deadline): each pipeline stops at its next message (an iterative solve
 * at its next iteration); a connection that has answered and only waits
 * for the client's EOF closes at once. */
void mr_conn_cancel_all(mr_conn_host *host);

#endif
