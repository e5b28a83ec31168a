#include "external_link.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "decode.h"
#include "encode.h"

/* How often a waiting thread looks at the cancel flags and the clocks. */
#define SLICE_MS 20
/* What the receive queue holds at most, besides one message of any size
 * the decoder's limits allow: a peer that answers with big images faster
 * than the chain takes them waits (TCP backpressure) instead of filling
 * `depth` slots of up to a GiB each. What is queued counts against the
 * memory budget until it is delivered. */
#define IN_BYTES ((size_t)64 << 20)

typedef struct ring {
  mr_message **slot;
  size_t cap, head, count;
  size_t bytes; /* the payloads held (the receive queue's; mr_message_payload_bytes) */
} ring;

struct mr_link {
  int fd;
  char peer[160];
  mr_link_opts opts;
  mr_decoder *dec;
  pthread_mutex_t mu;
  pthread_cond_t changed;
  ring out, in;         /* to the peer, from the peer */
  int stopping;         /* mr_link_stop: threads leave */
  int peer_closed;      /* its CLOSE was received */
  int fault;            /* the connection failed (code in why) */
  mr_err why;
  uint64_t start_ns, moved_ns; /* when started; when a byte last moved */
  pthread_t reader, writer;
  int threads;
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void wait_slice(mr_link *l) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += SLICE_MS * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&l->changed, &l->mu, &t);
}

static void ring_push(ring *r, mr_message *m) {
  r->slot[(r->head + r->count) % r->cap] = m;
  r->count++;
}

static mr_message *ring_pop(ring *r) {
  mr_message *m = r->slot[r->head];
  r->head = (r->head + 1) % r->cap;
  r->count--;
  return m;
}

/* The receive queue's side: what arrives is counted (and taken from the
 * memory budget) until delivered. */
static mr_message *ring_take(ring *r) {
  mr_message *m = ring_pop(r);
  size_t bytes = mr_message_payload_bytes(m);
  r->bytes -= bytes;
  mr_budget_give(bytes);
  return m;
}

static void ring_drop(ring *r, int counted) {
  while (r->count > 0)
    mr_message_unref(counted ? ring_take(r) : ring_pop(r));
  free(r->slot);
}

/* Records the connection's first failure (under mu). */
static void set_fault(mr_link *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_fault(mr_link *l, int code, const char *fmt, ...) {
  if (l->fault)
    return;
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  mr_err_set(&l->why, code, "%s: %s", l->peer, what);
  l->fault = code;
  pthread_cond_broadcast(&l->changed);
  if (l->opts.notify != NULL && !l->stopping)
    l->opts.notify(l->opts.notify_ctx);
}

static int on_message(void *ctx, mr_message *msg) {
  mr_link *l = ctx;
  size_t bytes = mr_message_payload_bytes(msg);
  pthread_mutex_lock(&l->mu);
  while ((l->in.count == l->in.cap || (l->in.count > 0 && l->in.bytes + bytes > IN_BYTES)) &&
         !l->stopping)
    pthread_cond_wait(&l->changed, &l->mu);
  int stop = l->stopping, closed = 0;
  mr_err e = {0};
  if (!stop && mr_budget_take(bytes, "a message from the external peer", &e) < 0) {
    set_fault(l, MR_ELIMIT, "sent a message of %.1f MiB: %s", (double)bytes / (1 << 20),
              e.msg);
    stop = 1;
  }
  if (!stop) {
    l->in.bytes += bytes;
    ring_push(&l->in, msg);
    if (msg->kind == MR_MSG_CLOSE)
      l->peer_closed = closed = 1;
    pthread_cond_broadcast(&l->changed);
  }
  pthread_mutex_unlock(&l->mu);
  if (stop)
    mr_message_unref(msg);
  else if (l->opts.notify != NULL)
    l->opts.notify(l->opts.notify_ctx);
  /* Nothing after its CLOSE is read. */
  return stop || closed ? 1 : 0;
}

static void on_reject(void *ctx, int code, const char *text) {
  mr_link *l = ctx;
  pthread_mutex_lock(&l->mu);
  set_fault(l, code, "sent a message we cannot take: %s", text);
  pthread_mutex_unlock(&l->mu);
}

static void *reader_main(void *arg) {
  mr_link *l = arg;
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = recv(l->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    int why = n < 0 ? errno : 0;
    pthread_mutex_lock(&l->mu);
    int stop = l->stopping || l->fault;
    if (n > 0)
      l->moved_ns = now_ns();
    else if (!stop && (n == 0 || why == ECONNRESET)) /* a peer that dies with our bytes unread resets */
      set_fault(l, MR_ECONN, "closed the connection before its CLOSE");
    else if (!stop)
      set_fault(l, MR_ECONN, "receiving failed: %s", strerror(why));
    pthread_mutex_unlock(&l->mu);
    if (n <= 0 || stop)
      return NULL;
    int rc = mr_decoder_feed(l->dec, buf, (size_t)n);
    if (rc != 0) {
      pthread_mutex_lock(&l->mu);
      if (rc < 0)
        set_fault(l, MR_EPROTO, "sent what is not the MRD protocol: %s",
                  mr_decoder_error(l->dec));
      pthread_mutex_unlock(&l->mu);
      return NULL; /* its CLOSE, garbage or our stop: nothing more to read */
    }
    pthread_mutex_lock(&l->mu);
    stop = l->fault != 0;
    pthread_mutex_unlock(&l->mu);
    if (stop)
      return NULL;
  }
}

/* Writes every piece of one encoded message; 0 or an errno. */
static int write_all(mr_link *l, mr_encoded *e) {
  struct iovec iov[MR_ENCODE_PIECES];
  int n = e->npieces, first = 0;
  for (int i = 0; i < n; i++)
    iov[i] = (struct iovec){(void *)e->piece[i].base, e->piece[i].len};
  while (first < n) {
    /* sendmsg for MSG_NOSIGNAL: a peer that went away is an error, not SIGPIPE. */
    struct msghdr mh = {.msg_iov = iov + first, .msg_iovlen = (size_t)(n - first)};
    ssize_t w = sendmsg(l->fd, &mh, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return errno;
    pthread_mutex_lock(&l->mu);
    l->moved_ns = now_ns();
    pthread_mutex_unlock(&l->mu);
    size_t left = (size_t)w;
    while (first < n && left >= iov[first].iov_len)
      left -= iov[first++].iov_len;
    if (first < n) {
      iov[first].iov_base = (char *)iov[first].iov_base + left;
      iov[first].iov_len -= left;
    }
  }
  return 0;
}

static void *writer_main(void *arg) {
  mr_link *l = arg;
  for (;;) {
    pthread_mutex_lock(&l->mu);
    while (l->out.count == 0 && !l->stopping && !l->fault)
      pthread_cond_wait(&l->changed, &l->mu);
    if (l->stopping || l->fault) {
      pthread_mutex_unlock(&l->mu);
      return NULL;
    }
    mr_message *m = ring_pop(&l->out);
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
    mr_encoded e;
    int rc = mr_encode(m, &e), err = rc < 0 ? 0 : write_all(l, &e);
    int closing = m->kind == MR_MSG_CLOSE;
    mr_message_unref(m);
    pthread_mutex_lock(&l->mu);
    if (rc < 0)
      set_fault(l, rc, "a message for it could not be encoded: %s", mr_strerror(rc));
    else if ((err == EPIPE || err == ECONNRESET) && !l->stopping && !l->peer_closed)
      set_fault(l, MR_ECONN, "closed the connection before its CLOSE");
    else if (err != 0 && !l->stopping && !l->peer_closed)
      set_fault(l, MR_ECONN, "sending failed: %s", strerror(err));
    pthread_mutex_unlock(&l->mu);
    if (rc < 0 || err != 0)
      return NULL;
    if (closing) /* the peer knows we are done; it may still answer */
      shutdown(l->fd, SHUT_WR);
  }
}

int mr_link_start(int fd, const mr_link_opts *opts, mr_link **out, mr_err *err) {
  mr_link *l = calloc(1, sizeof *l);
  size_t depth = opts->depth > 0 ? opts->depth : 1;
  if (l != NULL) {
    l->out.slot = calloc(depth, sizeof *l->out.slot);
    l->in.slot = calloc(depth, sizeof *l->in.slot);
  }
  mr_decoder_callbacks cb = {on_message, on_reject, l};
  if (l == NULL || l->out.slot == NULL || l->in.slot == NULL ||
      mr_decoder_create(NULL, &cb, &l->dec) < 0) {
    if (l != NULL) {
      free(l->out.slot);
      free(l->in.slot);
    }
    free(l);
    close(fd);
    return mr_err_set(err, MR_ENOMEM, "out of memory connecting to %s", opts->peer);
  }
  l->fd = fd;
  l->opts = *opts;
  snprintf(l->peer, sizeof l->peer, "%s", opts->peer);
  l->opts.peer = l->peer;
  l->out.cap = l->in.cap = depth;
  l->start_ns = l->moved_ns = now_ns();
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->changed, NULL);
  if (pthread_create(&l->reader, NULL, reader_main, l) == 0) {
    l->threads = 1;
    if (pthread_create(&l->writer, NULL, writer_main, l) == 0)
      l->threads = 2;
  }
  if (l->threads < 2) {
    mr_link_stop(l);
    return mr_err_set(err, MR_ENOMEM, "cannot start the threads for %s", opts->peer);
  }
  *out = l;
  return 0;
}

/* Why the waiting thread must stop waiting (under mu); 0 to go on. */
static int check(mr_link *l, uint64_t wait_start, mr_err *err) {
  if ((l->opts.cancel != NULL && atomic_load(l->opts.cancel)) ||
      (l->opts.failed != NULL && atomic_load(l->opts.failed)))
    return MR_ECANCELED;
  if (l->fault) {
    mr_err_set(err, l->fault, "%s", l->why.msg);
    return l->fault;
  }
  uint64_t now = now_ns(), since = l->moved_ns > wait_start ? l->moved_ns : wait_start;
  if (l->opts.total_ms > 0 && now - l->start_ns > (uint64_t)l->opts.total_ms * 1000000u)
    return mr_err_set(err, MR_ETIMEDOUT, "%s: no CLOSE within %d ms (total_timeout_ms)",
                      l->peer, l->opts.total_ms);
  if (l->opts.idle_ms > 0 && now - since > (uint64_t)l->opts.idle_ms * 1000000u)
    return mr_err_set(err, MR_ETIMEDOUT,
                      "%s: nothing sent or received for %d ms while waiting on it "
                      "(idle_timeout_ms)",
                      l->peer, l->opts.idle_ms);
  return 0;
}

/* Delivers what has arrived, without the lock; 1 once the peer's CLOSE
 * was delivered, else 0 or a delivery's error. Called with mu held; returns
 * with it held. */
static int deliver_arrived(mr_link *l, mr_link_deliver deliver, void *ctx) {
  while (l->in.count > 0) {
    mr_message *m = ring_take(&l->in);
    pthread_cond_broadcast(&l->changed);
    if (m->kind == MR_MSG_CLOSE) {
      mr_message_unref(m);
      return 1;
    }
    pthread_mutex_unlock(&l->mu);
    int rc = deliver(ctx, m);
    pthread_mutex_lock(&l->mu);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int mr_link_send(mr_link *l, mr_message *msg, mr_link_deliver deliver, void *ctx, mr_err *err) {
  uint64_t wait_start = now_ns();
  int rc = 0;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    if ((rc = deliver_arrived(l, deliver, ctx)) != 0) {
      if (rc > 0)
        rc = mr_err_set(err, MR_EPROTO, "%s: sent CLOSE before it had our CLOSE", l->peer);
      break;
    }
    if ((rc = check(l, wait_start, err)) < 0)
      break;
    if (l->out.count < l->out.cap) {
      ring_push(&l->out, msg);
      msg = NULL;
      pthread_cond_broadcast(&l->changed);
      break;
    }
    wait_slice(l);
  }
  pthread_mutex_unlock(&l->mu);
  mr_message_unref(msg);
  return rc;
}

int mr_link_poll(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err) {
  pthread_mutex_lock(&l->mu);
  int rc = deliver_arrived(l, deliver, ctx);
  if (rc > 0)
    rc = mr_err_set(err, MR_EPROTO, "%s: sent CLOSE before it had our CLOSE", l->peer);
  else if (rc == 0 && l->fault)
    rc = mr_err_set(err, l->fault, "%s", l->why.msg);
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int mr_link_finish(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err) {
  uint64_t wait_start = now_ns();
  int rc;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    if ((rc = deliver_arrived(l, deliver, ctx)) != 0)
      break;
    if ((rc = check(l, wait_start, err)) < 0)
      break;
    wait_slice(l);
  }
  pthread_mutex_unlock(&l->mu);
  return rc > 0 ? 0 : rc;
}

void mr_link_stop(mr_link *l) {
  if (l == NULL)
    return;
  pthread_mutex_lock(&l->mu);
  l->stopping = 1;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->mu);
  shutdown(l->fd, SHUT_RDWR); /* wakes a thread blocked in recv or writev */
  if (l->threads >= 1)
    pthread_join(l->reader, NULL);
  if (l->threads >= 2)
    pthread_join(l->writer, NULL);
  close(l->fd);
  ring_drop(&l->out, 0);
  ring_drop(&l->in, 1);
  mr_decoder_destroy(l->dec);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->changed);
  free(l);
}
