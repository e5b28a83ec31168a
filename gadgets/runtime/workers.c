/* A gadget's worker threads (workers.h): a ring of the jobs given and not
 * yet taken back, oldest first; the workers start them in that order and
 * the gadget takes them back in that order. */
#include "workers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "thread_name.h"

typedef struct entry {
  void *job;
  int done, rc; /* whether it has run, and its result */
  mr_err err;
} entry;

struct mr_workers {
  mr_worker_fn run;
  void (*free_own)(void *);
  mr_gadget_ctx *ctx;
  char name[16];
  pthread_mutex_t mu;
  pthread_cond_t work; /* a job was given, or stop */
  pthread_cond_t done; /* a job has run */
  entry *ring;         /* capacity entries */
  int capacity, head, count; /* the given jobs: ring[head ..], count of them */
  int started;         /* of those, started (the oldest ones) */
  int stopping;
  pthread_t *threads;
  int nthreads;
};

static void *worker_main(void *arg) {
  mr_workers *w = arg;
  mr_thread_name("mr-%s", w->name);
  void *own = NULL;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->stopping && w->started == w->count)
      pthread_cond_wait(&w->work, &w->mu);
    if (w->stopping)
      break;
    entry *e = &w->ring[(w->head + w->started++) % w->capacity];
    pthread_mutex_unlock(&w->mu);
    mr_err err = {0};
    int rc = w->run(&own, e->job, &err);
    pthread_mutex_lock(&w->mu);
    e->rc = rc;
    e->err = err;
    e->done = 1;
    pthread_cond_broadcast(&w->done);
    pthread_mutex_unlock(&w->mu);
    mr_gadget_wake(w->ctx); /* its wake() takes the job back */
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  if (own != NULL)
    w->free_own(own);
  return NULL;
}

int mr_workers_create(int count, const char *name, mr_worker_fn run, void (*free_own)(void *),
                      mr_gadget_ctx *ctx, mr_workers **out, mr_err *err) {
  mr_workers *w = calloc(1, sizeof *w);
  if (w != NULL) {
    w->ring = calloc((size_t)count, sizeof *w->ring);
    w->threads = calloc((size_t)count, sizeof *w->threads);
  }
  if (w == NULL || w->ring == NULL || w->threads == NULL) {
    if (w != NULL) {
      free(w->ring);
      free(w->threads);
    }
    free(w);
    return mr_err_set(err, MR_ENOMEM, "%s: out of memory for %d workers", name, count);
  }
  w->run = run;
  w->free_own = free_own;
  w->ctx = ctx;
  w->capacity = count;
  snprintf(w->name, sizeof w->name, "%s", name);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->work, NULL);
  pthread_cond_init(&w->done, NULL);
  for (int i = 0; i < count; i++) {
    if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
      break; /* fewer workers still run every job */
    w->nthreads++;
  }
  if (w->nthreads == 0) {
    mr_workers_destroy(w, NULL);
    return mr_err_set(err, MR_ENOMEM, "%s: no worker thread started", name);
  }
  *out = w;
  return 0;
}

int mr_workers_pending(const mr_workers *w) { return w != NULL ? w->count : 0; }

int mr_workers_full(const mr_workers *w) { return w->count == w->capacity; }

void mr_workers_give(mr_workers *w, void *job) {
  pthread_mutex_lock(&w->mu);
  entry *e = &w->ring[(w->head + w->count++) % w->capacity];
  e->job = job;
  e->done = 0;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
}

void *mr_workers_take(mr_workers *w, int wait, int *rc, mr_err *err) {
  pthread_mutex_lock(&w->mu);
  entry *e = &w->ring[w->head];
  while (wait && w->count > 0 && !e->done)
    pthread_cond_wait(&w->done, &w->mu);
  void *job = NULL;
  if (w->count > 0 && e->done) {
    job = e->job;
    *rc = e->rc;
    if (e->rc < 0)
      mr_err_set(err, e->rc, "%s", mr_err_text(&e->err, e->rc));
    w->head = (w->head + 1) % w->capacity;
    w->count--;
    w->started--;
  }
  pthread_mutex_unlock(&w->mu);
  return job;
}

void mr_workers_destroy(mr_workers *w, void (*drop)(void *job)) {
  if (w == NULL)
    return;
  pthread_mutex_lock(&w->mu);
  w->stopping = 1;
  pthread_cond_broadcast(&w->work);
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < w->nthreads; i++)
    pthread_join(w->threads[i], NULL);
  for (int i = 0; drop != NULL && i < w->count; i++)
    drop(w->ring[(w->head + i) % w->capacity].job);
  pthread_cond_destroy(&w->work);
  pthread_cond_destroy(&w->done);
  pthread_mutex_destroy(&w->mu);
  free(w->ring);
  free(w->threads);
  free(w);
}
