/* pool.h with several GPUs: placement of sessions on the least loaded,
 * each GPU's memory, faults injected mid-scan, --gpus leaving devices out.
 * The CPU group runs on fake GPUs (mr_pool_opts.fake_gpus: the CPU's
 * implementations in a GPU's place); with --cuda the same placement runs
 * on every GPU of a machine with several, else on two logical devices of
 * GPU 0 (share_gpus), and raw copies on two of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_gpu_common.h"

static void quiet(void *ctx, const char *line) {
  (void)ctx;
  (void)line;
}

static mr_pool *fake_pool(int n, const char *gpus, size_t memory) {
  mr_pool_opts o = {.gpus = gpus, .cpu_threads = 2, .fake_gpus = n, .fake_gpu_memory = memory,
                    .log = quiet};
  mr_pool *pool = NULL;
  mr_err err = {0};
  if (mr_pool_create(&o, &pool, &err) < 0)
    fail_msg("fake pool of %d (%s): %s", n, gpus != NULL ? gpus : "all", err.msg);
  return pool;
}

static int load_of(mr_device *dev) {
  mr_device_info info;
  GPU_OK(mr_device_info_get(dev, &info, TERR));
  return info.load;
}

/* Sessions go to the GPU with the fewest, never to the CPU while there is
 * a GPU; a released place is the next one taken. */
static void least_loaded(mr_pool *pool) {
  int n = mr_pool_gpu_count(pool);
  mr_device *placed[16];
  mr_err err = {0};
  for (int i = 0; i < 2 * n; i++) {
    GPU_OK(mr_pool_acquire(pool, "auto", &placed[i], &err));
    assert_int_equal(mr_device_gpu_index(placed[i]), i % n);
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(load_of(placed[i]), 2);
  mr_pool_release(pool, placed[n - 1]);
  mr_device *next;
  GPU_OK(mr_pool_acquire(pool, "auto", &next, &err));
  assert_ptr_equal(next, placed[n - 1]);
  /* One more scan device for a session on GPU 0: the least loaded other */
  mr_pool_release(pool, placed[1]);
  mr_device *other;
  GPU_OK(mr_pool_acquire_other(pool, &placed[0], 1, &other, &err));
  assert_ptr_equal(other, placed[1]);
  mr_pool_release(pool, other);
  for (int i = 0; i < 2 * n; i++)
    if (i != 1)
      mr_pool_release(pool, i == n - 1 ? next : placed[i]);
  for (int i = 0; i < n; i++)
    assert_int_equal(load_of(placed[i]), 0);
}

static void fake_least_loaded(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(4, NULL, 0);
  assert_int_equal(mr_pool_gpu_count(pool), 4);
  least_loaded(pool);
  mr_device *d;
  GPU_OK(mr_pool_acquire(pool, "2", &d, NULL));
  assert_false(mr_device_is_gpu(d)); /* it runs the CPU's implementations */
  assert_int_equal(mr_device_gpu_index(d), 2);
  assert_int_equal(mr_device_ordinal(d), 2);
  char *json, *text;
  GPU_OK(mr_pool_describe(pool, MR_POOL_JSON, &json, TERR));
  GPU_OK(mr_pool_describe(pool, MR_POOL_TEXT, &text, TERR));
  assert_non_null(strstr(json, "{\"devices\":[{\"kind\":\"fake\",\"index\":0,"));
  assert_non_null(strstr(json, "{\"kind\":\"fake\",\"index\":2,"));
  assert_non_null(strstr(json, "\"kind\":\"cpu\",\"index\":-1"));
  assert_non_null(strstr(text, "gpu 3: fake GPU 3"));
  mr_device_info info;
  GPU_OK(mr_pool_gpu_info(pool, 2, &info));
  assert_int_equal(info.load, 1);
  assert_int_equal(info.ordinal, 2);
  free(json);
  free(text);
  mr_pool_release(pool, d);
  mr_pool_destroy(pool);
}

/* Each fake GPU has memory of its own: over it a buffer is MR_EDEVMEM,
 * saying which GPU; the others are untouched, and freeing gives it back. */
static void fake_memory_per_device(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(2, NULL, 1 << 20);
  mr_device *a, *b;
  GPU_OK(mr_pool_acquire(pool, "0", &a, NULL));
  GPU_OK(mr_pool_acquire(pool, "1", &b, NULL));
  mr_buf *big, *more = NULL, *there;
  GPU_OK(mr_buf_create(a, 768 << 10, &big, TERR));
  assert_int_equal(mr_buf_create(a, 512 << 10, &more, TERR), MR_EDEVMEM);
  assert_null(more);
  assert_non_null(strstr(mr_test_last_error(), "fake GPU 0"));
  mr_device_info info;
  GPU_OK(mr_pool_gpu_info(pool, 0, &info));
  assert_int_equal(info.mem_total, 1 << 20);
  assert_int_equal(info.mem_free, 256 << 10);
  GPU_OK(mr_buf_create(b, 512 << 10, &there, TERR));
  mr_buf_destroy(big);
  GPU_OK(mr_pool_gpu_info(pool, 0, &info));
  assert_int_equal(info.mem_free, 1 << 20);
  GPU_OK(mr_buf_create(a, 512 << 10, &more, TERR));
  mr_buf_destroy(more);
  mr_buf_destroy(there);
  mr_pool_release(pool, a);
  mr_pool_release(pool, b);
  mr_pool_destroy(pool);
}

static int count_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  ++*(int *)arg;
  return 0;
}

/* An injected fault lets `after` tasks through, then fails every one (and
 * every buffer) on that GPU only, until cleared. */
static void fake_faults(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(2, NULL, 0);
  mr_device *a, *b;
  GPU_OK(mr_pool_acquire(pool, "0", &a, NULL));
  GPU_OK(mr_pool_acquire(pool, "1", &b, NULL));
  GPU_OK(mr_pool_fake_fault(pool, 0, 2, MR_EDEVICE, TERR));
  int ran = 0;
  GPU_OK(mr_device_run(a, count_task, &ran, TERR));
  GPU_OK(mr_device_run(a, count_task, &ran, TERR));
  assert_int_equal(mr_device_run(a, count_task, &ran, TERR), MR_EDEVICE);
  assert_non_null(strstr(mr_test_last_error(), "fake GPU 0: injected fault"));
  mr_buf *buf = NULL;
  assert_int_equal(mr_buf_create(a, 16, &buf, TERR), MR_EDEVICE);
  GPU_OK(mr_device_run(b, count_task, &ran, TERR));
  assert_int_equal(ran, 3);
  GPU_OK(mr_pool_fake_fault(pool, 0, -1, 0, TERR));
  GPU_OK(mr_device_run(a, count_task, &ran, TERR));
  assert_int_equal(mr_pool_fake_fault(pool, 2, 0, MR_EDEVICE, TERR), MR_EINVAL);
  mr_pool_release(pool, a);
  mr_pool_release(pool, b);
  mr_pool_destroy(pool);
  /* Not a fake pool: nothing to inject into. */
  mr_pool_opts o = {.gpus = "none", .cpu_threads = 1};
  GPU_OK(mr_pool_create(&o, &pool, NULL));
  assert_int_equal(mr_pool_fake_fault(pool, 0, 0, MR_EDEVICE, TERR), MR_EINVAL);
  mr_pool_destroy(pool);
}

/* --gpus picks among the fake GPUs as among real ones. */
static void fake_gpus_option(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(4, "0,2", 0);
  assert_int_equal(mr_pool_gpu_count(pool), 2);
  mr_device *d = NULL;
  mr_err err = {0};
  assert_int_equal(mr_pool_acquire(pool, "1", &d, &err), MR_ENOENT);
  GPU_OK(mr_pool_acquire(pool, "2", &d, &err));
  assert_int_equal(mr_device_gpu_index(d), 1);
  mr_device *e;
  GPU_OK(mr_pool_acquire(pool, "auto", &e, &err));
  assert_int_equal(mr_device_ordinal(e), 0);
  mr_device *held[] = {d, e}, *none = NULL;
  assert_int_equal(mr_pool_acquire_other(pool, held, 2, &none, &err), MR_ENOENT);
  assert_null(none);
  mr_pool_release(pool, d);
  mr_pool_release(pool, e);
  mr_pool_destroy(pool);

  pool = fake_pool(4, "none", 0);
  assert_int_equal(mr_pool_gpu_count(pool), 0);
  mr_pool_destroy(pool);

  mr_pool_opts o = {.gpus = "5", .fake_gpus = 4, .log = quiet};
  pool = NULL;
  mr_err_clear(&err);
  assert_int_equal(mr_pool_create(&o, &pool, &err), MR_ENOENT);
  assert_non_null(strstr(err.msg, "no device 5"));
  o.gpus = "1,1";
  mr_err_clear(&err);
  assert_int_equal(mr_pool_create(&o, &pool, &err), MR_EINVAL);
  assert_null(pool);
  /* Shared: one GPU listed twice is two logical devices. */
  o.share_gpus = 1;
  GPU_OK(mr_pool_create(&o, &pool, &err));
  assert_int_equal(mr_pool_gpu_count(pool), 2);
  GPU_OK(mr_pool_acquire(pool, "1", &d, &err));
  GPU_OK(mr_pool_acquire(pool, "1", &e, &err));
  assert_ptr_not_equal(d, e);
  assert_int_equal(mr_device_ordinal(d), mr_device_ordinal(e));
  mr_pool_release(pool, d);
  mr_pool_release(pool, e);
  mr_pool_destroy(pool);
}

/* mr_device_upload / mr_device_download through a pointer into a buffer. */
static void raw_copies(mr_device *dev) {
  enum { N = 5000 };
  float host[N], back[N];
  for (int i = 0; i < N; i++)
    host[i] = (float)i * 0.5f;
  mr_buf *b;
  GPU_OK(mr_buf_create(dev, (N + 10) * sizeof(float), &b, TERR));
  float *at = (float *)mr_buf_data(b) + 10;
  GPU_OK(mr_device_upload(dev, at, host, sizeof host, TERR));
  GPU_OK(mr_device_download(dev, back, at, sizeof back, TERR));
  assert_memory_equal(host, back, sizeof host);
  mr_buf_destroy(b);
}

static void fake_raw_copies(void **state) {
  (void)state;
  mr_pool *pool = fake_pool(1, NULL, 0);
  mr_device *d;
  GPU_OK(mr_pool_acquire(pool, "auto", &d, NULL));
  raw_copies(d);
  mr_pool_release(pool, d);
  mr_pool_destroy(pool);
}

/* The CUDA group: every GPU (up to 8), or GPU 0 as two logical devices. */
static mr_pool *cuda_pool;

static void shared_gpu_placement(void **state) {
  (void)state;
  least_loaded(cuda_pool);
  mr_device *a, *b;
  GPU_OK(mr_pool_acquire(cuda_pool, "auto", &a, NULL));
  GPU_OK(mr_pool_acquire(cuda_pool, "auto", &b, NULL));
  assert_true(mr_device_is_gpu(a) && mr_device_is_gpu(b));
  assert_ptr_not_equal(a, b);
  raw_copies(a);
  raw_copies(b);
  mr_pool_release(cuda_pool, a);
  mr_pool_release(cuda_pool, b);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
    mr_pool_opts o = {.gpus = "all", .cpu_threads = 2, .log = quiet};
    mr_err err = {0};
    if (mr_pool_create(&o, &cuda_pool, &err) < 0 || mr_pool_gpu_count(cuda_pool) < 2 ||
        mr_pool_gpu_count(cuda_pool) > 8) {
      mr_pool_destroy(cuda_pool);
      o.gpus = "0,0";
      o.share_gpus = 1;
      if (mr_pool_create(&o, &cuda_pool, &err) < 0) {
        printf("skipped: no usable GPU 0 (%s)\n", err.msg);
        return 77;
      }
    }
    printf("%d GPU devices (%s)\n", mr_pool_gpu_count(cuda_pool), o.gpus);
    const struct CMUnitTest tests[] = {cmocka_unit_test(shared_gpu_placement)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mr_pool_destroy(cuda_pool);
    return rc;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fake_least_loaded),      cmocka_unit_test(fake_memory_per_device),
      cmocka_unit_test(fake_faults),            cmocka_unit_test(fake_gpus_option),
      cmocka_unit_test(fake_raw_copies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
