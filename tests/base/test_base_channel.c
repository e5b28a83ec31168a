/* The bounded channel (base/channel.h), in process: order, the byte count
 * and its release, bounds by number and by bytes, the pause / resume
 * handshake of a producer that must not block, a producer that waits for
 * room, timed pops and pushes, closing, the hooks, and many threads at
 * once (run under ASan and TSan-clean by design: every shared field is
 * behind the channel's lock). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "channel.h"
#include "error.h"

typedef struct item {
  int producer;
  int seq;
} item;

static mr_chan *make(size_t max_items, size_t max_bytes) {
  mr_chan_opts o = {.item_size = sizeof(item), .max_items = max_items, .max_bytes = max_bytes};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  return ch;
}

static void push_seq(mr_chan *ch, int seq, size_t bytes) {
  item it = {0, seq};
  assert_int_equal(mr_chan_push(ch, &it, bytes, 0), 0);
}

/* Pops one item (no wait), releases it, returns its seq. */
static int pop_seq(mr_chan *ch) {
  item it;
  size_t bytes = 0;
  assert_int_equal(mr_chan_pop(ch, &it, &bytes, 0), 0);
  mr_chan_release(ch, bytes);
  return it.seq;
}

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void test_items_come_out_in_order_and_count_until_released(void **state) {
  (void)state;
  mr_chan *ch = make(0, 10000);
  push_seq(ch, 1, 100);
  push_seq(ch, 2, 0);
  push_seq(ch, 3, 200);
  assert_int_equal(mr_chan_bytes(ch), 300);
  item it;
  size_t bytes = 0;
  assert_int_equal(mr_chan_pop(ch, &it, &bytes, 0), 0);
  assert_int_equal(it.seq, 1);
  assert_int_equal(bytes, 100);
  assert_int_equal(mr_chan_bytes(ch), 300); /* popped, not yet released */
  mr_chan_release(ch, bytes);
  assert_int_equal(mr_chan_bytes(ch), 200);
  assert_int_equal(pop_seq(ch), 2);
  assert_int_equal(pop_seq(ch), 3);
  assert_int_equal(mr_chan_bytes(ch), 0);
  uint64_t t0 = now_ms();
  assert_int_equal(mr_chan_pop(ch, &it, NULL, 30), MR_ETIMEDOUT); /* empty: the timeout */
  assert_true(now_ms() - t0 >= 29);
  mr_chan_free(ch);
}

/* Bounded by number: full at max_items; a put goes past the bound (the
 * loop thread never blocks), a push does not. */
static void test_a_bound_by_number(void **state) {
  (void)state;
  mr_chan *ch = make(2, 0);
  push_seq(ch, 1, 0);
  assert_false(mr_chan_full(ch));
  push_seq(ch, 2, 0);
  assert_true(mr_chan_full(ch));
  item it = {0, 3};
  uint64_t t0 = now_ms();
  assert_int_equal(mr_chan_push(ch, &it, 0, 20), MR_ETIMEDOUT);
  assert_true(now_ms() - t0 >= 19);
  assert_int_equal(mr_chan_push(ch, &it, 0, 0), MR_ETIMEDOUT);
  assert_int_equal(mr_chan_put(ch, &it, 0), 0);
  for (int i = 1; i <= 3; i++)
    assert_int_equal(pop_seq(ch), i);
  mr_chan_free(ch);
}

/* A channel bounded by bytes alone grows its ring for what is put past
 * the bound, and keeps the order across the growth. */
static void test_the_ring_grows_in_order(void **state) {
  (void)state;
  mr_chan *ch = make(0, 10);
  item it = {0, 0};
  for (it.seq = 0; it.seq < 1000; it.seq++)
    assert_int_equal(mr_chan_put(ch, &it, 1), 0);
  for (int i = 0; i < 500; i++)
    assert_int_equal(pop_seq(ch), i);
  for (it.seq = 1000; it.seq < 1500; it.seq++)
    assert_int_equal(mr_chan_put(ch, &it, 1), 0);
  for (int i = 500; i < 1500; i++)
    assert_int_equal(pop_seq(ch), i);
  assert_int_equal(mr_chan_bytes(ch), 0);
  mr_chan_free(ch);
}

static int rooms, items;
static void on_room(void *ctx) {
  (void)ctx;
  rooms++;
}
static void on_item(void *ctx) {
  (void)ctx;
  items++;
}

/* The loop thread never blocks: it sees the channel full, pauses, and
 * hears once that it may go on when the channel has drained to half. */
static void test_a_paused_producer_is_told_once_at_half(void **state) {
  (void)state;
  mr_chan_opts o = {.item_size = sizeof(item), .max_bytes = 400, .on_room = on_room};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  rooms = 0;
  for (int i = 0; i < 4; i++)
    assert_int_equal(mr_chan_put(ch, &(item){0, i}, 100), 0);
  assert_true(mr_chan_full(ch));
  mr_chan_pause(ch);
  pop_seq(ch);
  assert_int_equal(rooms, 0); /* 300 left: more than half */
  assert_false(mr_chan_full(ch));
  pop_seq(ch);
  assert_int_equal(rooms, 1); /* 200: half, go on */
  pop_seq(ch);
  assert_int_equal(rooms, 1); /* told once per pause */
  /* Bounded by number, room comes with the pop itself. */
  mr_chan_free(ch); /* the item still queued goes too */
  o = (mr_chan_opts){.item_size = sizeof(item), .max_items = 4, .on_room = on_room};
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  for (int i = 0; i < 4; i++)
    push_seq(ch, i, 0);
  mr_chan_pause(ch);
  item it;
  assert_int_equal(mr_chan_pop(ch, &it, NULL, 0), 0);
  assert_int_equal(rooms, 1);
  assert_int_equal(mr_chan_pop(ch, &it, NULL, 0), 0);
  assert_int_equal(rooms, 2);
  mr_chan_free(ch);
}

typedef struct pusher {
  mr_chan *ch;
  atomic_int done;
  int rc;
} pusher;

static void *push_waiting(void *arg) {
  pusher *p = arg;
  item it = {0, 99};
  p->rc = mr_chan_push(p->ch, &it, 100, -1);
  atomic_store(&p->done, 1);
  return NULL;
}

/* A full channel of 100 bytes holding item 1, and a thread whose push
 * waits for room there. */
static mr_chan *fill_and_start_pusher(pusher *p, pthread_t *t) {
  mr_chan *ch = make(0, 100);
  push_seq(ch, 1, 100);
  p->ch = ch;
  assert_int_equal(pthread_create(t, NULL, push_waiting, p), 0);
  while (mr_chan_waiting(ch) == 0)
    sched_yield(); /* until it waits for room */
  return ch;
}

static void test_a_waiting_producer_goes_on_when_room_is_made(void **state) {
  (void)state;
  pusher p = {0};
  pthread_t t;
  mr_chan *ch = fill_and_start_pusher(&p, &t);
  assert_false(atomic_load(&p.done)); /* full: it waits */
  item it;
  size_t bytes;
  assert_int_equal(mr_chan_pop(ch, &it, &bytes, 0), 0);
  assert_false(atomic_load(&p.done)); /* popped is not released: still full */
  mr_chan_release(ch, bytes);
  pthread_join(t, NULL);
  assert_int_equal(p.rc, 0);
  assert_int_equal(pop_seq(ch), 99);
  mr_chan_free(ch);
}

/* Closing lets a waiting producer go, fails later pushes, drains what is
 * left and then fails pops at once, however long they would wait. */
static void test_closing_releases_a_waiting_producer_and_drains(void **state) {
  (void)state;
  pusher p = {0};
  pthread_t t;
  mr_chan *ch = fill_and_start_pusher(&p, &t);
  mr_chan_close(ch);
  pthread_join(t, NULL);
  assert_int_equal(p.rc, MR_ECANCELED);
  assert_true(mr_chan_closed(ch));
  item it = {0, 5};
  assert_int_equal(mr_chan_push(ch, &it, 10, 0), MR_ECANCELED);
  assert_int_equal(mr_chan_put(ch, &it, 10), MR_ECANCELED);
  assert_int_equal(mr_chan_pop(ch, &it, NULL, -1), 0);
  assert_int_equal(it.seq, 1);
  assert_int_equal(mr_chan_pop(ch, &it, NULL, -1), MR_ECANCELED); /* closed and empty */
  mr_chan_free(ch);
}

typedef struct popper {
  mr_chan *ch;
  int rc;
} popper;

static void *pop_waiting(void *arg) {
  popper *p = arg;
  item it;
  p->rc = mr_chan_pop(p->ch, &it, NULL, -1);
  return NULL;
}

/* A consumer blocked without a timeout wakes when the channel closes:
 * that is how a waiting thread is cancelled. */
static void test_closing_wakes_a_blocked_consumer(void **state) {
  (void)state;
  mr_chan_opts o = {.item_size = sizeof(item), .on_item = on_item};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  items = 0;
  popper p = {ch, 1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pop_waiting, &p), 0);
  mr_chan_close(ch);
  pthread_join(t, NULL);
  assert_int_equal(p.rc, MR_ECANCELED);
  assert_int_equal(items, 1); /* the consumer that cannot block hears of the close */
  mr_chan_free(ch);
}

static void test_the_item_hook_hears_every_push(void **state) {
  (void)state;
  mr_chan_opts o = {.item_size = sizeof(item), .max_items = 1, .on_item = on_item};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  items = 0;
  push_seq(ch, 1, 0);
  assert_int_equal(items, 1);
  assert_int_equal(mr_chan_push(ch, &(item){0, 2}, 0, 0), MR_ETIMEDOUT);
  assert_int_equal(items, 1); /* nothing queued, nothing said */
  assert_int_equal(mr_chan_put(ch, &(item){0, 2}, 0), 0);
  assert_int_equal(items, 2);
  mr_chan_free(ch);
}

static int64_t counted;
static void count(int64_t delta) { counted += delta; }

static void test_the_metrics_hook_sees_every_change(void **state) {
  (void)state;
  mr_chan_opts o = {.item_size = sizeof(item), .max_bytes = 1000, .count = count};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  counted = 0;
  push_seq(ch, 1, 120);
  push_seq(ch, 2, 80);
  assert_int_equal(counted, 200);
  pop_seq(ch);
  assert_int_equal(counted, 80);
  mr_chan_free(ch); /* what is still queued is counted out too */
  assert_int_equal(counted, 0);
}

static int dropped;
static void drop(void *p) {
  item *it = p;
  dropped += it->seq;
}

static void test_what_is_left_is_dropped(void **state) {
  (void)state;
  mr_chan_opts o = {.item_size = sizeof(item), .max_items = 3, .drop = drop};
  mr_chan *ch = NULL;
  assert_int_equal(mr_chan_create(&o, &ch), 0);
  dropped = 0;
  push_seq(ch, 1, 0);
  push_seq(ch, 2, 0);
  push_seq(ch, 4, 0);
  pop_seq(ch); /* wraps the ring: the drop must find items 2 and 4 */
  push_seq(ch, 8, 0);
  mr_chan_free(ch);
  assert_int_equal(dropped, 2 + 4 + 8);
}

/* Many producers and consumers at once over a small channel bounded both
 * ways: every item comes out exactly once, each producer's items in the
 * order it pushed them (checked per consumer: a consumer never sees a
 * producer's items out of order), and closing at the end lets every
 * consumer go. */
enum { PRODUCERS = 4, CONSUMERS = 4, PER_PRODUCER = 20000 };

typedef struct stress {
  mr_chan *ch;
  int id;
  atomic_int *seen; /* PRODUCERS * PER_PRODUCER counters */
  int out_of_order;
  long popped;
} stress;

static void *stress_produce(void *arg) {
  stress *s = arg;
  for (int i = 0; i < PER_PRODUCER; i++) {
    item it = {s->id, i};
    /* Some pushes wait for room, some give up and try again. */
    int rc;
    while ((rc = mr_chan_push(s->ch, &it, 3, i % 3 == 0 ? 0 : -1)) == MR_ETIMEDOUT)
      ;
    if (rc != 0) /* checked on the main thread: cmocka asserts there only */
      s->out_of_order++;
  }
  return NULL;
}

static void *stress_consume(void *arg) {
  stress *s = arg;
  int last[PRODUCERS];
  for (int p = 0; p < PRODUCERS; p++)
    last[p] = -1;
  item it;
  size_t bytes;
  int rc;
  while ((rc = mr_chan_pop(s->ch, &it, &bytes, s->id % 2 == 0 ? -1 : 5)) != MR_ECANCELED) {
    if (rc == MR_ETIMEDOUT)
      continue;
    if (it.seq <= last[it.producer])
      s->out_of_order++;
    last[it.producer] = it.seq;
    atomic_fetch_add(&s->seen[it.producer * PER_PRODUCER + it.seq], 1);
    s->popped++;
    mr_chan_release(s->ch, bytes);
  }
  return NULL;
}

static void test_many_threads_at_once(void **state) {
  (void)state;
  mr_chan *ch = make(8, 16);
  atomic_int *seen = calloc(PRODUCERS * PER_PRODUCER, sizeof *seen);
  assert_non_null(seen);
  stress prod[PRODUCERS], cons[CONSUMERS];
  pthread_t tp[PRODUCERS], tc[CONSUMERS];
  for (int i = 0; i < CONSUMERS; i++) {
    cons[i] = (stress){.ch = ch, .id = i, .seen = seen};
    assert_int_equal(pthread_create(&tc[i], NULL, stress_consume, &cons[i]), 0);
  }
  for (int i = 0; i < PRODUCERS; i++) {
    prod[i] = (stress){.ch = ch, .id = i, .seen = seen};
    assert_int_equal(pthread_create(&tp[i], NULL, stress_produce, &prod[i]), 0);
  }
  for (int i = 0; i < PRODUCERS; i++) {
    pthread_join(tp[i], NULL);
    assert_int_equal(prod[i].out_of_order, 0); /* every push went in */
  }
  mr_chan_close(ch); /* the consumers drain what is left, then leave */
  long popped = 0;
  for (int i = 0; i < CONSUMERS; i++) {
    pthread_join(tc[i], NULL);
    popped += cons[i].popped;
    assert_int_equal(cons[i].out_of_order, 0);
  }
  assert_int_equal(popped, PRODUCERS * PER_PRODUCER);
  for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
    assert_int_equal(atomic_load(&seen[i]), 1);
  assert_int_equal(mr_chan_bytes(ch), 0);
  mr_chan_free(ch);
  free(seen);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_items_come_out_in_order_and_count_until_released),
      cmocka_unit_test(test_a_bound_by_number),
      cmocka_unit_test(test_the_ring_grows_in_order),
      cmocka_unit_test(test_a_paused_producer_is_told_once_at_half),
      cmocka_unit_test(test_a_waiting_producer_goes_on_when_room_is_made),
      cmocka_unit_test(test_closing_releases_a_waiting_producer_and_drains),
      cmocka_unit_test(test_closing_wakes_a_blocked_consumer),
      cmocka_unit_test(test_the_item_hook_hears_every_push),
      cmocka_unit_test(test_the_metrics_hook_sees_every_change),
      cmocka_unit_test(test_what_is_left_is_dropped),
      cmocka_unit_test(test_many_threads_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
