#include "chain.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "chain_impl.h"
#include "clock.h"
#include "device.h"
#include "params.h"
#include "registry.h"

static void kinds_text(uint32_t mask, char *buf, size_t size) {
  buf[0] = '\0';
  for (int k = 0; k < MR_MSG_KIND_COUNT; k++) {
    if (!(mask & MR_KIND_BIT(k)))
      continue;
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", used ? "|" : "", mr_message_kind_name(k));
  }
  if (buf[0] == '\0')
    snprintf(buf, size, "nothing");
}

static int type_check(const mr_chain *c, uint32_t input, mr_err *err) {
  uint32_t available = input;
  for (int i = 0; i < c->n; i++) {
    const mr_gadget_class *cls = c->nodes[i].cls;
    if ((cls->accepts & available) == 0) {
      char want[128], have[128];
      kinds_text(cls->accepts, want, sizeof want);
      kinds_text(available, have, sizeof have);
      return mr_err_set(err, MR_ECONFIG,
                        "config '%s', gadget %d '%s': handles %s, but what reaches it is %s",
                        c->cfg->name, i, cls->name, want, have);
    }
    available = (available & ~cls->accepts) | cls->produces;
  }
  return 0;
}

uint32_t mr_chain_produces(const mr_chain *c) {
  uint32_t produced = 0;
  for (int i = 0; i < c->n; i++)
    produced |= c->nodes[i].cls->produces;
  return produced;
}

int mr_chain_ends_in_sink(const mr_chain *c) {
  return c->n > 0 && c->nodes[c->n - 1].cls->produces == 0;
}

int mr_chain_create(const mr_pipeline_config *cfg, uint32_t input, mr_chain **out,
                    mr_err *err) {
  mr_chain *c = calloc(1, sizeof *c);
  int n = cJSON_GetArraySize(cfg->gadgets);
  if (c == NULL || (c->nodes = calloc((size_t)n, sizeof *c->nodes)) == NULL) {
    free(c);
    return mr_err_set(err, MR_ENOMEM, "out of memory building config '%s'", cfg->name);
  }
  c->cfg = cfg;
  c->err = &c->own_err;
  atomic_init(&c->failed, 0);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->flushed, NULL);
  int rc = 0, i = 0;
  for (const cJSON *e = cfg->gadgets->child; e != NULL; e = e->next, i++) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, MR_PARAM_KEY_GADGET);
    if (!cJSON_IsObject(e) || !cJSON_IsString(g)) {
      rc = mr_err_set(err, MR_ECONFIG,
                      "config '%s', gadget %d: expected an object with a \"gadget\" name",
                      cfg->name, i);
      break;
    }
    const mr_gadget_class *cls = mr_registry_find(g->valuestring);
    if (cls == NULL) {
      rc = mr_err_set(err, MR_ECONFIG,
                      "config '%s', gadget %d: no gadget called '%s' (see reconserver --describe)",
                      cfg->name, i, g->valuestring);
      break;
    }
    node *nd = &c->nodes[i];
    nd->cls = cls;
    c->n = i + 1;
    nd->state = calloc(1, cls->state_size > 0 ? cls->state_size : 1);
    if (nd->state == NULL) {
      rc = mr_err_set(err, MR_ENOMEM, "out of memory building config '%s'", cfg->name);
      break;
    }
    if ((rc = mr_params_bind(cls, e, nd->state, cfg->name, i, err)) < 0)
      break;
    nd->ctx = (mr_gadget_ctx){.config = cfg->name, .gadget = cls->name, .index = i,
                              .err = c->err, .history = c->history,
                              .notes = &c->notes, .failed = &c->failed};
    size_t used = strlen(c->history);
    snprintf(c->history + used, sizeof c->history - used, "%s%s", used ? "," : "",
             cls->name);
  }
  if (rc == 0)
    rc = type_check(c, input, err);
  if (rc == 0 && mr_stages_plan(c, 0) < 0)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory building config '%s'", cfg->name);
  if (rc < 0) {
    mr_chain_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

void mr_chain_destroy(mr_chain *c) {
  if (c == NULL)
    return;
  mr_stages_stop(c);
  if (c->realtime_counted) { /* the thread that configured it: its session is over */
    mr_device_set_realtime(0);
    mr_device_count_realtime_session(c->realtime_device, -1);
  }
  for (int i = 0; i < c->n; i++) {
    node *nd = &c->nodes[i];
    if (nd->state != NULL && nd->cls->destroy != NULL)
      nd->cls->destroy(nd->state);
    free(nd->state);
  }
  mr_stages_free(c);
  free(c->nodes);
  free(c->stages);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->flushed);
  free(c);
}

int mr_chain_set_pipelined(mr_chain *c, size_t depth) { return mr_stages_plan(c, depth); }

int mr_chain_threads_needed(const mr_chain *c) {
  int n = c->nstages - 1;
  for (int i = 0; i < c->n && c->nstages > 1; i++)
    if (c->nodes[i].cls->threads != NULL)
      n += c->nodes[i].cls->threads(c->nodes[i].state);
  return n;
}

void mr_chain_set_sink(mr_chain *c, mr_chain_sink sink, void *ctx,
                       const atomic_int *cancel) {
  c->sink = sink;
  c->sink_ctx = ctx;
  c->cancel = cancel;
  for (int i = 0; i < c->n; i++)
    c->nodes[i].ctx.cancel = cancel;
}

int mr_chain_configure(mr_chain *c, const mr_stream_header *hdr,
                       struct mr_pool *pool, struct mr_device *device, mr_err *err) {
  c->err = err;
  /* The pushing thread runs stage 0: a real-time config's GPU work from
   * here on goes to the real-time lanes (its stage threads say so too). */
  if (c->cfg->realtime && !c->realtime_counted) {
    mr_device_set_realtime(1);
    mr_device_count_realtime_session(device, +1);
    c->realtime_counted = 1;
    c->realtime_device = device;
  }
  for (int i = 0; i < c->n; i++) {
    node *nd = &c->nodes[i];
    nd->ctx.hdr = hdr;
    nd->ctx.pool = pool;
    nd->ctx.device = device;
    nd->ctx.err = err; /* configure runs here, whatever the stage */
  }
  int rc = 0;
  for (int i = 0; hdr != NULL && i < c->n && rc == 0; i++) {
    node *nd = &c->nodes[i];
    if (nd->cls->configure != NULL && (rc = nd->cls->configure(nd->state, &nd->ctx)) < 0)
      mr_gadget_fail(&nd->ctx, rc, "configure failed: %s", mr_strerror(rc));
  }
  for (int i = 0; i < c->n; i++)
    if (c->nodes[i].stage > 0)
      c->nodes[i].ctx.err = &c->stages[c->nodes[i].stage].err;
  if (rc == 0 && mr_stages_start(c) < 0)
    rc = mr_err_set(err, MR_ENOMEM, "config '%s': cannot start its pipeline threads",
                    c->cfg->name);
  if (rc == 0 && hdr != NULL)
    rc = mr_capability_check_header(c, hdr, err);
  if (rc < 0)
    return mr_chain_failed(c, rc, err);
  return 0;
}

/* Runs one gadget step (process or flush) and charges it its own time:
 * whatever it emitted ran synchronously inside it, and is charged to the
 * gadgets downstream (or, for the sink and a hand-over to the next stage,
 * to nobody). */
typedef int (*step_fn)(node *nd, mr_message *msg, mr_emit *out);

static int timed(stage *st, node *nd, step_fn step, mr_message *msg, mr_emit *out) {
  uint64_t outer = st->nested_ns, t0 = mr_now_ns();
  st->nested_ns = 0;
  int rc = step(nd, msg, out);
  uint64_t spent = mr_now_ns() - t0, own = spent - st->nested_ns;
  nd->busy_ns += own;
  if (++nd->steps == 1 || own > nd->slowest_ns) {
    nd->slowest_ns = own;
    nd->slowest_step = nd->steps;
  }
  st->nested_ns = outer + spent;
  return rc;
}

static int process_step(node *nd, mr_message *msg, mr_emit *out) {
  return nd->cls->process(nd->state, &nd->ctx, msg, out);
}

static int flush_step(node *nd, mr_message *msg, mr_emit *out) {
  (void)msg;
  return nd->cls->flush(nd->state, &nd->ctx, out);
}

static int wake_step(node *nd, mr_message *msg, mr_emit *out) {
  (void)msg;
  return nd->cls->wake(nd->state, &nd->ctx, out);
}

static int pipelined(const mr_chain *c) { return c->nstages > 1; }

int mr_chain_failed(mr_chain *c, int code, const mr_err *why) {
  if (!pipelined(c))
    return code;
  pthread_mutex_lock(&c->mu);
  if (atomic_load(&c->failed) == 0) {
    c->first_err = *why;
    if (c->first_err.code == 0)
      c->first_err.code = code;
    atomic_store(&c->failed, code);
  }
  pthread_mutex_unlock(&c->mu);
  mr_chain_interrupt(c); /* a gadget waiting on a peer stops now */
  return code;
}

/* A pipelined chain's first failure, for the pushing thread's err. */
static int report_failure(mr_chain *c) {
  pthread_mutex_lock(&c->mu);
  int code = atomic_load(&c->failed);
  *c->err = c->first_err;
  pthread_mutex_unlock(&c->mu);
  return code;
}

static int hand_on(mr_chain *c, stage *st, int from, mr_message *msg) {
  uint64_t t0 = mr_now_ns();
  int rc = mr_stages_hand(c, st->index + 1, (stage_item){ITEM_MESSAGE, msg, from});
  st->nested_ns += mr_now_ns() - t0; /* waiting for room is nobody's work */
  return rc;
}

int mr_chain_deliver(mr_chain *c, stage *st, int from, mr_message *msg) {
  if ((c->cancel != NULL && atomic_load(c->cancel)) || atomic_load(&c->failed) != 0) {
    mr_message_unref(msg);
    return c->cancel != NULL && atomic_load(c->cancel) ? MR_ECANCELED : atomic_load(&c->failed);
  }
  for (int i = from; i < c->n; i++) {
    node *nd = &c->nodes[i];
    if (!(nd->cls->accepts & MR_KIND_BIT(msg->kind)))
      continue;
    if (nd->stage != st->index)
      return hand_on(c, st, i, msg);
    mr_emit out = {c, st, i + 1};
    int rc = timed(st, nd, process_step, msg, &out);
    mr_message_unref(msg); /* process() borrowed it, whatever it returned (gadget.h) */
    if (rc < 0 && atomic_load(&c->failed) == 0) {
      mr_gadget_fail(&nd->ctx, rc, "%s", mr_strerror(rc));
      return mr_chain_failed(c, rc, nd->ctx.err);
    }
    return rc < 0 ? rc : 0;
  }
  if (st->index + 1 < c->nstages) /* the sink is fed by the last stage */
    return hand_on(c, st, c->n, msg);
  if (c->sink != NULL) {
    /* Charged to nobody: waiting for the client is not a gadget's time. */
    uint64_t t0 = mr_now_ns();
    int rc = c->sink(c->sink_ctx, msg);
    st->nested_ns += mr_now_ns() - t0;
    return rc;
  }
  mr_message_unref(msg);
  return 0;
}

int mr_emit_message(mr_emit *out, mr_message *msg) {
  return mr_chain_deliver(out->chain, out->stage, out->next, msg);
}

int mr_chain_push(mr_chain *c, mr_message *msg) {
  if (msg->kind == MR_MSG_ACQUISITION) {
    int rc = mr_capability_check_acquisition(c, &msg->u.acq, c->err);
    if (rc < 0) {
      mr_message_unref(msg);
      return mr_chain_failed(c, rc, c->err);
    }
  }
  int rc = mr_chain_deliver(c, &c->stages[0], 0, msg);
  if (pipelined(c) && atomic_load(&c->failed) != 0)
    return report_failure(c);
  return rc;
}

int mr_chain_flush_stage(mr_chain *c, stage *st) {
  for (int i = st->first; i < st->end; i++) {
    node *nd = &c->nodes[i];
    if (nd->cls->flush == NULL)
      continue;
    mr_emit out = {c, st, i + 1};
    int rc = timed(st, nd, flush_step, NULL, &out);
    if (rc < 0 && atomic_load(&c->failed) == 0) {
      mr_gadget_fail(&nd->ctx, rc, "flush failed: %s", mr_strerror(rc));
      return mr_chain_failed(c, rc, nd->ctx.err);
    }
    if (rc < 0)
      return rc;
  }
  return 0;
}

void mr_chain_wake_stage(mr_chain *c, stage *st) {
  for (int i = st->first; i < st->end && !atomic_load(&c->failed); i++) {
    node *nd = &c->nodes[i];
    if (nd->cls->wake == NULL)
      continue;
    mr_emit out = {c, st, i + 1};
    int rc = timed(st, nd, wake_step, NULL, &out);
    if (rc < 0 && atomic_load(&c->failed) == 0) {
      mr_gadget_fail(&nd->ctx, rc, "%s", mr_strerror(rc));
      mr_chain_failed(c, rc, nd->ctx.err);
    }
  }
}

int mr_chain_flush(mr_chain *c) {
  int rc = atomic_load(&c->failed) == 0 ? mr_chain_flush_stage(c, &c->stages[0]) : 0;
  if (!pipelined(c))
    return rc;
  mr_stages_flush(c);
  return atomic_load(&c->failed) != 0 ? report_failure(c) : 0;
}

void mr_chain_abandon(mr_chain *c) {
  int none = 0;
  atomic_compare_exchange_strong(&c->failed, &none, MR_ECANCELED);
  mr_chain_interrupt(c);
  mr_stages_flush(c);
}

void mr_chain_timings(const mr_chain *c, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < c->n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%s=%.1fms", i ? "," : "",
                             c->nodes[i].cls->name, (double)c->nodes[i].busy_ns / 1e6);
}

void mr_chain_slowest_step(const mr_chain *c, char *buf, size_t size) {
  buf[0] = '\0';
  const node *slowest = NULL;
  for (int i = 0; i < c->n; i++)
    if (c->nodes[i].steps > 0 && (slowest == NULL || c->nodes[i].slowest_ns > slowest->slowest_ns))
      slowest = &c->nodes[i];
  if (slowest != NULL)
    snprintf(buf, size, "%s:%.1fms@%llu", slowest->cls->name, (double)slowest->slowest_ns / 1e6,
             (unsigned long long)slowest->slowest_step);
}

void mr_chain_each_timing(const mr_chain *c,
                          void (*each)(void *ctx, const char *gadget, uint64_t busy_ns),
                          void *ctx) {
  for (int i = 0; i < c->n; i++)
    each(ctx, c->nodes[i].cls->name, c->nodes[i].busy_ns);
}

/* The name in parentheses: gadget.h's macro for the analyzer is not expanded. */
int(mr_gadget_fail)(mr_gadget_ctx *ctx, int code, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return mr_err_set(ctx->err, code, "config '%s', gadget %d '%s': %s", ctx->config,
                    ctx->index, ctx->gadget, what);
}

static int gadget_cancelled(void *arg) {
  const mr_gadget_ctx *ctx = arg;
  return (ctx->cancel != NULL && atomic_load(ctx->cancel)) ||
         (ctx->failed != NULL && atomic_load(ctx->failed));
}

mr_cancel mr_gadget_cancel(mr_gadget_ctx *ctx) {
  return (mr_cancel){.requested = gadget_cancelled, .ctx = ctx};
}
