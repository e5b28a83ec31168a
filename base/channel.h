/* A bounded channel between threads: items of one fixed size, copied in
 * and out in order, bounded by their number, by the bytes they stand for,
 * or both. The one queue of the project: a connection's inbox and outbox
 * (server/), the inboxes of a pipelined chain's stages and the two
 * directions of the external step's link to its peer (gadgets/).
 *
 * The bound is what gives backpressure, in one of two ways:
 *   - a producer that may block (a pipeline thread writing images) waits
 *     in mr_chan_push() while the channel is full;
 *   - a producer that must never block (a libuv loop thread) puts anyway
 *     (mr_chan_put), sees mr_chan_full(), stops its source, says so with
 *     mr_chan_pause() and is called back (on_room) once, when the channel
 *     has drained to half.
 * A consumer that must never block (the loop again) is called back
 * (on_item) after every push and at close; its hook typically does
 * uv_async_send(), as libuv's own cross-thread wake does.
 *
 * Closing wakes every waiter: pushes then fail, pops drain what is left
 * and then fail at once. Closing is how a waiting thread is cancelled:
 * nobody polls a flag.
 *
 * An item's bytes count from its push until mr_chan_release(), not until
 * its pop: an answer popped by the loop thread still holds its memory
 * until the socket has written it. A consumer whose items hold nothing
 * after the pop releases at once (or pushes them with 0 bytes). */
#ifndef MR_BASE_CHANNEL_H
#define MR_BASE_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct mr_chan mr_chan;

typedef struct mr_chan_opts {
  size_t item_size; /* bytes of one item (copied in and out), > 0 */
  size_t max_items; /* full at this many queued items; 0: no bound by number */
  size_t max_bytes; /* full at this many bytes held; 0: no bound by bytes */
  /* Each hook may be NULL. on_item and on_room run on the thread that made
   * the change, after the channel's lock is let go: they must not block.
   * count runs under the lock: it must not call the channel. */
  void (*on_item)(void *ctx); /* an item was queued, or the channel closed */
  void (*on_room)(void *ctx); /* a paused producer may go on (mr_chan_pause) */
  void *hook_ctx;
  void (*count)(int64_t delta); /* every change of the bytes held (metrics) */
  /* Frees an item still queued when the channel is freed (NULL: nothing
   * to free). */
  void (*drop)(void *item);
} mr_chan_opts;

/* MR_ENOMEM or 0. */
int mr_chan_create(const mr_chan_opts *opts, mr_chan **out);
/* Drops what is still queued (opts.drop) and counts out every byte still
 * held. No thread may use ch any more. NULL is fine. */
void mr_chan_free(mr_chan *ch);

/* Appends a copy of item, counting `bytes`, waiting while the channel is
 * full: timeout_ms < 0 without end, 0 not at all. On failure item was not
 * taken (the caller still owns what it points to): MR_ETIMEDOUT (still
 * full), MR_ECANCELED (closed), MR_ENOMEM. */
int mr_chan_push(mr_chan *ch, const void *item, size_t bytes, int timeout_ms);
/* Appends without waiting, over the bound if need be: the producer that
 * must never block, which looks at mr_chan_full() itself. MR_ECANCELED
 * (closed), MR_ENOMEM or 0. */
int mr_chan_put(mr_chan *ch, const void *item, size_t bytes);

/* Takes the first item into *item (and its bytes into *bytes, may be
 * NULL), waiting up to timeout_ms (< 0: without end) for one. 0, or
 * MR_ETIMEDOUT, or MR_ECANCELED once closed and empty. Its bytes still
 * count until mr_chan_release(). */
int mr_chan_pop(mr_chan *ch, void *item, size_t *bytes, int timeout_ms);
/* Stops counting `bytes` (of popped items) and wakes waiting producers. */
void mr_chan_release(mr_chan *ch, size_t bytes);

/* The producer that does not block stopped because the channel is full:
 * on_room is called once, when it has drained to half (of each bound). */
void mr_chan_pause(mr_chan *ch);
/* At or over a bound: max_items items queued, or max_bytes held. */
int mr_chan_full(mr_chan *ch);
/* Bytes held now (queued, and popped but not released). */
size_t mr_chan_bytes(mr_chan *ch);
/* Producers blocked in mr_chan_push now: what a test waits on before it
 * makes room, instead of sleeping. */
int mr_chan_waiting(mr_chan *ch);

/* Wakes everyone; later pushes fail, pops drain what is left. Any thread,
 * any number of times. */
void mr_chan_close(mr_chan *ch);
int mr_chan_closed(mr_chan *ch);

#endif
