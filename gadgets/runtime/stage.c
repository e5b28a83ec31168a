/* The stages of a pipelined chain: where a chain is cut, one thread and
 * one bounded inbox per stage after the first, flush markers, shutdown. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain_impl.h"
#include "device.h"

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
  for (int s = 1; s < n; s++) {
    st[s].cap = depth;
    if ((st[s].ring = calloc(depth, sizeof *st[s].ring)) == NULL) {
      for (int k = 1; k < s; k++)
        free(st[k].ring);
      free(st);
      return MR_ENOMEM;
    }
    pthread_mutex_init(&st[s].mu, NULL);
    pthread_cond_init(&st[s].changed, NULL);
    /* The gadgets of a stage report into the stage's own line. */
    for (int i = st[s].first; i < st[s].end; i++)
      c->nodes[i].ctx.err = &st[s].err;
  }
  for (int i = 0; i < c->n; i++) {
    int s = c->nodes[i].stage;
    c->nodes[i].ctx.stage = s > 0 ? &st[s] : NULL;
  }
  free(c->stages);
  c->stages = st;
  c->nstages = n;
  return 0;
}

/* Takes the next item (a wake when one is due and nothing is queued); 0
 * when the inbox is closed and empty. */
static int take(stage *st, stage_item *out) {
  pthread_mutex_lock(&st->mu);
  while (st->count == 0 && !st->closed && !st->wake)
    pthread_cond_wait(&st->changed, &st->mu);
  int got = st->count > 0 || (st->wake && !st->closed);
  if (st->count == 0 && got) {
    *out = (stage_item){.kind = ITEM_WAKE};
    st->wake = 0;
  } else if (got) {
    *out = st->ring[st->head];
    st->head = (st->head + 1) % st->cap;
    st->count--;
    pthread_cond_broadcast(&st->changed); /* room for a waiting producer */
  }
  pthread_mutex_unlock(&st->mu);
  return got;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int mr_stages_hand(mr_chain *c, int to, stage_item item) {
  stage *st = &c->stages[to];
  pthread_mutex_lock(&st->mu);
  while (st->count == st->cap && !st->closed)
    pthread_cond_wait(&st->changed, &st->mu);
  if (st->closed) {
    pthread_mutex_unlock(&st->mu);
    mr_message_unref(item.msg);
    return MR_ECANCELED;
  }
  st->ring[(st->head + st->count) % st->cap] = item;
  st->count++;
  pthread_cond_broadcast(&st->changed);
  pthread_mutex_unlock(&st->mu);
  return 0;
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
  mr_device_set_realtime(c->cfg->realtime);
  stage_item it;
  while (take(st, &it)) {
    if (it.kind == ITEM_MESSAGE) {
      mr_chain_deliver(c, st, it.from, it.msg); /* failures are recorded there */
      continue;
    }
    if (it.kind == ITEM_WAKE) {
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
  uint64_t t0 = now_ns();
  mr_stages_hand(c, 1, (stage_item){.kind = ITEM_FLUSH});
  pthread_mutex_lock(&c->mu);
  while (c->flushes == seen)
    pthread_cond_wait(&c->flushed, &c->mu);
  pthread_mutex_unlock(&c->mu);
  c->stages[0].nested_ns += now_ns() - t0;
}

void mr_stages_stop(mr_chain *c) {
  for (int s = 1; s < c->nstages; s++) {
    stage *st = &c->stages[s];
    pthread_mutex_lock(&st->mu);
    st->closed = 1;
    pthread_cond_broadcast(&st->changed);
    pthread_mutex_unlock(&st->mu);
  }
  for (int s = 1; s <= c->threads; s++)
    pthread_join(c->stages[s].thread, NULL);
  c->threads = 0;
  for (int s = 1; s < c->nstages; s++) {
    stage *st = &c->stages[s];
    for (; st->count > 0; st->count--, st->head = (st->head + 1) % st->cap)
      mr_message_unref(st->ring[st->head].msg);
  }
}

void mr_stages_free(mr_chain *c) {
  for (int s = 1; s < c->nstages; s++) {
    stage *st = &c->stages[s];
    free(st->ring);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->changed);
  }
}

void mr_gadget_wake(mr_gadget_ctx *ctx) {
  stage *st = ctx->stage;
  if (st == NULL)
    return;
  pthread_mutex_lock(&st->mu);
  st->wake = 1;
  pthread_cond_broadcast(&st->changed);
  pthread_mutex_unlock(&st->mu);
}
