/* Server-wide counters for the /metrics endpoint (Prometheus text format).
 *
 * Every update is one or a few relaxed atomic adds on fixed slots, so the
 * loop thread and the pipeline threads may count per message, and the HTTP
 * thread may read at any time, without a lock. Labels come from fixed sets
 * (the installed configs, the gadget registry, the error kinds below): a
 * client can never grow the number of series. The counters are process-wide,
 * like the memory budget; a process runs one server. */
#ifndef MR_SERVER_METRICS_H
#define MR_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "config_dir.h"

struct mr_pool;

/* How a connection ended. */
typedef enum mr_metrics_outcome {
  MR_OUTCOME_OK,      /* answered in full, no error */
  MR_OUTCOME_ERROR,   /* the client was told of an error, or left early */
  MR_OUTCOME_CUT,     /* cut at the drain deadline */
  MR_OUTCOME_REFUSED, /* turned away (--max-connections) */
  MR_OUTCOME_COUNT
} mr_metrics_outcome;

/* What went wrong, for mrrecon_errors_total{kind}. */
typedef enum mr_metrics_error_kind {
  MR_ERRKIND_PROTOCOL,   /* malformed or out-of-order messages */
  MR_ERRKIND_LIMIT,      /* a size over a limit, or over the memory budget */
  MR_ERRKIND_CONFIG,     /* unknown or invalid config */
  MR_ERRKIND_HEADER,     /* invalid ISMRMRD header */
  MR_ERRKIND_DATA,       /* NaN, compressed or otherwise unusable data */
  MR_ERRKIND_MEMORY,     /* out of host memory */
  MR_ERRKIND_GPU,        /* a GPU error or out of GPU memory */
  MR_ERRKIND_PROCESSING, /* a gadget failed otherwise */
  MR_ERRKIND_TIMEOUT,    /* handshake, idle or write timeout */
  MR_ERRKIND_CONNECTION, /* the client left or its socket failed */
  MR_ERRKIND_BUSY,       /* turned away at --max-connections */
  MR_ERRKIND_SHUTDOWN,   /* cut at the drain deadline */
  MR_ERRKIND_COUNT
} mr_metrics_error_kind;

/* The kind of an MR_E* code. */
mr_metrics_error_kind mr_metrics_error_kind_of(int code);

/* Names the config slots after the installed configs (borrows configs for
 * the life of the process) and records the server's capacity. Call once at
 * start-up, before any other thread counts. Sessions of another config
 * (a CONFIG_SCRIPT, an unknown name) count as "other", those that never
 * named one (health checks) as "none". */
void mr_metrics_init(const mr_config_dir *configs, int max_connections);

/* A connection is being served (counts against --max-connections) / is no
 * longer. */
void mr_metrics_connection_open(void);
void mr_metrics_connection_closed(void);
/* Where the server stands: not ready until it accepts, nor once it drains. */
typedef enum mr_metrics_state {
  MR_STATE_STARTING,  /* the protocol port is not listening yet */
  MR_STATE_WARMING,   /* listening, replaying --warm's sessions to itself (warm.h) */
  MR_STATE_ACCEPTING, /* serving */
  MR_STATE_DRAINING   /* SIGTERM / SIGINT: no new connections */
} mr_metrics_state;
void mr_metrics_set_state(mr_metrics_state state);
/* The warm-up is over: warming becomes accepting (a draining server stays
 * draining). */
void mr_metrics_warmed(void);

/* A connection ended: its config (borrowed; "" for none), how, and how
 * long it lasted. */
void mr_metrics_session_finished(const char *config, mr_metrics_outcome outcome, double seconds);
/* Time a gadget (by registry name; borrowed) spent on one session. */
void mr_metrics_gadget_time(const char *gadget, uint64_t busy_ns);
void mr_metrics_error(mr_metrics_error_kind kind);

void mr_metrics_bytes_in(uint64_t bytes);
void mr_metrics_bytes_out(uint64_t bytes);
void mr_metrics_acquisitions(uint64_t n);
void mr_metrics_images(uint64_t n);
/* The loop threads (loops.h): how many, and a connection handed to one. */
#define MR_METRICS_MAX_LOOPS 64
void mr_metrics_loops(int n);
void mr_metrics_loop_connection(int loop);
/* Bytes held in the connections' inboxes / outboxes (+ or -). */
void mr_metrics_inbox_bytes(int64_t delta);
void mr_metrics_outbox_bytes(int64_t delta);

/* Ready for new scans: accepting, below --max-connections and with
 * at least MR_METRICS_BUDGET_HEADROOM of the memory budget free. Writes a
 * short reason when not (why may be NULL). */
#define MR_METRICS_BUDGET_HEADROOM 0.05
int mr_metrics_ready(char *why, size_t size);

/* Every metric in Prometheus text exposition format 0.0.4; pool (borrowed,
 * may be NULL) adds its devices. *out is malloc'ed (the caller takes it).
 * 0 or MR_ENOMEM. */
int mr_metrics_render(struct mr_pool *pool, char **out, size_t *len);

#endif
