/* The stages of a pipelined chain: where a chain is cut, one thread and
 * one bounded inbox (a base/ channel) per stage after the first, flush
 * markers, wakes, shutdown; and the interruption that closes the channels
 * its gadgets wait on outside the chain. */
#include <stdlib.h>
#include <string.h>

#include "chain_impl.h"
#include "clock.h"
#include "device.h"
#include "thread_name.h"

static void drop_item(void *item) { mr_message_unref(((stage_item *)item)->msg); }

/* A stage starts at a gadget that handles a chain object: per-slice work,
 * as opposed to the per-line work on what the wire brings; and at a gadget
 * that waits on a peer (own_stage), even at the head of the chain, so the
 * pipeline thread keeps taking the client's messages meanwhile. */
static int starts_stage(const mr_gadget_class *cls, int index) {
  return cls->own_stage || (index > 0 && (cls->accepts & ~(uint32_t)MR_CHAIN_WIRE_INPUT) != 0);
}

int mr_stages_plan(mr_chain *c, size_t depth) {
  int n = 1;
  for (int i = 0; i < c->n; i++) {
    if (depth > 0 && starts_stage(c->nodes[i].cls, i))
      n++;
    c->nodes[i].stage = n - 1;
  }
  stage *st = calloc((size_t)n, sizeof *st);
  if (st == NULL)
    return MR_ENOMEM;
  for (int s = 0; s < n; s++) {
    st[s].chain = c;
    st[s].index = s;
    st[s].first = c->n;
    st[s].end = 0;
  }
  for (int i = 0; i < c->n; i++) {
    stage *owner = &st[c->nodes[i].stage];
    if (i < owner->first)
      owner->first = i;
    owner->end = i + 1;
  }
  if (c->n == 0)
    st[0].first = 0;
  mr_chan_opts inbox = {.item_size = sizeof(stage_item), .max_items = depth, .drop = drop_item};
  for (int s = 1; s < n; s++) {
    if (mr_chan_create(&inbox, &st[s].inbox) < 0) {
      for (int k = 1; k < s; k++)
        mr_chan_free(st[k].inbox);
      free(st);
      return MR_ENOMEM;
    }
    /* The gadgets of a stage report into the stage's own line. */
    for (int i = st[s].first; i < st[s].end; i++)
      c->nodes[i].ctx.err = &st[s].err;
  }
  for (int i = 0; i < c->n; i++)
    c->nodes[i].ctx.stage = &st[c->nodes[i].stage];
  free(c->stages);
  c->stages = st;
  c->nstages = n;
  return 0;
}


int mr_stages_hand(mr_chain *c, int to, stage_item item) {
  int rc = mr_chan_push(c->stages[to].inbox, &item, 0, -1);
  if (rc < 0) /* closed: the chain is being stopped */
    mr_message_unref(item.msg);
  return rc;
}

/* The flush marker has passed stage st: on to the next, or, past the
 * last, tell the flushing thread. */
static void pass_flush(mr_chain *c, stage *st) {
  if (st->index + 1 < c->nstages) {
    mr_stages_hand(c, st->index + 1, (stage_item){.kind = ITEM_FLUSH});
    return;
  }
  pthread_mutex_lock(&c->mu);
  c->flushes++;
  pthread_cond_broadcast(&c->flushed);
  pthread_mutex_unlock(&c->mu);
}

static void *stage_main(void *arg) {
  stage *st = arg;
  mr_chain *c = st->chain;
  mr_thread_name("mr-stage%d", (int)(st - c->stages));
  mr_device_set_realtime(c->cfg->realtime);
  stage_item it;
  while (mr_chan_pop(st->inbox, &it, NULL, -1) == 0) {
    if (it.kind == ITEM_MESSAGE) {
      mr_chain_deliver(c, st, it.from, it.msg); /* failures are recorded there */
      continue;
    }
    if (it.kind == ITEM_WAKE) {
      atomic_store(&st->wake_queued, 0); /* a wake from now on queues another */
      if (!atomic_load(&c->failed))
        mr_chain_wake_stage(c, st);
      continue;
    }
    if (!atomic_load(&c->failed))
      mr_chain_flush_stage(c, st);
    pass_flush(c, st);
  }
  mr_device_set_realtime(0);
  return NULL;
}

int mr_stages_start(mr_chain *c) {
  for (int s = c->threads + 1; s < c->nstages; s++) {
    if (pthread_create(&c->stages[s].thread, NULL, stage_main, &c->stages[s]) != 0)
      return MR_ENOMEM; /* the stages that did start are stopped at destroy */
    c->threads = s;
  }
  return 0;
}

void mr_stages_flush(mr_chain *c) {
  if (c->nstages < 2 || c->threads < c->nstages - 1)
    return; /* not (all) started: nothing runs there */
  pthread_mutex_lock(&c->mu);
  unsigned seen = c->flushes;
  pthread_mutex_unlock(&c->mu);
  uint64_t t0 = mr_now_ns();
  mr_stages_hand(c, 1, (stage_item){.kind = ITEM_FLUSH});
  pthread_mutex_lock(&c->mu);
  while (c->flushes == seen)
    pthread_cond_wait(&c->flushed, &c->mu);
  pthread_mutex_unlock(&c->mu);
  c->stages[0].nested_ns += mr_now_ns() - t0;
}

void mr_stages_stop(mr_chain *c) {
  for (int s = 1; s < c->nstages; s++)
    mr_chan_close(c->stages[s].inbox);
  for (int s = 1; s <= c->threads; s++)
    pthread_join(c->stages[s].thread, NULL);
  c->threads = 0;
  stage_item it;
  for (int s = 1; s < c->nstages; s++)
    while (mr_chan_pop(c->stages[s].inbox, &it, NULL, 0) == 0)
      mr_message_unref(it.msg);
}

void mr_stages_free(mr_chain *c) {
  for (int s = 1; s < c->nstages; s++)
    mr_chan_free(c->stages[s].inbox);
}

void mr_gadget_wake(mr_gadget_ctx *ctx) {
  stage *st = ctx->stage;
  if (st == NULL || st->index == 0)
    return; /* no stage thread of its own: it catches up in its next call */
  /* Once for any number of calls before the stage takes it; past the
   * inbox's bound (never blocking), and dropped once the inbox is closed. */
  if (atomic_exchange(&st->wake_queued, 1) == 0 &&
      mr_chan_put(st->inbox, &(stage_item){.kind = ITEM_WAKE}, 0) < 0)
    atomic_store(&st->wake_queued, 0);
}

int mr_gadget_has_thread(const mr_gadget_ctx *ctx) {
  const stage *st = ctx->stage;
  return st != NULL && st->index > 0;
}

/* Under the chain's mu. */
static int told_to_stop(const mr_chain *c) {
  return c->interrupted || (c->cancel != NULL && atomic_load(c->cancel)) ||
         atomic_load(&c->failed) != 0;
}

void mr_chain_interrupt(mr_chain *c) {
  pthread_mutex_lock(&c->mu);
  c->interrupted = 1;
  for (int i = 0; i < c->n; i++)
    if (c->nodes[i].close_on_stop != NULL)
      mr_chan_close(c->nodes[i].close_on_stop);
  pthread_mutex_unlock(&c->mu);
}

void mr_gadget_close_on_stop(mr_gadget_ctx *ctx, mr_chan *ch) {
  stage *st = ctx->stage;
  if (st == NULL)
    return; /* not run by a chain */
  mr_chain *c = st->chain;
  pthread_mutex_lock(&c->mu);
  c->nodes[ctx->index].close_on_stop = ch;
  if (ch != NULL && told_to_stop(c))
    mr_chan_close(ch);
  pthread_mutex_unlock(&c->mu);
}
