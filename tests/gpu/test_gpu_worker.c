/* The worker thread behind each GPU (gpu/core/worker.h): calls run one at a
 * time in order; posted calls do not make the caller wait, run in their
 * place in that order, with a copy of their argument; a call's failure line
 * is written into the caller's mr_err. No GPU needed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "error.h"
#include "test_err.h"
#include "worker.h"

typedef struct log_ {
  int order[64];
  int n;
  pthread_mutex_t gate; /* held by the test to keep the worker busy */
} log_;

static log_ the_log = {.gate = PTHREAD_MUTEX_INITIALIZER};

static int init(void *arg, mr_err *err) {
  (void)arg;
  (void)err;
  return 0;
}

typedef struct note {
  int value;
} note;

static int append(void *arg, mr_err *err) {
  (void)err;
  const note *n = arg;
  the_log.order[the_log.n++] = n->value;
  return 0;
}

/* Blocks the worker until the test lets go of the gate. */
static atomic_int at_gate;

static int wait_at_gate(void *arg, mr_err *err) {
  (void)arg;
  (void)err;
  atomic_store(&at_gate, 1);
  pthread_mutex_lock(&the_log.gate);
  pthread_mutex_unlock(&the_log.gate);
  return 0;
}

static int count(void *arg, mr_err *err) {
  (void)err;
  *(int *)arg = the_log.n;
  return 0;
}

static void *blocker(void *w) {
  mr_worker_call(w, wait_at_gate, NULL, NULL);
  return NULL;
}

static void test_posted_calls_run_in_order_without_waiting(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w, TERR), 0);
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
    assert_int_equal(mr_worker_post(w, append, &n, sizeof n, TERR), 0);
  }
  n.value = 99; /* the posted calls have their own copies */
  assert_int_equal(the_log.n, 0); /* none ran: the worker is busy */
  pthread_mutex_unlock(&the_log.gate);
  int seen = -1;
  assert_int_equal(mr_worker_call(w, count, &seen, NULL), 0); /* after every posted call */
  assert_int_equal(seen, 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(the_log.order[i], i + 1);
  pthread_join(t, NULL);
  mr_worker_stop(w, NULL, NULL);
}

static int post_from_worker(void *w) {
  note n = {42};
  int before = the_log.n;
  int rc = mr_worker_post(w, append, &n, sizeof n, TERR);
  /* On the worker itself the call runs at once. */
  return rc == 0 && the_log.n == before + 1 ? 0 : MR_EINVAL;
}

typedef struct self_call {
  mr_worker *w;
} self_call;

static int post_self(void *arg, mr_err *err) {
  (void)err;
  return post_from_worker(((self_call *)arg)->w);
}

static void test_post_on_the_worker_runs_at_once(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w, TERR), 0);
  the_log.n = 0;
  self_call sc = {w};
  assert_int_equal(mr_worker_call(w, post_self, &sc, NULL), 0);
  assert_int_equal(the_log.order[0], 42);
  mr_worker_stop(w, NULL, NULL);
}

static void test_stop_runs_what_was_posted(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w, TERR), 0);
  the_log.n = 0;
  note n = {7};
  for (int i = 0; i < 3; i++)
    assert_int_equal(mr_worker_post(w, append, &n, sizeof n, TERR), 0);
  mr_worker_stop(w, NULL, NULL); /* nothing leaks (ASan) and all ran */
  assert_int_equal(the_log.n, 3);
}

static int fail_here(void *arg, mr_err *err) {
  *(pthread_t *)arg = pthread_self();
  return mr_err_set(err, MR_EDEVICE, "worker: failed on thread %s", "w");
}

static int fail_init(void *arg, mr_err *err) {
  (void)arg;
  return mr_err_set(err, MR_ENOENT, "worker: no device to start on");
}

/* The line of a call that fails on the worker's thread is in the waiting
 * caller's mr_err when the call returns; so is a failed start's. */
static void test_a_call_s_line_reaches_the_caller(void **state) {
  (void)state;
  mr_worker *w = NULL;
  assert_int_equal(mr_worker_start(init, NULL, &w, NULL), 0);
  pthread_t ran = pthread_self();
  mr_err err = {0};
  assert_int_equal(mr_worker_call(w, fail_here, &ran, &err), MR_EDEVICE);
  assert_false(pthread_equal(ran, pthread_self()));
  assert_int_equal(err.code, MR_EDEVICE);
  assert_string_equal(err.msg, "worker: failed on thread w");
  mr_worker_stop(w, NULL, NULL);

  mr_err_clear(&err);
  w = NULL;
  assert_int_equal(mr_worker_start(fail_init, NULL, &w, &err), MR_ENOENT);
  assert_null(w);
  assert_string_equal(err.msg, "worker: no device to start on");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_posted_calls_run_in_order_without_waiting),
      cmocka_unit_test(test_post_on_the_worker_runs_at_once),
      cmocka_unit_test(test_stop_runs_what_was_posted),
      cmocka_unit_test(test_a_call_s_line_reaches_the_caller),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
