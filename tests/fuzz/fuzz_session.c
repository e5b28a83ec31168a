/* libFuzzer target: the session state machine. The input is decoded as a
 * client's byte stream; every message (and every rejection) goes to a
 * session running the installed configs on a CPU pool, as a connection's
 * pipeline thread would see it. Whatever the order or content, the session
 * must end with a CLOSE and leak nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "budget.h"
#include "config_dir.h"
#include "decode.h"
#include "log.h"
#include "pool.h"
#include "session.h"

#ifndef MR_FUZZ_CONFIG_DIR
#define MR_FUZZ_CONFIG_DIR "configs"
#endif

static mr_config_dir configs;
static mr_pool *pool;
static mr_limits limits;
static mr_server_env env;

static void quiet(void *ctx, const char *line) {
  (void)ctx;
  (void)line;
}

static void setup(void) {
  mr_err err = {0};
  if (mr_config_dir_load(MR_FUZZ_CONFIG_DIR, &configs, &err) < 0 ||
      mr_pool_create(&(mr_pool_opts){.gpus = "none", .cpu_threads = 1, .log = quiet}, &pool,
                     &err) < 0) {
    fprintf(stderr, "fuzz_session: %s\n", err.msg);
    abort();
  }
  limits = mr_limits_default;
  limits.header_bytes = limits.config_script_bytes = limits.text_bytes = 16384;
  limits.acquisition_bytes = limits.image_bytes = 1 << 18;
  /* A header may ask for a huge matrix: the budget must say no. */
  mr_budget_set(64u << 20);
  mr_log_set_level(MR_LOG_ERROR);
  /* Long timeouts: the end of the input (a closed inbox) ends a session,
   * and errors keep the session reading, as a patient client would. */
  env = (mr_server_env){.configs = &configs, .pool = pool, .limits = &limits,
                        .version = "fuzz", .handshake_timeout_ms = 3600000,
                        .idle_timeout_ms = 3600000, .error_grace_ms = 3600000};
}

static int to_inbox(void *ctx, mr_message *m) { return mr_envelope_send(ctx, m, 0); }

static void rejected(void *ctx, int code, const char *text) {
  mr_envelope_send_event(ctx, code, text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  mr_chan *inbox = NULL, *outbox = NULL;
  if (mr_envelope_channel(0, NULL, NULL, NULL, NULL, &inbox) < 0 ||
      mr_envelope_channel(0, NULL, NULL, NULL, NULL, &outbox) < 0)
    abort();
  mr_decoder_callbacks cb = {to_inbox, rejected, inbox};
  mr_decoder *d = NULL;
  mr_decoder_create(&limits, &cb, &d);
  if (mr_decoder_feed(d, data, size) < 0)
    mr_envelope_send_event(inbox, MR_EFRAME, mr_decoder_error(d));
  mr_decoder_destroy(d);
  mr_chan_close(inbox); /* the end of the input: an idle client */
  atomic_int cancel = 0;
  mr_session s = {.env = &env, .inbox = inbox, .outbox = outbox, .cancel = &cancel,
                  .chain_mu = PTHREAD_MUTEX_INITIALIZER, .peer = "fuzz"};
  mr_session_run(&s);
  /* The last thing a session sends is CLOSE. */
  mr_envelope e, last = {0};
  int any = 0;
  while (mr_chan_pop(outbox, &e, NULL, 0) == 0) {
    mr_envelope_clear(&last);
    last = e;
    any = 1;
  }
  if (!any || last.msg == NULL || last.msg->kind != MR_MSG_CLOSE)
    abort();
  mr_envelope_clear(&last);
  mr_chan_free(inbox);
  mr_chan_free(outbox);
  return 0;
}
