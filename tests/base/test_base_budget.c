/* The memory budget (base/budget.h): reservations against the limit, and
 * spare memory kept by several caches, each with its own reclaim function
 * (the k-space block cache and the pinned host blocks register one each):
 * a reservation that does not fit frees every cache's spare memory, and
 * registering a function twice calls it once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "budget.h"
#include "error.h"

/* Two caches holding spare memory. */
static uint64_t held[2];
static int calls[2];

static void reclaim_a(void) {
  calls[0]++;
  mr_budget_drop_spare(held[0]);
  held[0] = 0;
}

static void reclaim_b(void) {
  calls[1]++;
  mr_budget_drop_spare(held[1]);
  held[1] = 0;
}

static void keep(int cache, uint64_t bytes) {
  assert_int_equal(mr_budget_keep_spare(bytes), 0);
  held[cache] += bytes;
}

static void every_cache_gives_way(void **state) {
  (void)state;
  mr_budget_set(100);
  mr_budget_add_reclaim(reclaim_a);
  mr_budget_add_reclaim(reclaim_b);
  mr_budget_add_reclaim(reclaim_a); /* once is enough */
  assert_int_equal(mr_budget_take(40, "a session", NULL), 0);
  keep(0, 20);
  keep(1, 30);
  /* 40 used + 50 spare + 20 > 100: the spare memory is not kept */
  assert_int_equal(mr_budget_keep_spare(20), MR_ELIMIT);
  assert_int_equal(mr_budget_spare(), 50);
  /* Fits beside the spare memory: nobody is asked. */
  assert_int_equal(mr_budget_take(10, "a session", NULL), 0);
  assert_int_equal(calls[0] + calls[1], 0);
  /* Fits only without it: both caches free theirs, each once. */
  mr_err err = {0};
  assert_int_equal(mr_budget_take(45, "a session", &err), 0);
  assert_int_equal(calls[0], 1);
  assert_int_equal(calls[1], 1);
  assert_int_equal(mr_budget_spare(), 0);
  assert_int_equal(mr_budget_used(), 95);
  /* Over the budget even then: a clear error, nothing taken. */
  assert_int_equal(mr_budget_take(10, "a big buffer", &err), MR_ELIMIT);
  assert_non_null(strstr(err.msg, "memory budget: a big buffer needs"));
  assert_int_equal(mr_budget_used(), 95);
  mr_budget_give(95);
  mr_budget_set(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_cache_gives_way),
  };
  return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
