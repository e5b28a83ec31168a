/* The client's TCP connection: blocking-style reads and writes on a
 * non-blocking socket, bounded by one timeout that measures the server's
 * silence.
 *
 * One thread writes while another reads (the link is full duplex). The
 * timeout runs from the last byte moved in either direction, so a reader
 * waiting for the first image does not time out while the writer is still
 * streaming acquisitions, and a writer blocked by a server that stopped
 * reading gives up after the same time. */
#ifndef MR_CLIENT_NET_H
#define MR_CLIENT_NET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "encode.h"
#include "error.h"

typedef struct mr_net {
  int fd;
  int timeout_ms;            /* allowed silence; <= 0: wait forever */
  atomic_int_least64_t last; /* ms (monotonic) when bytes last moved */
  char peer[320];            /* "host:port", for messages */
} mr_net;

/* Resolves host (a name or an IPv4/IPv6 address) and connects to the first
 * address that answers within timeout_ms. Fails with MR_ECONN and a line
 * naming host, port and the reason. */
int mr_net_connect(mr_net *net, const char *host, int port, int timeout_ms, mr_err *err);

/* Writes every byte of the n pieces (borrowed). MR_ECONN when the server
 * closed or reset the connection, MR_ETIMEDOUT after timeout_ms of silence. */
int mr_net_write(mr_net *net, const mr_piece *pieces, int n, mr_err *err);

/* Reads up to cap bytes into buf; *got = 0 means the server closed its end.
 * MR_ECONN on a reset, MR_ETIMEDOUT after timeout_ms of silence. */
int mr_net_read(mr_net *net, void *buf, size_t cap, size_t *got, mr_err *err);

/* Makes reads and writes in other threads return at once (with MR_ECONN). */
void mr_net_shutdown(mr_net *net);

void mr_net_close(mr_net *net);

/* Monotonic clock in milliseconds (base/clock.h), signed for the client's deadline arithmetic. */
int64_t mr_net_now_ms(void);

#endif
