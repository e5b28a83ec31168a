#include "channel.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

struct mr_chan {
  mr_chan_opts o;
  pthread_mutex_t mu;
  pthread_cond_t has_item; /* consumers wait here */
  pthread_cond_t has_room; /* producers wait here */
  /* cap slots of `stride` bytes, count of them in use from head; a slot
   * holds an item's bytes (a size_t) and then the item. */
  unsigned char *ring;
  size_t stride, cap, head, count;
  size_t bytes; /* held: queued, and popped but not yet released */
  int closed;
  int paused;  /* a producer that does not block waits to hear of room */
  int waiting; /* producers blocked in mr_chan_push */
};

int mr_chan_create(const mr_chan_opts *opts, mr_chan **out) {
  *out = NULL;
  if (opts->item_size == 0)
    return MR_EINVAL;
  mr_chan *ch = calloc(1, sizeof *ch);
  if (ch == NULL)
    return MR_ENOMEM;
  ch->o = *opts;
  /* Bounded by number: the ring holds the bound (only a put past it grows
   * it). Else it starts small and doubles as needed. */
  ch->cap = opts->max_items > 0 ? opts->max_items : 16;
  ch->stride = (sizeof(size_t) + opts->item_size + 15) / 16 * 16; /* items stay aligned */
  ch->ring = calloc(ch->cap, ch->stride);
  pthread_condattr_t attr;
  int ok = ch->ring != NULL && pthread_condattr_init(&attr) == 0;
  if (ok) {
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int a = pthread_cond_init(&ch->has_item, &attr);
    int b = a == 0 ? pthread_cond_init(&ch->has_room, &attr) : -1;
    int c = b == 0 ? pthread_mutex_init(&ch->mu, NULL) : -1;
    pthread_condattr_destroy(&attr);
    if (b == 0 && c != 0)
      pthread_cond_destroy(&ch->has_room);
    if (a == 0 && (b != 0 || c != 0))
      pthread_cond_destroy(&ch->has_item);
    ok = a == 0 && b == 0 && c == 0;
  }
  if (!ok) {
    free(ch->ring);
    free(ch);
    return MR_ENOMEM;
  }
  *out = ch;
  return 0;
}

static unsigned char *slot(mr_chan *ch, size_t i) {
  return ch->ring + ((ch->head + i) % ch->cap) * ch->stride;
}

static void *item_of(unsigned char *s) { return s + sizeof(size_t); }

void mr_chan_free(mr_chan *ch) {
  if (ch == NULL)
    return;
  for (size_t i = 0; i < ch->count; i++)
    if (ch->o.drop != NULL)
      ch->o.drop(item_of(slot(ch, i)));
  if (ch->o.count != NULL && ch->bytes > 0)
    ch->o.count(-(int64_t)ch->bytes);
  pthread_mutex_destroy(&ch->mu);
  pthread_cond_destroy(&ch->has_item);
  pthread_cond_destroy(&ch->has_room);
  free(ch->ring);
  free(ch);
}

/* Under mu. */
static int full(const mr_chan *ch) {
  return (ch->o.max_items > 0 && ch->count >= ch->o.max_items) ||
         (ch->o.max_bytes > 0 && ch->bytes >= ch->o.max_bytes);
}

/* Drained to half of each bound (under mu). */
static int half_empty(const mr_chan *ch) {
  return (ch->o.max_items == 0 || ch->count <= ch->o.max_items / 2) &&
         (ch->o.max_bytes == 0 || ch->bytes <= ch->o.max_bytes / 2);
}

/* Room for one more item in the ring (under mu): it doubles when full,
 * which a push into a channel bounded by number never finds (it waits
 * first), but a put past the bound does. */
static int make_slot(mr_chan *ch) {
  if (ch->count < ch->cap)
    return 0;
  size_t cap = ch->cap * 2;
  unsigned char *ring = calloc(cap, ch->stride);
  if (ring == NULL)
    return MR_ENOMEM;
  for (size_t i = 0; i < ch->count; i++)
    memcpy(ring + i * ch->stride, slot(ch, i), ch->stride);
  free(ch->ring);
  ch->ring = ring;
  ch->cap = cap;
  ch->head = 0;
  return 0;
}

static void deadline_in(struct timespec *t, int timeout_ms) {
  clock_gettime(CLOCK_MONOTONIC, t);
  t->tv_sec += timeout_ms / 1000;
  t->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000L;
  }
}

/* Waits on cv (under mu) until the deadline; 0 when woken, MR_ETIMEDOUT
 * when it passed or timeout_ms is 0. */
static int wait_on(mr_chan *ch, pthread_cond_t *cv, int timeout_ms, const struct timespec *t) {
  if (timeout_ms == 0)
    return MR_ETIMEDOUT;
  if (timeout_ms < 0)
    return pthread_cond_wait(cv, &ch->mu) == 0 ? 0 : MR_ETIMEDOUT;
  return pthread_cond_timedwait(cv, &ch->mu, t) == ETIMEDOUT ? MR_ETIMEDOUT : 0;
}

/* Appends item (under mu; the slot is there). */
static void append(mr_chan *ch, const void *item, size_t bytes) {
  unsigned char *s = slot(ch, ch->count);
  memcpy(s, &bytes, sizeof bytes);
  memcpy(item_of(s), item, ch->o.item_size);
  ch->count++;
  ch->bytes += bytes;
  if (ch->o.count != NULL && bytes > 0)
    ch->o.count((int64_t)bytes);
  pthread_cond_broadcast(&ch->has_item);
}

static int push(mr_chan *ch, const void *item, size_t bytes, int timeout_ms, int wait) {
  struct timespec t;
  if (timeout_ms > 0)
    deadline_in(&t, timeout_ms);
  pthread_mutex_lock(&ch->mu);
  int rc = 0;
  while (wait && !ch->closed && full(ch) && rc == 0) {
    ch->waiting++;
    rc = wait_on(ch, &ch->has_room, timeout_ms, &t);
    ch->waiting--;
  }
  if (ch->closed)
    rc = MR_ECANCELED;
  else if (wait && full(ch))
    rc = MR_ETIMEDOUT;
  else
    rc = make_slot(ch);
  if (rc == 0)
    append(ch, item, bytes);
  pthread_mutex_unlock(&ch->mu);
  if (rc == 0 && ch->o.on_item != NULL)
    ch->o.on_item(ch->o.hook_ctx);
  return rc;
}

int mr_chan_push(mr_chan *ch, const void *item, size_t bytes, int timeout_ms) {
  return push(ch, item, bytes, timeout_ms, 1);
}

int mr_chan_put(mr_chan *ch, const void *item, size_t bytes) {
  return push(ch, item, bytes, 0, 0);
}

/* After room was made (under mu): wakes the producers that wait, and says
 * whether the one that paused is to be told (once per pause). */
static int room_made(mr_chan *ch) {
  pthread_cond_broadcast(&ch->has_room);
  if (!ch->paused || !half_empty(ch))
    return 0;
  ch->paused = 0;
  return 1;
}

int mr_chan_pop(mr_chan *ch, void *item, size_t *bytes, int timeout_ms) {
  struct timespec t;
  if (timeout_ms > 0)
    deadline_in(&t, timeout_ms);
  pthread_mutex_lock(&ch->mu);
  int rc = 0;
  while (ch->count == 0 && !ch->closed && rc == 0)
    rc = wait_on(ch, &ch->has_item, timeout_ms, &t);
  int resume = 0;
  if (ch->count > 0) {
    unsigned char *s = slot(ch, 0);
    memcpy(item, item_of(s), ch->o.item_size);
    if (bytes != NULL) /* what the consumer releases later */
      memcpy(bytes, s, sizeof *bytes);
    ch->head = (ch->head + 1) % ch->cap;
    ch->count--;
    resume = room_made(ch);
    rc = 0;
  } else {
    rc = ch->closed ? MR_ECANCELED : MR_ETIMEDOUT;
  }
  pthread_mutex_unlock(&ch->mu);
  if (resume && ch->o.on_room != NULL)
    ch->o.on_room(ch->o.hook_ctx);
  return rc;
}

void mr_chan_release(mr_chan *ch, size_t bytes) {
  pthread_mutex_lock(&ch->mu);
  size_t released = bytes < ch->bytes ? bytes : ch->bytes;
  ch->bytes -= released;
  if (ch->o.count != NULL && released > 0)
    ch->o.count(-(int64_t)released);
  int resume = room_made(ch);
  pthread_mutex_unlock(&ch->mu);
  if (resume && ch->o.on_room != NULL)
    ch->o.on_room(ch->o.hook_ctx);
}

void mr_chan_pause(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  ch->paused = 1;
  pthread_mutex_unlock(&ch->mu);
}

int mr_chan_full(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  int f = full(ch);
  pthread_mutex_unlock(&ch->mu);
  return f;
}

size_t mr_chan_bytes(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  size_t b = ch->bytes;
  pthread_mutex_unlock(&ch->mu);
  return b;
}

int mr_chan_waiting(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  int n = ch->waiting;
  pthread_mutex_unlock(&ch->mu);
  return n;
}

void mr_chan_close(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  ch->closed = 1;
  pthread_cond_broadcast(&ch->has_item);
  pthread_cond_broadcast(&ch->has_room);
  pthread_mutex_unlock(&ch->mu);
  if (ch->o.on_item != NULL)
    ch->o.on_item(ch->o.hook_ctx);
}

int mr_chan_closed(mr_chan *ch) {
  pthread_mutex_lock(&ch->mu);
  int c = ch->closed;
  pthread_mutex_unlock(&ch->mu);
  return c;
}
