/* The worker thread behind each GPU (gpu/core/worker.h): calls run one at a
 * time in order; posted calls do not make the caller wait, run in their
 * place in that order, with a copy of their argument. No GPU needed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "error.h"
#include "worker.h"

typedef struct log_ {
  int order[64];
  int n;
  pthread_mutex_t gate; /* held by the test to keep the worker busy */
} log_;

static log_ the_log = {.gate = PTHREAD_MUTEX_INITIALIZER};

static int init(void *arg) {
  (void)arg;
  return 0;
}

typedef struct note {
  int value;
} note;

static int append(void *arg) {
  const note *n = arg;
  the_log.order[the_log.n++] = n->value;
  return 0;
}

/* Blocks the worker until the test lets go of the gate. */
static atomic_int at_gate;

static int wait_at_gate(void *arg) {
  (void)arg;
  atomic_store(&at_gate, 1);
  pthread_mutex_lock(&the_log.gate);
  pthread_mutex_unlock(&the_log.gate);
  return 0;
}

static int count(void *arg) {
  *(int *)arg = the_log.n;
  return 0;
}

static void *blocker(void *w) {
  mr_worker_call(w, wait_at_gate, NULL);
  return NULL;
}

static void test_posted_calls_run_in_order_without_waiting(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w), 0);
  the_log.n = 0;
  /* The worker is kept busy: posting must return all the same. */
  pthread_mutex_lock(&the_log.gate);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, blocker, w), 0);
  while (!atomic_load(&at_gate)) /* the worker is inside the blocking call */
    usleep(1000);
  note n = {0};
  for (int i = 1; i <= 5; i++) {
    n.value = i;
    assert_int_equal(mr_worker_post(w, append, &n, sizeof n), 0);
  }
  n.value = 99; /* the posted calls have their own copies */
  assert_int_equal(the_log.n, 0); /* none ran: the worker is busy */
  pthread_mutex_unlock(&the_log.gate);
  int seen = -1;
  assert_int_equal(mr_worker_call(w, count, &seen), 0); /* after every posted call */
  assert_int_equal(seen, 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(the_log.order[i], i + 1);
  pthread_join(t, NULL);
  mr_worker_stop(w, NULL, NULL);
}

static int post_from_worker(void *w) {
  note n = {42};
  int before = the_log.n;
  int rc = mr_worker_post(w, append, &n, sizeof n);
  /* On the worker itself the call runs at once. */
  return rc == 0 && the_log.n == before + 1 ? 0 : MR_EINVAL;
}

typedef struct self_call {
  mr_worker *w;
} self_call;

static int post_self(void *arg) { return post_from_worker(((self_call *)arg)->w); }

static void test_post_on_the_worker_runs_at_once(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w), 0);
  the_log.n = 0;
  self_call sc = {w};
  assert_int_equal(mr_worker_call(w, post_self, &sc), 0);
  assert_int_equal(the_log.order[0], 42);
  mr_worker_stop(w, NULL, NULL);
}

static void test_stop_runs_what_was_posted(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w), 0);
  the_log.n = 0;
  note n = {7};
  for (int i = 0; i < 3; i++)
    assert_int_equal(mr_worker_post(w, append, &n, sizeof n), 0);
  mr_worker_stop(w, NULL, NULL); /* nothing leaks (ASan) and all ran */
  assert_int_equal(the_log.n, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_posted_calls_run_in_order_without_waiting),
      cmocka_unit_test(test_post_on_the_worker_runs_at_once),
      cmocka_unit_test(test_stop_runs_what_was_posted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
