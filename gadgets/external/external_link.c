#include "external_link.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "decode.h"
#include "encode.h"
#include "thread_name.h"

/* What the receive channel holds: `depth` messages, and no more once they
 * hold 64 MiB (a message of any size the decoder's limits allow still
 * goes into a channel under that): a peer that answers with big images
 * faster than the chain takes them waits (TCP backpressure) instead of
 * filling `depth` slots of up to a GiB each. What is queued counts
 * against the memory budget until it is delivered. */
#define IN_BYTES ((size_t)64 << 20)

/* Two channels (base/channel.h) of mr_message pointers:
 *   out: to the peer; the gadget's thread pushes, the writer pops.
 *   in:  to the gadget's thread: what the reader received, and NULL, word
 *        of room in `out` for a gadget that paused on it full (out's
 *        on_room). Closed on a fault, at stop, and by the chain when the
 *        session stops (mr_gadget_close_on_stop).
 * The gadget's thread waits on `in` alone, up to its next timeout: a
 * message, room, a fault or a stop wakes it, nothing is polled. */
struct mr_link {
  int fd;
  char peer[160];
  mr_link_opts opts;
  mr_decoder *dec;
  mr_chan *out, *in;
  pthread_mutex_t mu; /* the four fields below */
  int stopping;       /* mr_link_stop: threads leave */
  int peer_closed;    /* its CLOSE was received */
  int fault;          /* the connection failed (code in why) */
  mr_err why;
  uint64_t start_ns;         /* when started */
  _Atomic uint64_t moved_ns; /* when a byte last moved either way */
  pthread_t reader, writer;
  int threads;
};

/* What the receive channel still holds at stop was taken from the budget. */
static void drop_in(void *item) {
  mr_message *m = *(mr_message **)item;
  if (m != NULL)
    mr_budget_give(mr_message_payload_bytes(m));
  mr_message_unref(m);
}

static void drop_out(void *item) { mr_message_unref(*(mr_message **)item); }

/* out's on_room (the writer's thread): the gadget paused on a full `out`
 * hears of room. */
static void room_for_gadget(void *ctx) {
  mr_link *l = ctx;
  mr_message *room = NULL;
  mr_chan_put(l->in, &room, 0); /* fails only once closed: then nobody waits for room */
}

/* Records the connection's first failure (under mu) and closes both
 * channels: the threads stop, and the waiting thread takes what arrived
 * before, then hears of the fault. */
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
  mr_chan_close(l->in);
  mr_chan_close(l->out);
  if (l->opts.notify != NULL && !l->stopping)
    l->opts.notify(l->opts.notify_ctx);
}

static int on_message(void *ctx, mr_message *msg) {
  mr_link *l = ctx;
  size_t bytes = mr_message_payload_bytes(msg);
  mr_err e = {0};
  if (mr_budget_take(bytes, "a message from the external peer", &e) < 0) {
    pthread_mutex_lock(&l->mu);
    if (!l->stopping)
      set_fault(l, MR_ELIMIT, "sent a message of %.1f MiB: %s", (double)bytes / (1 << 20),
                e.msg);
    pthread_mutex_unlock(&l->mu);
    mr_message_unref(msg);
    return 1;
  }
  int closing = msg->kind == MR_MSG_CLOSE;
  if (closing) { /* from now on the writer's failures are no fault */
    pthread_mutex_lock(&l->mu);
    l->peer_closed = 1;
    pthread_mutex_unlock(&l->mu);
  }
  /* Waits while the channel is full: the peer then waits on TCP. */
  if (mr_chan_push(l->in, &msg, bytes, -1) < 0) { /* closed: a fault or a stop */
    mr_budget_give(bytes);
    mr_message_unref(msg);
    return 1;
  }
  if (l->opts.notify != NULL)
    l->opts.notify(l->opts.notify_ctx);
  /* Nothing after its CLOSE is read. */
  return closing ? 1 : 0;
}

static void on_reject(void *ctx, int code, const char *text) {
  mr_link *l = ctx;
  pthread_mutex_lock(&l->mu);
  set_fault(l, code, "sent a message we cannot take: %s", text);
  pthread_mutex_unlock(&l->mu);
}

static void *reader_main(void *arg) {
  mr_link *l = arg;
  mr_thread_name("mr-ext-reader");
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = recv(l->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    int why = n < 0 ? errno : 0;
    if (n > 0)
      atomic_store(&l->moved_ns, mr_now_ns());
    pthread_mutex_lock(&l->mu);
    int stop = l->stopping || l->fault;
    if (n == 0 || (n < 0 && why == ECONNRESET)) { /* a peer that dies with our bytes unread resets */
      if (!stop)
        set_fault(l, MR_ECONN, "closed the connection before its CLOSE");
    } else if (n < 0 && !stop)
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
    atomic_store(&l->moved_ns, mr_now_ns());
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
  mr_thread_name("mr-ext-writer");
  mr_message *m;
  while (mr_chan_pop(l->out, &m, NULL, -1) == 0) { /* until a fault or the stop closes it */
    mr_encoded e;
    int rc = mr_encode(m, &e), err = rc < 0 ? 0 : write_all(l, &e);
    int closing = m->kind == MR_MSG_CLOSE;
    mr_message_unref(m);
    pthread_mutex_lock(&l->mu);
    int quiet = l->stopping || l->peer_closed;
    if (rc < 0)
      set_fault(l, rc, "a message for it could not be encoded: %s", mr_strerror(rc));
    else if ((err == EPIPE || err == ECONNRESET) && !quiet)
      set_fault(l, MR_ECONN, "closed the connection before its CLOSE");
    else if (err != 0 && !quiet)
      set_fault(l, MR_ECONN, "sending failed: %s", strerror(err));
    pthread_mutex_unlock(&l->mu);
    if (rc < 0 || err != 0)
      return NULL;
    if (closing) /* the peer knows we are done; it may still answer */
      shutdown(l->fd, SHUT_WR);
  }
  return NULL;
}

int mr_link_start(int fd, const mr_link_opts *opts, mr_link **out, mr_err *err) {
  mr_link *l = calloc(1, sizeof *l);
  size_t depth = opts->depth > 0 ? opts->depth : 1;
  mr_chan_opts o_out = {.item_size = sizeof(mr_message *), .max_items = depth,
                        .on_room = room_for_gadget, .hook_ctx = l, .drop = drop_out};
  mr_chan_opts o_in = {.item_size = sizeof(mr_message *), .max_items = depth,
                       .max_bytes = IN_BYTES, .drop = drop_in};
  mr_decoder_callbacks cb = {on_message, on_reject, l};
  if (l == NULL || mr_chan_create(&o_out, &l->out) < 0 || mr_chan_create(&o_in, &l->in) < 0 ||
      mr_decoder_create(NULL, &cb, &l->dec) < 0) {
    if (l != NULL) {
      mr_chan_free(l->out);
      mr_chan_free(l->in);
    }
    free(l);
    close(fd);
    return mr_err_set(err, MR_ENOMEM, "out of memory connecting to %s", opts->peer);
  }
  l->fd = fd;
  l->opts = *opts;
  snprintf(l->peer, sizeof l->peer, "%s", opts->peer);
  l->opts.peer = l->peer;
  l->start_ns = mr_now_ns();
  atomic_init(&l->moved_ns, l->start_ns);
  pthread_mutex_init(&l->mu, NULL);
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

mr_chan *mr_link_channel(mr_link *l) { return l->in; }

/* Whether a timeout has passed (0: not yet); a wait began at wait_start. */
static int timed_out(mr_link *l, uint64_t wait_start, mr_err *err) {
  /* moved_ns is read before the clock: the other thread may stamp it at any
     moment, and a stamp later than `now` made now - since wrap around to a
     huge idle time (a false timeout at once, seen under load). */
  uint64_t moved = atomic_load(&l->moved_ns), now = mr_now_ns();
  uint64_t since = moved > wait_start ? moved : wait_start;
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

/* Milliseconds until the nearer timeout (at least 1), or -1 for none. */
static int until_timeout(mr_link *l, uint64_t wait_start) {
  uint64_t now = mr_now_ns(), moved = atomic_load(&l->moved_ns), next = UINT64_MAX;
  uint64_t since = moved > wait_start ? moved : wait_start;
  if (l->opts.total_ms > 0)
    next = l->start_ns + (uint64_t)l->opts.total_ms * 1000000u;
  if (l->opts.idle_ms > 0 && since + (uint64_t)l->opts.idle_ms * 1000000u < next)
    next = since + (uint64_t)l->opts.idle_ms * 1000000u;
  if (next == UINT64_MAX)
    return -1;
  uint64_t ms = next > now ? (next - now + 999999u) / 1000000u + 1 : 1;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Why `in` is closed: the connection's fault, else the chain's stop. */
static int closed_why(mr_link *l, mr_err *err) {
  pthread_mutex_lock(&l->mu);
  int code = l->fault;
  if (code != 0)
    mr_err_set(err, code, "%s", l->why.msg);
  pthread_mutex_unlock(&l->mu);
  return code != 0 ? code : MR_ECANCELED;
}

enum { NOTHING, TOOK, PEER_CLOSE };

/* Waits up to wait_ms for what the peer sent or word of room, and
 * delivers a message: NOTHING, TOOK (a message or room), PEER_CLOSE, or
 * an error (a fault, the chain's stop, a delivery's). */
static int take_one(mr_link *l, int wait_ms, mr_link_deliver deliver, void *ctx, mr_err *err) {
  mr_message *m;
  size_t bytes;
  int rc = mr_chan_pop(l->in, &m, &bytes, wait_ms);
  if (rc == MR_ETIMEDOUT)
    return NOTHING;
  if (rc < 0)
    return closed_why(l, err);
  if (m == NULL)
    return TOOK; /* room in `out` */
  mr_chan_release(l->in, bytes);
  mr_budget_give(bytes);
  if (m->kind == MR_MSG_CLOSE) {
    mr_message_unref(m);
    return PEER_CLOSE;
  }
  rc = deliver(ctx, m);
  return rc < 0 ? rc : TOOK;
}

/* Delivers what has arrived, without waiting: NOTHING once it is all
 * delivered, PEER_CLOSE, or an error. */
static int deliver_arrived(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err) {
  int rc;
  while ((rc = take_one(l, 0, deliver, ctx, err)) == TOOK)
    ;
  return rc;
}

static int early_close(mr_link *l, mr_err *err) {
  return mr_err_set(err, MR_EPROTO, "%s: sent CLOSE before it had our CLOSE", l->peer);
}

int mr_link_send(mr_link *l, mr_message *msg, mr_link_deliver deliver, void *ctx, mr_err *err) {
  uint64_t wait_start = mr_now_ns();
  int rc;
  for (;;) {
    if ((rc = deliver_arrived(l, deliver, ctx, err)) != NOTHING ||
        (rc = timed_out(l, wait_start, err)) < 0)
      break;
    if ((rc = mr_chan_push(l->out, &msg, 0, 0)) != MR_ETIMEDOUT)
      break;
    /* Full: room comes as a NULL on `in` (once paused), meanwhile what
     * the peer sends is delivered, so a peer that answers before it has
     * read everything never deadlocks against us. */
    mr_chan_pause(l->out);
    if ((rc = mr_chan_push(l->out, &msg, 0, 0)) != MR_ETIMEDOUT)
      break; /* room was made before the pause */
    if ((rc = take_one(l, until_timeout(l, wait_start), deliver, ctx, err)) < 0 ||
        rc == PEER_CLOSE)
      break;
  }
  if (rc == 0) /* in `out` now */
    return 0;
  mr_message_unref(msg);
  if (rc == PEER_CLOSE)
    return early_close(l, err);
  return rc == MR_ECANCELED ? closed_why(l, err) : rc;
}

int mr_link_poll(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err) {
  int rc = deliver_arrived(l, deliver, ctx, err);
  return rc == PEER_CLOSE ? early_close(l, err) : rc;
}

int mr_link_finish(mr_link *l, mr_link_deliver deliver, void *ctx, mr_err *err) {
  uint64_t wait_start = mr_now_ns();
  for (;;) {
    int rc = timed_out(l, wait_start, err);
    if (rc == 0)
      rc = take_one(l, until_timeout(l, wait_start), deliver, ctx, err);
    if (rc == PEER_CLOSE)
      return 0;
    if (rc < 0)
      return rc;
  }
}

void mr_link_stop(mr_link *l) {
  if (l == NULL)
    return;
  pthread_mutex_lock(&l->mu);
  l->stopping = 1;
  pthread_mutex_unlock(&l->mu);
  mr_chan_close(l->in);  /* the reader stops waiting for room */
  mr_chan_close(l->out); /* the writer stops waiting for messages */
  shutdown(l->fd, SHUT_RDWR); /* wakes a thread blocked in recv or sendmsg */
  if (l->threads >= 1)
    pthread_join(l->reader, NULL);
  if (l->threads >= 2)
    pthread_join(l->writer, NULL);
  close(l->fd);
  mr_chan_free(l->out);
  mr_chan_free(l->in);
  mr_decoder_destroy(l->dec);
  pthread_mutex_destroy(&l->mu);
  free(l);
}
