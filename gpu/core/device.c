#include "device_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "buf_impl.h"
#include "clock.h"
#include "error.h"
#ifdef MR_HAVE_CUDA
#include "cuda_ctx.h"
#endif

int mr_device_is_gpu(const mr_device *dev) { return dev->ordinal >= 0 && dev->fake == NULL; }

int mr_device_gpu_index(const mr_device *dev) { return dev->index; }

int mr_device_ordinal(const mr_device *dev) { return dev->ordinal; }

/* The lane whose worker this thread is (NULL elsewhere); whether it is a
 * helper (mr_device_become_helper). */
static _Thread_local mr_gpu_lane *own_lane;
static _Thread_local int helper;

/* The turns this thread took on the devices it hands work to: each
 * device's threads take its lanes in turn (a per-device count, so that the
 * sessions placed on a GPU spread over its lanes evenly: with one count for
 * all GPUs, one lane of a GPU ran 4% of a load's time and another 94%). */
#define TURNS_KEPT 8
static _Thread_local struct {
  const mr_device *dev;
  int turn;
} turns_taken[TURNS_KEPT];
static _Thread_local unsigned turns_next;

static int turn_on(mr_device *dev) {
  for (int i = 0; i < TURNS_KEPT; i++)
    if (turns_taken[i].dev == dev)
      return turns_taken[i].turn;
  int t = atomic_fetch_add(&dev->turns, 1) & 0xffff;
  /* More devices than kept (never in practice): the oldest is forgotten. */
  turns_taken[turns_next % TURNS_KEPT].dev = dev;
  turns_taken[turns_next % TURNS_KEPT].turn = t;
  turns_next++;
  return t;
}

void mr_device_enter_lane(mr_gpu_lane *lane) { own_lane = lane; }

void mr_device_become_helper(void) { helper = 1; }

/* This thread's work is real-time work. */
static _Thread_local int realtime;

void mr_device_set_realtime(int on) { realtime = on != 0; }

int mr_device_is_realtime(void) { return realtime; }

void mr_device_count_realtime_session(mr_device *dev, int delta) {
  if (dev != NULL)
    atomic_fetch_add(&dev->realtime_sessions, delta);
}

int mr_device_lane_pick(int nlanes, int realtime_thread, int realtime_sessions, int sessions,
                        int turn) {
  if (nlanes <= 1)
    return 0;
  /* Lane 0 is left to real-time work even before a real-time session
   * comes: a heavy session's task holds a lane for as long as its whole
   * solve (a 3D CG-SENSE scan's, about 100 ms), and a stream's first frame
   * given a lane taken before the stream began would queue behind it.
   * Further lanes, one per further real-time session up to all but one,
   * are kept too, so that real-time sessions do not queue behind each other
   * while lanes are spare. With only real-time sessions on the device, all
   * of them. */
  int kept = realtime_sessions < 1           ? 1
             : realtime_sessions >= sessions ? nlanes
             : realtime_sessions < nlanes    ? realtime_sessions
                                             : nlanes - 1;
  if (realtime_thread)
    return turn % kept;
  return kept < nlanes ? kept + turn % (nlanes - kept) : turn % nlanes;
}

mr_gpu_lane *mr_device_lane(mr_device *dev) {
  if (own_lane != NULL && own_lane->dev == dev)
    return own_lane;
  if (helper && dev->helper_lane)
    return &dev->lanes[dev->nlanes];
  /* Tasks are synchronous and end with their lane's streams synchronised,
   * so a thread moving between lanes (real-time sessions coming and going)
   * keeps its tasks in order. */
  return &dev->lanes[mr_device_lane_pick(dev->nlanes, realtime,
                                         atomic_load(&dev->realtime_sessions),
                                         atomic_load(&dev->load), turn_on(dev))];
}

void mr_device_post_other_lanes(mr_device *dev, int (*fn)(void *arg, mr_err *err),
                                const void *arg, size_t size) {
  for (int l = 0; l < dev->nlanes; l++)
    if (&dev->lanes[l] != own_lane)
      (void)mr_worker_post(dev->lanes[l].worker, fn, arg, size, NULL);
}

struct mr_cuda_ctx *mr_device_cuda(const mr_device *dev) {
  if (own_lane != NULL && own_lane->dev == dev)
    return own_lane->cuda;
  return dev->nlanes > 0 ? dev->lanes[0].cuda : NULL;
}

mr_cpu_threads *mr_device_threads(const mr_device *dev) { return dev->threads; }

int mr_device_lane_count(const mr_device *dev) { return dev->fake != NULL ? 1 : dev->nlanes; }

double mr_device_lane_busy_s(const mr_device *dev, int lane) {
  if (lane < 0 || lane >= mr_device_lane_count(dev))
    return 0;
  return (double)atomic_load(&dev->lanes[lane].busy_ns) / 1e9;
}

#ifdef MR_HAVE_CUDA
typedef struct task_call {
  mr_device *dev;
  mr_device_task task;
  void *arg;
  int warmup, reps;
  double *ms;
} task_call;

/* A task that came through the queue: it owns the synchronisation. */
static int run_outermost(void *p, mr_err *err) {
  task_call *c = p;
  uint64_t t0 = mr_now_ns();
  int rc = c->task(c->dev, c->arg, err);
  int sync = mr_cuda_ctx_sync(mr_device_cuda(c->dev), err);
  atomic_fetch_add(&own_lane->busy_ns, (long long)(mr_now_ns() - t0));
  return rc < 0 ? rc : sync;
}

static int time_on_worker(void *p, mr_err *err) {
  task_call *c = p;
  return mr_cuda_ctx_time(mr_device_cuda(c->dev), c->dev, c->task, c->arg, c->warmup, c->reps,
                          c->ms, err);
}

static int info_on_worker(void *p, mr_err *err) {
  task_call *c = p;
  return mr_cuda_ctx_info(mr_device_cuda(c->dev), c->arg, err);
}
#endif

int mr_device_fake_fault(mr_device *dev, const char *what, mr_err *err) {
  mr_fake_gpu *f = dev->fake;
  if (f == NULL)
    return 0;
  int left = atomic_load(&f->fail_after);
  while (left > 0 && !atomic_compare_exchange_weak(&f->fail_after, &left, left - 1))
    ;
  if (left != 0)
    return 0;
  return mr_err_set(err, f->fail_code, "%s on fake GPU %d: injected fault (%s)", what, dev->ordinal,
                    mr_strerror(f->fail_code));
}

int mr_device_fake_take(mr_device *dev, size_t bytes, mr_err *err) {
  mr_fake_gpu *f = dev->fake;
  if (f == NULL)
    return 0;
  size_t used = atomic_load(&f->mem_used);
  do {
    if (bytes > f->mem_limit - used)
      return mr_err_set(err, MR_EDEVMEM,
                        "cannot allocate %zu bytes on fake GPU %d: %zu of its %zu bytes in use",
                        bytes, dev->ordinal, used, f->mem_limit);
  } while (!atomic_compare_exchange_weak(&f->mem_used, &used, used + bytes));
  return 0;
}

void mr_device_fake_give(mr_device *dev, size_t bytes) {
  if (dev->fake != NULL)
    atomic_fetch_sub(&dev->fake->mem_used, bytes);
}

int mr_device_run(mr_device *dev, mr_device_task task, void *arg, mr_err *err) {
  int fault = mr_device_fake_fault(dev, "task", err);
  if (fault < 0)
    return fault;
#ifdef MR_HAVE_CUDA
  if (dev->nlanes > 0) {
    mr_worker *w = mr_device_lane(dev)->worker;
    /* Inside a task already: the outer task synchronises at its end. */
    if (mr_worker_is_current(w))
      return task(dev, arg, err);
    task_call c = {.dev = dev, .task = task, .arg = arg};
    return mr_worker_call(w, run_outermost, &c, err);
  }
#endif
  if (dev->fake == NULL)
    return task(dev, arg, err);
  /* A fake GPU's tasks run on their callers: its one pretend lane is
   * busy for the outermost ones. */
  static _Thread_local int depth;
  uint64_t t0 = depth == 0 ? mr_now_ns() : 0;
  depth++;
  int rc = task(dev, arg, err);
  if (--depth == 0)
    atomic_fetch_add(&dev->lanes[0].busy_ns, (long long)(mr_now_ns() - t0));
  return rc;
}

int mr_device_time(mr_device *dev, mr_device_task task, void *arg, int warmup, int reps, double *ms,
                   mr_err *err) {
  if (warmup < 0 || reps < 1 || ms == NULL)
    return mr_err_set(err, MR_EINVAL, "device time: warmup %d, reps %d", warmup, reps);
#ifdef MR_HAVE_CUDA
  if (dev->nlanes > 0) {
    task_call c = {.dev = dev, .task = task, .arg = arg, .warmup = warmup,
                   .reps = reps, .ms = ms};
    return mr_worker_call(mr_device_lane(dev)->worker, time_on_worker, &c, err);
  }
#endif
  for (int i = 0; i < warmup + reps; i++) {
    uint64_t t0 = mr_now_ns();
    int rc = task(dev, arg, err);
    if (rc < 0)
      return rc;
    if (i >= warmup)
      ms[i - warmup] = (double)(mr_now_ns() - t0) / 1e6;
  }
  return 0;
}

/* The CPU model from /proc/cpuinfo, else a plain name. */
static void cpu_model(char *name, size_t cap) {
  snprintf(name, cap, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL)
    return;
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      const char *colon = strchr(line, ':');
      if (colon != NULL) {
        colon += strspn(colon + 1, " \t") + 1;
        snprintf(name, cap, "%.*s", (int)strcspn(colon, "\n"), colon);
      }
      break;
    }
  }
  fclose(f);
}

void mr_device_fake_info(mr_device *dev, mr_device_info *info) {
  info->ordinal = dev->ordinal;
  snprintf(info->name, sizeof info->name, "fake GPU %d (the CPU's implementations)",
           dev->ordinal);
  info->mem_total = dev->fake->mem_limit;
  info->mem_free = dev->fake->mem_limit - atomic_load(&dev->fake->mem_used);
  info->units = mr_cpu_threads_count(dev->threads);
}

void mr_device_cpu_info(mr_device *dev, mr_device_info *info) {
  info->ordinal = -1;
  cpu_model(info->name, sizeof info->name);
  struct sysinfo si;
  if (sysinfo(&si) == 0) {
    info->mem_total = (size_t)si.totalram * si.mem_unit;
    info->mem_free = (size_t)(si.freeram + si.bufferram) * si.mem_unit;
  }
  info->units = mr_cpu_threads_count(dev->threads);
}

int mr_device_info_get(mr_device *dev, mr_device_info *info, mr_err *err) {
  (void)err;
  memset(info, 0, sizeof *info);
  if (dev->fake != NULL)
    mr_device_fake_info(dev, info);
  else if (dev->nlanes == 0)
    mr_device_cpu_info(dev, info);
#ifdef MR_HAVE_CUDA
  else {
    task_call c = {.dev = dev, .arg = info};
    int rc = mr_worker_call(mr_device_lane(dev)->worker, info_on_worker, &c, err);
    if (rc < 0)
      return rc;
  }
#endif
  /* A snapshot: load may change as soon as it is read. */
  info->load = atomic_load(&dev->load);
  return 0;
}

int mr_device_upload(mr_device *dev, void *dst, const void *host, size_t bytes, mr_err *err) {
  if (bytes == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_buf_cuda_copy_up(dev, dst, host, bytes, err);
#else
  (void)dev;
  (void)err;
#endif
  memcpy(dst, host, bytes);
  return 0;
}

int mr_device_copy_to(mr_device *src_dev, const void *src, mr_device *dst_dev, void *dst,
                      size_t bytes, mr_err *err) {
  if (bytes == 0)
    return 0;
  if (mr_device_is_gpu(src_dev) != mr_device_is_gpu(dst_dev))
    return mr_err_set(err, MR_EINVAL, "device copy: between a GPU and host memory (upload or "
                                      "download instead)");
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(src_dev))
    return mr_buf_cuda_copy_peer(src_dev, src, dst_dev, dst, bytes, err);
#endif
  memcpy(dst, src, bytes);
  return 0;
}

int mr_device_download(mr_device *dev, void *host, const void *src, size_t bytes, mr_err *err) {
  if (bytes == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_buf_cuda_copy_down(dev, host, src, bytes, err);
#else
  (void)dev;
  (void)err;
#endif
  memcpy(host, src, bytes);
  return 0;
}
