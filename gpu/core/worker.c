#include "worker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* One call for the worker: on the caller's stack while it waits, or on
 * the heap (with its argument after it) when posted. */
typedef struct call {
  mr_worker_fn fn;
  void *arg;
  int rc;
  int done;
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
  int stopping;
  mr_worker_fn init;
  void *init_arg;
  int init_rc;
  mr_err *init_err; /* the starting thread's, which waits meanwhile */
  int started;
};

static _Thread_local const mr_worker *current_worker;

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
    while (w->head == NULL && !w->stopping)
      pthread_cond_wait(&w->wake, &w->lock);
    if (w->head == NULL)
      break;
    call *c = w->head;
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
    c->done = 1;
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
  pthread_mutex_lock(&w->lock);
  if (w->tail != NULL)
    w->tail->next = &c;
  else
    w->head = &c;
  w->tail = &c;
  pthread_cond_signal(&w->wake);
  while (!c.done)
    pthread_cond_wait(&w->done, &w->lock);
  pthread_mutex_unlock(&w->lock);
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
