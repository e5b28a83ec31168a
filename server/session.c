#include "session.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "clock.h"
#include "gadgetron_xml.h"
#include "log.h"
#include "noise_store.h"
#include "metrics.h"
#include "nhlbi.h"
#include "pool.h"
#include "query.h"
#include "state_machine.h"
#include "stream_header.h"

#define MAX_ERRORS 8
/* Messages waiting at each pipeline stage of a session's chain: one to
 * work on next while the stage before prepares another keeps every stage
 * busy; more would only hold more slices (each counted against the memory
 * budget) per connection (chain.h). */
#define STAGE_DEPTH 2

/* The session's state, stepped only through enter_state (checked as the
 * connection's machines are: state_machine.h). Whether it failed, and
 * whether it is done, are not states of this machine: a failure can come
 * in any of them and is answered at the CLOSE. */
enum state {
  AWAIT_CONFIG, /* queries only so far */
  AWAIT_HEADER, /* a chain is built */
  STREAMING,    /* the chain is configured: data flows */
  DEPENDENCY,   /* a Gadgetron noise-dependency query (rule 6) */
  STATES
};

static const char *const state_names[STATES] = {"await-config", "await-header", "streaming",
                                                "dependency"};
static const unsigned state_steps[STATES] = {
    [AWAIT_CONFIG] = MR_STEP(AWAIT_HEADER) | MR_STEP(DEPENDENCY),
    [AWAIT_HEADER] = MR_STEP(STREAMING),
    [STREAMING] = 0,
    [DEPENDENCY] = 0,
};
static const mr_state_machine session_machine = {"session", state_names, state_steps};

typedef struct run {
  mr_session *s;
  enum state state;
  mr_pipeline_config *script; /* a CONFIG_SCRIPT's config (owned) */
  char dependency[160]; /* the measurement a dependency query asks about */
  mr_chain *chain;
  mr_stream_header hdr;
  int have_hdr;
  mr_device *device; /* the session's placement, from the pool */
  mr_err err;    /* the chain's error line */
  int failed;    /* stop feeding data; answer at CLOSE */
  uint64_t answer_by_ms; /* after a failure: answer even without the CLOSE */
  char *errors[MAX_ERRORS];
  int nerrors;
  int done;
} run;

static void enter_state(run *r, enum state to) {
  mr_state_check(&session_machine, (int)r->state, (int)to, r->s->peer);
  r->state = to;
}

static void record_error(run *r, int code, const char *text) {
  mr_session_stats *st = &r->s->stats;
  mr_metrics_error(mr_metrics_error_kind_of(code));
  /* the first error's text, cut to the stats' field (the log has it whole) */
  if (st->errors == 0 &&
      snprintf(st->first_error, sizeof st->first_error, "%s", text) >= (int)sizeof st->first_error)
    st->first_error[sizeof st->first_error - 1] = '\0';
  st->errors++;
  if (!r->failed)
    r->answer_by_ms = mr_now_ms() + (uint64_t)r->s->env->error_grace_ms;
  r->failed = 1;
  if (r->nerrors < MAX_ERRORS)
    r->errors[r->nerrors++] = strdup(text);
  mr_log(MR_LOG_DEBUG, "%s: error: %s", r->s->peer, text);
}

/* An error of the session: code (MR_E*) is its kind for the metrics. */
static void fail(run *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(run *r, int code, const char *fmt, ...) {
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  record_error(r, code, text);
}

/* Queues msg for the client (takes it); waits while the outbox is full. */
static int send_to_client(run *r, mr_message *msg) {
  if (msg == NULL)
    return MR_ENOMEM;
  return mr_envelope_send(r->s->outbox, msg, 1); /* the outbox's hook wakes the loop */
}

/* The end of the chain: images, DICOM files and TEXT go to the client; acquisitions and
 * waveforms that passed every gadget, and chain objects nobody consumed,
 * stop here (ids 1008 and 1026 never go to a client: rule 1). */
static int chain_sink(void *ctx, mr_message *msg) {
  if (msg->kind == MR_MSG_TEXT && strncmp(msg->u.text, "WARNING:", 8) == 0) {
    const run *r = ctx; /* a gadget's warning goes to the session log too */
    mr_log(MR_LOG_WARN, "%s: %s", r->s->peer, msg->u.text);
  }
  if (msg->kind == MR_MSG_IMAGE || msg->kind == MR_MSG_DICOM || msg->kind == MR_MSG_TEXT)
    return send_to_client(ctx, msg);
  mr_message_unref(msg);
  return 0;
}

static void take_chain_error(run *r, int rc) {
  fail(r, rc, "%s", mr_err_text(&r->err, rc));
}

static int is_xml(const char *text) {
  while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n')
    text++;
  return *text == '<';
}

/* 0 when n is within limit, else a failure naming the wire limit `name`
 * and how to raise it: "config 'x' <what> n <units>, over ...". */
static int within(run *r, const char *config, const char *what, int n, uint32_t limit,
                  const char *units, const char *name) {
  if (n <= 0 || (uint32_t)n <= limit)
    return 0;
  fail(r, MR_ELIMIT, "config '%s' %s %d %s, over the limit of %u (%s; reconserver --limit %s=N)",
       config, what, n, units, limit, name, name);
  return MR_ELIMIT;
}

static void start_chain(run *r, const mr_pipeline_config *cfg) {
  const mr_limits *limits = r->s->env->limits;
  if (within(r, cfg->name, "has", cJSON_GetArraySize(cfg->gadgets), limits->chain_steps,
             "steps per chain", "chain_steps") < 0)
    return;
  mr_err e = {0};
  int rc = mr_chain_create(cfg, MR_CHAIN_WIRE_INPUT, &r->chain, &e);
  if (rc < 0) {
    fail(r, rc, "%s", mr_err_text(&e, rc));
    return;
  }
  mr_chain_set_sink(r->chain, chain_sink, r, r->s->cancel);
  if (mr_chain_set_pipelined(r->chain, STAGE_DEPTH) < 0) {
    fail(r, MR_ENOMEM, "out of memory building config '%s'", cfg->name);
    return;
  }
  pthread_mutex_lock(&r->s->chain_mu); /* from now on a cancel interrupts it */
  r->s->chain = r->chain;
  pthread_mutex_unlock(&r->s->chain_mu);
  if (within(r, cfg->name, "would start", mr_chain_threads_needed(r->chain),
             limits->session_threads, "pipeline threads per session", "session_threads") < 0)
    return;
  snprintf(r->s->stats.config, sizeof r->s->stats.config, "%s", cfg->name);
  enter_state(r, AWAIT_HEADER);
}

static void on_config_file(run *r, const char *name) {
  const mr_pipeline_config *cfg = NULL;
  mr_err e = {0};
  int rc = mr_config_dir_find(r->s->env->configs, name, &cfg, &e);
  if (rc < 0) {
    snprintf(r->s->stats.config, sizeof r->s->stats.config, "%.100s", name);
    fail(r, rc, "%s", mr_err_text(&e, rc));
    return;
  }
  start_chain(r, cfg);
}

static void on_config_script(run *r, const char *text, size_t len) {
  mr_err e = {0};
  int rc;
  if (is_xml(text)) {
    /* Gadgetron's C++ client asks about noise dependencies with an XML
     * chain naming NoiseSummaryGadget (rule 6); other Gadgetron chains are
     * translated when every gadget has a counterpart here. */
    if (mr_gadgetron_xml_noise_query(text, len, r->dependency, sizeof r->dependency) == 1) {
      snprintf(r->s->stats.config, sizeof r->s->stats.config, "noise-dependency-query");
      enter_state(r, DEPENDENCY);
      return;
    }
    rc = mr_gadgetron_xml_translate(text, len, &r->script, &e);
  } else {
    rc = mr_pipeline_config_parse(text, len, "CONFIG_SCRIPT", &r->script, &e);
  }
  if (rc < 0) {
    fail(r, rc, "%s", mr_err_text(&e, rc));
    return;
  }
  if (!r->s->env->script_external && mr_pipeline_config_uses(r->script, "external")) {
    fail(r, MR_ECONFIG,
         "a CONFIG_SCRIPT may not use the external gadget (it connects to addresses and "
         "starts programs on the server): use an installed config, or start the server "
         "with --allow-script-external");
    return;
  }
  start_chain(r, r->script);
}

static void on_header(run *r, const mr_message *m) {
  mr_err e = {0};
  int rc = mr_stream_header_parse(m->u.text, m->text_len, &r->hdr, &e);
  if (rc < 0) {
    fail(r, rc, "%s", mr_err_text(&e, rc));
    return;
  }
  r->have_hdr = 1;
  if ((rc = mr_pool_acquire(r->s->env->pool, "auto", &r->device, &e)) < 0) {
    fail(r, rc, "no compute device: %s", mr_err_text(&e, rc));
    return;
  }
  if ((rc = mr_chain_configure(r->chain, &r->hdr, r->s->env->pool, r->device, &r->err)) < 0) {
    take_chain_error(r, rc);
    return;
  }
  enter_state(r, STREAMING);
}

/* Samples the chain could not survive: NaN or infinity. Whether there is
 * one the decoder has said (or, decompressed here, a look now says); the
 * value by value search only names the first. */
static int check_finite(run *r, mr_acquisition *a) {
  if (a->head.number_of_samples == 0)
    return 0; /* no samples (the chain skips it): nothing to check */
  if (a->finite == 0)
    a->finite = (int8_t)(mr_acquisition_finite(a) ? 1 : -1);
  if (a->finite > 0)
    return 0;
  size_t n = mr_acquisition_data_count(&a->head);
  const float *f = (const float *)a->data;
  for (size_t i = 0; i < 2 * n; i++) {
    if (!isfinite(f[i])) {
      size_t sample = (i / 2) % a->head.number_of_samples;
      size_t channel = (i / 2) / a->head.number_of_samples;
      fail(r, MR_EDATA, "acquisition %u has a %s sample (channel %zu, sample %zu)", a->head.scan_counter,
           isnan(f[i]) ? "NaN" : "infinite", channel, sample);
      return MR_EDATA;
    }
  }
  size_t nt = mr_acquisition_traj_count(&a->head);
  for (size_t i = 0; i < nt; i++) {
    if (!isfinite(a->traj[i])) {
      fail(r, MR_EDATA, "acquisition %u has a non-finite trajectory value", a->head.scan_counter);
      return MR_EDATA;
    }
  }
  return 0;
}

static void on_data(run *r, mr_message *m) {
  mr_session_stats *st = &r->s->stats;
  if (m->kind == MR_MSG_ACQUISITION) {
    st->acquisitions++;
    const ISMRMRD_AcquisitionHeader *h = &m->u.acq.head;
    if ((h->number_of_samples == 0 || h->active_channels == 0) &&
        !(h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)))
      st->empty_acquisitions++;
    mr_metrics_acquisitions(1);
  } else if (m->kind == MR_MSG_WAVEFORM) {
    st->waveforms++;
  }
  if (r->failed) {
    mr_message_unref(m);
    return;
  }
  if (r->state != STREAMING) {
    fail(r, MR_ESTATE, "%s before %s", mr_message_kind_name(m->kind),
         r->state == AWAIT_CONFIG ? "a config (CONFIG_FILE or CONFIG_SCRIPT)" : "the HEADER");
    mr_message_unref(m);
    return;
  }
  if (m->kind == MR_MSG_ACQUISITION) {
    if (m->u.acq.head.flags & MR_ACQ_COMPRESSED) {
      mr_err e = {0};
      if (mr_acquisition_decompress(&m->u.acq, &e) < 0) {
        fail(r, e.code, "acquisition %u: %s", m->u.acq.head.scan_counter, e.msg);
        mr_message_unref(m);
        return;
      }
    }
    if (check_finite(r, &m->u.acq) < 0) {
      mr_message_unref(m);
      return;
    }
  }
  int rc = mr_chain_push(r->chain, m);
  if (rc < 0)
    take_chain_error(r, rc);
}

static void on_query(run *r, const mr_message *m) {
  size_t len = 0;
  char *answer = mr_query_answer(r->s->env, m->u.query.text, &len);
  mr_message *resp = answer != NULL ? mr_message_new_query(MR_MSG_RESPONSE,
                                                           m->u.query.correlation_id, answer, len)
                                    : NULL;
  free(answer);
  if (send_to_client(r, resp) == MR_ENOMEM)
    fail(r, MR_ENOMEM, "out of memory answering QUERY '%.100s'", m->u.query.text);
}

/* Rule 6: the noise-dependency reply, as Gadgetron 4's NoiseSummaryGadget
 * writes it: the stored noise's dwell time, smallest, largest and mean
 * channel sigma and channel count, then status `success`; status `failed`
 * alone when that noise is not stored (or unusable), which tells the
 * client to go on without it. (Gadgetron's mean_sigma is the sum of the
 * sigmas; ours is their mean.) */
static void answer_dependency(run *r) {
  mr_noise_stats noise;
  mr_err e = {0};
  char meta[1024];
  int n;
  if (mr_noise_store_load(r->dependency, &noise, &e) == 0) {
    double lo, hi, mean;
    mr_noise_stats_sigmas(&noise, &lo, &hi, &mean);
    n = snprintf(meta, sizeof meta,
                 "<?xml version=\"1.0\"?><ismrmrdMeta>"
                 "<meta><name>noise_dwell_time_us</name><value>%.9g</value></meta>"
                 "<meta><name>min_sigma</name><value>%.9g</value></meta>"
                 "<meta><name>max_sigma</name><value>%.9g</value></meta>"
                 "<meta><name>mean_sigma</name><value>%.9g</value></meta>"
                 "<meta><name>channels</name><value>%d</value></meta>"
                 "<meta><name>status</name><value>success</value></meta></ismrmrdMeta>",
                 (double)noise.dwell_us, lo, hi, mean, noise.nch);
    mr_noise_stats_free(&noise);
  } else {
    mr_log(MR_LOG_DEBUG, "%s: dependency query: %s", r->s->peer, e.msg);
    n = snprintf(meta, sizeof meta, "<?xml version=\"1.0\"?><ismrmrdMeta>"
                                    "<meta><name>status</name><value>failed</value></meta>"
                                    "</ismrmrdMeta>");
  }
  send_to_client(r, mr_message_new_text(MR_MSG_DEPENDENCY_QUERY, meta, (size_t)n));
}

static void on_close(run *r) {
  if (!r->failed && r->chain != NULL) {
    int rc = 0;
    if (r->state == AWAIT_HEADER) /* rule 6: a header-less run */
      rc = mr_chain_configure(r->chain, NULL, r->s->env->pool, NULL, &r->err);
    if (rc == 0)
      rc = mr_chain_flush(r->chain);
    if (rc < 0)
      take_chain_error(r, rc);
  }
  /* Nothing of a failed stream may follow its errors and CLOSE. */
  if (r->failed && r->chain != NULL)
    mr_chain_abandon(r->chain);
  if (r->state == DEPENDENCY && !r->failed)
    answer_dependency(r);
  for (int i = 0; i < r->nerrors; i++) {
    char text[700];
    int n = snprintf(text, sizeof text, "ERROR: %s", r->errors[i] != NULL ? r->errors[i] : "");
    send_to_client(r, mr_message_new_text(MR_MSG_TEXT, text, (size_t)n));
  }
  send_to_client(r, mr_message_new(MR_MSG_CLOSE));
  r->done = 1;
}

static void on_message(run *r, mr_message *m) {
  switch (m->kind) {
  case MR_MSG_CONFIG_FILE:
  case MR_MSG_CONFIG_SCRIPT:
    if (r->state != AWAIT_CONFIG)
      fail(r, MR_ESTATE, "a second config (%s) in one session", mr_message_kind_name(m->kind));
    else if (m->kind == MR_MSG_CONFIG_FILE)
      on_config_file(r, m->u.config_name);
    else
      on_config_script(r, m->u.text, m->text_len);
    /* A config that cannot be served is answered at once: the client
     * hears why before it uploads a whole dataset for nothing. */
    if (r->failed)
      on_close(r);
    break;
  case MR_MSG_HEADER:
    if (r->failed)
      break;
    if (r->state == AWAIT_CONFIG)
      fail(r, MR_ESTATE, "HEADER before a config (CONFIG_FILE or CONFIG_SCRIPT)");
    else if (r->state != AWAIT_HEADER)
      fail(r, MR_ESTATE, "a second HEADER in one session");
    else
      on_header(r, m);
    break;
  case MR_MSG_ACQUISITION:
  case MR_MSG_WAVEFORM:
  case MR_MSG_IMAGE:
    on_data(r, m);
    return; /* on_data took m */
  case MR_MSG_TEXT:
    /* Summarised in the connection's log line: a client sending TEXT in a
     * loop must not flood the log. */
    if (r->s->stats.texts++ == 0)
      snprintf(r->s->stats.first_text, sizeof r->s->stats.first_text, "%s", m->u.text);
    break;
  case MR_MSG_QUERY:
    on_query(r, m);
    break;
  case MR_MSG_CLOSE:
    on_close(r);
    break;
  default:
    fail(r, MR_EPROTO, "%s is a server-to-client message", mr_message_kind_name(m->kind));
    break;
  }
  mr_message_unref(m);
}

/* How long to wait for the client's next message, and what to say when
 * it does not come: no config in time, silence mid-stream, or no CLOSE
 * after an error (then the answer goes out without it). */
static int wait_budget(const run *r, uint64_t start_ms, const char **why) {
  const mr_server_env *env = r->s->env;
  uint64_t now = mr_now_ms();
  if (r->failed) {
    *why = NULL;
    return r->answer_by_ms > now ? (int)(r->answer_by_ms - now) : 0;
  }
  if (r->state == AWAIT_CONFIG) {
    *why = "handshake";
    uint64_t by = start_ms + (uint64_t)env->handshake_timeout_ms;
    return by > now ? (int)(by - now) : 0;
  }
  *why = "idle";
  return env->idle_timeout_ms;
}

static void time_out(run *r, const char *why) {
  const mr_server_env *env = r->s->env;
  if (why != NULL && strcmp(why, "handshake") == 0)
    fail(r, MR_ETIMEDOUT, "no config within %d ms of connecting (--handshake-timeout)",
         env->handshake_timeout_ms);
  else if (why != NULL)
    fail(r, MR_ETIMEDOUT, "no message for %d ms (--idle-timeout)", env->idle_timeout_ms);
  on_close(r);
}

static void count_gadget_time(void *ctx, const char *gadget, uint64_t busy_ns) {
  (void)ctx;
  mr_metrics_gadget_time(gadget, busy_ns);
}

void mr_session_run(mr_session *s) {
  run r = {.s = s, .state = AWAIT_CONFIG};
  uint64_t start = mr_now_ms();
  while (!r.done && !atomic_load(s->cancel)) {
    if (r.failed && mr_now_ms() >= r.answer_by_ms) {
      /* A client that keeps sending after an error without its CLOSE
       * gets its answer anyway. */
      on_close(&r);
      break;
    }
    const char *why = NULL;
    mr_envelope e;
    size_t bytes;
    if (mr_chan_pop(s->inbox, &e, &bytes, wait_budget(&r, start, &why)) < 0) {
      if (!atomic_load(s->cancel)) /* closed only by a cancel: else the wait ran out */
        time_out(&r, why);
      break;
    }
    mr_chan_release(s->inbox, bytes); /* its hook tells a paused loop of room */
    if (e.msg != NULL) {
      mr_message *m = e.msg;
      e.msg = NULL;
      on_message(&r, m);
    } else if (e.code == MR_ECONN) {
      record_error(&r, e.code, e.text); /* for the log: nobody is left to tell */
      mr_envelope_clear(&e);
      break;
    } else {
      record_error(&r, e.code, e.text);
      /* Nothing more can be read, or the client declared a size over a
       * limit (its body is not waited for): answer now. */
      if (e.code == MR_EFRAME || e.code == MR_ELIMIT)
        on_close(&r);
    }
    mr_envelope_clear(&e);
  }
  if (r.chain != NULL) {
    mr_chain_abandon(r.chain); /* its stages idle before their times are read */
    mr_chain_timings(r.chain, s->stats.gadget_time, sizeof s->stats.gadget_time);
    mr_chain_slowest_step(r.chain, s->stats.slowest_step, sizeof s->stats.slowest_step);
    mr_chain_each_timing(r.chain, count_gadget_time, NULL);
  }
  pthread_mutex_lock(&s->chain_mu);
  s->chain = NULL;
  pthread_mutex_unlock(&s->chain_mu);
  mr_chain_destroy(r.chain);
  if (r.device != NULL)
    mr_pool_release(s->env->pool, r.device);
  mr_pipeline_config_free(r.script);
  if (r.have_hdr)
    mr_stream_header_free(&r.hdr);
  for (int i = 0; i < r.nerrors; i++)
    free(r.errors[i]);
}

void mr_session_cancel(mr_session *s) {
  pthread_mutex_lock(&s->chain_mu);
  if (s->chain != NULL)
    mr_chain_interrupt(s->chain);
  pthread_mutex_unlock(&s->chain_mu);
}
