#include "conn.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "encode.h"
#include "log.h"
#include "queue.h"
#include "server.h"
#include "session.h"

#define READ_CHUNK 65536

typedef struct mr_conn {
  uv_tcp_t tcp;
  uv_async_t async;
  uv_timer_t timer;       /* closing grace */
  uv_timer_t write_timer; /* no write completed for write_timeout_ms */
  int handles_open;
  mr_server *server;
  struct mr_conn *next, **pprev;
  mr_decoder *dec;
  mr_queue inbox, outbox;
  mr_session session;
  uv_thread_t thread;
  int has_thread;
  atomic_int cancel;
  atomic_int session_done;
  int got_close;      /* the decoder delivered the client's CLOSE */
  int reading;        /* uv_read_start is in effect */
  int peer_eof;       /* the peer shut its side, or the socket failed */
  int framing_lost;   /* decoder failed: discard whatever else arrives */
  int writes_pending;
  int closing;        /* our side is done: shut down, wait for EOF */
  uint64_t closing_since_ms;
  uint64_t start_ms;
  char peer[64];
  char rbuf[READ_CHUNK];
} mr_conn;

typedef struct write_req {
  uv_write_t req;
  mr_conn *conn;
  mr_message *msg;
  size_t bytes;
  mr_encoded enc;
} write_req;

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void maybe_finish(mr_conn *c);

/* ---- teardown ---- */

static void log_session(const mr_conn *c) {
  const mr_session_stats *st = &c->session.stats;
  double secs = (double)(uv_now(c->server->loop) - c->start_ms) / 1000.0;
  mr_log(st->errors ? MR_LOG_WARN : MR_LOG_INFO,
         "%s config=%s acquisitions=%llu waveforms=%llu images=%llu bytes_in=%llu "
         "duration=%.3fs errors=%d%s%s%s%s",
         c->peer, st->config[0] ? st->config : "-", (unsigned long long)st->acquisitions,
         (unsigned long long)st->waveforms, (unsigned long long)st->images,
         (unsigned long long)st->bytes_in, secs, st->errors, st->gadget_time[0] ? " gadgets=" : "",
         st->gadget_time, st->errors ? " first_error=" : "", st->first_error);
}

static void on_handle_closed(uv_handle_t *h) {
  mr_conn *c = h->data;
  if (--c->handles_open > 0)
    return;
  if (c->has_thread)
    uv_thread_join(&c->thread);
  log_session(c);
  *c->pprev = c->next;
  if (c->next != NULL)
    c->next->pprev = c->pprev;
  mr_server *server = c->server;
  mr_decoder_destroy(c->dec);
  mr_queue_destroy(&c->inbox);
  mr_queue_destroy(&c->outbox);
  free(c);
  mr_server_conn_closed(server);
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h))
    uv_close(h, on_handle_closed);
}

/* Only once the session thread is done: it signals through the async. */
static void close_all(mr_conn *c) {
  close_handle((uv_handle_t *)&c->tcp);
  close_handle((uv_handle_t *)&c->async);
  close_handle((uv_handle_t *)&c->timer);
  close_handle((uv_handle_t *)&c->write_timer);
}

/* The client is gone (or must go): stop the session where it stands. */
static void cancel_session(mr_conn *c) {
  atomic_store(&c->cancel, 1);
  mr_queue_close(&c->inbox);
  mr_queue_close(&c->outbox);
}

void mr_conn_cancel_all(mr_server *server) {
  for (mr_conn *c = server->conns; c != NULL; c = c->next)
    cancel_session(c);
}

static void on_grace_timeout(uv_timer_t *t) {
  mr_conn *c = t->data;
  close_all(c);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  mr_conn *c = req->data;
  free(req);
  if (status < 0)
    close_all(c);
}

/* Our CLOSE is written. Rule 2: shut our side and keep reading until the
 * peer closes, so a client still sending never meets a reset. */
static void begin_closing(mr_conn *c) {
  c->closing = 1;
  c->closing_since_ms = uv_now(c->server->loop);
  if (c->peer_eof) {
    close_all(c);
    return;
  }
  uv_shutdown_t *req = malloc(sizeof *req);
  if (req == NULL || (req->data = c, uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown)) < 0) {
    free(req);
    close_all(c);
    return;
  }
  if (!c->reading && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = 1;
  uv_timer_start(&c->timer, on_grace_timeout, (uint64_t)c->server->opt.close_grace_ms, 0);
}

static void maybe_finish(mr_conn *c) {
  if (c->closing || !atomic_load(&c->session_done) || c->writes_pending > 0 ||
      mr_queue_bytes(&c->outbox) > 0)
    return;
  begin_closing(c);
}

/* ---- writing ---- */

/* A client that stops reading blocks its chain on a full outbox; past the
 * write timeout it is dropped so it cannot hold a pipeline forever. */
static void on_write_stall(uv_timer_t *t) {
  mr_conn *c = t->data;
  mr_log(MR_LOG_WARN, "%s: no output written for %d ms (--write-timeout): dropping the client",
         c->peer, c->server->opt.write_timeout_ms);
  c->peer_eof = 1;
  cancel_session(c);
  /* Closing the socket fails the stuck writes; the rest closes once the
   * session thread has noticed the cancel (maybe_finish). */
  close_handle((uv_handle_t *)&c->tcp);
}

static void arm_write_timer(mr_conn *c) {
  if (c->writes_pending > 0)
    uv_timer_start(&c->write_timer, on_write_stall, (uint64_t)c->server->opt.write_timeout_ms, 0);
  else
    uv_timer_stop(&c->write_timer);
}

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  mr_conn *c = w->conn;
  c->writes_pending--;
  arm_write_timer(c);
  mr_queue_release(&c->outbox, w->bytes);
  mr_message_unref(w->msg);
  free(w);
  if (status < 0 && !c->peer_eof) {
    mr_log(MR_LOG_DEBUG, "%s: write failed: %s", c->peer, uv_strerror(status));
    c->peer_eof = 1;
    cancel_session(c);
  }
  maybe_finish(c);
}

static void write_outbox(mr_conn *c) {
  mr_queue_entry *e;
  while ((e = mr_queue_pop(&c->outbox, 0)) != NULL) {
    write_req *w = calloc(1, sizeof *w);
    int rc = w != NULL ? mr_encode(e->msg, &w->enc) : MR_ENOMEM;
    if (rc == 0 && !c->peer_eof) {
      uv_buf_t bufs[MR_ENCODE_PIECES];
      for (int i = 0; i < w->enc.npieces; i++)
        bufs[i] = uv_buf_init((char *)w->enc.piece[i].base, (unsigned)w->enc.piece[i].len);
      w->conn = c;
      w->msg = e->msg;
      w->bytes = e->bytes;
      rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)w->enc.npieces, on_written);
      if (rc == 0) {
        e->msg = NULL;
        if (c->writes_pending++ == 0)
          arm_write_timer(c);
        mr_queue_entry_free(e);
        continue;
      }
    }
    if (rc < 0 && !c->peer_eof)
      mr_log(MR_LOG_WARN, "%s: cannot send %s: %s", c->peer, mr_message_kind_name(e->msg->kind),
             mr_strerror(rc));
    free(w);
    mr_queue_release(&c->outbox, e->bytes);
    mr_queue_entry_free(e);
  }
}

/* The session thread woke us: output to write, room in the inbox, or the
 * session is over. */
static void on_async(uv_async_t *a) {
  mr_conn *c = a->data;
  if (!c->reading && !c->peer_eof && !c->closing && !mr_queue_full(&c->inbox) &&
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = 1;
  write_outbox(c);
  maybe_finish(c);
}

static void wake_loop(void *ctx) {
  mr_conn *c = ctx;
  uv_async_send(&c->async);
}

/* ---- reading ---- */

static int on_decoded(void *ctx, mr_message *msg) {
  mr_conn *c = ctx;
  if (msg->kind == MR_MSG_CLOSE)
    c->got_close = 1;
  return mr_queue_push(&c->inbox, msg, mr_queue_message_bytes(msg), 0) == MR_ENOMEM ? MR_ENOMEM
                                                                                    : 0;
}

static void on_rejected(void *ctx, int code, const char *text) {
  mr_conn *c = ctx;
  mr_queue_push_event(&c->inbox, code, text);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mr_conn *c = h->data;
  *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  mr_conn *c = s->data;
  if (nread < 0) {
    uv_read_stop(s);
    c->reading = 0;
    c->peer_eof = 1;
    if (nread != UV_EOF)
      mr_log(MR_LOG_DEBUG, "%s: read failed: %s", c->peer, uv_strerror((int)nread));
    if (c->closing) {
      close_all(c);
      return;
    }
    /* A client may shut its side after its CLOSE and still read our
     * answer; one that leaves before its CLOSE is gone. */
    if (!c->got_close || nread != UV_EOF) {
      mr_queue_push_event(&c->inbox, MR_ECONN, nread == UV_EOF
                                                   ? "the client left before its CLOSE"
                                                   : "the connection failed before the client's CLOSE");
      cancel_session(c);
    }
    maybe_finish(c);
    return;
  }
  if (c->closing) {
    /* Answered already (after an error, maybe before the client's CLOSE):
     * discard what still comes so a client mid-upload never meets a
     * reset; the grace counts from the last byte, within the idle limit. */
    if (uv_now(c->server->loop) - c->closing_since_ms >
        (uint64_t)c->server->env->idle_timeout_ms)
      close_all(c);
    else if (nread > 0)
      uv_timer_start(&c->timer, on_grace_timeout, (uint64_t)c->server->opt.close_grace_ms, 0);
    return;
  }
  if (nread == 0 || c->framing_lost)
    return;
  int rc = mr_decoder_feed(c->dec, c->rbuf, (size_t)nread);
  if (rc < 0) {
    c->framing_lost = 1;
    mr_queue_push_event(&c->inbox, MR_EFRAME,
                        rc == MR_ENOMEM ? "out of memory reading a message"
                                        : mr_decoder_error(c->dec));
  }
  if (mr_queue_full(&c->inbox)) {
    mr_queue_pause(&c->inbox);
    uv_read_stop(s);
    c->reading = 0;
    /* The session may have drained the queue between the check and the
     * pause; look again so we never sleep on a queue nobody will wake. */
    if (!mr_queue_full(&c->inbox))
      uv_async_send(&c->async);
  }
}

/* ---- accepting ---- */

static void session_thread(void *arg) {
  mr_conn *c = arg;
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
 * thread. */
static void refuse(mr_conn *c, const char *why) {
  char text[200];
  int n = snprintf(text, sizeof text, "ERROR: %s", why);
  snprintf(c->session.stats.first_error, sizeof c->session.stats.first_error, "%s", text);
  c->session.stats.errors = 1;
  mr_message *t = mr_message_new_text(MR_MSG_TEXT, text, (size_t)n);
  if (t != NULL)
    mr_queue_push(&c->outbox, t, mr_queue_message_bytes(t), 0);
  mr_message *close_msg = mr_message_new(MR_MSG_CLOSE);
  if (close_msg != NULL)
    mr_queue_push(&c->outbox, close_msg, mr_queue_message_bytes(close_msg), 0);
  atomic_store(&c->session_done, 1);
  uv_async_send(&c->async);
}

void mr_conn_accept(mr_server *server) {
  mr_conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    mr_log(MR_LOG_ERROR, "out of memory accepting a connection");
    return;
  }
  c->server = server;
  c->start_ms = uv_now(server->loop);
  uv_tcp_init(server->loop, &c->tcp);
  uv_async_init(server->loop, &c->async, on_async);
  uv_timer_init(server->loop, &c->timer);
  uv_timer_init(server->loop, &c->write_timer);
  c->tcp.data = c->async.data = c->timer.data = c->write_timer.data = c;
  c->handles_open = 4;
  c->next = server->conns;
  if (c->next != NULL)
    c->next->pprev = &c->next;
  c->pprev = &server->conns;
  server->conns = c;
  server->nconns++;
  snprintf(c->peer, sizeof c->peer, "?");
  mr_decoder_callbacks cb = {on_decoded, on_rejected, c};
  int uv_rc = uv_accept((uv_stream_t *)&server->listener, (uv_stream_t *)&c->tcp);
  int rc = mr_queue_init(&c->inbox, server->env->limits->connection_bytes);
  if (rc == 0)
    rc = mr_queue_init(&c->outbox, server->env->limits->connection_bytes);
  if (rc == 0)
    rc = mr_decoder_create(server->env->limits, &cb, &c->dec);
  if (uv_rc != 0 || rc != 0) {
    mr_log(MR_LOG_ERROR, "cannot accept a connection: %s",
           uv_rc != 0 ? uv_strerror(uv_rc) : mr_strerror(rc));
    atomic_store(&c->session_done, 1);
    c->peer_eof = 1;
    close_all(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  peer_name(&c->tcp, c->peer, sizeof c->peer);
  c->session = (mr_session){.env = server->env, .inbox = &c->inbox, .outbox = &c->outbox,
                            .cancel = &c->cancel, .wake = wake_loop, .wake_ctx = c,
                            .peer = c->peer};
  mr_log(MR_LOG_DEBUG, "%s: connected", c->peer);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = 1;
  if (server->nconns > server->opt.max_connections) {
    char why[128];
    snprintf(why, sizeof why, "server busy: %d connections open (--max-connections %d)",
             server->nconns - 1, server->opt.max_connections);
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
