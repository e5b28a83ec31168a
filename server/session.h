/* One client's session, run on its own pipeline thread:
 *
 *   CONFIG -> HEADER -> STREAM -> (CLOSE) -> drain -> TEXT errors -> CLOSE
 *
 * It takes messages from the inbox the loop thread fills, builds and runs
 * the gadget chain, answers QUERY, and puts what goes back to the client
 * in the outbox (waiting when it is full: that is the backpressure on the
 * chain). A failure is that client's alone: it becomes a TEXT error after
 * the client's CLOSE, then CLOSE (docs/protocol.md rules 1-2). */
#ifndef MR_SERVER_SESSION_H
#define MR_SERVER_SESSION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config_dir.h"
#include "wire_limits.h"
#include "envelope.h"

struct mr_pool;

/* What every session shares, read-only. */
typedef struct mr_server_env {
  const mr_config_dir *configs;
  struct mr_pool *pool;
  const mr_limits *limits;
  const char *version;
  int handshake_timeout_ms; /* connection to config */
  int idle_timeout_ms;      /* between two messages of a client */
  int error_grace_ms;       /* after an error, for the client's CLOSE */
  /* A client's CONFIG_SCRIPT may use the external gadget, which connects
   * to any address the server can reach and starts programs from
   * --external-dir (--allow-script-external). 0: only installed configs
   * may. */
  int script_external;
} mr_server_env;

/* What the session saw, for the connection's log line (the connection
 * itself counts the bytes it read and the images it wrote). */
typedef struct mr_session_stats {
  char config[128];
  uint64_t acquisitions, waveforms;
  uint64_t empty_acquisitions; /* imaging ones with no samples or no channels (the chain
                                  skips them) */
  uint64_t texts;       /* TEXT messages from the client: summarised, not logged each */
  char first_text[128]; /* the first of them */
  int errors;
  char first_error[256];
  char gadget_time[512]; /* mr_chain_timings() at the end */
  char slowest_step[96]; /* mr_chain_slowest_step() at the end */
} mr_session_stats;

typedef struct mr_session {
  const mr_server_env *env;
  /* Channels of mr_envelope (envelope.h). Their hooks tell the loop
   * thread of answers in the outbox and of room in the inbox. */
  mr_chan *inbox;  /* filled by the loop thread */
  mr_chan *outbox; /* drained by the loop thread */
  const atomic_int *cancel; /* set when the client is gone */
  /* The session's chain while one runs (the session thread sets it), for
   * mr_session_cancel. Initialise with PTHREAD_MUTEX_INITIALIZER. */
  pthread_mutex_t chain_mu;
  struct mr_chain *chain;
  const char *peer;
  mr_session_stats stats;
} mr_session;

/* The pipeline thread's body; returns when the session is over (CLOSE
 * answered, or the client gone). */
void mr_session_run(mr_session *s);

/* From the loop thread, after setting *cancel and closing the channels:
 * interrupts the running chain (mr_chain_interrupt), so a step waiting on
 * a peer (external) stops at once instead of at its timeout. */
void mr_session_cancel(mr_session *s);

#endif
