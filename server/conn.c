#include "conn.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "encode.h"
#include "log.h"
#include "conn_host.h"
#include "metrics.h"
#include "envelope.h"
#include "session.h"
#include "state_machine.h"
#include "thread_name.h"
#include "write_bufs.h"

#define READ_CHUNK 65536
/* A message body with at least this much left is received in place, into
 * the decoder's message (mr_decoder_body_room): the samples of a scan are
 * copied once, by the kernel, instead of twice. After such a read the next
 * one takes just a message id and an acquisition header, so that the body
 * after them is received in place again. */
#define IN_PLACE_MIN 4096
#define AFTER_IN_PLACE (2 + sizeof(ISMRMRD_AcquisitionHeader))
/* Buffers of one write: MR_WRITE_BUF_MAX each, so up to 64 GiB a message. */
#define WRITE_BUFS 64
/* How long a connection whose session the drain deadline cut waits for the
 * client's EOF after our CLOSE (instead of --grace): enough for the client
 * to read the answer before the socket closes. */
#define CUT_GRACE_MS 200

/* A connection is three small state machines, each changed only through
 * its enter function, which aborts on a step its table does not list (as
 * libuv asserts its handles' states): a close-ordering bug stops the
 * server where it happens instead of surfacing later as a use-after-free.
 *
 * Its life, in the order of closing (docs/protocol.md rule 2). The steps:
 *   SERVING   -> ANSWERING  the session thread stopped (or the client was refused)
 *   ANSWERING -> LINGERING  everything written, our CLOSE last: our side shut
 *   SERVING   -> DROPPED    no write completed for --write-timeout: socket closed
 *   ANSWERING -> DROPPED    (the same while writing the last answers)
 *   LINGERING -> CLOSING    the client's EOF, the grace period, the drain deadline
 *   ANSWERING -> CLOSING    answered with the client already gone (EOF, failure)
 *   DROPPED   -> CLOSING    the session thread stopped
 *   SERVING   -> CLOSING    the connection could not be set up
 */
typedef enum conn_life {
  LIFE_SERVING,   /* the session thread runs: messages in, answers out */
  LIFE_ANSWERING, /* the session is over (or never began: refused); its last answers, and
                     any the connection owes (owe_answer), are being written */
  LIFE_LINGERING, /* our CLOSE is written and our side shut: the client's bytes are
                     discarded until its EOF or a quiet grace period */
  LIFE_DROPPED,   /* the socket was closed under a running session (write stall); the
                     rest closes once the session thread has stopped */
  LIFE_CLOSING,   /* the handles are closing; the connection is freed with the last */
  LIFE_STATES
} conn_life;

/* The client's side of the socket, as the connection reads it. */
typedef enum conn_client {
  CLIENT_SENDING,       /* before its CLOSE: bytes decoded into the inbox */
  CLIENT_GARBLED,       /* before its CLOSE, framing lost (or the client refused): bytes
                           read and discarded */
  CLIENT_CLOSED,        /* its CLOSE is in; bytes still decoded, to see a second session */
  CLIENT_CLOSED_GARBLED,/* after its CLOSE, a second session or bytes that do not frame:
                           read and discarded */
  CLIENT_HALF_CLOSED,   /* it shut its side after its CLOSE (socat, nc -N): nothing more to
                           read, our answer still goes out */
  CLIENT_LEFT,          /* it shut its side before its CLOSE: the session is cancelled */
  CLIENT_LOST,          /* the socket failed or was dropped: nothing more read or written */
  CLIENT_STATES
} conn_client;

/* Receiving, and the backpressure on it. */
typedef enum conn_reading {
  READING_OFF,  /* not reading: the inbox is full, or there is nothing more to read */
  READING_ON,   /* uv_read_start is in effect */
  READING_HELD, /* stopped while the outbox is full: reading resumes once the client has
                   read it down to half */
  READING_STATES
} conn_reading;

typedef struct mr_conn {
  uv_tcp_t tcp;
  uv_async_t async;
  uv_timer_t timer;       /* closing grace */
  uv_timer_t write_timer; /* no write completed for write_timeout_ms */
  int handles_open;
  mr_conn_host *host;
  struct mr_conn *next, **pprev;
  mr_decoder *dec;
  mr_chan *inbox, *outbox; /* NULL until set up */
  mr_session session;
  uv_thread_t thread;
  int has_thread;
  atomic_int cancel;
  atomic_int session_done; /* set by the session thread; the loop acts on it (life) */
  conn_life life;
  conn_client client;
  conn_reading reading;
  int writes_pending;
  int close_queued;   /* a CLOSE of ours went into the socket's write queue */
  int close_written;  /* ... and was written */
  int evicted;        /* closes without waiting for the client's EOF (make_room) */
  int counted;        /* counts as open against --max-connections */
  int refused;        /* turned away without a session */
  /* What the connection owes its client after the session's answer: */
  enum { CUT_NO, CUT_PENDING, CUT_TOLD } cut; /* the drain deadline ended the session */
  enum { PIPELINED_NO, PIPELINED_SEEN, PIPELINED_TOLD } pipelined; /* messages after CLOSE */
  uint64_t start_ms;
  uint64_t bytes_in;   /* received from the socket */
  uint64_t images_out; /* written to the socket */
  char peer[64];
  int in_place;        /* the last read went into a message body */
  char rbuf[READ_CHUNK];
} mr_conn;

typedef struct write_req {
  uv_write_t req;
  mr_conn *conn;
  mr_message *msg;
  size_t bytes;
  mr_encoded enc;
} write_req;

/* The channels count memory (mr_envelope_bytes), the write request that
 * sends an answer included (an envelope's slot is its size and a size_t,
 * rounded up to 16). */
_Static_assert(sizeof(write_req) + sizeof(mr_message) + sizeof(mr_envelope) + 32 <=
                   MR_ENVELOPE_OVERHEAD,
               "MR_ENVELOPE_OVERHEAD must cover a queued answer's own memory");

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void maybe_finish(mr_conn *c);

/* ---- states ---- */

static const char *const life_names[LIFE_STATES] = {"serving", "answering", "lingering",
                                                    "dropped", "closing"};
static const unsigned life_steps[LIFE_STATES] = {
    [LIFE_SERVING] = MR_STEP(LIFE_ANSWERING) | MR_STEP(LIFE_DROPPED) | MR_STEP(LIFE_CLOSING),
    [LIFE_ANSWERING] = MR_STEP(LIFE_LINGERING) | MR_STEP(LIFE_DROPPED) | MR_STEP(LIFE_CLOSING),
    [LIFE_LINGERING] = MR_STEP(LIFE_CLOSING),
    [LIFE_DROPPED] = MR_STEP(LIFE_CLOSING),
    [LIFE_CLOSING] = 0,
};
static const mr_state_machine life_machine = {"connection life", life_names, life_steps};

static const char *const client_names[CLIENT_STATES] = {
    "sending", "garbled", "closed", "closed-garbled", "half-closed", "left", "lost"};
static const unsigned client_steps[CLIENT_STATES] = {
    [CLIENT_SENDING] = MR_STEP(CLIENT_GARBLED) | MR_STEP(CLIENT_CLOSED) | MR_STEP(CLIENT_LEFT) |
                       MR_STEP(CLIENT_LOST),
    [CLIENT_GARBLED] = MR_STEP(CLIENT_LEFT) | MR_STEP(CLIENT_LOST),
    [CLIENT_CLOSED] =
        MR_STEP(CLIENT_CLOSED_GARBLED) | MR_STEP(CLIENT_HALF_CLOSED) | MR_STEP(CLIENT_LOST),
    [CLIENT_CLOSED_GARBLED] = MR_STEP(CLIENT_HALF_CLOSED) | MR_STEP(CLIENT_LOST),
    [CLIENT_HALF_CLOSED] = MR_STEP(CLIENT_LOST),
    [CLIENT_LEFT] = MR_STEP(CLIENT_LOST),
    [CLIENT_LOST] = 0,
};
static const mr_state_machine client_machine = {"connection client", client_names,
                                                client_steps};

static const char *const reading_names[READING_STATES] = {"off", "on", "held"};
static const unsigned reading_steps[READING_STATES] = {
    [READING_OFF] = MR_STEP(READING_ON),
    [READING_ON] = MR_STEP(READING_OFF) | MR_STEP(READING_HELD),
    [READING_HELD] = MR_STEP(READING_ON) | MR_STEP(READING_OFF),
};
static const mr_state_machine reading_machine = {"connection reading", reading_names,
                                                 reading_steps};

static void enter_life(mr_conn *c, conn_life to) {
  mr_state_check(&life_machine, (int)c->life, (int)to, c->peer);
  c->life = to;
}

static void enter_client(mr_conn *c, conn_client to) {
  mr_state_check(&client_machine, (int)c->client, (int)to, c->peer);
  c->client = to;
}

static void enter_reading(mr_conn *c, conn_reading to) {
  mr_state_check(&reading_machine, (int)c->reading, (int)to, c->peer);
  c->reading = to;
}

/* The client sends no more (its EOF, or the socket gone). */
static int client_done(const mr_conn *c) {
  return c->client == CLIENT_HALF_CLOSED || c->client == CLIENT_LEFT || c->client == CLIENT_LOST;
}

/* Its bytes still go to the decoder. */
static int client_decoded(const mr_conn *c) {
  return c->life != LIFE_LINGERING && (c->client == CLIENT_SENDING || c->client == CLIENT_CLOSED);
}

/* The socket failed or was dropped: from any state but that one. */
static void lose_client(mr_conn *c) {
  if (c->client != CLIENT_LOST)
    enter_client(c, CLIENT_LOST);
}

/* connection_bytes bounds what the connection holds: half for read-ahead
 * (the inbox), half for answers not yet written (the outbox). */
static size_t channel_bytes(const mr_conn *c) {
  return (size_t)(c->host->env->limits->connection_bytes / 2);
}

/* ---- counting ---- */

/* A connection counts against --max-connections until its socket is
 * closed (on_handle_closed): one that lingers after our CLOSE still holds a
 * descriptor, and a client that never stops sending must not open more
 * beside it. A new client at the limit makes room instead by closing the
 * oldest connection whose CLOSE is written (make_room), so that a client
 * that reconnects as soon as it has read our CLOSE is never turned away
 * by its own last connection. Refused connections never count. */
static void uncount(mr_conn *c) {
  if (c->counted) {
    c->counted = 0;
    c->host->release(c->host->ctx);
    mr_metrics_connection_closed();
  }
}

/* An error the connection itself found, for the log line; only once the
 * session thread is done with the stats. */
static void note_error(mr_conn *c, const char *text) {
  mr_session_stats *st = &c->session.stats;
  if (st->errors++ == 0)
    snprintf(st->first_error, sizeof st->first_error, "%s", text);
}

/* ---- teardown ---- */

/* A health check (queries and CLOSE, nothing else, no error) is logged at
 * debug level: monitoring every few seconds must not fill the log. */
static int is_health_check(const mr_conn *c) {
  const mr_session_stats *st = &c->session.stats;
  return st->config[0] == '\0' && st->acquisitions == 0 && st->waveforms == 0 &&
         st->texts == 0 && st->errors == 0 && c->images_out == 0;
}

static void log_session(const mr_conn *c) {
  const mr_session_stats *st = &c->session.stats;
  double secs = (double)(uv_now(c->host->loop) - c->start_ms) / 1000.0;
  char extra[240] = "";
  if (st->empty_acquisitions > 0) /* skipped by the chain, which tells the client */
    snprintf(extra, sizeof extra, " empty_acquisitions=%llu",
             (unsigned long long)st->empty_acquisitions);
  if (st->texts > 0)
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " texts=%llu first_text=\"%s\"",
             (unsigned long long)st->texts, st->first_text);
  mr_log(st->errors ? MR_LOG_WARN : is_health_check(c) ? MR_LOG_DEBUG : MR_LOG_INFO,
         "%s config=%s acquisitions=%llu waveforms=%llu images=%llu bytes_in=%llu "
         "duration=%.3fs errors=%d%s%s%s%s%s%s%s",
         c->peer, st->config[0] ? st->config : "-", (unsigned long long)st->acquisitions,
         (unsigned long long)st->waveforms, (unsigned long long)c->images_out,
         (unsigned long long)c->bytes_in, secs, st->errors, extra,
         st->gadget_time[0] ? " gadgets=" : "", st->gadget_time,
         st->slowest_step[0] ? " slowest_step=" : "", st->slowest_step,
         st->errors ? " first_error=" : "", st->first_error);
}

static void count_session(const mr_conn *c) {
  mr_metrics_outcome outcome = c->refused         ? MR_OUTCOME_REFUSED
                               : c->cut != CUT_NO ? MR_OUTCOME_CUT
                               : c->session.stats.errors ? MR_OUTCOME_ERROR
                                                         : MR_OUTCOME_OK;
  mr_metrics_session_finished(c->session.stats.config, outcome,
                              (double)(uv_now(c->host->loop) - c->start_ms) / 1000.0);
}

static void on_handle_closed(uv_handle_t *h) {
  mr_conn *c = h->data;
  if (--c->handles_open > 0)
    return;
  if (c->has_thread)
    uv_thread_join(&c->thread);
  uncount(c);
  log_session(c);
  count_session(c);
  *c->pprev = c->next;
  if (c->next != NULL)
    c->next->pprev = c->pprev;
  mr_conn_host *host = c->host;
  host->nconns--;
  mr_decoder_destroy(c->dec);
  mr_chan_free(c->inbox);
  mr_chan_free(c->outbox);
  free(c);
  if (host->closed != NULL)
    host->closed(host->ctx);
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h))
    uv_close(h, on_handle_closed);
}

/* Only once the session thread is done: it signals through the async. */
static void close_all(mr_conn *c) {
  enter_life(c, LIFE_CLOSING);
  close_handle((uv_handle_t *)&c->tcp);
  close_handle((uv_handle_t *)&c->async);
  close_handle((uv_handle_t *)&c->timer);
  close_handle((uv_handle_t *)&c->write_timer);
}

/* The client is gone (or must go): stop the session where it stands. */
static void cancel_session(mr_conn *c) {
  if (c->life == LIFE_CLOSING)
    return; /* its session thread is done (or never ran), its handles closing */
  atomic_store(&c->cancel, 1);
  mr_chan_close(c->inbox);
  mr_chan_close(c->outbox);
  if (c->has_thread)
    mr_session_cancel(&c->session);
}

/* At --max-connections: the oldest connection whose CLOSE is written (it
 * has answered in full) stops counting and closes: at once when it only
 * waits for its client's EOF, else without that wait once its session
 * thread has stopped (begin_closing). 1 when one made room. */
static int make_room(mr_conn_host *host) {
  mr_conn *oldest = NULL;
  for (mr_conn *c = host->conns; c != NULL; c = c->next)
    if (c->close_written && c->counted)
      oldest = c; /* the list is newest first */
  if (oldest == NULL)
    return 0;
  uncount(oldest);
  oldest->evicted = 1;
  if (oldest->life == LIFE_LINGERING)
    close_all(oldest);
  return 1;
}

void mr_conn_cancel_all(mr_conn_host *host) {
  for (mr_conn *c = host->conns; c != NULL; c = c->next) {
    if (c->life == LIFE_LINGERING) {
      close_all(c); /* answered in full: waiting for its EOF must not hold the exit */
      continue;
    }
    if (!atomic_load(&c->session_done) && c->cut == CUT_NO)
      c->cut = CUT_PENDING; /* told once its session thread stops (maybe_finish) */
    cancel_session(c);
  }
}

static void on_grace_timeout(uv_timer_t *t) {
  mr_conn *c = t->data;
  close_all(c);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  mr_conn *c = req->data;
  free(req);
  /* Closing the socket cancels a shutdown still pending: already CLOSING. */
  if (status < 0 && c->life == LIFE_LINGERING)
    close_all(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Our CLOSE is written. Rule 2: shut our side and keep reading until the
 * peer closes, so a client still sending never meets a reset. */
static void begin_closing(mr_conn *c) {
  if (client_done(c) || c->evicted) { /* nothing to wait for (or no time to) */
    close_all(c);
    return;
  }
  enter_life(c, LIFE_LINGERING);
  uv_shutdown_t *req = malloc(sizeof *req);
  if (req == NULL || (req->data = c, uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown)) < 0) {
    free(req);
    close_all(c);
    return;
  }
  /* Read (and discard) whatever still comes, the outbox no longer matters. */
  if (c->reading != READING_ON && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    enter_reading(c, READING_ON);
  /* One grace period from now, never restarted by what arrives: a client
   * that keeps sending after our CLOSE is drained that long, then closed. A
   * session the drain deadline cut lingers only briefly: the server is
   * past its deadline. */
  int grace = c->host->close_grace_ms;
  if (c->cut != CUT_NO && grace > CUT_GRACE_MS)
    grace = CUT_GRACE_MS;
  uv_timer_start(&c->timer, on_grace_timeout, (uint64_t)grace, 0);
}

static int send_error(mr_conn *c, const char *why);

/* What the connection itself still owes its client once the session is
 * over and its answer written: word that the drain deadline cut the
 * session, or that a second session sent after the CLOSE is not served.
 * Returns 1 when that went into the write queue. */
static int owe_answer(mr_conn *c) {
  char why[200];
  if (c->cut == CUT_PENDING) {
    c->cut = CUT_TOLD;
    if (c->close_queued)
      return 0; /* the session had answered in full before the cut */
    snprintf(why, sizeof why,
             "server shutting down: the session was cut before it finished (--drain-timeout "
             "%d ms)",
             c->host->drain_timeout_ms);
    mr_metrics_error(MR_ERRKIND_SHUTDOWN);
  } else if (c->pipelined == PIPELINED_SEEN && c->close_queued) {
    c->pipelined = PIPELINED_TOLD;
    snprintf(why, sizeof why,
             "a second session on one connection (messages after its CLOSE) is not served: "
             "open a connection for each session");
    mr_metrics_error(MR_ERRKIND_PROTOCOL);
  } else {
    return 0;
  }
  note_error(c, why);
  return send_error(c, why) == 0;
}

/* Every path that may end the session's part comes here: the session
 * thread stopped, a write completed, the client left. */
static void maybe_finish(mr_conn *c) {
  if (!atomic_load(&c->session_done))
    return;
  if (c->life == LIFE_SERVING)
    enter_life(c, LIFE_ANSWERING);
  if ((c->life != LIFE_ANSWERING && c->life != LIFE_DROPPED) || c->writes_pending > 0 ||
      mr_chan_bytes(c->outbox) > 0)
    return;
  if (owe_answer(c))
    return; /* back here when it is written */
  begin_closing(c);
}

/* ---- writing ---- */

/* A client that stops reading blocks its chain on a full outbox; past the
 * write timeout it is dropped so it cannot hold a pipeline forever. */
static void on_write_stall(uv_timer_t *t) {
  mr_conn *c = t->data;
  mr_log(MR_LOG_WARN, "%s: no output written for %d ms (--write-timeout): dropping the client",
         c->peer, c->host->write_timeout_ms);
  mr_metrics_error(MR_ERRKIND_TIMEOUT);
  lose_client(c);
  cancel_session(c);
  enter_life(c, LIFE_DROPPED);
  if (c->reading != READING_OFF)
    enter_reading(c, READING_OFF);
  /* Closing the socket fails the stuck writes; the rest closes once the
   * session thread has noticed the cancel (maybe_finish). */
  close_handle((uv_handle_t *)&c->tcp);
}

/* Armed while writes are pending on a live socket (SERVING, ANSWERING). */
static void arm_write_timer(mr_conn *c) {
  if (c->writes_pending > 0 && (c->life == LIFE_SERVING || c->life == LIFE_ANSWERING))
    uv_timer_start(&c->write_timer, on_write_stall, (uint64_t)c->host->write_timeout_ms, 0);
  else
    uv_timer_stop(&c->write_timer);
}

static void start_reading(mr_conn *c);

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  mr_conn *c = w->conn;
  c->writes_pending--;
  if (w->bytes > 0)
    mr_chan_release(c->outbox, w->bytes);
  if (status == 0)
    mr_metrics_bytes_out(w->enc.total);
  if (status == 0 && w->msg->kind == MR_MSG_CLOSE)
    c->close_written = 1;
  if (status == 0 && w->msg->kind == MR_MSG_IMAGE) {
    c->images_out++; /* the log counts images the client was sent */
    mr_metrics_images(1);
  }
  mr_message_unref(w->msg);
  free(w);
  if (c->life == LIFE_CLOSING)
    return; /* cancelled by the socket's closing: nothing left to drive */
  if (status < 0 && c->client != CLIENT_LOST) {
    mr_log(MR_LOG_DEBUG, "%s: write failed: %s", c->peer, uv_strerror(status));
    lose_client(c);
    cancel_session(c);
  }
  arm_write_timer(c);
  start_reading(c);
  maybe_finish(c);
}

/* Encodes msg and queues it on the socket (takes msg). `counted` is what
 * it counts against the outbox until written: 0 for the connection's own
 * answers, which never went through it. */
static int write_message(mr_conn *c, mr_message *msg, size_t counted) {
  write_req *w = calloc(1, sizeof *w);
  int rc = w == NULL                    ? MR_ENOMEM
           : c->client == CLIENT_LOST ? MR_ECONN
                                      : mr_encode(msg, &w->enc);
  if (rc == 0) {
    uv_buf_t bufs[WRITE_BUFS];
    int n = mr_write_bufs(&w->enc, bufs, WRITE_BUFS);
    w->conn = c;
    w->msg = msg;
    w->bytes = counted;
    rc = n < 0 ? n
               : uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)n, on_written) == 0
                     ? 0
                     : MR_EIO;
    if (rc == 0) {
      if (msg->kind == MR_MSG_CLOSE)
        c->close_queued = 1;
      if (c->writes_pending++ == 0)
        arm_write_timer(c);
      return 0;
    }
  }
  if (rc != MR_ECONN)
    mr_log(MR_LOG_WARN, "%s: cannot send %s: %s", c->peer, mr_message_kind_name(msg->kind),
           mr_strerror(rc));
  free(w);
  mr_message_unref(msg);
  if (counted > 0)
    mr_chan_release(c->outbox, counted);
  return rc;
}

static void write_outbox(mr_conn *c) {
  mr_envelope e;
  size_t bytes;
  while (mr_chan_pop(c->outbox, &e, &bytes, 0) == 0) {
    if (e.msg != NULL)
      write_message(c, e.msg, bytes);
    else
      mr_chan_release(c->outbox, bytes);
    e.msg = NULL;
    mr_envelope_clear(&e);
  }
}

/* TEXT "ERROR: why", then CLOSE, written by the connection itself. */
static int send_error(mr_conn *c, const char *why) {
  char text[300];
  int n = snprintf(text, sizeof text, "ERROR: %s", why);
  mr_message *t = mr_message_new_text(MR_MSG_TEXT, text, (size_t)n);
  int rc = t != NULL ? write_message(c, t, 0) : MR_ENOMEM;
  mr_message *close_msg = mr_message_new(MR_MSG_CLOSE);
  if (rc == 0)
    rc = close_msg != NULL ? write_message(c, close_msg, 0) : MR_ENOMEM;
  else
    mr_message_unref(close_msg);
  return rc;
}

/* The session thread woke us (the channels' hooks, or its end): output
 * to write, room in the inbox, or the session is over. */
static void on_async(uv_async_t *a) {
  mr_conn *c = a->data;
  write_outbox(c);
  start_reading(c);
  maybe_finish(c);
}

static void wake_loop(void *ctx) {
  mr_conn *c = ctx;
  uv_async_send(&c->async);
}

/* ---- reading ---- */

/* Reading goes on while both queues have room. A client that sends
 * without reading its answers (a QUERY flood) fills the outbox: it is not
 * read again until the outbox has drained to half, so what a connection
 * holds stays within its two queues' bounds. */
static void start_reading(mr_conn *c) {
  if (c->reading == READING_ON || client_done(c) ||
      (c->life != LIFE_SERVING && c->life != LIFE_ANSWERING) || mr_chan_full(c->inbox))
    return;
  size_t out = mr_chan_bytes(c->outbox), bound = channel_bytes(c);
  if (c->reading == READING_HELD ? out > bound / 2 : out >= bound)
    return;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    enter_reading(c, READING_ON);
}

/* to: READING_OFF, or READING_HELD (until the outbox drains). */
static void stop_reading(mr_conn *c, conn_reading to) {
  uv_read_stop((uv_stream_t *)&c->tcp);
  enter_reading(c, to);
}

/* A message after the client's CLOSE starts a second session on the same
 * connection: it is not served (one session per connection), and the
 * client is told so after the first session's answer. */
static int after_close(mr_conn *c) {
  if (c->pipelined == PIPELINED_NO)
    c->pipelined = PIPELINED_SEEN;
  if (c->client == CLIENT_CLOSED)
    enter_client(c, CLIENT_CLOSED_GARBLED);
  return MR_ECANCELED; /* stops the decoder: the rest is discarded */
}

static int on_decoded(void *ctx, mr_message *msg) {
  mr_conn *c = ctx;
  if (c->client != CLIENT_SENDING) {
    mr_message_unref(msg);
    return after_close(c);
  }
  if (msg->kind == MR_MSG_CLOSE)
    enter_client(c, CLIENT_CLOSED);
  return mr_envelope_send(c->inbox, msg, 0) == MR_ENOMEM ? MR_ENOMEM : 0;
}

static void on_rejected(void *ctx, int code, const char *text) {
  mr_conn *c = ctx;
  if (c->client != CLIENT_SENDING)
    after_close(c);
  else
    mr_envelope_send_event(c->inbox, code, text);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mr_conn *c = h->data;
  void *body = NULL;
  size_t room = client_decoded(c) ? mr_decoder_body_room(c->dec, &body) : 0;
  if (room >= IN_PLACE_MIN) {
    *buf = uv_buf_init(body, room > UINT_MAX ? UINT_MAX : (unsigned)room);
    return;
  }
  *buf = uv_buf_init(c->rbuf, c->in_place ? AFTER_IN_PLACE : sizeof c->rbuf);
}

/* The client's EOF, or the socket failed. */
static void on_read_end(mr_conn *c, ssize_t nread) {
  stop_reading(c, READING_OFF);
  if (nread != UV_EOF) {
    mr_log(MR_LOG_DEBUG, "%s: read failed: %s", c->peer, uv_strerror((int)nread));
    lose_client(c);
  } else if (c->client == CLIENT_SENDING || c->client == CLIENT_GARBLED) {
    enter_client(c, CLIENT_LEFT);
  } else if (c->client == CLIENT_CLOSED || c->client == CLIENT_CLOSED_GARBLED) {
    enter_client(c, CLIENT_HALF_CLOSED);
  }
  if (c->life == LIFE_LINGERING) {
    close_all(c);
    return;
  }
  /* A client may shut its side after its CLOSE and still read our answer
   * (socat, nc -N): writing goes on until our CLOSE is out. One that
   * leaves before its CLOSE is gone. */
  if (c->client != CLIENT_HALF_CLOSED) {
    mr_envelope_send_event(c->inbox, MR_ECONN,
                           nread == UV_EOF ? "the client left before its CLOSE"
                                           : "the connection failed before the client's CLOSE");
    cancel_session(c);
  }
  maybe_finish(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mr_conn *c = s->data;
  if (nread < 0) {
    on_read_end(c, nread);
    return;
  }
  c->bytes_in += (uint64_t)nread;
  mr_metrics_bytes_in((uint64_t)nread);
  /* Answered already (after an error, maybe before the client's CLOSE):
   * what still comes is discarded, within the grace period, so that a
   * client mid-upload never meets a reset. */
  if (nread == 0 || !client_decoded(c))
    return;
  c->in_place = buf->base != c->rbuf;
  int rc = c->in_place ? mr_decoder_received(c->dec, (size_t)nread)
                       : mr_decoder_feed(c->dec, c->rbuf, (size_t)nread);
  /* A second session after the CLOSE stopped the decoder (after_close,
   * CLOSED_GARBLED already); anything else that does not frame is told to
   * the session. */
  if (rc < 0 && (c->client == CLIENT_SENDING || c->client == CLIENT_CLOSED)) {
    mr_envelope_send_event(c->inbox, MR_EFRAME,
                           rc == MR_ENOMEM ? "out of memory reading a message"
                                           : mr_decoder_error(c->dec));
    enter_client(c, c->client == CLIENT_SENDING ? CLIENT_GARBLED : CLIENT_CLOSED_GARBLED);
  }
  if (mr_chan_full(c->inbox)) {
    mr_chan_pause(c->inbox); /* on_room wakes the loop when it has drained to half */
    stop_reading(c, READING_OFF);
    /* The session may have drained the channel between the check and the
     * pause; look again so we never sleep on a channel nobody will wake. */
    if (!mr_chan_full(c->inbox))
      uv_async_send(&c->async);
  } else if (mr_chan_full(c->outbox)) {
    stop_reading(c, READING_HELD); /* on_written reads again once the client has read */
  }
}

/* ---- accepting ---- */

static void session_thread(void *arg) {
  mr_conn *c = arg;
  mr_thread_name("mr-session");
  mr_session_run(&c->session);
  atomic_store(&c->session_done, 1);
  uv_async_send(&c->async);
}

static void peer_name(uv_tcp_t *tcp, char *out, size_t size) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char host[64] = "?";
  int port = 0;
  if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
  }
  snprintf(out, size, "%s:%d", host, port);
}

/* Tells the client why it cannot be served and lets go, without a session
 * thread; what it sends meanwhile is discarded. */
static void refuse(mr_conn *c, const char *why) {
  note_error(c, why);
  c->refused = 1;
  enter_client(c, CLIENT_GARBLED); /* what it sends meanwhile is discarded */
  atomic_store(&c->session_done, 1);
  send_error(c, why);
  maybe_finish(c);
}

void mr_conn_accept(mr_conn_host *host, int fd) {
  mr_conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    mr_log(MR_LOG_ERROR, "out of memory accepting a connection");
    close(fd);
    return;
  }
  c->host = host;
  c->start_ms = uv_now(host->loop);
  uv_tcp_init(host->loop, &c->tcp);
  uv_async_init(host->loop, &c->async, on_async);
  uv_timer_init(host->loop, &c->timer);
  uv_timer_init(host->loop, &c->write_timer);
  c->tcp.data = c->async.data = c->timer.data = c->write_timer.data = c;
  c->handles_open = 4;
  c->next = host->conns;
  if (c->next != NULL)
    c->next->pprev = &c->next;
  c->pprev = &host->conns;
  host->conns = c;
  host->nconns++;
  /* A newcomer at the limit makes room by closing a connection that only
   * lingers after our CLOSE (on this loop), then takes the slot. */
  c->counted = host->admit(host->ctx) || (make_room(host) && host->admit(host->ctx));
  int busy = !c->counted;
  if (c->counted)
    mr_metrics_connection_open();
  snprintf(c->peer, sizeof c->peer, "?");
  mr_decoder_callbacks cb = {on_decoded, on_rejected, c};
  int uv_rc = uv_tcp_open(&c->tcp, fd);
  if (uv_rc != 0)
    close(fd);
  /* The loop hears of room in the inbox and of answers in the outbox
   * through the channels' hooks (uv_async_send: any thread). */
  int rc = mr_envelope_channel(channel_bytes(c), mr_metrics_inbox_bytes, NULL, wake_loop, c,
                               &c->inbox);
  if (rc == 0)
    rc = mr_envelope_channel(channel_bytes(c), mr_metrics_outbox_bytes, wake_loop, NULL, c,
                             &c->outbox);
  if (rc == 0)
    rc = mr_decoder_create(host->env->limits, &cb, &c->dec);
  if (uv_rc != 0 || rc != 0) {
    mr_log(MR_LOG_ERROR, "cannot accept a connection: %s",
           uv_rc != 0 ? uv_strerror(uv_rc) : mr_strerror(rc));
    atomic_store(&c->session_done, 1);
    enter_client(c, CLIENT_LOST);
    close_all(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  peer_name(&c->tcp, c->peer, sizeof c->peer);
  c->session = (mr_session){.env = host->env, .inbox = c->inbox, .outbox = c->outbox,
                            .cancel = &c->cancel, .chain_mu = PTHREAD_MUTEX_INITIALIZER,
                            .peer = c->peer};
  mr_log(MR_LOG_DEBUG, "%s: connected", c->peer);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    enter_reading(c, READING_ON);
  if (busy) {
    char why[128];
    snprintf(why, sizeof why, "server busy: %d connections open (--max-connections %d)",
             host->open_count(host->ctx), host->max_connections);
    mr_metrics_error(MR_ERRKIND_BUSY);
    refuse(c, why);
    return;
  }
  if (uv_thread_create(&c->thread, session_thread, c) != 0) {
    mr_log(MR_LOG_ERROR, "%s: cannot start a pipeline thread", c->peer);
    refuse(c, "server cannot start a pipeline thread");
    return;
  }
  c->has_thread = 1;
}
