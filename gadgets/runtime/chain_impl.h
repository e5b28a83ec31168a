/* Internal to the chain runtime (chain.c, stage.c): a chain's gadgets and
 * the stages that run them.
 *
 * A synchronous chain (the default) is one stage run by whoever pushes. A
 * pipelined chain (mr_chain_set_pipelined) is cut into stages: stage 0 runs
 * on the pushing thread, and a new stage, with a thread and a bounded inbox
 * of its own, starts at every later gadget that handles a chain object
 * (k-space, image arrays), and at any gadget with own_stage (external):
 * per-line work, per-slice math and the end of the chain then overlap. Messages move between stages hop by hop, through
 * every stage in between, so everything reaches the sink in the order a
 * synchronous chain would deliver it. */
#ifndef MR_GADGETS_CHAIN_IMPL_H
#define MR_GADGETS_CHAIN_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "chain.h"
#include "channel.h"

typedef struct node {
  const mr_gadget_class *cls;
  void *state;
  mr_gadget_ctx ctx;
  uint64_t busy_ns; /* in process/flush, less what it handed downstream */
  uint64_t steps;        /* process and flush calls so far */
  uint64_t slowest_ns;   /* the longest one's own time (as busy_ns counts it) */
  uint64_t slowest_step; /* which call that was, 1 = the first */
  int stage;        /* the stage that runs it */
  /* Closed when the chain is interrupted (mr_gadget_close_on_stop), under
   * the chain's mu. */
  mr_chan *close_on_stop;
} node;

enum item_kind {
  ITEM_MESSAGE, /* deliver msg from gadget `from` on */
  ITEM_FLUSH,   /* end of stream: flush this stage's gadgets, pass it on */
  ITEM_WAKE,    /* mr_gadget_wake(): run this stage's gadgets' wake() */
};

typedef struct stage_item {
  enum item_kind kind;
  mr_message *msg;
  int from;
} stage_item;

typedef struct stage {
  struct mr_chain *chain;
  int index;
  int first, end;     /* its gadgets: [first, end) */
  uint64_t nested_ns; /* time spent downstream of the running gadget */
  mr_err err;         /* where its gadgets report (stages after 0) */
  mr_chan *inbox;     /* of stage_item, `depth` of them (stages after 0) */
  atomic_int wake_queued; /* an ITEM_WAKE is in the inbox, not yet taken */
  pthread_t thread;
} stage;

struct mr_chain {
  const mr_pipeline_config *cfg;
  node *nodes;
  int n;
  stage *stages;
  int nstages;
  int threads; /* stage threads running (stages 1..threads) */
  mr_chain_sink sink;
  void *sink_ctx;
  const atomic_int *cancel;
  mr_err *err;
  mr_err own_err; /* until configure gives one */
  char history[512];
  mr_chain_notes notes;
  int realtime_counted;              /* configure counted a real-time session on */
  struct mr_device *realtime_device; /* this device (NULL: the CPU) */
  /* Pipelined only: the first failure of any stage. Once set, every stage
   * drops what reaches it and skips its flush. */
  atomic_int failed;
  pthread_mutex_t mu;
  pthread_cond_t flushed;
  mr_err first_err; /* under mu */
  unsigned flushes; /* flush markers that passed the last stage, under mu */
  int interrupted;  /* mr_chain_interrupt() was called, under mu */
};

struct mr_emit {
  mr_chain *chain;
  stage *stage; /* the stage whose thread emits */
  int next;
};

/* Gives msg to the first gadget at or after `from` that handles its kind
 * (or to the sink), running it when it belongs to stage `st`, otherwise
 * handing it to the next stage. Takes msg. */
int mr_chain_deliver(mr_chain *c, stage *st, int from, mr_message *msg);
/* Flushes the gadgets of st in order (their output flows on). */
int mr_chain_flush_stage(mr_chain *c, stage *st);
/* Runs the wake() of the gadgets of st that have one. */
void mr_chain_wake_stage(mr_chain *c, stage *st);
/* Records the first failure of a pipelined chain; returns code. */
int mr_chain_failed(mr_chain *c, int code, const mr_err *why);

/* stage.c: cutting a chain into stages, their threads and inboxes. */
int mr_stages_plan(mr_chain *c, size_t depth);
int mr_stages_start(mr_chain *c);
/* Hands an item to stage `to`, waiting while its inbox is full; drops
 * (and unrefs) the message once the inbox is closed. */
int mr_stages_hand(mr_chain *c, int to, stage_item item);
/* Sends a flush marker down the stages after 0 and waits until it has
 * passed the last one. */
void mr_stages_flush(mr_chain *c);
/* Stops and joins the threads, dropping whatever is still queued. */
void mr_stages_stop(mr_chain *c);
/* Frees the stages' inboxes and locks: after the gadgets are destroyed
 * (a gadget's own thread may call mr_gadget_wake() until then). */
void mr_stages_free(mr_chain *c);

#endif
