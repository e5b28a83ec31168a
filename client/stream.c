#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "encode.h"
#include "escape.h"

#define READ_CHUNK (1u << 20)

typedef struct run {
  mr_net *net;
  const mr_stream_source *src;
  const mr_stream_sink *sink;
  mr_stream_stats *stats;
  mr_stream_result *res;
  atomic_int stop; /* the receiver is done: the sender must not go on */
  /* The sender's outcome, read after the join. */
  int send_rc;
  mr_err send_err;
  int close_sent;
  /* The receiver's. */
  int closed; /* the server's CLOSE arrived */
  mr_err recv_err;
} run;

/* Takes m (NULL: out of memory). */
static int send_message(run *r, mr_message *m, mr_err *err) {
  if (m == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  mr_stream_stats *st = r->stats;
  int is_acq = m->kind == MR_MSG_ACQUISITION;
  if (is_acq && atomic_load(&st->first_acq_ms) == 0)
    atomic_store(&st->first_acq_ms, mr_net_now_ms());
  mr_encoded enc;
  int rc = mr_encode(m, &enc);
  if (rc < 0)
    rc = mr_err_set(err, rc, "cannot encode %s: %s", mr_message_kind_name(m->kind),
                    mr_strerror(rc));
  else
    rc = mr_net_write(r->net, enc.piece, enc.npieces, err);
  if (rc == 0) {
    if (is_acq) {
      atomic_fetch_add(&st->acquisitions, 1);
      atomic_fetch_add(&st->acq_bytes, enc.total);
      atomic_store(&st->last_acq_ms, mr_net_now_ms());
    } else if (m->kind == MR_MSG_WAVEFORM) {
      atomic_fetch_add(&st->waveforms, 1);
    }
  }
  mr_message_unref(m);
  return rc;
}

static void *sender(void *arg) {
  run *r = arg;
  int rc = 0, source_failed = 0;
  while (!atomic_load(&r->stop)) {
    mr_message *m = NULL;
    if ((rc = r->src->next(r->src->ctx, &m, &r->send_err)) < 0) {
      source_failed = 1;
      break;
    }
    if (m == NULL || (rc = send_message(r, m, &r->send_err)) < 0)
      break;
  }
  int link_broken = rc < 0 && !source_failed &&
                    (r->send_err.code == MR_ECONN || r->send_err.code == MR_ETIMEDOUT);
  if (!link_broken && !atomic_load(&r->stop)) {
    /* Also after a source error: the server then finishes cleanly and the
     * source's error is reported. */
    mr_err close_err = {0};
    int crc = send_message(r, mr_message_new(MR_MSG_CLOSE), &close_err);
    r->close_sent = crc == 0;
    if (crc < 0 && rc == 0) {
      rc = crc;
      r->send_err = close_err;
    }
  }
  /* A write that failed because the receiver ended the conversation (it
   * sets stop, then shuts the socket down) is no error of its own. */
  if (link_broken && atomic_load(&r->stop))
    rc = 0;
  r->send_rc = rc;
  return NULL;
}

static int is_error_text(const char *t) {
  while (*t == ' ' || *t == '\t' || *t == '\r' || *t == '\n')
    t++;
  return strncmp(t, "ERROR:", 6) == 0;
}

/* A server's TEXT is shown as it comes, escaped (a hostile server must not
 * drive the user's terminal), except the first error: the command's own
 * failure line says that one, so it is not printed twice. */
static void on_text(run *r, const mr_message *m) {
  const char *t = m->u.text;
  size_t len = strnlen(t, m->text_len);
  while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == '\r'))
    len--;
  mr_stream_result *res = r->res;
  if (is_error_text(t) && res->server_errors++ == 0) {
    const char *e = strstr(t, "ERROR:") + 6;
    while (*e == ' ')
      e++;
    size_t n = len > (size_t)(e - t) ? len - (size_t)(e - t) : 0;
    mr_escape(e, n, res->first_error, sizeof res->first_error, MR_ESCAPE_KEEP_UTF8);
    return;
  }
  /* Over a progress line, if one is showing (see progress.h). */
  fprintf(stderr, "%sserver: ", isatty(STDERR_FILENO) ? "\r\033[K" : "");
  mr_escape_write(stderr, t, len, MR_ESCAPE_KEEP_LINES | MR_ESCAPE_KEEP_UTF8);
  fputc('\n', stderr);
}

/* Decoder callback: 1 stops at the server's CLOSE, negative on failure. */
static int on_message(void *ctx, mr_message *m) {
  run *r = ctx;
  int rc = 0;
  switch (m->kind) {
  case MR_MSG_TEXT:
    on_text(r, m);
    break;
  case MR_MSG_CLOSE:
    r->closed = 1;
    rc = 1;
    break;
  case MR_MSG_IMAGE:
  case MR_MSG_DICOM:
    atomic_fetch_add(&r->stats->images, 1);
    /* fall through */
  case MR_MSG_RESPONSE:
    rc = r->sink->on_message(r->sink->ctx, m, &r->recv_err);
    break;
  default:
    rc = mr_err_set(&r->recv_err, MR_EPROTO,
                    "protocol violation: the server sent %s (id %u), which a server never sends "
                    "to this client",
                    mr_message_kind_name(m->kind), mr_message_wire_id(m->kind));
    break;
  }
  mr_message_unref(m);
  return rc;
}

static void on_reject(void *ctx, int code, const char *text) {
  run *r = ctx;
  (void)code;
  mr_err_set(&r->recv_err, MR_EPROTO, "protocol violation: %s", text);
}

/* Reads and dispatches until the server's CLOSE; returns 0 or an error. */
static int receive(run *r) {
  mr_decoder *dec = NULL;
  mr_decoder_callbacks cb = {.on_message = on_message, .on_error = on_reject, .ctx = r};
  uint8_t *buf = malloc(READ_CHUNK);
  int rc = buf == NULL ? MR_ENOMEM : mr_decoder_create(NULL, &cb, &dec);
  if (rc < 0) {
    free(buf);
    return mr_err_set(&r->recv_err, rc, "cannot start receiving: %s", mr_strerror(rc));
  }
  while (!r->closed) {
    size_t got = 0;
    if ((rc = mr_net_read(r->net, buf, READ_CHUNK, &got, &r->recv_err)) < 0)
      break;
    if (got == 0) {
      rc = mr_err_set(&r->recv_err, MR_ECONN,
                      "the server at %s closed the connection without CLOSE", r->net->peer);
      break;
    }
    rc = mr_decoder_feed(dec, buf, got);
    if (rc < 0 && r->recv_err.code == 0)
      rc = mr_err_set(&r->recv_err, MR_EPROTO, "protocol violation: %s", mr_decoder_error(dec));
    if (rc < 0)
      break;
    if (r->recv_err.code != 0) { /* a rejected message */
      rc = r->recv_err.code;
      break;
    }
  }
  mr_decoder_destroy(dec);
  free(buf);
  return rc < 0 ? rc : 0;
}

int mr_stream_run(mr_net *net, const mr_stream_source *src, const mr_stream_sink *sink,
                  mr_stream_stats *stats, mr_stream_result *res, mr_err *err) {
  mr_stream_stats own_stats;
  if (stats == NULL) {
    memset(&own_stats, 0, sizeof own_stats);
    stats = &own_stats;
  }
  memset(res, 0, sizeof *res);
  run r = {.net = net, .src = src, .sink = sink, .stats = stats, .res = res};
  atomic_init(&r.stop, 0);
  pthread_t thread;
  if (pthread_create(&thread, NULL, sender, &r) != 0)
    return mr_err_set(err, MR_ENOMEM, "cannot start the sender thread");
  int rc = receive(&r);
  atomic_store(&r.stop, 1);
  /* Unblocks a sender that is still writing: the conversation is over. */
  mr_net_shutdown(net);
  pthread_join(thread, NULL);
  if (rc < 0) {
    *err = r.recv_err;
    return rc;
  }
  if (r.send_rc < 0) {
    *err = r.send_err;
    return r.send_rc;
  }
  if (!r.close_sent && res->server_errors == 0)
    return mr_err_set(err, MR_EPROTO,
                      "protocol violation: the server sent CLOSE before the client had sent "
                      "everything (%llu acquisitions sent)",
                      (unsigned long long)atomic_load(&stats->acquisitions));
  return 0;
}
