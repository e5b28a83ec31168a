#include "readahead.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct item {
  struct item *next;
  mr_message *msg;
  size_t bytes;
} item;

struct mr_readahead {
  const mr_stream_source *src;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t changed;
  item *head, *tail;
  size_t bytes, capacity;
  int ended;    /* the source said NULL or failed: nothing more comes */
  int rc;       /* the source's failure */
  mr_err err;   /* its line */
  int stopping; /* the consumer is gone */
};

/* About what a message holds: its samples and trajectory. */
static size_t message_bytes(const mr_message *m) {
  size_t b = sizeof *m;
  if (m->kind == MR_MSG_ACQUISITION)
    b += mr_acquisition_data_count(&m->u.acq.head) * 8 +
         mr_acquisition_traj_count(&m->u.acq.head) * sizeof(float);
  else if (m->kind == MR_MSG_WAVEFORM)
    b += mr_waveform_data_count(&m->u.waveform.head) * sizeof(uint32_t);
  return b;
}

static void *reader(void *arg) {
  mr_readahead *ra = arg;
  for (;;) {
    mr_message *m = NULL;
    mr_err err = {0};
    int rc = ra->src->next(ra->src->ctx, &m, &err);
    item *it = rc == 0 && m != NULL ? malloc(sizeof *it) : NULL;
    if (rc == 0 && m != NULL && it == NULL) {
      mr_message_unref(m);
      rc = mr_err_set(&err, MR_ENOMEM, "out of memory reading ahead");
    }
    pthread_mutex_lock(&ra->mu);
    if (it == NULL) { /* the end, or a failure */
      ra->ended = 1;
      ra->rc = rc;
      ra->err = err;
      pthread_cond_broadcast(&ra->changed);
      pthread_mutex_unlock(&ra->mu);
      return NULL;
    }
    *it = (item){.msg = m, .bytes = message_bytes(m)};
    /* One message always fits, however large: the sender must progress. */
    while (ra->bytes > 0 && ra->bytes + it->bytes > ra->capacity && !ra->stopping)
      pthread_cond_wait(&ra->changed, &ra->mu);
    if (ra->stopping) {
      pthread_mutex_unlock(&ra->mu);
      mr_message_unref(m);
      free(it);
      return NULL;
    }
    if (ra->tail != NULL)
      ra->tail->next = it;
    else
      ra->head = it;
    ra->tail = it;
    ra->bytes += it->bytes;
    pthread_cond_broadcast(&ra->changed);
    pthread_mutex_unlock(&ra->mu);
  }
}

static int next_read(void *ctx, mr_message **out, mr_err *err) {
  mr_readahead *ra = ctx;
  pthread_mutex_lock(&ra->mu);
  while (ra->head == NULL && !ra->ended)
    pthread_cond_wait(&ra->changed, &ra->mu);
  item *it = ra->head;
  int rc = 0;
  *out = NULL;
  if (it != NULL) {
    ra->head = it->next;
    if (ra->head == NULL)
      ra->tail = NULL;
    ra->bytes -= it->bytes;
    *out = it->msg;
    free(it);
    pthread_cond_broadcast(&ra->changed);
  } else if (ra->rc < 0) {
    rc = ra->rc;
    *err = ra->err;
  }
  pthread_mutex_unlock(&ra->mu);
  return rc;
}

int mr_readahead_start(const mr_stream_source *src, size_t bytes, mr_readahead **out) {
  mr_readahead *ra = calloc(1, sizeof *ra);
  if (ra == NULL)
    return MR_ENOMEM;
  ra->src = src;
  ra->capacity = bytes;
  pthread_mutex_init(&ra->mu, NULL);
  pthread_cond_init(&ra->changed, NULL);
  if (pthread_create(&ra->thread, NULL, reader, ra) != 0) {
    pthread_mutex_destroy(&ra->mu);
    pthread_cond_destroy(&ra->changed);
    free(ra);
    return MR_ENOMEM;
  }
  *out = ra;
  return 0;
}

mr_stream_source mr_readahead_source(mr_readahead *ra) {
  return (mr_stream_source){.next = next_read, .ctx = ra};
}

void mr_readahead_stop(mr_readahead *ra) {
  if (ra == NULL)
    return;
  pthread_mutex_lock(&ra->mu);
  ra->stopping = 1;
  pthread_cond_broadcast(&ra->changed);
  pthread_mutex_unlock(&ra->mu);
  pthread_join(ra->thread, NULL);
  for (item *it = ra->head, *next; it != NULL; it = next) {
    next = it->next;
    mr_message_unref(it->msg);
    free(it);
  }
  pthread_mutex_destroy(&ra->mu);
  pthread_cond_destroy(&ra->changed);
  free(ra);
}
