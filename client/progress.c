#include "progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define REFRESH_MS 200

struct mr_progress {
  const mr_stream_stats *stats;
  uint64_t total;
  int64_t start_ms;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  int stopping;
};

static void draw(const mr_progress *p) {
  const mr_stream_stats *st = p->stats;
  uint64_t acqs = atomic_load(&st->acquisitions), bytes = atomic_load(&st->acq_bytes);
  int64_t first = atomic_load(&st->first_acq_ms), last = atomic_load(&st->last_acq_ms);
  double secs = first > 0 && last > first ? (double)(last - first) / 1000.0 : 0.0;
  double mb = (double)bytes / 1e6;
  fprintf(stderr, "\r\033[Ksent %llu/%llu acquisitions (%.0f%%), %.1f MB",
          (unsigned long long)acqs, (unsigned long long)p->total,
          p->total > 0 ? 100.0 * (double)acqs / (double)p->total : 0.0, mb);
  if (secs > 0)
    fprintf(stderr, " at %.0f MB/s", mb / secs);
  uint64_t images = atomic_load(&st->images);
  fprintf(stderr, ", %llu image%s received, %.1f s", (unsigned long long)images,
          images == 1 ? "" : "s",
          (double)(mr_net_now_ms() - p->start_ms) / 1000.0);
}

static void *run(void *arg) {
  mr_progress *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->stopping) {
    draw(p);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += REFRESH_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&p->wake, &p->lock, &until);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

mr_progress *mr_progress_start(const mr_stream_stats *stats, uint64_t total_acquisitions) {
  if (!isatty(STDERR_FILENO))
    return NULL;
  mr_progress *p = calloc(1, sizeof *p);
  if (p == NULL)
    return NULL;
  p->stats = stats;
  p->total = total_acquisitions;
  p->start_ms = mr_net_now_ms();
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (pthread_create(&p->thread, NULL, run, p) != 0) {
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
    return NULL;
  }
  return p;
}

void mr_progress_stop(mr_progress *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->stopping = 1;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  draw(p);
  fputc('\n', stderr);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  free(p);
}
