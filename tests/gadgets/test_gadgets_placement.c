/* placement.h: a failing step is explained by its own line, never by an
 * older gpu/ line left on the thread (issue 12, item 13: an MR_ENOMEM
 * without a line was reported with an earlier, unrelated GPU message);
 * gpu/'s line folded into a gadget's error (mr_gadget_fail_device). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "device.h"
#include "placement.h"
#include "pool.h"

static int time_nothing(mr_device *dev, void *arg) {
  (void)dev;
  (void)arg;
  return 0;
}

/* Fails through gpu/, which leaves "device time: warmup -1, reps 0". */
static int gpu_call_fails(mr_device *dev, void *arg) {
  (void)arg;
  return mr_device_time(dev, time_nothing, NULL, -1, 0, NULL);
}

/* Fails on its own (a host allocation), with no gpu/ line. */
static int out_of_memory(mr_device *dev, void *arg) {
  (void)dev;
  (void)arg;
  return MR_ENOMEM;
}

static void test_old_gpu_line_not_reported(void **state) {
  (void)state;
  mr_pool_opts po = {.gpus = "none"};
  mr_pool *pool = NULL;
  assert_int_equal(mr_pool_create(&po, &pool, NULL), 0);
  mr_err err = {0};
  mr_gadget_ctx ctx = {.pool = pool, .err = &err, .config = "test", .gadget = "placement"};
  mr_placement p = {0};
  assert_int_equal(mr_placement_acquire(&p, &ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE), 0);

  /* A step that fails inside gpu/ is explained by gpu/'s line. */
  assert_int_equal(mr_placement_run(&p, &ctx, gpu_call_fails, NULL), MR_EINVAL);
  assert_non_null(strstr(err.msg, "device time: warmup -1"));

  /* The next step fails without a line: the old one stays out of it. */
  mr_err_clear(&err);
  assert_int_equal(mr_placement_run(&p, &ctx, out_of_memory, NULL), MR_ENOMEM);
  assert_null(strstr(err.msg, "device time"));
  assert_non_null(strstr(err.msg, mr_strerror(MR_ENOMEM)));

  mr_placement_release(&p);
  mr_pool_destroy(pool);
}

/* The one way gpu/'s line reaches a client's error: folded into an mr_err
 * with what the gadget was doing, or the code's text when gpu/ said
 * nothing. */
static void test_gpu_line_folded_into_the_error(void **state) {
  (void)state;
  mr_pool_opts po = {.gpus = "none"};
  mr_pool *pool = NULL;
  assert_int_equal(mr_pool_create(&po, &pool, NULL), 0);
  mr_device *cpu = NULL;
  assert_int_equal(mr_pool_acquire(pool, "cpu", &cpu, NULL), 0);
  mr_err err = {0};
  mr_gadget_ctx ctx = {.err = &err, .config = "test", .gadget = "fold", .index = 3};

  mr_device_clear_error();
  int rc = gpu_call_fails(cpu, NULL);
  assert_int_equal(mr_gadget_fail_device(&ctx, rc, "timing"), MR_EINVAL);
  assert_string_equal(err.msg, "config 'test', gadget 3 'fold': timing: device time: warmup -1, "
                               "reps 0");
  mr_err_clear(&err);
  assert_int_equal(mr_device_error(&err, rc, NULL), MR_EINVAL);
  assert_string_equal(err.msg, "device time: warmup -1, reps 0");

  /* The first error is kept, as mr_err_set() keeps it. */
  assert_int_equal(mr_device_error(&err, MR_EDATA, "later"), MR_EDATA);
  assert_int_equal(err.code, MR_EINVAL);

  mr_device_clear_error();
  mr_err_clear(&err);
  assert_int_equal(mr_gadget_fail_device(&ctx, MR_EDEVMEM, "uploading"), MR_EDEVMEM);
  char want[256];
  snprintf(want, sizeof want, "config 'test', gadget 3 'fold': uploading: %s",
           mr_strerror(MR_EDEVMEM));
  assert_string_equal(err.msg, want);

  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_line_folded_into_the_error),
      cmocka_unit_test(test_old_gpu_line_not_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
