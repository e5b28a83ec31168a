#include "worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cpus.h"
#include "error.h"

/* One call for the worker: on the caller's stack while it waits, or on
 * the heap (with its argument after it) when posted. */
typedef struct call {
  mr_worker_fn fn;
  void *arg;
  int rc;
  atomic_int done;
  int posted; /* nobody waits: the worker frees it */
  mr_err *err; /* the caller's: the worker writes a failure's line into it */
  struct call *next;
} call;

struct mr_worker {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;   /* a call arrived */
  pthread_cond_t done;   /* a call finished */
  call *head, *tail;
  atomic_int queued; /* calls in the queue: what an idle worker watches */
  long long spin_ns; /* SPIN_NS, or 0 on a machine of few cores */
  int stopping;
  mr_worker_fn init;
  void *init_arg;
  int init_rc;
  mr_err *init_err; /* the starting thread's, which waits meanwhile */
  int started;
};

static _Thread_local const mr_worker *current_worker;

/* How long a caller watches for its call's end, and an idle worker for the
 * next call, before sleeping on the condition variable: two wake-ups
 * through the kernel cost more than a short call does on the GPU (on the
 * H100's host an empty call took 12.8 us so, 2.0 us spinning; a NUFFT
 * set_points of 131,072 radial points 0.048-0.058 ms against 0.038-0.043).
 * Only where cores are plenty, as CUDA's own waits spin only while the
 * contexts are fewer than the cores: on a small machine the spinning thread
 * would take the core the other one needs. The cores are those the process
 * may run on (a container's CPU set), not the machine's. */
#define SPIN_NS 50000
#define SPIN_MIN_CORES 8

/* Watches *flag for up to ns; returns 1 once it is nonzero, 0 when the
 * time ran out. */
static int spin_until_set(atomic_int *flag, long long ns) {
  if (ns <= 0)
    return atomic_load_explicit(flag, memory_order_acquire) != 0;
  uint64_t end = mr_now_ns() + (uint64_t)ns;
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(flag, memory_order_acquire) != 0)
      return 1;
    if (i % 64 == 0 && mr_now_ns() > end)
      return 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

static void *worker_main(void *p) {
  mr_worker *w = p;
  current_worker = w;
  int rc = w->init(w->init_arg, w->init_err);
  pthread_mutex_lock(&w->lock);
  w->init_rc = rc;
  w->started = 1;
  pthread_cond_broadcast(&w->done);
  pthread_mutex_unlock(&w->lock);
  if (rc < 0)
    return NULL;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    if (w->head == NULL && !w->stopping) {
      pthread_mutex_unlock(&w->lock);
      spin_until_set(&w->queued, w->spin_ns);
      pthread_mutex_lock(&w->lock);
    }
    while (w->head == NULL && !w->stopping)
      pthread_cond_wait(&w->wake, &w->lock);
    if (w->head == NULL)
      break;
    call *c = w->head;
    atomic_fetch_sub(&w->queued, 1);
    w->head = c->next;
    if (w->head == NULL)
      w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    /* The caller waits until done is set (under the lock), so its mr_err
     * is written by this thread alone meanwhile. A posted call has no
     * caller: it records a failure where its next waited-for call finds
     * it (mr_worker_post). */
    int r = c->fn(c->arg, c->err);
    if (c->posted) {
      free(c);
      pthread_mutex_lock(&w->lock);
      continue;
    }
    pthread_mutex_lock(&w->lock);
    c->rc = r;
    atomic_store_explicit(&c->done, 1, memory_order_release); /* c is the caller's after this */
    pthread_cond_broadcast(&w->done);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int mr_worker_start(mr_worker_fn init, void *arg, mr_worker **out, mr_err *err) {
  mr_worker *w = calloc(1, sizeof *w);
  if (w == NULL)
    return mr_err_set(err, MR_ENOMEM, "worker: out of memory");
  pthread_mutex_init(&w->lock, NULL);
  atomic_init(&w->queued, 0);
  w->spin_ns = mr_cpus_usable() >= SPIN_MIN_CORES ? SPIN_NS : 0;
  pthread_cond_init(&w->wake, NULL);
  pthread_cond_init(&w->done, NULL);
  w->init = init;
  w->init_arg = arg;
  w->init_err = err;
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    free(w);
    return mr_err_set(err, MR_ENOMEM, "worker: cannot start a thread");
  }
  pthread_mutex_lock(&w->lock);
  while (!w->started)
    pthread_cond_wait(&w->done, &w->lock);
  pthread_mutex_unlock(&w->lock);
  if (w->init_rc < 0) {
    int rc = w->init_rc;
    pthread_join(w->thread, NULL);
    free(w);
    return rc;
  }
  *out = w;
  return 0;
}

int mr_worker_is_current(const mr_worker *w) { return current_worker == w; }

int mr_worker_call(mr_worker *w, mr_worker_fn fn, void *arg, mr_err *err) {
  if (current_worker == w)
    return fn(arg, err);
  call c = {.fn = fn, .arg = arg, .err = err};
  atomic_init(&c.done, 0);
  pthread_mutex_lock(&w->lock);
  if (w->tail != NULL)
    w->tail->next = &c;
  else
    w->head = &c;
  w->tail = &c;
  atomic_fetch_add(&w->queued, 1);
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  if (!spin_until_set(&c.done, w->spin_ns)) {
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&c.done))
      pthread_cond_wait(&w->done, &w->lock);
    pthread_mutex_unlock(&w->lock);
  }
  return c.rc;
}

int mr_worker_post(mr_worker *w, mr_worker_fn fn, const void *arg, size_t size, mr_err *err) {
  call *c = malloc(sizeof *c + size);
  if (c == NULL)
    return mr_err_set(err, MR_ENOMEM, "worker: out of memory");
  memset(c, 0, sizeof *c);
  c->fn = fn;
  c->arg = c + 1;
  c->posted = 1;
  memcpy(c->arg, arg, size);
  if (current_worker == w) {
    fn(c->arg, NULL);
    free(c);
    return 0;
  }
  pthread_mutex_lock(&w->lock);
  if (w->tail != NULL)
    w->tail->next = c;
  else
    w->head = c;
  w->tail = c;
  atomic_fetch_add(&w->queued, 1);
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  return 0;
}

void mr_worker_stop(mr_worker *w, mr_worker_fn fini, void *arg) {
  if (fini != NULL)
    mr_worker_call(w, fini, arg, NULL);
  pthread_mutex_lock(&w->lock);
  w->stopping = 1;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->done);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
