#include "cpu_threads.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "error.h"
#include "thread_name.h"

/* One parallel loop; lives on its caller's stack. Chunks are handed out
 * under the lock: they are coarse (several per thread), so the lock is
 * taken rarely compared with the work in between. */
typedef struct loop {
  mr_range_fn fn;
  void *arg;
  size_t n, chunk, nchunks;
  size_t next;      /* next chunk to hand out */
  size_t finished;  /* chunks done */
  struct loop *prev, *next_loop;
} loop;

struct mr_cpu_threads {
  int count;
  pthread_t *threads;
  pthread_mutex_t lock;
  pthread_cond_t work;  /* a loop was queued, or stop */
  pthread_cond_t done;  /* a loop's last chunk finished */
  loop *loops;          /* loops with chunks left to hand out */
  int stopping;
};

static void unlink_loop(mr_cpu_threads *t, loop *l) {
  if (l->prev != NULL)
    l->prev->next_loop = l->next_loop;
  else
    t->loops = l->next_loop;
  if (l->next_loop != NULL)
    l->next_loop->prev = l->prev;
  l->prev = l->next_loop = NULL;
}

/* Claims a chunk of l, with the lock held; unlinks l after its last one. */
static size_t claim(mr_cpu_threads *t, loop *l) {
  size_t c = l->next++;
  if (l->next == l->nchunks)
    unlink_loop(t, l);
  return c;
}

/* Runs chunk c of l without the lock, then counts it done with the lock. */
static void run_chunk(mr_cpu_threads *t, loop *l, size_t c) {
  pthread_mutex_unlock(&t->lock);
  size_t begin = c * l->chunk;
  size_t end = begin + l->chunk < l->n ? begin + l->chunk : l->n;
  l->fn(l->arg, begin, end);
  pthread_mutex_lock(&t->lock);
  if (++l->finished == l->nchunks)
    pthread_cond_broadcast(&t->done);
}

static void *helper_main(void *p) {
  mr_cpu_threads *t = p;
  mr_thread_name("mr-cpu");
  pthread_mutex_lock(&t->lock);
  for (;;) {
    while (t->loops == NULL && !t->stopping)
      pthread_cond_wait(&t->work, &t->lock);
    if (t->stopping)
      break;
    loop *l = t->loops;
    run_chunk(t, l, claim(t, l));
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
            .nchunks = (n + chunk - 1) / chunk};
  pthread_mutex_lock(&t->lock);
  l.next_loop = t->loops;
  if (t->loops != NULL)
    t->loops->prev = &l;
  t->loops = &l;
  pthread_cond_broadcast(&t->work);
  while (l.next < l.nchunks)
    run_chunk(t, &l, claim(t, &l));
  while (l.finished < l.nchunks)
    pthread_cond_wait(&t->done, &t->lock);
  pthread_mutex_unlock(&t->lock);
}
