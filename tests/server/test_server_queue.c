/* The bounded queue between a connection's loop thread and its pipeline
 * thread (server/queue.h), in process: order, the byte count and its
 * release, the pause / resume handshake of a producer that must not block,
 * a producer that waits for room, closing, timeouts, the metrics hook. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sched.h>

#include "error.h"
#include "message.h"
#include "queue.h"

static mr_message *text(const char *s) {
  mr_message *m = mr_message_new_text(MR_MSG_TEXT, s, strlen(s));
  assert_non_null(m);
  return m;
}

static void test_entries_come_out_in_order_and_count_until_released(void **state) {
  (void)state;
  mr_queue q;
  const size_t event = MR_QUEUE_MESSAGE_OVERHEAD + strlen("bad framing");
  assert_int_equal(mr_queue_init(&q, 10000), 0);
  assert_int_equal(mr_queue_push(&q, text("one"), 100, 0), 0);
  assert_int_equal(mr_queue_push_event(&q, MR_EPROTO, "bad framing"), 0);
  assert_int_equal(mr_queue_push(&q, text("two"), 200, 0), 0);
  assert_int_equal(mr_queue_bytes(&q), 300 + event); /* events count too */
  mr_queue_entry *e = mr_queue_pop(&q, 0);
  assert_non_null(e);
  assert_string_equal(e->msg->u.text, "one");
  assert_int_equal(mr_queue_bytes(&q), 300 + event); /* popped, not yet released */
  mr_queue_release(&q, e->bytes);
  assert_int_equal(mr_queue_bytes(&q), 200 + event);
  mr_queue_entry_free(e);
  e = mr_queue_pop(&q, 0);
  assert_null(e->msg);
  assert_int_equal(e->code, MR_EPROTO);
  assert_string_equal(e->text, "bad framing");
  assert_int_equal(e->bytes, event);
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  e = mr_queue_pop(&q, 0);
  assert_string_equal(e->msg->u.text, "two");
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  assert_int_equal(mr_queue_bytes(&q), 0);
  assert_null(mr_queue_pop(&q, 10)); /* empty: the timeout, then NULL */
  mr_queue_destroy(&q);
}

/* Rejected messages (events) are held like messages: a flood of them
 * fills the queue, so the loop thread stops reading the socket. */
static void test_a_flood_of_events_fills_the_queue(void **state) {
  (void)state;
  mr_queue q;
  assert_int_equal(mr_queue_init(&q, 64 * 1024), 0);
  int pushed = 0;
  while (!mr_queue_full(&q) && pushed < 1000) {
    assert_int_equal(mr_queue_push_event(&q, MR_EPROTO, "QUERY: malformed"), 0);
    pushed++;
  }
  assert_true(mr_queue_full(&q));
  assert_int_equal(pushed, (64 * 1024 + MR_QUEUE_MESSAGE_OVERHEAD + 15) /
                               (MR_QUEUE_MESSAGE_OVERHEAD + 16));
  mr_queue_destroy(&q);
}

/* The loop thread never blocks: it sees the queue full, pauses, and hears
 * once that it may go on when the queue has drained to half. */
static void test_a_paused_producer_is_told_once_at_half(void **state) {
  (void)state;
  mr_queue q;
  assert_int_equal(mr_queue_init(&q, 400), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(mr_queue_push(&q, text("x"), 100, 0), 0);
  assert_true(mr_queue_full(&q));
  mr_queue_pause(&q);
  mr_queue_entry *e = mr_queue_pop(&q, 0);
  assert_int_equal(mr_queue_release(&q, e->bytes), 0); /* 300 left: more than half */
  mr_queue_entry_free(e);
  assert_false(mr_queue_full(&q));
  e = mr_queue_pop(&q, 0);
  assert_int_equal(mr_queue_release(&q, e->bytes), 1); /* 200: half, go on */
  mr_queue_entry_free(e);
  e = mr_queue_pop(&q, 0);
  assert_int_equal(mr_queue_release(&q, e->bytes), 0); /* told once per pause */
  mr_queue_entry_free(e);
  mr_queue_destroy(&q); /* frees the entry still queued */
}

typedef struct pusher {
  mr_queue *q;
  atomic_int done;
  int rc;
} pusher;

static void *push_waiting(void *arg) {
  pusher *p = arg;
  p->rc = mr_queue_push(p->q, text("late"), 100, 1);
  atomic_store(&p->done, 1);
  return NULL;
}

/* A full queue of capacity 100 holding `first`, and a thread whose push
 * waits for room there. */
static void fill_and_start_pusher(mr_queue *q, const char *first, pusher *p, pthread_t *t) {
  assert_int_equal(mr_queue_init(q, 100), 0);
  assert_int_equal(mr_queue_push(q, text(first), 100, 1), 0);
  p->q = q;
  assert_int_equal(pthread_create(t, NULL, push_waiting, p), 0);
  while (mr_queue_waiting(q) == 0)
    sched_yield(); /* until it waits for room */
}

/* The pipeline thread writing images waits for room instead. */
static void test_a_waiting_producer_goes_on_when_room_is_made(void **state) {
  (void)state;
  mr_queue q;
  pusher p = {0};
  pthread_t t;
  fill_and_start_pusher(&q, "first", &p, &t);
  assert_false(atomic_load(&p.done)); /* full: it waits */
  mr_queue_entry *e = mr_queue_pop(&q, 0);
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  pthread_join(t, NULL);
  assert_int_equal(p.rc, 0);
  e = mr_queue_pop(&q, 0);
  assert_string_equal(e->msg->u.text, "late");
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  mr_queue_destroy(&q);
}

/* A client that vanishes closes the queues: a producer waiting for room is
 * let go, later pushes fail (their message dropped, not leaked: ASan),
 * pops drain what is left and then return NULL at once. */
static void test_closing_releases_a_waiting_producer_and_drains(void **state) {
  (void)state;
  mr_queue q;
  pusher p = {0};
  pthread_t t;
  fill_and_start_pusher(&q, "kept", &p, &t);
  mr_queue_close(&q);
  pthread_join(t, NULL);
  assert_int_equal(p.rc, MR_ECANCELED);
  assert_int_equal(mr_queue_push(&q, text("after"), 10, 0), MR_ECANCELED);
  mr_queue_entry *e = mr_queue_pop(&q, -1);
  assert_non_null(e);
  assert_string_equal(e->msg->u.text, "kept");
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  assert_null(mr_queue_pop(&q, -1)); /* closed and empty: no wait */
  mr_queue_destroy(&q);
}

static int64_t counted;

static void count(int64_t delta) { counted += delta; }

static void test_the_metrics_hook_sees_every_change(void **state) {
  (void)state;
  mr_queue q;
  assert_int_equal(mr_queue_init(&q, 1000), 0);
  q.count = count;
  counted = 0;
  assert_int_equal(mr_queue_push(&q, text("a"), 120, 0), 0);
  assert_int_equal(mr_queue_push(&q, text("b"), 80, 0), 0);
  assert_int_equal(counted, 200);
  mr_queue_entry *e = mr_queue_pop(&q, 0);
  mr_queue_release(&q, e->bytes);
  mr_queue_entry_free(e);
  assert_int_equal(counted, 80);
  mr_queue_destroy(&q); /* what is still queued is counted out too */
  assert_int_equal(counted, 0);
}

static void test_a_message_counts_its_memory(void **state) {
  (void)state;
  mr_message *m = text("hello");
  assert_int_equal(mr_queue_message_bytes(m), MR_QUEUE_MESSAGE_OVERHEAD + 5);
  mr_message_unref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entries_come_out_in_order_and_count_until_released),
      cmocka_unit_test(test_a_flood_of_events_fills_the_queue),
      cmocka_unit_test(test_a_paused_producer_is_told_once_at_half),
      cmocka_unit_test(test_a_waiting_producer_goes_on_when_room_is_made),
      cmocka_unit_test(test_closing_releases_a_waiting_producer_and_drains),
      cmocka_unit_test(test_the_metrics_hook_sees_every_change),
      cmocka_unit_test(test_a_message_counts_its_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
