#include "stream_replay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "decode.h"
#include "wire_client.h"

#define READ_CHUNK ((size_t)1 << 20)

/* Writes the session cut by cut, noting after each the milliseconds since
 * t0 in cut_ms (NaN for cuts never reached). After cap_ms (0: none) it
 * stops at the next cut, sends the CLOSE and sets *capped_at (ms since
 * t0; may be NULL). Returns 0 or -1 (errno). */
/* Sleeps until ms after t0 (bench_now_ms's clock). */
static void sleep_until(double t0, double ms) {
  double wait = t0 + ms - bench_now_ms();
  if (wait > 0) {
    struct timespec ts = {(time_t)(wait / 1e3), (long)(fmod(wait, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
  }
}

static int write_session(int fd, const stream_session *s, double t0, double pace_ms,
                         double cap_ms, double *cut_ms, stream_timing *t,
                         atomic_llong *capped_at) {
  size_t at = 0;
  int unit = 0; /* the unit whose bytes come next */
  for (int i = 0; i < s->ncuts; i++)
    cut_ms[i] = NAN;
  for (int i = 0; i < s->ncuts; i++) {
    size_t end = s->cuts[i];
    while (unit < s->nunits && s->unit_end[unit] <= at)
      unit++;
    if (pace_ms > 0 && s->cut_pace != NULL)
      sleep_until(t0, pace_ms * s->cut_pace[i]);
    else if (pace_ms > 0 && unit < s->nunits)
      sleep_until(t0, pace_ms * unit);
    if (mr_test_send_bytes(fd, s->bytes + at, end - at) < 0)
      return -1;
    t->bytes_sent += end - at;
    cut_ms[i] = bench_now_ms() - t0;
    at = end;
    if (cap_ms > 0 && cut_ms[i] > cap_ms && end < s->close_at) {
      if (capped_at != NULL)
        atomic_store(capped_at, (long long)cut_ms[i]);
      if (mr_test_send_bytes(fd, s->bytes + s->close_at, s->len - s->close_at) < 0)
        return -1;
      t->bytes_sent += s->len - s->close_at;
      break;
    }
  }
  for (int u = 0; u < s->nunits; u++)
    t->units_sent += s->unit_end[u] <= at;
  t->last_acq_ms = cut_ms[stream_session_cut(s, s->last_acq_end)];
  if (isnan(t->last_acq_ms)) /* cut short: the last acquisition that went */
    for (int i = 0; i < s->ncuts && s->cuts[i] <= at; i++)
      if (s->cuts[i] <= s->last_acq_end)
        t->last_acq_ms = cut_ms[i];
  return 0;
}

/* The server's side of the conversation, on its own thread. */
typedef struct receiver {
  int fd, silence_ms;
  const stream_session *s;
  double t0, drain_ms;
  atomic_llong capped_at; /* ms since t0 the sender was cut short; 0: not */
  double *arrival_ms; /* [nunits], NaN until the unit's image came (by volume: its last) */
  int *got;           /* [nunits]: images of the unit so far */
  int images, unmatched, closed, abandoned;
  double last_image_ms, close_ms;
  char error[512];
} receiver;

static void fail(receiver *r, const char *fmt, const char *detail) {
  if (r->error[0] == '\0')
    snprintf(r->error, sizeof r->error, fmt, detail);
}

static int on_message(void *ctx, mr_message *m) {
  receiver *r = ctx;
  double now = bench_now_ms() - r->t0;
  int rc = 0;
  if (m->kind == MR_MSG_IMAGE) {
    const ISMRMRD_ImageHeader *h = &m->u.image.head;
    stream_key k = {{h->slice, h->contrast, h->phase, h->repetition, h->set}};
    int u = stream_session_unit(r->s, &k);
    int want = r->s->volume_images > 0 ? r->s->volume_images : 1;
    if (u >= 0 && r->got[u] < want) {
      if (++r->got[u] == want)
        r->arrival_ms[u] = now;
    } else {
      r->unmatched++;
    }
    r->images++;
    r->last_image_ms = now;
  } else if (m->kind == MR_MSG_TEXT) {
    if (strstr(m->u.text, "ERROR") != NULL)
      fail(r, "server: %s", m->u.text);
  } else if (m->kind == MR_MSG_CLOSE) {
    r->closed = 1;
    r->close_ms = now;
    rc = 1;
  }
  mr_message_unref(m);
  return rc;
}

static void *receive(void *arg) {
  receiver *r = arg;
  mr_decoder *dec = NULL;
  mr_decoder_callbacks cb = {.on_message = on_message, .ctx = r};
  uint8_t *buf = malloc(READ_CHUNK);
  if (buf == NULL || mr_decoder_create(NULL, &cb, &dec) < 0) {
    fail(r, "%s", "out of memory");
  } else {
    double heard = bench_now_ms() - r->t0; /* the server's last sign of life */
    while (!r->closed) {
      /* Short waits: the sender may cut the session short meanwhile. */
      struct pollfd p = {r->fd, POLLIN, 0};
      int ready = poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) {
        fail(r, "poll: %s", strerror(errno));
        break;
      }
      double now = bench_now_ms() - r->t0;
      long long capped = atomic_load(&r->capped_at);
      if (capped > 0 && now > (double)capped + r->drain_ms) {
        r->abandoned = 1;
        break;
      }
      if (ready <= 0) {
        if (now - heard > r->silence_ms) {
          fail(r, "%s", "the server was silent too long");
          break;
        }
        continue;
      }
      heard = now;
      ssize_t n = recv(r->fd, buf, READ_CHUNK, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        fail(r, "%s", "the server closed the connection without CLOSE");
        break;
      }
      int rc = mr_decoder_feed(dec, buf, (size_t)n);
      if (rc < 0) {
        fail(r, "undecodable reply: %s", mr_decoder_error(dec));
        break;
      }
    }
  }
  mr_decoder_destroy(dec);
  free(buf);
  /* Unblocks a sender the server stopped reading. */
  shutdown(r->fd, SHUT_RDWR);
  return NULL;
}

int stream_replay_server(const stream_session *s, int port, double pace_ms, double cap_ms,
                         double drain_ms, int silence_ms, stream_timing *t) {
  memset(t, 0, sizeof *t);
  t->last_image_ms = NAN;
  t->latency_ms = malloc((size_t)s->nunits * sizeof *t->latency_ms);
  double *arrival = malloc((size_t)s->nunits * sizeof *arrival);
  double *cut_ms = malloc((size_t)s->ncuts * sizeof *cut_ms);
  int *got = calloc((size_t)s->nunits, sizeof *got);
  int fd = mr_test_connect(port);
  if (t->latency_ms == NULL || arrival == NULL || cut_ms == NULL || got == NULL || fd < 0) {
    snprintf(t->error, sizeof t->error, "%s",
             fd < 0 ? "cannot connect to the server" : "out of memory");
    free(arrival);
    free(cut_ms);
    free(got);
    if (fd >= 0)
      close(fd);
    return -1;
  }
  for (int u = 0; u < s->nunits; u++)
    arrival[u] = t->latency_ms[u] = NAN;
  receiver r = {.fd = fd, .silence_ms = silence_ms, .s = s, .drain_ms = drain_ms,
                .arrival_ms = arrival, .got = got};
  atomic_init(&r.capped_at, 0);
  r.t0 = bench_now_ms();
  pthread_t thread;
  if (pthread_create(&thread, NULL, receive, &r) != 0) {
    snprintf(t->error, sizeof t->error, "cannot start the receiver thread");
    close(fd);
    free(arrival);
    free(cut_ms);
    free(got);
    return -1;
  }
  int wrc = write_session(fd, s, r.t0, pace_ms, cap_ms, cut_ms, t, &r.capped_at);
  int werr = errno;
  pthread_join(thread, NULL);
  close(fd);
  t->wall_ms = r.closed ? r.close_ms : NAN;
  t->abandoned = r.abandoned;
  t->images = r.images;
  t->unmatched_images = r.unmatched;
  t->last_image_ms = r.images > 0 ? r.last_image_ms : NAN;
  for (int u = 0; u < s->nunits; u++)
    t->latency_ms[u] = arrival[u] - cut_ms[stream_session_cut(s, s->unit_end[u])];
  if (r.error[0] != '\0')
    snprintf(t->error, sizeof t->error, "%s", r.error);
  else if (wrc < 0 && !r.abandoned)
    snprintf(t->error, sizeof t->error, "sending failed: %s", strerror(werr));
  else if (r.images == 0)
    snprintf(t->error, sizeof t->error, "no image came back%s",
             r.abandoned ? " before the bench gave up on the cut-short session" : "");
  free(arrival);
  free(cut_ms);
  free(got);
  return t->error[0] != '\0' ? -1 : 0;
}

/* The discarding end of the raw copy. */
typedef struct sink {
  int listener;
  size_t expect;
  int ok;
} sink;

static void *sink_main(void *arg) {
  sink *k = arg;
  int fd = accept(k->listener, NULL, NULL);
  uint8_t *buf = malloc(READ_CHUNK);
  size_t got = 0;
  while (fd >= 0 && buf != NULL && got < k->expect) {
    ssize_t n = recv(fd, buf, READ_CHUNK, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  k->ok = got == k->expect && mr_test_send_bytes(fd, (const uint8_t *)"", 1) == 0;
  free(buf);
  if (fd >= 0)
    close(fd);
  return NULL;
}

static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0)
    return -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int stream_replay_raw(const stream_session *s, stream_timing *t) {
  memset(t, 0, sizeof *t);
  t->last_image_ms = NAN;
  int port = 0;
  sink k = {.listener = listen_loopback(&port), .expect = s->len};
  double *cut_ms = malloc((size_t)s->ncuts * sizeof *cut_ms);
  pthread_t thread;
  if (k.listener < 0 || cut_ms == NULL || pthread_create(&thread, NULL, sink_main, &k) != 0) {
    snprintf(t->error, sizeof t->error, "cannot start the sink");
    if (k.listener >= 0)
      close(k.listener);
    free(cut_ms);
    return -1;
  }
  int fd = mr_test_connect(port);
  double t0 = bench_now_ms();
  int rc = fd >= 0 ? write_session(fd, s, t0, 0, 0, cut_ms, t, NULL) : -1;
  char ack = 1;
  if (rc == 0 && recv(fd, &ack, 1, MSG_WAITALL) != 1)
    rc = -1;
  t->wall_ms = bench_now_ms() - t0;
  if (fd >= 0)
    shutdown(fd, SHUT_RDWR); /* a sink still reading gives up */
  else
    shutdown(k.listener, SHUT_RDWR); /* a sink still in accept() gives up */
  pthread_join(thread, NULL);
  if (fd >= 0)
    close(fd);
  close(k.listener);
  free(cut_ms);
  if (rc < 0 || !k.ok) {
    snprintf(t->error, sizeof t->error, "the raw copy failed");
    return -1;
  }
  return 0;
}

void stream_timing_free(stream_timing *t) {
  free(t->latency_ms);
  t->latency_ms = NULL;
}

#define LATE_UNITS 40 /* listed at most (stream_replay.h) */
void stream_write_late_units(bench_json *j, const stream_session *s, const stream_timing *t,
                             double p99) {
  json_open(j, "late_units", '[');
  for (int u = 0, listed = 0; u < s->nunits && listed < LATE_UNITS; u++) {
    if (s->unit_end[u] > t->bytes_sent || isnan(t->latency_ms[u]) || t->latency_ms[u] < p99)
      continue;
    json_open(j, NULL, '[');
    json_int(j, NULL, u);
    json_num(j, NULL, t->latency_ms[u]);
    json_close(j, ']');
    listed++;
  }
  json_close(j, ']');
}
