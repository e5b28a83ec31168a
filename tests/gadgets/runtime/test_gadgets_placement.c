/* placement.h: a failing step is explained by its own line, never by an
 * older one (issue 12, item 13: an MR_ENOMEM without a line was reported
 * with an earlier, unrelated GPU message); a GPU that fails or runs out of
 * memory mid-scan hands the step to another GPU or the CPU (fake GPUs with
 * injected faults); gpu/'s line reaches a gadget's error through the mr_err
 * each step is given. */
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
#include "test_err.h"

static void quiet(void *ctx, const char *line) {
  (void)ctx;
  (void)line;
}

static int time_nothing(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  (void)arg;
  return 0;
}

/* Fails through gpu/, which leaves "device time: warmup -1, reps 0". */
static int gpu_call_fails(mr_device *dev, void *arg, mr_err *err) {
  (void)arg;
  return mr_device_time(dev, time_nothing, NULL, -1, 0, NULL, err);
}

/* Fails on its own (a host allocation), with no gpu/ line. */
static int out_of_memory(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
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

static int record(mr_device *dev, void *arg, mr_err *err) {
  (void)err;
  *(mr_device **)arg = dev;
  return 0;
}

/* A step as gadgets run one: a task on the device. */
static int step(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, record, arg, err);
}

static mr_pool *fake_pool(int n) {
  mr_pool_opts po = {.fake_gpus = n, .cpu_threads = 1, .log = quiet};
  mr_pool *pool = NULL;
  assert_int_equal(mr_pool_create(&po, &pool, NULL), 0);
  return pool;
}

static void test_failed_gpu_falls_back_to_another(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(3);
  mr_err err = {0};
  mr_gadget_ctx ctx = {.pool = pool, .err = &err, .config = "test", .gadget = "placement"};
  mr_placement p = {0};
  assert_int_equal(mr_placement_acquire(&p, &ctx, MR_PARAM_DEVICE_AUTO, MR_FALLBACK_GPU), 0);
  assert_int_equal(mr_device_gpu_index(p.dev), 0);
  mr_device *busy; /* GPU 1 has a session: the fallback takes GPU 2 */
  assert_int_equal(mr_pool_acquire(pool, "1", &busy, NULL), 0);
  mr_device *ran = NULL;
  assert_int_equal(mr_placement_run(&p, &ctx, step, &ran), 0);
  assert_ptr_equal(ran, p.dev);

  /* GPU 0 fails mid-scan: the step runs on the least loaded other GPU. */
  assert_int_equal(mr_pool_fake_fault(pool, 0, 0, MR_EDEVICE, TERR), 0);
  assert_int_equal(mr_placement_run(&p, &ctx, step, &ran), 0);
  assert_int_equal(mr_device_gpu_index(ran), 2);
  /* It runs out of memory too: the CPU. */
  assert_int_equal(mr_pool_fake_fault(pool, 2, 0, MR_EDEVMEM, TERR), 0);
  assert_int_equal(mr_placement_run(&p, &ctx, step, &ran), 0);
  assert_int_equal(mr_device_gpu_index(ran), -1);
  assert_string_equal(err.msg, "");
  mr_placement_release(&p);
  mr_pool_release(pool, busy);
  mr_device_info info;
  for (int i = 0; i < 3; i++) { /* every place given back */
    assert_int_equal(mr_pool_gpu_info(pool, i, &info), 0);
    assert_int_equal(info.load, 0);
  }
  mr_pool_destroy(pool);
}

static void test_cpu_fallback_from_fake_gpu(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(1);
  mr_err err = {0};
  mr_gadget_ctx ctx = {.pool = pool, .err = &err, .config = "test", .gadget = "placement"};
  mr_placement p = {0};
  assert_int_equal(mr_placement_acquire(&p, &ctx, 0, MR_FALLBACK_CPU), 0);
  mr_device *ran = NULL;
  /* Out of memory: "cpu" redoes the step there. */
  assert_int_equal(mr_pool_fake_fault(pool, 0, 0, MR_EDEVMEM, TERR), 0);
  assert_int_equal(mr_placement_run(&p, &ctx, step, &ran), 0);
  assert_int_equal(mr_device_gpu_index(ran), -1);
  /* A failed GPU is not "cpu"'s to hide: the step fails, saying why. */
  assert_int_equal(mr_pool_fake_fault(pool, 0, 0, MR_EDEVICE, TERR), 0);
  assert_int_equal(mr_placement_run(&p, &ctx, step, &ran), MR_EDEVICE);
  assert_non_null(strstr(err.msg, "injected fault"));
  mr_placement_release(&p);
  mr_pool_destroy(pool);
}

/* A step's gpu/ line reaches the client's error through the mr_err that
 * mr_placement_run() hands the step, after what the gadget is; a step that
 * fails without a line of its own is explained by its code's text. */
static void test_gpu_line_reaches_the_error(void **state) {
  (void)state;
  mr_pool_opts po = {.gpus = "none"};
  mr_pool *pool = NULL;
  assert_int_equal(mr_pool_create(&po, &pool, NULL), 0);
  mr_err err = {0};
  mr_gadget_ctx ctx = {.pool = pool, .err = &err, .config = "test", .gadget = "fold", .index = 3};
  mr_placement p = {0};
  assert_int_equal(mr_placement_acquire(&p, &ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE), 0);

  assert_int_equal(mr_placement_run(&p, &ctx, gpu_call_fails, NULL), MR_EINVAL);
  assert_string_equal(err.msg, "config 'test', gadget 3 'fold': device time: warmup -1, "
                               "reps 0");

  mr_err_clear(&err);
  assert_int_equal(mr_placement_run(&p, &ctx, out_of_memory, NULL), MR_ENOMEM);
  char want[256];
  snprintf(want, sizeof want, "config 'test', gadget 3 'fold': %s", mr_strerror(MR_ENOMEM));
  assert_string_equal(err.msg, want);

  mr_placement_release(&p);
  mr_pool_destroy(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_line_reaches_the_error),
      cmocka_unit_test(test_old_gpu_line_not_reported),
      cmocka_unit_test(test_failed_gpu_falls_back_to_another),
      cmocka_unit_test(test_cpu_fallback_from_fake_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
