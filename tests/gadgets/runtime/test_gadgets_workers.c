/* workers.h: jobs run side by side on a gadget's worker threads and come
 * back in the order they were given, whatever order they end in, each with
 * its own result and line; at most `count` are out at once; a worker keeps
 * its own state between its jobs and frees it at the end; jobs never taken
 * back are handed to the drop function. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "workers.h"

typedef struct job {
  int id;
  int started_before; /* runs on once this many jobs have started */
  int ended_before;   /* ... and this many have ended */
  int gated;          /* ... and the test opened the gate */
  int fail;           /* returns MR_EDATA with a line naming it */
  int ran;
} job;

static atomic_int running, most_running, started, ended, gate, owns_made, owns_freed, dropped;

/* Waits (1 ms at a time, 10 s at most) until *count reaches n. */
static void wait_for(atomic_int *count, int n) {
  struct timespec ms = {0, 1000000L};
  for (int i = 0; i < 10000 && atomic_load(count) < n; i++)
    nanosleep(&ms, NULL);
}

static void free_own(void *own) {
  atomic_fetch_add(&owns_freed, 1);
  free(own);
}

static int run_job(void **own, void *arg, mr_err *err) {
  job *j = arg;
  if (*own == NULL) {
    *own = malloc(16);
    atomic_fetch_add(&owns_made, 1);
  }
  int now = atomic_fetch_add(&running, 1) + 1;
  for (int seen = atomic_load(&most_running);
       now > seen && !atomic_compare_exchange_weak(&most_running, &seen, now);)
    ;
  atomic_fetch_add(&started, 1);
  wait_for(&started, j->started_before);
  wait_for(&ended, j->ended_before);
  wait_for(&gate, j->gated);
  atomic_fetch_sub(&running, 1);
  j->ran = 1;
  atomic_fetch_add(&ended, 1);
  return j->fail ? mr_err_set(err, MR_EDATA, "job %d failed", j->id) : 0;
}

static void drop_job(void *arg) {
  (void)arg;
  atomic_fetch_add(&dropped, 1);
}

static void reset(void) {
  atomic_store(&running, 0);
  atomic_store(&most_running, 0);
  atomic_store(&started, 0);
  atomic_store(&ended, 0);
  atomic_store(&gate, 0);
  atomic_store(&owns_made, 0);
  atomic_store(&owns_freed, 0);
  atomic_store(&dropped, 0);
}

/* Three at once, the first given ending last: the others wait behind it,
 * then come in order. */
static void back_in_order(void **state) {
  (void)state;
  reset();
  mr_gadget_ctx ctx = {0}; /* no stage thread: waking does nothing */
  mr_workers *w = NULL;
  assert_int_equal(mr_workers_create(3, "test", run_job, free_own, &ctx, &w, NULL), 0);
  job jobs[3] = {{0, 3, 2, 1, 0, 0}, {1, 3, 0, 0, 0, 0}, {2, 3, 0, 0, 1, 0}};
  for (int i = 0; i < 3; i++) {
    assert_false(mr_workers_full(w));
    mr_workers_give(w, &jobs[i]);
  }
  assert_true(mr_workers_full(w));
  assert_int_equal(mr_workers_pending(w), 3);
  int rc = 0;
  mr_err e = {0};
  wait_for(&ended, 2);
  assert_null(mr_workers_take(w, 0, &rc, &e)); /* the first still runs: nothing yet */
  atomic_store(&gate, 1);
  assert_ptr_equal(mr_workers_take(w, 1, &rc, &e), &jobs[0]);
  assert_int_equal(rc, 0);
  assert_ptr_equal(mr_workers_take(w, 1, &rc, &e), &jobs[1]);
  assert_ptr_equal(mr_workers_take(w, 1, &rc, &e), &jobs[2]);
  assert_int_equal(rc, MR_EDATA);
  assert_string_equal(e.msg, "job 2 failed");
  assert_int_equal(mr_workers_pending(w), 0);
  assert_null(mr_workers_take(w, 1, &rc, &e)); /* none left: no wait */
  assert_int_equal(atomic_load(&most_running), 3);
  mr_workers_destroy(w, drop_job);
  assert_int_equal(atomic_load(&dropped), 0);
  assert_int_equal(atomic_load(&owns_freed), atomic_load(&owns_made));
}

/* More jobs than workers, given as room frees up: never more than count
 * at once; those not taken back at the end are dropped. */
static void bounded_and_dropped(void **state) {
  (void)state;
  reset();
  mr_gadget_ctx ctx = {0};
  mr_workers *w = NULL;
  assert_int_equal(mr_workers_create(2, "test", run_job, free_own, &ctx, &w, NULL), 0);
  job jobs[7];
  int taken = 0, rc = 0;
  for (int i = 0; i < 7; i++) {
    jobs[i] = (job){i, 0, 0, 0, 0, 0};
    if (mr_workers_full(w)) {
      job *j = mr_workers_take(w, 1, &rc, NULL);
      assert_non_null(j);
      assert_int_equal(j->id, taken++);
    }
    mr_workers_give(w, &jobs[i]);
  }
  assert_int_equal(taken, 5);
  assert_true(atomic_load(&most_running) <= 2);
  mr_workers_destroy(w, drop_job); /* the last two: run or not, dropped */
  assert_int_equal(atomic_load(&dropped), 2);
  assert_int_equal(atomic_load(&owns_freed), atomic_load(&owns_made));
  assert_true(atomic_load(&owns_made) <= 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(back_in_order),
      cmocka_unit_test(bounded_and_dropped),
  };
  return cmocka_run_group_tests_name("gadgets_workers", tests, NULL, NULL);
}
