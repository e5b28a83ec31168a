/* What a connection's two channels carry between its loop thread and its
 * session thread (base/channel.h: the inbox, which the loop fills, and the
 * outbox, which it drains): a message, or an event without one (an error
 * the decoder reported, the peer going away), each counting the memory it
 * holds against the channel's bound of bytes (half of connection_bytes
 * each). The bound is the backpressure: the session thread writing images
 * waits for room; the loop thread, which must never block, puts anyway,
 * sees the inbox full and stops reading its socket until it is told of
 * room (mr_chan_pause, on_room). */
#ifndef MR_SERVER_ENVELOPE_H
#define MR_SERVER_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "message.h"

typedef struct mr_envelope {
  mr_message *msg; /* owned; NULL for events */
  int code;        /* an event's MR_E* code; 0 for messages */
  char *text;      /* an event's description (owned) */
} mr_envelope;

/* A channel of envelopes holding up to `bytes`; count (may be NULL) is
 * told every change of what it holds (the server's metrics), on_item and
 * on_room as in mr_chan_opts. What is left when it is freed is freed with
 * it. */
int mr_envelope_channel(size_t bytes, void (*count)(int64_t delta), void (*on_item)(void *),
                        void (*on_room)(void *), void *hook_ctx, mr_chan **out);

/* Queues msg (takes it, also on failure) counting mr_envelope_bytes(msg):
 * with wait, waiting while the channel is full (the session thread);
 * without, at once whatever it holds (the loop thread, which looks at
 * mr_chan_full itself). MR_ECANCELED once the channel is closed. */
int mr_envelope_send(mr_chan *ch, mr_message *msg, int wait);
/* Queues an event (a copy of text) without waiting. It counts like a
 * message (MR_ENVELOPE_OVERHEAD plus its text): a flood of rejected
 * messages fills the inbox and stops the reading like any other backlog. */
int mr_envelope_send_event(mr_chan *ch, int code, const char *text);
/* Frees what a popped envelope holds (its message, if still there). */
void mr_envelope_clear(mr_envelope *e);

/* What a queued message holds besides its payload: the message struct,
 * its envelope and channel slot, the write request that sends an answer
 * (conn.c checks that this covers them) and the allocator's headers. A
 * 46-byte QUERY holds some 2 KiB: counting wire bytes would let a flood of
 * small messages hold many times the bound. */
#define MR_ENVELOPE_OVERHEAD 2560

/* What a message counts against a channel: its payload plus
 * MR_ENVELOPE_OVERHEAD. */
size_t mr_envelope_bytes(const mr_message *msg);

#endif
