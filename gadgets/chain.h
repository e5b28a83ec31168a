/* A chain of gadgets built from a pipeline config, and the runtime that
 * moves messages through it. Used by one pipeline thread at a time. */
#ifndef MR_GADGETS_CHAIN_H
#define MR_GADGETS_CHAIN_H

#include <stdatomic.h>

#include "gadget.h"
#include "pipeline_config.h"

typedef struct mr_chain mr_chain;

/* Where the chain's output goes (takes msg). Images and TEXT are for the
 * client; anything else reaching the end of the chain is dropped by the
 * chain before the sink sees it. */
typedef int (*mr_chain_sink)(void *ctx, mr_message *msg);

/* Builds the chain: allocates every gadget's state and binds its
 * parameters, then type-checks it (each gadget must get a kind it handles
 * from the wire or from a gadget before it, and the chain must produce
 * images). No data is read. Borrows cfg for the chain's lifetime. */
int mr_chain_create(const mr_pipeline_config *cfg, mr_chain **out, mr_err *err);
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

/* End of stream: flushes the gadgets in order. */
int mr_chain_flush(mr_chain *chain);

#endif
