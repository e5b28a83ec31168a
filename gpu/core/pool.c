#include "pool.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpus.h"
#include "device_impl.h"
#include "thread_name.h"
#ifdef MR_HAVE_CUDA
#include "cuda_ctx.h"
#endif

/* Enough for any machine we run on; a longer --gpus list is an error. */
#define MAX_GPUS 64

struct mr_pool {
  pthread_mutex_t lock;   /* placement: the loads */
  mr_cpu_threads *threads;
  mr_device cpu;
  int ngpus;
  mr_device *gpus;
  /* Each GPU's description, read once when its worker starts: a devices
   * query must never wait behind another session's work on that worker.
   * memory_free is therefore as of start-up. */
  mr_device_info *gpu_info;
  mr_fake_gpu *fakes; /* [ngpus] for a pool of fake GPUs, else NULL */
};

static void say(const mr_pool_opts *opts, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const mr_pool_opts *opts, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (opts->log != NULL)
    opts->log(opts->log_ctx, line);
  else
    fprintf(stderr, "%s\n", line);
}

/* Parses "all" | "none" | "N,M,...": *all for all, else the list of *n
 * (a number may repeat when share). */
static int parse_gpus(const char *spec, int share, int *list, size_t *n, int *all,
                      mr_err *err) {
  *n = 0;
  *all = strcmp(spec, "all") == 0;
  if (*all)
    return 0;
  if (strcmp(spec, "none") == 0)
    return 0;
  const char *p = spec;
  for (;;) {
    if (!isdigit((unsigned char)*p))
      return mr_err_set(err, MR_EINVAL,
                        "--gpus '%s': expected all, none or a list like 0,1",
                        spec);
    char *end;
    long v = strtol(p, &end, 10);
    if (v >= MAX_GPUS || *n == MAX_GPUS)
      return mr_err_set(err, MR_EINVAL, "--gpus '%s': device %ld is out of range",
                        spec, v);
    for (size_t i = 0; i < *n && !share; i++)
      if (list[i] == v)
        return mr_err_set(err, MR_EINVAL, "--gpus '%s': device %ld twice", spec, v);
    list[(*n)++] = (int)v;
    if (*end == '\0')
      return 0;
    if (*end != ',')
      return mr_err_set(err, MR_EINVAL,
                        "--gpus '%s': expected all, none or a list like 0,1",
                        spec);
    p = end + 1;
  }
}

#ifdef MR_HAVE_CUDA
static int gpu_init(void *p, mr_err *err) {
  mr_gpu_lane *lane = p;
  int rank = (int)(lane - lane->dev->lanes);
  mr_device_enter_lane(lane);
  mr_thread_name("mr-gpu%d-lane%d", lane->dev->ordinal, rank);
  /* The real-time lanes are the first ones (device.h): streams by rank. */
  return mr_cuda_ctx_create(lane->dev, rank, &lane->cuda, err);
}

static int gpu_fini(void *p, mr_err *err) {
  (void)err;
  mr_gpu_lane *lane = p;
  mr_cuda_ctx_destroy(lane->cuda);
  return 0;
}

static void stop_lanes(mr_device *dev) {
  for (int l = 0; l < dev->nlanes + dev->helper_lane; l++)
    mr_worker_stop(dev->lanes[l].worker, gpu_fini, &dev->lanes[l]);
  dev->nlanes = dev->helper_lane = 0;
}

/* Starts a worker for each GPU in list[0..n), or every GPU found if all. */
static int start_gpus(mr_pool *pool, const mr_pool_opts *opts, int *list,
                      size_t n, int all, mr_err *err) {
  char why[256] = "";
  int found = mr_cuda_count(why, sizeof why);
  if (all) {
    if (found == 0) {
      say(opts, "gpu: no CUDA device (%s); running on the CPU only", why);
      return 0;
    }
    n = found < MAX_GPUS ? (size_t)found : MAX_GPUS;
    for (size_t i = 0; i < n; i++)
      list[i] = (int)i;
  }
  for (size_t i = 0; i < n; i++)
    if (list[i] >= found)
      return mr_err_set(err, MR_ENOENT, "--gpus: no CUDA device %d (%d found%s%s)",
                        list[i], found, found == 0 ? ": " : "", why);
  pool->gpus = calloc(n, sizeof *pool->gpus);
  pool->gpu_info = calloc(n, sizeof *pool->gpu_info);
  if (pool->gpus == NULL || pool->gpu_info == NULL)
    return mr_err_set(err, MR_ENOMEM, "gpu pool: out of memory");
  for (size_t i = 0; i < n; i++) {
    mr_device *dev = &pool->gpus[i];
    dev->pool = pool;
    dev->ordinal = list[i];
    dev->index = (int)i;
    dev->threads = pool->threads;
    int lanes = opts->gpu_lanes > 0 ? opts->gpu_lanes : MR_GPU_LANES_DEFAULT;
    if (lanes > MR_GPU_LANES_MAX)
      lanes = MR_GPU_LANES_MAX;
    lanes++; /* the real-time lane (device.h) */
    pool->ngpus++; /* stopped with the pool from here on, lanes started or not */
    /* With several GPUs a scan may be split across them: one more lane,
     * for its helpers (device_impl.h). */
    for (int l = 0; l < lanes + (n > 1); l++) {
      dev->lanes[l].dev = dev;
      mr_err why = {0};
      int rc = mr_worker_start(gpu_init, &dev->lanes[l], &dev->lanes[l].worker, &why);
      if (rc < 0)
        return mr_err_set(err, rc, "gpu %d: %s", list[i], mr_err_text(&why, rc));
      if (l < lanes)
        dev->nlanes++;
      else
        dev->helper_lane = 1;
    }
    int rc;
    mr_err why = {0};
    mr_device_info *info = &pool->gpu_info[i];
    if ((rc = mr_device_info_get(dev, info, &why)) < 0)
      return mr_err_set(err, rc, "gpu %d: %s", list[i], mr_err_text(&why, rc));
    say(opts, "gpu %d: %s, %.1f GiB, compute capability %d.%d, %d SMs",
        info->ordinal, info->name, info->mem_total / 1073741824.0,
        info->cc_major, info->cc_minor, info->units);
  }
  return 0;
}
#endif

/* Makes the fake GPUs in list[0..n) (every one of opts->fake_gpus if
 * all): the CPU's implementations in a GPU's place (pool.h). */
static int start_fakes(mr_pool *pool, const mr_pool_opts *opts, int *list, size_t n, int all,
                       mr_err *err) {
  if (opts->fake_gpus > MAX_GPUS)
    return mr_err_set(err, MR_EINVAL, "fake GPUs: %d, at most %d", opts->fake_gpus, MAX_GPUS);
  if (all) {
    n = (size_t)opts->fake_gpus;
    for (size_t i = 0; i < n; i++)
      list[i] = (int)i;
  }
  for (size_t i = 0; i < n; i++)
    if (list[i] >= opts->fake_gpus)
      return mr_err_set(err, MR_ENOENT, "--gpus: no device %d (%d fake GPUs)", list[i],
                        opts->fake_gpus);
  pool->gpus = calloc(n, sizeof *pool->gpus);
  pool->gpu_info = calloc(n, sizeof *pool->gpu_info);
  pool->fakes = calloc(n, sizeof *pool->fakes);
  if (pool->gpus == NULL || pool->gpu_info == NULL || pool->fakes == NULL)
    return mr_err_set(err, MR_ENOMEM, "gpu pool: out of memory");
  size_t memory = opts->fake_gpu_memory > 0 ? opts->fake_gpu_memory : (size_t)1 << 30;
  for (size_t i = 0; i < n; i++) {
    mr_fake_gpu *f = &pool->fakes[i];
    f->mem_limit = memory;
    atomic_init(&f->mem_used, 0);
    atomic_init(&f->fail_after, -1);
    mr_device *dev = &pool->gpus[i];
    dev->pool = pool;
    dev->ordinal = list[i];
    dev->index = (int)i;
    dev->fake = f;
    dev->threads = pool->threads;
    mr_device_fake_info(dev, &pool->gpu_info[i]);
    pool->ngpus++;
  }
  say(opts, "gpu: %zu fake GPUs (the CPU's implementations), %.1f GiB each", n,
      memory / 1073741824.0);
  return 0;
}

int mr_pool_create(const mr_pool_opts *opts, mr_pool **out, mr_err *err) {
  const mr_pool_opts none = {0};
  if (opts == NULL)
    opts = &none;
  int list[MAX_GPUS], all;
  size_t n;
  int rc = parse_gpus(opts->gpus != NULL ? opts->gpus : "all", opts->share_gpus, list, &n,
                      &all, err);
  if (rc < 0)
    return rc;
  mr_pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL)
    return mr_err_set(err, MR_ENOMEM, "gpu pool: out of memory");
  pthread_mutex_init(&pool->lock, NULL);
  int threads = opts->cpu_threads;
  if (threads <= 0)
    threads = mr_cpus_usable();
  rc = mr_cpu_threads_create(threads, &pool->threads, err);
  if (rc < 0) {
    mr_pool_destroy(pool);
    return rc;
  }
  pool->cpu.pool = pool;
  pool->cpu.ordinal = -1;
  pool->cpu.index = -1;
  pool->cpu.threads = pool->threads;
  if (opts->fake_gpus > 0 && (all || n > 0)) {
    rc = start_fakes(pool, opts, list, n, all, err);
    if (rc < 0) {
      mr_pool_destroy(pool);
      return rc;
    }
  } else if (all || n > 0) {
#ifdef MR_HAVE_CUDA
    rc = start_gpus(pool, opts, list, n, all, err);
    if (rc < 0) {
      mr_pool_destroy(pool);
      return rc;
    }
#else
    if (!all) {
      mr_pool_destroy(pool);
      return mr_err_set(err, MR_ENOTSUP,
                        "--gpus %s: this build has no CUDA backend", opts->gpus);
    }
    say(opts, "gpu: built without CUDA; running on the CPU only");
#endif
  }
  *out = pool;
  return 0;
}

void mr_pool_destroy(mr_pool *pool) {
  if (pool == NULL)
    return;
#ifdef MR_HAVE_CUDA
  for (int i = 0; i < pool->ngpus; i++)
    stop_lanes(&pool->gpus[i]);
#endif
  free(pool->gpus);
  free(pool->gpu_info);
  free(pool->fakes);
  mr_cpu_threads_destroy(pool->threads);
  pthread_mutex_destroy(&pool->lock);
  free(pool);
}

int mr_pool_gpu_count(const mr_pool *pool) { return pool->ngpus; }

/* The least loaded of the pool's GPUs that have `ordinal` (any when < 0;
 * a shared GPU is several devices) and are not among held[0..nheld); the
 * first of equals; NULL when none. Under the pool's lock. */
static mr_device *least_loaded(mr_pool *pool, long ordinal, mr_device *const *held,
                               size_t nheld) {
  mr_device *dev = NULL;
  for (int i = 0; i < pool->ngpus; i++) {
    mr_device *g = &pool->gpus[i];
    int taken = 0;
    for (size_t h = 0; h < nheld && !taken; h++)
      taken = held[h] == g;
    if (!taken && (ordinal < 0 || g->ordinal == ordinal) &&
        (dev == NULL || atomic_load(&g->load) < atomic_load(&dev->load)))
      dev = g;
  }
  return dev;
}

int mr_pool_acquire(mr_pool *pool, const char *want, mr_device **out,
                    mr_err *err) {
  mr_device *dev = NULL;
  pthread_mutex_lock(&pool->lock);
  if (strcmp(want, "cpu") == 0) {
    dev = &pool->cpu;
  } else if (strcmp(want, "auto") == 0) {
    dev = least_loaded(pool, -1, NULL, 0);
    if (dev == NULL)
      dev = &pool->cpu;
  } else {
    char *end;
    long ordinal = strtol(want, &end, 10);
    if (isdigit((unsigned char)want[0]) && *end == '\0')
      dev = least_loaded(pool, ordinal, NULL, 0);
  }
  if (dev != NULL)
    atomic_fetch_add(&dev->load, 1);
  pthread_mutex_unlock(&pool->lock);
  if (dev == NULL) {
    if (strcmp(want, "auto") != 0 && isdigit((unsigned char)want[0]))
      return mr_err_set(err, MR_ENOENT, "device %s: no such GPU in the pool (%d GPUs)",
                        want, pool->ngpus);
    return mr_err_set(err, MR_EINVAL, "device '%s': expected auto, cpu or a GPU number",
                      want);
  }
  *out = dev;
  return 0;
}

int mr_pool_acquire_other(mr_pool *pool, mr_device *const *held, size_t nheld,
                          mr_device **out, mr_err *err) {
  pthread_mutex_lock(&pool->lock);
  mr_device *dev = least_loaded(pool, -1, held, nheld);
  if (dev != NULL)
    atomic_fetch_add(&dev->load, 1);
  pthread_mutex_unlock(&pool->lock);
  if (dev == NULL)
    return mr_err_set(err, MR_ENOENT, "no other GPU in the pool (%d GPUs, %zu held)",
                      pool->ngpus, nheld);
  *out = dev;
  return 0;
}

int mr_pool_fake_fault(mr_pool *pool, int index, int after, int code, mr_err *err) {
  if (pool->fakes == NULL || index < 0 || index >= pool->ngpus || (after >= 0 && code >= 0))
    return mr_err_set(err, MR_EINVAL, "fake fault: device %d of %d fake GPUs, code %d", index,
                      pool->fakes != NULL ? pool->ngpus : 0, code);
  mr_fake_gpu *f = &pool->fakes[index];
  f->fail_code = code;
  atomic_store(&f->fail_after, after < 0 ? -1 : after);
  return 0;
}

void mr_pool_release(mr_pool *pool, mr_device *dev) {
  pthread_mutex_lock(&pool->lock);
  atomic_fetch_sub(&dev->load, 1);
  pthread_mutex_unlock(&pool->lock);
}

/* A growing string for mr_pool_describe(). */
typedef struct text {
  char *s;
  size_t len, cap;
  int failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...) {
  if (t->failed)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap + (size_t)n) * 2;
    char *s = realloc(t->s, cap);
    if (s == NULL) {
      t->failed = 1;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void put_json_string(text *t, const char *s) {
  put(t, "\"");
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      put(t, "\\%c", c);
    else if (c < 0x20)
      put(t, "\\u%04x", c);
    else
      put(t, "%c", c);
  }
  put(t, "\"");
}

static void describe_one(text *t, const mr_device_info *d, const char *kind,
                         mr_pool_format fmt, int first) {
  const double gib = 1073741824.0;
  if (fmt == MR_POOL_TEXT) {
    if (strcmp(kind, "fake") == 0)
      put(t, "gpu %d: %s, memory %.1f GiB (%.1f GiB free), sessions %d\n", d->ordinal, d->name,
          d->mem_total / gib, d->mem_free / gib, d->load);
    else if (d->ordinal >= 0)
      put(t, "gpu %d: %s, compute capability %d.%d, %d SMs, memory %.1f GiB "
             "(%.1f GiB free), sessions %d\n",
          d->ordinal, d->name, d->cc_major, d->cc_minor, d->units,
          d->mem_total / gib, d->mem_free / gib, d->load);
    else
      put(t, "cpu: %s, %d threads, memory %.1f GiB (%.1f GiB free), sessions %d\n",
          d->name, d->units, d->mem_total / gib, d->mem_free / gib, d->load);
    return;
  }
  put(t, "%s{\"kind\":\"%s\",\"index\":%d,\"name\":", first ? "" : ",", kind,
      d->ordinal);
  put_json_string(t, d->name);
  put(t, ",\"memory_total\":%zu,\"memory_free\":%zu", d->mem_total, d->mem_free);
  if (d->ordinal >= 0)
    put(t, ",\"compute_capability\":\"%d.%d\",\"multiprocessors\":%d", d->cc_major,
        d->cc_minor, d->units);
  else
    put(t, ",\"threads\":%d", d->units);
  put(t, ",\"load\":%d}", d->load);
}

int mr_pool_gpu_info(mr_pool *pool, int i, mr_device_info *out) {
  if (i < 0 || i >= pool->ngpus)
    return MR_EINVAL;
  *out = pool->gpu_info[i];
  out->load = atomic_load(&pool->gpus[i].load);
  if (pool->fakes != NULL) {
    mr_device_fake_info(&pool->gpus[i], out);
    return 0;
  }
#ifdef MR_HAVE_CUDA
  size_t free_bytes;
  if (mr_cuda_mem_free(out->ordinal, &free_bytes, NULL) == 0) /* the figure from the start stays */
    out->mem_free = free_bytes;
#endif
  return 0;
}

int mr_pool_gpu_lanes_busy(mr_pool *pool, int i, double *busy_s, int max) {
  if (i < 0 || i >= pool->ngpus)
    return 0;
  int n = mr_device_lane_count(&pool->gpus[i]);
  for (int l = 0; l < n && l < max; l++)
    busy_s[l] = mr_device_lane_busy_s(&pool->gpus[i], l);
  return n;
}

int mr_pool_describe(mr_pool *pool, mr_pool_format format, char **out, mr_err *err) {
  text t = {0};
  if (format == MR_POOL_JSON)
    put(&t, "{\"devices\":[");
  for (int i = 0; i <= pool->ngpus; i++) {
    mr_device_info info;
    const char *kind = "cpu";
    if (i < pool->ngpus) {
      info = pool->gpu_info[i];
      info.load = atomic_load(&pool->gpus[i].load);
      kind = pool->fakes != NULL ? "fake" : "cuda";
      if (pool->fakes != NULL)
        mr_device_fake_info(&pool->gpus[i], &info);
    } else {
      int rc = mr_device_info_get(&pool->cpu, &info, err); /* no worker: read here */
      if (rc < 0) {
        free(t.s);
        return rc;
      }
    }
    describe_one(&t, &info, kind, format, i == 0);
  }
  if (format == MR_POOL_JSON)
    put(&t, "]}");
  if (t.failed || t.s == NULL) {
    free(t.s);
    return mr_err_set(err, MR_ENOMEM, "pool describe: out of memory");
  }
  *out = t.s;
  return 0;
}
