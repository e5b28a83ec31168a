#include "queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

int mr_queue_init(mr_queue *q, size_t capacity) {
  memset(q, 0, sizeof *q);
  q->capacity = capacity;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&q->changed, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0)
    return MR_ENOMEM;
  if (pthread_mutex_init(&q->mu, NULL) != 0) {
    pthread_cond_destroy(&q->changed);
    return MR_ENOMEM;
  }
  return 0;
}

void mr_queue_entry_free(mr_queue_entry *e) {
  if (e == NULL)
    return;
  mr_message_unref(e->msg);
  free(e->text);
  free(e);
}

void mr_queue_destroy(mr_queue *q) {
  if (q->count != NULL && q->bytes > 0)
    q->count(-(int64_t)q->bytes);
  while (q->head != NULL) {
    mr_queue_entry *e = q->head;
    q->head = e->next;
    mr_queue_entry_free(e);
  }
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->changed);
}

static void append(mr_queue *q, mr_queue_entry *e) {
  if (q->tail != NULL)
    q->tail->next = e;
  else
    q->head = e;
  q->tail = e;
  q->bytes += e->bytes;
  if (q->count != NULL && e->bytes > 0)
    q->count((int64_t)e->bytes);
  pthread_cond_broadcast(&q->changed);
}

int mr_queue_push(mr_queue *q, mr_message *msg, size_t bytes, int wait) {
  mr_queue_entry *e = calloc(1, sizeof *e);
  if (e == NULL) {
    mr_message_unref(msg);
    return MR_ENOMEM;
  }
  e->msg = msg;
  e->bytes = bytes;
  pthread_mutex_lock(&q->mu);
  while (wait && !q->closed && q->bytes >= q->capacity) {
    q->waiting++;
    pthread_cond_wait(&q->changed, &q->mu);
    q->waiting--;
  }
  if (q->closed) {
    pthread_mutex_unlock(&q->mu);
    mr_queue_entry_free(e);
    return MR_ECANCELED;
  }
  append(q, e);
  pthread_mutex_unlock(&q->mu);
  return 0;
}

int mr_queue_push_event(mr_queue *q, int code, const char *text) {
  mr_queue_entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->text = strdup(text != NULL ? text : "")) == NULL) {
    free(e);
    return MR_ENOMEM;
  }
  e->code = code;
  e->bytes = MR_QUEUE_MESSAGE_OVERHEAD + strlen(e->text);
  pthread_mutex_lock(&q->mu);
  append(q, e);
  pthread_mutex_unlock(&q->mu);
  return 0;
}

mr_queue_entry *mr_queue_pop(mr_queue *q, int timeout_ms) {
  struct timespec deadline;
  if (timeout_ms >= 0) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&q->mu);
  while (q->head == NULL && !q->closed) {
    if (timeout_ms < 0)
      pthread_cond_wait(&q->changed, &q->mu);
    else if (pthread_cond_timedwait(&q->changed, &q->mu, &deadline) == ETIMEDOUT)
      break;
  }
  mr_queue_entry *e = q->head;
  if (e != NULL) {
    q->head = e->next;
    if (q->head == NULL)
      q->tail = NULL;
    e->next = NULL;
  }
  pthread_mutex_unlock(&q->mu);
  return e;
}

int mr_queue_release(mr_queue *q, size_t bytes) {
  pthread_mutex_lock(&q->mu);
  size_t released = bytes < q->bytes ? bytes : q->bytes;
  q->bytes -= released;
  if (q->count != NULL && released > 0)
    q->count(-(int64_t)released);
  int resume = q->paused && q->bytes <= q->capacity / 2;
  if (resume)
    q->paused = 0;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->mu);
  return resume;
}

void mr_queue_pause(mr_queue *q) {
  pthread_mutex_lock(&q->mu);
  q->paused = 1;
  pthread_mutex_unlock(&q->mu);
}

int mr_queue_full(mr_queue *q) {
  pthread_mutex_lock(&q->mu);
  int full = q->bytes >= q->capacity;
  pthread_mutex_unlock(&q->mu);
  return full;
}

size_t mr_queue_bytes(mr_queue *q) {
  pthread_mutex_lock(&q->mu);
  size_t b = q->bytes;
  pthread_mutex_unlock(&q->mu);
  return b;
}

void mr_queue_close(mr_queue *q) {
  pthread_mutex_lock(&q->mu);
  q->closed = 1;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->mu);
}

size_t mr_queue_message_bytes(const mr_message *m) {
  return MR_QUEUE_MESSAGE_OVERHEAD + mr_message_payload_bytes(m);
}

int mr_queue_waiting(mr_queue *q) {
  pthread_mutex_lock(&q->mu);
  int n = q->waiting;
  pthread_mutex_unlock(&q->mu);
  return n;
}
