/* One client connection, the loop-thread side: moves bytes between the
 * socket and the session's inbox / outbox, and closes in the order the
 * protocol wants (our CLOSE written, write side shut, the peer's EOF or a
 * grace period, then the socket closed). Never runs math, never blocks. */
#ifndef MR_SERVER_CONN_H
#define MR_SERVER_CONN_H

#include <uv.h>

struct mr_server;

/* Serves the accepted socket fd (takes it). When the server is at
 * --max-connections the client is told so (TEXT, CLOSE) and let go. Any
 * connected stream socket will do, and of the server only its loop, opt,
 * env, counts and connection list are used (and, once it is stopping, its
 * signal handles: mr_server_conn_closed), so tests/server/test_server_conn.c
 * serves one end of a socketpair from a hand-built mr_server. */
void mr_conn_accept(struct mr_server *server, int fd);

/* Ends every connection's session early (server shutting down past its
 * deadline): each pipeline stops at its next message (an iterative solve
 * at its next iteration); a connection that has answered and only waits
 * for the client's EOF closes at once. */
void mr_conn_cancel_all(struct mr_server *server);

#endif
