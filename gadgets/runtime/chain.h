/* A chain of gadgets built from a pipeline config, and the runtime that
 * moves messages through it. Used by one pipeline thread at a time. */
#ifndef MR_GADGETS_CHAIN_H
#define MR_GADGETS_CHAIN_H

#include <stdatomic.h>

#include "gadget.h"
#include "pipeline_config.h"

typedef struct mr_chain mr_chain;

/* Where whatever reaches the end of the chain goes (takes msg). */
typedef int (*mr_chain_sink)(void *ctx, mr_message *msg);

/* The kinds a client's stream brings into a chain (the session handles the
 * control messages itself). */
#define MR_CHAIN_WIRE_INPUT                                                                      \
  (MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_WAVEFORM) | MR_KIND_BIT(MR_MSG_IMAGE))

/* Builds the chain: allocates every gadget's state and binds its
 * parameters, then type-checks it: each gadget must get a kind it handles,
 * from `input` (the kinds that will be pushed, MR_CHAIN_WIRE_INPUT for a
 * session) or from a gadget before it. No data is read. Borrows cfg for
 * the chain's lifetime. */
int mr_chain_create(const mr_pipeline_config *cfg, uint32_t input, mr_chain **out,
                    mr_err *err);

/* Runs the chain as a pipeline of stages (chain_impl.h has the picture):
 * the pushing thread runs the gadgets up to the first one that handles a
 * chain object (k-space, image arrays); from there each such gadget (and
 * a gadget whose class asks for one, own_stage, wherever it stands) starts
 * a stage with a thread of its own and an inbox of `depth` messages, so
 * receiving, per-line work, per-slice math and the sink overlap. Order is
 * kept, and a full inbox makes the stage before it wait (backpressure).
 * depth 0 keeps the chain synchronous (the default). Call before
 * mr_chain_configure(), which starts the threads.
 *
 * A pipelined chain's push returns before later stages have run: their
 * failures are reported by a later push or by flush (the first failure,
 * in err). Each gadget's state is only touched by its own stage's thread;
 * the sink is called from the last stage's. */
int mr_chain_set_pipelined(mr_chain *chain, size_t depth);
/* The threads a session's chain may start: one per stage after the first
 * and its gadgets' own workers at most (0 for a synchronous chain), for a
 * bound checked before. */
int mr_chain_threads_needed(const mr_chain *chain);

/* The kinds the chain's gadgets emit (MR_KIND_BIT()s). */
uint32_t mr_chain_produces(const mr_chain *chain);
/* 1 when its last gadget emits nothing (discard, raw_dump): a chain meant
 * to answer nothing but CLOSE. */
int mr_chain_ends_in_sink(const mr_chain *chain);
void mr_chain_destroy(mr_chain *chain);

/* Sets the output and a flag that, once non-zero, makes every later
 * delivery fail with MR_ECANCELED (a client that went away). */
void mr_chain_set_sink(mr_chain *chain, mr_chain_sink sink, void *ctx,
                       const atomic_int *cancel);

/* Configures every gadget with the stream header (hdr NULL: no HEADER came,
 * configure is skipped and only flush will run), the compute pool and the
 * session's device. Errors go to err, which the chain keeps for push and
 * flush. Borrows hdr, pool and device. */
int mr_chain_configure(mr_chain *chain, const mr_stream_header *hdr,
                       struct mr_pool *pool, struct mr_device *device, mr_err *err);

/* Runs one message through the chain (takes msg). */
int mr_chain_push(mr_chain *chain, mr_message *msg);

/* End of stream: flushes the gadgets in order; a pipelined chain returns
 * once everything pushed and flushed has reached the sink. */
int mr_chain_flush(mr_chain *chain);

/* Gives up on the stream (the session failed): what is still in flight
 * is dropped, no gadget is flushed, and nothing reaches the sink once this
 * returns. */
void mr_chain_abandon(mr_chain *chain);

/* From any thread, without waiting on the chain: closes the channels its
 * gadgets wait on outside the chain (mr_gadget_close_on_stop: external's
 * peer), so none holds the session's end. The session calls it once its
 * client is gone or the drain deadline has cut it (after setting the
 * cancel flag); the chain itself at its first failure and when abandoned. */
void mr_chain_interrupt(mr_chain *chain);

/* "accumulate=1.2ms,fft=3.4ms,...": each gadget's own processing time so
 * far (what it emitted is charged to the gadgets downstream). For a
 * pipelined chain, call it after flush or abandon, when no stage runs. */
void mr_chain_timings(const mr_chain *chain, char *buf, size_t size);
/* The longest single step (one process or flush call, its own time as
 * mr_chain_timings counts it) of any gadget so far, as "NAME:12.3ms@N": the
 * gadget's Nth step; "" before any. What held a stream up, when a frame
 * came late: its gadget and the call (for a per-frame gadget, the frame). */
void mr_chain_slowest_step(const mr_chain *chain, char *buf, size_t size);
/* The same times as numbers: each(ctx, gadget class name, nanoseconds) for
 * every gadget in chain order (the server's metrics). Same rule: only when
 * no stage runs. */
void mr_chain_each_timing(const mr_chain *chain,
                          void (*each)(void *ctx, const char *gadget, uint64_t busy_ns),
                          void *ctx);

#endif
