/* The external gadget's connection to its peer: one socket that speaks the
 * client side of the wire protocol (protocol/encode, protocol/decode), a
 * writer thread fed by a bounded send queue and a reader thread that fills
 * a bounded receive queue (both base/ channels), so both directions flow
 * at once: a peer that answers before it has read everything never
 * deadlocks against us.
 *
 * The gadget's thread waits on one channel (mr_link_channel), up to the
 * nearer of the idle and total timeouts: what the peer sends, room to
 * send, a failed connection, or the channel's close wakes it. The chain
 * closes that channel when the session stops (mr_gadget_close_on_stop), so
 * the gadget never holds a session's end and nothing is polled. */
#ifndef MR_GADGETS_EXTERNAL_LINK_H
#define MR_GADGETS_EXTERNAL_LINK_H

#include <stddef.h>

#include "channel.h"
#include "error.h"
#include "message.h"

typedef struct mr_link mr_link;

typedef struct mr_link_opts {
  size_t depth;       /* messages each queue holds */
  int idle_ms;        /* waiting on the peer with no byte moving either way */
  int total_ms;       /* from start to the peer's CLOSE */
  const char *peer;   /* how errors name the peer ("127.0.0.1:9020", "program x (pid 12)") */
  /* Called from the link's threads, never blocking, when a message from
   * the peer is queued or the connection failed (may be NULL): the owner
   * then calls mr_link_poll() on its own thread. */
  void (*notify)(void *ctx);
  void *notify_ctx;
} mr_link_opts;

/* Receives what the peer sent, on the waiting thread (takes msg). A
 * negative return ends the exchange with that code. */
typedef int (*mr_link_deliver)(void *ctx, mr_message *msg);

/* Starts the threads on a connected socket (takes fd; opts->peer is
 * copied). */
int mr_link_start(int fd, const mr_link_opts *opts, mr_link **out, mr_err *err);

/* The channel the waiting thread waits on: once it is closed (by the
 * chain, mr_gadget_close_on_stop) every wait of the link ends at once with
 * MR_ECANCELED. Valid until mr_link_stop(). */
mr_chan *mr_link_channel(mr_link *l);

/* Queues msg for the peer (takes it), waiting while the send queue is full;
 * whatever the peer sent meanwhile, and before, is delivered first. */
int mr_link_send(mr_link *l, mr_message *msg, mr_link_deliver deliver, void *ctx, mr_err *err);

/* Delivers what the peer has sent so far, without waiting; reports a
 * failed connection, or a CLOSE from the peer before ours. */
int mr_link_poll(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err);

/* Delivers what the peer sends until its CLOSE (after our CLOSE went out). */
int mr_link_finish(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err);

/* Stops the threads (the socket is shut down at once), drops what is
 * queued and frees l (NULL is fine). */
void mr_link_stop(mr_link *l);

#endif
