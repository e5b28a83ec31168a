/* pool.h, device.h, buf.h and the CPU threads: placement, descriptions,
 * tasks, buffers; with --cuda, the same on a GPU plus out-of-memory. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpu_threads.h"
#include "cpus.h"
#ifdef MR_HAVE_CUDA
#include "cuda_ctx.h"
#include "device_impl.h"
#include "fft.h"
#include "host.h"
#include "worker.h"
#endif
#include "test_gpu_common.h"
#include "test_support.h"

static void bad_specs(void **state) {
  (void)state;
  const char *bad[] = {"", "gpu", "0,", ",1", "0,0", "1;2", "-1", "99999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mr_pool *pool = NULL;
    mr_err err = {0};
    mr_pool_opts o = {.gpus = bad[i]};
    if (mr_pool_create(&o, &pool, &err) != MR_EINVAL)
      fail_msg("spec '%s' accepted", bad[i]);
    assert_true(err.msg[0] != '\0');
    assert_null(pool);
  }
}

static void cpu_placement(void **state) {
  (void)state;
  mr_pool *pool;
  mr_err err = {0};
  mr_pool_opts o = {.gpus = "none", .cpu_threads = 3};
  GPU_OK(mr_pool_create(&o, &pool, &err));
  assert_int_equal(mr_pool_gpu_count(pool), 0);
  mr_device *a, *b;
  GPU_OK(mr_pool_acquire(pool, "auto", &a, &err));
  GPU_OK(mr_pool_acquire(pool, "cpu", &b, &err));
  assert_ptr_equal(a, b);
  assert_false(mr_device_is_gpu(a));
  assert_int_equal(mr_device_ordinal(a), -1);
  mr_device_info info;
  GPU_OK(mr_device_info_get(a, &info, TERR));
  assert_int_equal(info.load, 2);
  assert_int_equal(info.units, 3);
  assert_true(info.mem_total > 0);
  mr_pool_release(pool, b);
  GPU_OK(mr_device_info_get(a, &info, TERR));
  assert_int_equal(info.load, 1);
  mr_device *c = NULL;
  assert_int_equal(mr_pool_acquire(pool, "0", &c, &err), MR_ENOENT);
  mr_err_clear(&err);
  assert_int_equal(mr_pool_acquire(pool, "fastest", &c, &err), MR_EINVAL);
  assert_null(c);
  char *text, *json;
  GPU_OK(mr_pool_describe(pool, MR_POOL_TEXT, &text, TERR));
  GPU_OK(mr_pool_describe(pool, MR_POOL_JSON, &json, TERR));
  assert_non_null(strstr(text, "cpu: "));
  assert_non_null(strstr(text, "sessions 1"));
  assert_non_null(strstr(json, "{\"devices\":[{\"kind\":\"cpu\",\"index\":-1,"));
  assert_non_null(strstr(json, "\"load\":1}]}"));
  free(text);
  free(json);
  mr_pool_release(pool, a);
  mr_pool_destroy(pool);
}

static int add_one(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  ++*(int *)arg;
  return 0;
}

static int fail_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  (void)arg;
  return MR_ENUMERIC;
}

/* Fails with a line of its own. */
static int fail_own_line(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)arg;
  return mr_err_set(err, MR_EDATA, "task: item %d is bad", 7);
}

/* Fails in a gpu/ call, whose line comes first, then writes its own. */
static int fail_in_a_call(mr_device *dev, void *arg, mr_err *err) {
  (void)arg;
  int rc = mr_device_time(dev, add_one, NULL, -1, 0, NULL, err);
  return mr_err_set(err, rc, "task: after the call");
}

/* A task's line reaches the caller's mr_err through mr_device_run() (on a
 * GPU written by the device's worker thread while the caller waits), and
 * the first error is kept, as mr_err_set() keeps it. */
static void task_lines(mr_device *dev) {
  mr_err err = {0};
  assert_int_equal(mr_device_run(dev, fail_own_line, NULL, &err), MR_EDATA);
  assert_int_equal(err.code, MR_EDATA);
  assert_string_equal(err.msg, "task: item 7 is bad");
  assert_int_equal(mr_device_run(dev, fail_in_a_call, NULL, &err), MR_EINVAL);
  assert_int_equal(err.code, MR_EDATA);
  assert_string_equal(err.msg, "task: item 7 is bad");

  mr_err_clear(&err);
  assert_int_equal(mr_device_run(dev, fail_in_a_call, NULL, &err), MR_EINVAL);
  assert_int_equal(err.code, MR_EINVAL);
  assert_string_equal(err.msg, "device time: warmup -1, reps 0");

  /* A success writes nothing; NULL asks for no line. */
  mr_err_clear(&err);
  int count = 0;
  assert_int_equal(mr_device_run(dev, add_one, &count, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.msg, "");
  assert_int_equal(mr_device_run(dev, fail_own_line, NULL, NULL), MR_EDATA);
}

static void cpu_task_lines(void **state) {
  (void)state;
  task_lines(gpu_test_cpu());
}

static void gpu_task_lines(void **state) {
  (void)state;
  task_lines(gpu_test_gpu());
}

static void tasks(void **state) {
  (void)state;
  int count = 0;
  GPU_OK(mr_device_run(gpu_test_cpu(), add_one, &count, TERR));
  assert_int_equal(count, 1);
  assert_int_equal(mr_device_run(gpu_test_cpu(), fail_task, NULL, TERR), MR_ENUMERIC);
  double ms[3];
  GPU_OK(mr_device_time(gpu_test_cpu(), add_one, &count, 2, 3, ms, TERR));
  assert_int_equal(count, 6);
  assert_true(ms[0] >= 0);
}

static void buffers(mr_device *dev) {
  enum { N = (9 << 20) + 123 }; /* three staging pieces on a GPU */
  unsigned char *src = malloc(N), *dst = malloc(N);
  for (size_t i = 0; i < N; i++)
    src[i] = (unsigned char)(i * 7 + i / 251);
  mr_buf *b;
  GPU_OK(mr_buf_create(dev, N + 100, &b, TERR));
  assert_ptr_equal(mr_buf_device(b), dev);
  assert_int_equal(mr_buf_size(b), N + 100);
  GPU_OK(mr_buf_upload(b, 100, src, N, TERR));
  GPU_OK(mr_buf_download(b, 100, dst, N, TERR));
  assert_memory_equal(src, dst, N);
  GPU_OK(mr_buf_download(b, 1000, dst, 10, TERR));
  assert_memory_equal(src + 900, dst, 10);
  assert_int_equal(mr_buf_upload(b, 101, src, N, TERR), MR_EINVAL);
  assert_int_equal(mr_buf_download(b, SIZE_MAX, dst, 1, TERR), MR_EINVAL);
  mr_buf_destroy(b);
  free(src);
  free(dst);
}

static void cpu_buffers(void **state) {
  (void)state;
  buffers(gpu_test_cpu());
}

typedef struct sum_job {
  unsigned long long *slots;
} sum_job;

static void mark(void *arg, size_t begin, size_t end) {
  sum_job *j = arg;
  for (size_t i = begin; i < end; i++)
    j->slots[i]++;
}

typedef struct caller {
  mr_cpu_threads *t;
  size_t n;
  int ok;
} caller;

/* Several callers run loops at once; each item of each loop runs once. */
static void *loop_caller(void *p) {
  caller *c = p;
  c->ok = 1;
  unsigned long long *slots = calloc(c->n, sizeof *slots);
  sum_job j = {slots};
  for (int round = 0; round < 20; round++)
    mr_cpu_parallel_for(c->t, c->n, 7, mark, &j);
  for (size_t i = 0; i < c->n; i++)
    if (slots[i] != 20)
      c->ok = 0;
  free(slots);
  return NULL;
}

static void cpu_threads_concurrent(void **state) {
  (void)state;
  mr_cpu_threads *t;
  GPU_OK(mr_cpu_threads_create(3, &t, TERR));
  assert_int_equal(mr_cpu_threads_count(t), 3);
  pthread_t th[4];
  caller c[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (caller){.t = t, .n = 1000 + 337 * (size_t)i};
    pthread_create(&th[i], NULL, loop_caller, &c[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_true(c[i].ok);
  }
  mr_cpu_threads_destroy(t);
}

/* Loops whose items run loops of their own (a pool thread becomes a
 * caller): every inner item runs once, and nothing waits forever. */
typedef struct nested_job {
  mr_cpu_threads *t;
  unsigned long long *slots; /* [outer item][INNER] */
} nested_job;

enum { OUTER = 24, INNER = 50 };

static void nested_items(void *arg, size_t begin, size_t end) {
  nested_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    sum_job inner = {j->slots + i * INNER};
    mr_cpu_parallel_for(j->t, INNER, 1, mark, &inner);
  }
}

static void cpu_threads_nested(void **state) {
  (void)state;
  mr_cpu_threads *t;
  GPU_OK(mr_cpu_threads_create(4, &t, TERR));
  unsigned long long *slots = calloc(OUTER * INNER, sizeof *slots);
  nested_job j = {t, slots};
  for (int round = 0; round < 10; round++)
    mr_cpu_parallel_for(t, OUTER, 1, nested_items, &j);
  for (size_t i = 0; i < OUTER * INNER; i++)
    assert_int_equal(slots[i], 10);
  free(slots);
  mr_cpu_threads_destroy(t);
}

static void gpu_placement(void **state) {
  (void)state;
  mr_device *gpu = gpu_test_gpu();
  assert_true(mr_device_is_gpu(gpu));
  assert_true(mr_device_ordinal(gpu) >= 0);
  mr_device_info info;
  GPU_OK(mr_device_info_get(gpu, &info, TERR));
  assert_true(info.cc_major >= 7);
  assert_true(info.mem_free > 0 && info.mem_free <= info.mem_total);
  assert_int_equal(info.load, 1);
  assert_true(info.units > 0);
  /* auto picks a GPU while there is one, the least loaded */
  mr_device *again;
  mr_err err = {0};
  GPU_OK(mr_pool_acquire(gpu_test_pool(), "auto", &again, &err));
  assert_true(mr_device_is_gpu(again));
  GPU_OK(mr_device_info_get(again, &info, TERR));
  assert_true(info.load >= 1);
  char *text, *json;
  GPU_OK(mr_pool_describe(gpu_test_pool(), MR_POOL_TEXT, &text, TERR));
  GPU_OK(mr_pool_describe(gpu_test_pool(), MR_POOL_JSON, &json, TERR));
  printf("%s%s\n", text, json);
  assert_non_null(strstr(text, "gpu "));
  assert_non_null(strstr(json, "\"kind\":\"cuda\""));
  assert_non_null(strstr(json, "\"compute_capability\":\""));
  free(text);
  free(json);
  mr_pool_release(gpu_test_pool(), again);
}

static void gpu_buffers(void **state) {
  (void)state;
  buffers(gpu_test_gpu());
}

/* Out of memory is an error code, never a crash, and the device recovers:
 * one absurd request, then the memory filled 2 GiB at a time. */
static void gpu_out_of_memory(void **state) {
  (void)state;
  enum { MAX_BUFS = 512 };
  mr_device_info info;
  GPU_OK(mr_device_info_get(gpu_test_gpu(), &info, TERR));
  mr_buf *b = NULL;
  assert_int_equal(mr_buf_create(gpu_test_gpu(), 2 * info.mem_total, &b, TERR), MR_EDEVMEM);
  assert_null(b);
  assert_non_null(strstr(mr_test_last_error(), "cannot allocate"));
  mr_buf **bufs = calloc(MAX_BUFS, sizeof *bufs);
  int n = 0, rc = 0;
  while (n < MAX_BUFS && (rc = mr_buf_create(gpu_test_gpu(), (size_t)2 << 30, &bufs[n], TERR)) == 0)
    n++;
  assert_int_equal(rc, MR_EDEVMEM);
  assert_true(n > 0);
  while (n > 0)
    mr_buf_destroy(bufs[--n]);
  free(bufs);
  GPU_OK(mr_buf_create(gpu_test_gpu(), 1 << 20, &b, TERR)); /* still usable */
  mr_buf_destroy(b);
}

/* A task chains buffer calls with one hand-off; calls inside it run directly. */
typedef struct round_trip {
  size_t n;
  const unsigned char *src;
  unsigned char *dst;
} round_trip;

static int round_trip_task(mr_device *dev, void *arg, mr_err *err) {
  round_trip *r = arg;
  mr_buf *b;
  int rc = mr_buf_create(dev, r->n, &b, err);
  if (rc < 0)
    return rc;
  rc = mr_buf_upload(b, 0, r->src, r->n, err);
  if (rc == 0)
    rc = mr_buf_download(b, 0, r->dst, r->n, err);
  mr_buf_destroy(b);
  return rc;
}

static void *thread_round_trips(void *p) {
  round_trip *r = p;
  for (int i = 0; i < 10; i++)
    if (mr_device_run(gpu_test_gpu(), round_trip_task, r, TERR) != 0)
      return p;
  return NULL;
}

static void gpu_tasks_from_threads(void **state) {
  (void)state;
  enum { THREADS = 4, N = 1 << 20 };
  pthread_t th[THREADS];
  round_trip r[THREADS];
  for (int t = 0; t < THREADS; t++) {
    unsigned char *src = malloc(N);
    for (size_t i = 0; i < N; i++)
      src[i] = (unsigned char)(i * (t + 3));
    r[t] = (round_trip){.n = N, .src = src, .dst = calloc(1, N)};
    pthread_create(&th[t], NULL, thread_round_trips, &r[t]);
  }
  for (int t = 0; t < THREADS; t++) {
    void *failed;
    pthread_join(th[t], &failed);
    assert_null(failed);
    assert_memory_equal(r[t].src, r[t].dst, N);
    free((void *)r[t].src);
    free(r[t].dst);
  }
  int count = 0;
  double ms[2];
  GPU_OK(mr_device_time(gpu_test_gpu(), add_one, &count, 1, 2, ms, TERR));
  assert_int_equal(count, 3);
  assert_int_equal(mr_device_run(gpu_test_gpu(), fail_task, NULL, TERR), MR_ENUMERIC);
}

/* A task that holds the GPU's worker until released (or 10 s pass). */
typedef struct holder {
  atomic_int started, released, finished;
} holder;

static int hold_worker(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  holder *h = arg;
  atomic_store(&h->started, 1);
  for (int i = 0; i < 10000 && !atomic_load(&h->released); i++)
    usleep(1000);
  atomic_store(&h->finished, 1);
  return 0;
}

static void *run_holder(void *arg) {
  mr_device_run(gpu_test_gpu(), hold_worker, arg, TERR);
  return NULL;
}

/* Starts a thread whose task holds its GPU lane until release_holder(). */
static void start_holder(holder *h, pthread_t *th) {
  pthread_create(th, NULL, run_holder, h);
  while (!atomic_load(&h->started))
    usleep(1000);
}

/* Lets the holder's task end; 1 when it was still running until then. */
static int release_holder(holder *h, pthread_t th) {
  int was_busy = !atomic_load(&h->finished);
  atomic_store(&h->released, 1);
  pthread_join(th, NULL);
  return was_busy;
}

/* The devices query (gadgetron::cuda::devices) is answered while another
 * session's work occupies the GPU's worker: it never queues behind it. */
static void gpu_describe_does_not_wait_for_the_worker(void **state) {
  (void)state;
  holder h = {0};
  pthread_t th;
  start_holder(&h, &th);
  char *json = NULL;
  GPU_OK(mr_pool_describe(gpu_test_pool(), MR_POOL_JSON, &json, TERR));
  assert_true(release_holder(&h, th));
  assert_non_null(strstr(json, "\"kind\":\"cuda\""));
  assert_non_null(strstr(json, "\"memory_total\":"));
  free(json);
}

static void *run_round_trip(void *arg) {
  int *ok = arg;
  unsigned char src[64] = {7}, dst[64] = {0};
  round_trip r = {sizeof src, src, dst};
  *ok = mr_device_run(gpu_test_gpu(), round_trip_task, &r, TERR) == 0 && dst[0] == 7;
  return NULL;
}

/* A long task of one thread does not hold up another thread's device work:
 * threads take the GPU's lanes in turn, and the next thread's lane is not
 * the holder's (before lanes, every task queued behind the one worker). */
static void gpu_threads_on_other_lanes_are_not_held_up(void **state) {
  (void)state;
  holder h = {0};
  pthread_t th;
  start_holder(&h, &th);
  int ok = 0;
  pthread_t probe;
  pthread_create(&probe, NULL, run_round_trip, &ok); /* takes the next lane */
  pthread_join(probe, NULL);
  assert_true(release_holder(&h, th));
  assert_true(ok);
}

/* A pool's CPU threads are as many as the CPUs the process may run on
 * (its affinity: taskset, a container's cpuset), not the machine's. */
static void cpu_threads_follow_affinity(void **state) {
  (void)state;
  cpu_set_t all, one;
  mr_test_one_cpu(&all, &one);
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  mr_pool_opts opts = {.gpus = "none"};
  mr_pool *pool = NULL;
  int rc = mr_pool_create(&opts, &pool, TERR);
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  GPU_OK(rc);
  mr_device *cpu;
  GPU_OK(mr_pool_acquire(pool, "cpu", &cpu, TERR));
  mr_device_info info;
  GPU_OK(mr_device_info_get(cpu, &info, TERR));
  assert_int_equal(info.units, 1); /* the CPU threads it uses */
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  assert_int_equal(mr_cpus_usable(), CPU_COUNT(&all));
}

static double lanes_busy(mr_pool *pool, int gpu) {
  double busy[MR_GPU_LANES_ALL], sum = 0;
  int n = mr_pool_gpu_lanes_busy(pool, gpu, busy, MR_GPU_LANES_ALL);
  assert_true(n >= 1);
  for (int l = 0; l < n; l++)
    sum += busy[l];
  return sum;
}

static int sleep_ms_task(mr_device *dev, void *arg, mr_err *err) {
  (void)dev;
  (void)err;
  usleep((useconds_t)(*(int *)arg * 1000));
  return 0;
}

/* 20 ms asleep around a nested 10 ms task: the inner one's time is the
 * outer one's, counted once. */
static int outer_sleep_task(mr_device *dev, void *arg, mr_err *err) {
  (void)arg;
  int inner = 10;
  usleep(20000);
  return mr_device_run(dev, sleep_ms_task, &inner, err);
}

/* A GPU's lanes count the time tasks hold them (the metrics' busy
 * counters): at least the task's 30 ms, at most the caller's wait. */
static void lane_busy(mr_pool *pool, mr_device *dev) {
  int gpu = mr_device_gpu_index(dev);
  double before = lanes_busy(pool, gpu);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  GPU_OK(mr_device_run(dev, outer_sleep_task, NULL, TERR));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  double busy = lanes_busy(pool, gpu) - before;
  assert_true(busy >= 0.030);
  assert_true(busy <= waited + 1e-6);
  assert_int_equal(mr_pool_gpu_lanes_busy(pool, 99, NULL, 0), 0);
}

static void fake_gpu_lane_busy(void **state) {
  (void)state;
  mr_pool_opts opts = {.fake_gpus = 1, .cpu_threads = 1};
  mr_pool *pool;
  GPU_OK(mr_pool_create(&opts, &pool, TERR));
  mr_device *dev;
  GPU_OK(mr_pool_acquire(pool, "0", &dev, TERR));
  lane_busy(pool, dev);
  mr_pool_release(pool, dev);
  mr_pool_destroy(pool);
}

#ifdef MR_HAVE_CUDA
static int sleep_on_worker(void *arg, mr_err *err) {
  (void)err;
  usleep((useconds_t)(*(const int *)arg * 1000));
  return 0;
}

/* Uploads queued without waiting (accumulate's batches) are waited for on
 * the lane they were queued to, even when the thread has moved lanes since
 * (a real-time session began on the GPU): the lane is held up 200 ms, so a
 * wait on the thread's new lane would let the download read the buffer
 * before the copy. */
static void gpu_posted_uploads_follow_their_lane(void **state) {
  (void)state;
  enum { N = 1 << 20 };
  mr_device *dev = gpu_test_gpu(), *second = NULL;
  if (dev->nlanes < 2)
    skip();
  unsigned char *src = NULL, *back = malloc(N);
  GPU_OK(mr_host_alloc(dev, N, (void **)&src, TERR));
  for (size_t i = 0; i < N; i++)
    src[i] = (unsigned char)(i * 13 + 7);
  mr_buf *buf;
  GPU_OK(mr_buf_create(dev, N, &buf, TERR));
  mr_gpu_lane *before = mr_device_lane(dev);
  int ms = 200;
  GPU_OK(mr_worker_post(before->worker, sleep_on_worker, &ms, sizeof ms, TERR));
  GPU_OK(mr_buf_upload_rows_async(buf, 0, N, src, N, N, 1, TERR));
  /* Move this thread: it began on a lane after the real-time lane (no
   * real-time session yet); as a real-time thread of the one real-time
   * session beside another, lane 0 is its own. */
  assert_ptr_not_equal(before, &dev->lanes[0]);
  char same[16];
  snprintf(same, sizeof same, "%d", mr_device_ordinal(dev));
  GPU_OK(mr_pool_acquire(gpu_test_pool(), same, &second, TERR));
  assert_ptr_equal(second, dev);
  mr_device_count_realtime_session(dev, +1);
  mr_device_set_realtime(1);
  mr_gpu_lane *after = mr_device_lane(dev);
  assert_ptr_not_equal(after, before);
  GPU_OK(mr_buf_wait_uploads(buf, TERR));
  GPU_OK(mr_buf_download(buf, 0, back, N, TERR));
  assert_memory_equal(back, src, N);
  mr_device_set_realtime(0);
  mr_device_count_realtime_session(dev, -1);
  mr_pool_release(gpu_test_pool(), second);
  mr_buf_destroy(buf);
  mr_host_free(dev, src);
  free(back);
}

static void *run_realtime_round_trip(void *arg) {
  mr_device_set_realtime(1);
  return run_round_trip(arg);
}

/* A real-time stream's first frame does not queue behind a heavy task
 * that took a lane before the stream began (device.h): every lane but the
 * real-time one is held by a long task of a thread that is not real-time,
 * then a real-time session begins beside them and its thread's task runs
 * while they still hold theirs. */
static void gpu_realtime_session_finds_its_lane_free(void **state) {
  (void)state;
  mr_device *dev = gpu_test_gpu(), *second = NULL;
  int held = dev->nlanes - 1; /* threads' consecutive turns: one a lane */
  assert_true(held >= 1);
  holder h[MR_GPU_LANES_ALL] = {0};
  pthread_t th[MR_GPU_LANES_ALL];
  for (int i = 0; i < held; i++)
    start_holder(&h[i], &th[i]);
  char same[16];
  snprintf(same, sizeof same, "%d", mr_device_ordinal(dev));
  GPU_OK(mr_pool_acquire(gpu_test_pool(), same, &second, TERR));
  mr_device_count_realtime_session(dev, +1);
  int ok = 0;
  pthread_t frame;
  pthread_create(&frame, NULL, run_realtime_round_trip, &ok);
  pthread_join(frame, NULL);
  int all_busy = 1;
  for (int i = 0; i < held; i++)
    all_busy &= release_holder(&h[i], th[i]);
  mr_device_count_realtime_session(dev, -1);
  mr_pool_release(gpu_test_pool(), second);
  assert_true(ok);
  assert_true(all_busy);
}
#endif

/* mr_device_copy_to: device to device (to another GPU of the pool where
 * there is one, else within the GPU), the bytes arrive; a GPU and the CPU
 * together are refused. */
static void gpu_copy_between_devices(void **state) {
  (void)state;
  enum { N = 3 << 20 };
  mr_device *dev = gpu_test_gpu(), *other = NULL;
  mr_err err = {0};
  if (mr_pool_acquire_other(gpu_test_pool(), &dev, 1, &other, &err) < 0)
    other = NULL;
  mr_device *to = other != NULL ? other : dev;
  unsigned char *src = malloc(N), *back = malloc(N);
  for (size_t i = 0; i < N; i++)
    src[i] = (unsigned char)(i * 7 + 3);
  mr_buf *a, *b;
  GPU_OK(mr_buf_create(dev, N, &a, TERR));
  GPU_OK(mr_buf_create(to, N, &b, TERR));
  GPU_OK(mr_buf_upload(a, 0, src, N, TERR));
  GPU_OK(mr_device_copy_to(dev, mr_buf_data(a), to, mr_buf_data(b), N, TERR));
  GPU_OK(mr_buf_download(b, 0, back, N, TERR));
  assert_memory_equal(back, src, N);
  if (mr_device_is_gpu(dev))
    assert_int_equal(mr_device_copy_to(dev, mr_buf_data(a), gpu_test_cpu(), back, N, NULL),
                     MR_EINVAL);
  mr_buf_destroy(a);
  mr_buf_destroy(b);
  if (other != NULL)
    mr_pool_release(gpu_test_pool(), other);
  free(src);
  free(back);
}

static void gpu_lane_busy(void **state) {
  (void)state;
  lane_busy(gpu_test_pool(), gpu_test_gpu());
}

/* Real-time work's lanes (device.h): with k real-time sessions among
 * more on a GPU its first min(k, lanes - 1) lanes are theirs, spread by
 * turn, and the others spread over the rest; with only real-time sessions
 * every lane is theirs (and everyone's); with none the first lane is
 * still kept for them (a stream to come must find it free) and the rest
 * is everyone else's; one lane is shared by all. */
static void realtime_lane(void **state) {
  (void)state;
  for (int sessions = 0; sessions <= 6; sessions++) {
    /* beside one other session */
    int kept = sessions == 0 ? 1 : sessions < 4 ? sessions : 3;
    int rt_seen[4] = {0}, other_seen[4] = {0}, only_seen[4] = {0}, any_seen[4] = {0};
    for (int turn = 0; turn < 24; turn++) {
      rt_seen[mr_device_lane_pick(4, 1, sessions, sessions + 1, turn)]++;
      other_seen[mr_device_lane_pick(4, 0, sessions, sessions + 1, turn)]++;
      only_seen[mr_device_lane_pick(4, 1, sessions, sessions, turn)]++;
      any_seen[mr_device_lane_pick(4, 0, sessions, sessions, turn)]++;
      assert_int_equal(mr_device_lane_pick(1, turn % 2, sessions, sessions + 1, turn), 0);
    }
    for (int lane = 0; lane < 4; lane++) {
      /* Real-time threads: the kept lanes evenly. */
      assert_int_equal(rt_seen[lane], lane < kept ? 24 / kept : 0);
      /* The rest: the other lanes evenly, never a kept one. */
      assert_int_equal(other_seen[lane], lane < kept ? 0 : 24 / (4 - kept));
      /* Real-time sessions alone: every lane (lane 0 only with none at
       * all, which the others then leave alone). */
      assert_int_equal(only_seen[lane], sessions == 0 ? (lane == 0 ? 24 : 0) : 6);
      assert_int_equal(any_seen[lane], sessions == 0 ? (lane == 0 ? 0 : 8) : 6);
    }
  }
  /* The flag is the calling thread's. */
  assert_false(mr_device_is_realtime());
  mr_device_set_realtime(1);
  mr_device_set_realtime(1); /* twice is once */
  assert_true(mr_device_is_realtime());
  mr_device_set_realtime(0);
  assert_false(mr_device_is_realtime());
}

#ifdef MR_HAVE_CUDA
typedef struct fft_probe {
  mr_device *dev;
  long long n[3]; /* cuFFT's order: slowest first */
  int found;
} fft_probe;

/* On a lane's worker: whether that lane's cache has the plan. */
static int probe_fft(void *arg, mr_err *err) {
  (void)err;
  fft_probe *p = arg;
  p->found = mr_cuda_fft_plan_cached(mr_device_cuda(p->dev), 2, p->n, 3);
  return 0;
}

/* A cuFFT plan one lane makes is made on the GPU's other lanes at once
 * (cuda_ctx.cu: making one holds a driver lock that stalls every lane):
 * after an FFT plan of a shape no other test uses is made from this
 * thread, every lane's cache holds it. A call on each lane's worker runs
 * after what was posted there before it. */
static void gpu_fft_plans_on_every_lane(void **state) {
  (void)state;
  mr_device *dev = gpu_test_gpu();
  mr_fft_opts o = {.rank = 2, .dims = {36, 44}, .batch = 3};
  mr_fft_plan *plan;
  GPU_OK(mr_fft_plan_create(dev, &o, &plan, TERR));
  assert_true(dev->nlanes > 1);
  for (int l = 0; l < dev->nlanes; l++) {
    fft_probe p = {dev, {44, 36, 1}, 0};
    GPU_OK(mr_worker_call(dev->lanes[l].worker, probe_fft, &p, TERR));
    if (!p.found)
      fail_msg("lane %d of %d has no plan of the 36 x 44 x 3 FFT", l, dev->nlanes);
  }
  mr_fft_plan_destroy(plan);
}
#endif

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(bad_specs),
      cmocka_unit_test(cpu_placement),
      cmocka_unit_test(tasks),
      cmocka_unit_test(cpu_task_lines),
      cmocka_unit_test(cpu_buffers),
      cmocka_unit_test(cpu_threads_concurrent),
      cmocka_unit_test(cpu_threads_nested),
      cmocka_unit_test(realtime_lane),
      cmocka_unit_test(fake_gpu_lane_busy),
      cmocka_unit_test(cpu_threads_follow_affinity),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(gpu_placement),
      cmocka_unit_test(gpu_buffers),
      cmocka_unit_test(gpu_out_of_memory),
      cmocka_unit_test(gpu_tasks_from_threads),
      cmocka_unit_test(gpu_task_lines),
      cmocka_unit_test(gpu_describe_does_not_wait_for_the_worker),
      cmocka_unit_test(gpu_threads_on_other_lanes_are_not_held_up),
      cmocka_unit_test(gpu_lane_busy),
      cmocka_unit_test(gpu_copy_between_devices),
#ifdef MR_HAVE_CUDA
      cmocka_unit_test(gpu_posted_uploads_follow_their_lane),
      cmocka_unit_test(gpu_realtime_session_finds_its_lane_free),
      cmocka_unit_test(gpu_fft_plans_on_every_lane),
#endif
  };
  int failed = cuda ? cmocka_run_group_tests_name("pool_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("pool_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
