#include "cpu_threads.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "error.h"
#include "thread_name.h"

/* One parallel loop; lives on its caller's stack. Its chunks are claimed
 * without the lock (an atomic counter): a chunk of a few microseconds no
 * longer queues 16 threads on one mutex twice. The lock guards the list of
 * loops and each loop's helper count: a helper joins a loop and leaves it
 * under the lock, and the caller returns only once its loop is out of the
 * list with no helper left on it, so no helper touches a loop that is gone. */
typedef struct loop {
  mr_range_fn fn;
  void *arg;
  size_t n, chunk, nchunks;
  atomic_size_t next; /* next chunk to claim; >= nchunks: all claimed */
  int helpers;        /* helper threads working on it */
  int listed;         /* in the list of loops with chunks to hand out */
  struct loop *prev, *next_loop;
} loop;

struct mr_cpu_threads {
  int count;
  pthread_t *threads;
  pthread_mutex_t lock;
  pthread_cond_t work;  /* a loop was queued, or stop */
  pthread_cond_t done;  /* a helper left a loop that is out of the list */
  loop *loops;          /* loops with chunks left to hand out */
  int sleeping;         /* helpers waiting for work */
  int woken;            /* of those, signalled and not yet up */
  int stopping;
};

static void unlink_loop(mr_cpu_threads *t, loop *l) {
  if (!l->listed)
    return;
  if (l->prev != NULL)
    l->prev->next_loop = l->next_loop;
  else
    t->loops = l->next_loop;
  if (l->next_loop != NULL)
    l->next_loop->prev = l->prev;
  l->prev = l->next_loop = NULL;
  l->listed = 0;
}

/* Runs chunks of l until none is left to claim, without the lock. */
static void run_chunks(loop *l) {
  for (;;) {
    size_t c = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);
    if (c >= l->nchunks)
      return;
    size_t begin = c * l->chunk;
    size_t end = begin + l->chunk < l->n ? begin + l->chunk : l->n;
    l->fn(l->arg, begin, end);
  }
}

/* The listed loop with the fewest helpers (the newest among equals): each
 * caller's loop gets its share of the helpers, so one stage's loops do not
 * take every thread while another stage's caller works alone. */
static loop *least_helped(const mr_cpu_threads *t) {
  loop *best = t->loops;
  for (loop *l = t->loops; l != NULL; l = l->next_loop)
    if (l->helpers < best->helpers)
      best = l;
  return best;
}

static void *helper_main(void *p) {
  mr_cpu_threads *t = p;
  mr_thread_name("mr-cpu");
  pthread_mutex_lock(&t->lock);
  for (;;) {
    while (t->loops == NULL && !t->stopping) {
      t->sleeping++;
      pthread_cond_wait(&t->work, &t->lock);
      t->sleeping--;
      if (t->woken > 0)
        t->woken--;
    }
    if (t->stopping)
      break;
    loop *l = least_helped(t);
    l->helpers++;
    pthread_mutex_unlock(&t->lock);
    run_chunks(l);
    pthread_mutex_lock(&t->lock);
    unlink_loop(t, l); /* every chunk is claimed */
    if (--l->helpers == 0)
      pthread_cond_broadcast(&t->done);
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

int mr_cpu_threads_create(int nthreads, mr_cpu_threads **out, mr_err *err) {
  /* One pool for the CPU's work: OpenBLAS runs every call in its caller's
   * thread, and the callers (gpu/linalg, gpu/grappa) cut big products into
   * pieces for these threads. OpenBLAS's own pool served one call at a time
   * while the callers of others (a server's sessions and pipeline stages)
   * spun waiting, and its idle threads spun (sched_yield) against ours:
   * the CPU server's 20-slice GRAPPA series spent more time prewhitening
   * than calibrating. Process-wide, as OpenBLAS's setting is. */
  openblas_set_num_threads(1);
  mr_cpu_threads *t = calloc(1, sizeof *t);
  if (t == NULL)
    return mr_err_set(err, MR_ENOMEM, "cpu threads: out of memory");
  t->threads = calloc(nthreads > 1 ? (size_t)nthreads - 1 : 1, sizeof *t->threads);
  if (t->threads == NULL) {
    free(t);
    return mr_err_set(err, MR_ENOMEM, "cpu threads: out of memory");
  }
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->work, NULL);
  pthread_cond_init(&t->done, NULL);
  t->count = 1;
  for (int i = 0; i < nthreads - 1; i++) {
    if (pthread_create(&t->threads[i], NULL, helper_main, t) != 0)
      break; /* fewer helpers still work */
    t->count++;
  }
  *out = t;
  return 0;
}

void mr_cpu_threads_destroy(mr_cpu_threads *t) {
  if (t == NULL)
    return;
  pthread_mutex_lock(&t->lock);
  t->stopping = 1;
  pthread_cond_broadcast(&t->work);
  pthread_mutex_unlock(&t->lock);
  for (int i = 0; i < t->count - 1; i++)
    pthread_join(t->threads[i], NULL);
  pthread_cond_destroy(&t->work);
  pthread_cond_destroy(&t->done);
  pthread_mutex_destroy(&t->lock);
  free(t->threads);
  free(t);
}

int mr_cpu_threads_count(const mr_cpu_threads *t) { return t->count; }

void mr_cpu_parallel_for(mr_cpu_threads *t, size_t n, size_t grain,
                         mr_range_fn fn, void *arg) {
  if (n == 0)
    return;
  if (grain == 0)
    grain = 1;
  /* About four chunks per thread balance uneven progress among threads. */
  size_t target = (size_t)t->count * 4;
  size_t chunk = (n + target - 1) / target;
  if (chunk < grain)
    chunk = grain;
  if (t->count == 1 || chunk >= n) {
    fn(arg, 0, n);
    return;
  }
  loop l = {.fn = fn, .arg = arg, .n = n, .chunk = chunk,
            .nchunks = (n + chunk - 1) / chunk, .listed = 1};
  atomic_init(&l.next, 0);
  pthread_mutex_lock(&t->lock);
  l.next_loop = t->loops;
  if (t->loops != NULL)
    t->loops->prev = &l;
  t->loops = &l;
  /* Wake as many sleeping helpers as there are chunks beside the caller's
   * first, not all of them: a small loop does not pay for fifteen wake-ups
   * (and their turns at the lock). */
  size_t want = l.nchunks - 1;
  int free_helpers = t->sleeping - t->woken;
  for (; want > 0 && free_helpers > 0; want--, free_helpers--) {
    t->woken++;
    pthread_cond_signal(&t->work);
  }
  pthread_mutex_unlock(&t->lock);
  run_chunks(&l);
  pthread_mutex_lock(&t->lock);
  unlink_loop(t, &l);
  while (l.helpers > 0)
    pthread_cond_wait(&t->done, &t->lock);
  pthread_mutex_unlock(&t->lock);
}
