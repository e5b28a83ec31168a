/* A bounded queue of messages between the loop thread and a pipeline
 * thread, counting bytes. The bound is what gives backpressure: the
 * producer either waits for room (the pipeline thread writing images) or
 * looks at mr_queue_full() and stops reading its socket (the loop thread,
 * which must never block). */
#ifndef MR_SERVER_QUEUE_H
#define MR_SERVER_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "message.h"

/* An entry: a message, or an event without one (an error the decoder
 * reported, the peer going away). */
typedef struct mr_queue_entry {
  struct mr_queue_entry *next;
  mr_message *msg; /* owned; NULL for events */
  int code;        /* 0 for messages */
  char *text;      /* an event's description (owned) */
  size_t bytes;    /* what this entry counts against the bound */
} mr_queue_entry;

typedef struct mr_queue {
  pthread_mutex_t mu;
  pthread_cond_t changed;
  mr_queue_entry *head, *tail;
  size_t bytes, capacity;
  int closed;
  int paused; /* the producer stopped and waits to hear of room */
  int waiting; /* producers blocked in mr_queue_push for room (mr_queue_waiting) */
  /* When set (after mr_queue_init), told every change of `bytes`: the
   * server's metrics sum what all connections hold. */
  void (*count)(int64_t delta);
} mr_queue;

int mr_queue_init(mr_queue *q, size_t capacity);
/* Frees whatever is still queued. */
void mr_queue_destroy(mr_queue *q);

/* Appends a message (takes msg) counting `bytes`. With wait, blocks while
 * the queue holds `capacity` bytes or more. Returns MR_ECANCELED once the
 * queue is closed (msg is dropped), MR_ENOMEM when out of memory. */
int mr_queue_push(mr_queue *q, mr_message *msg, size_t bytes, int wait);
/* Appends an event (code < 0, a copy of text); never waits, and counts
 * like a message (MR_QUEUE_MESSAGE_OVERHEAD plus its text): a flood of
 * rejected messages fills the queue and stops the reading like any other
 * backlog. */
int mr_queue_push_event(mr_queue *q, int code, const char *text);

/* Removes the first entry; waits up to timeout_ms (< 0: forever) for one.
 * NULL on timeout or when closed and empty. The entry's bytes still count
 * until mr_queue_release(). */
mr_queue_entry *mr_queue_pop(mr_queue *q, int timeout_ms);
/* Stops counting `bytes` and wakes waiting producers. Returns 1 when a
 * paused producer should now be told to go on (the queue has drained to
 * half its capacity), once per mr_queue_pause(). */
int mr_queue_release(mr_queue *q, size_t bytes);
/* The (non-blocking) producer says it stopped because the queue is full. */
void mr_queue_pause(mr_queue *q);
/* Frees a popped entry (and its message, if still there). */
void mr_queue_entry_free(mr_queue_entry *e);

/* True when the queue holds at least its capacity. */
int mr_queue_full(mr_queue *q);
/* Bytes counted now. */
size_t mr_queue_bytes(mr_queue *q);
/* Wakes everyone; later pushes fail, pops drain what is left. */
void mr_queue_close(mr_queue *q);
/* How many producers wait in mr_queue_push for room now: what a test
 * waits on before it makes room, instead of sleeping. */
int mr_queue_waiting(mr_queue *q);

/* What a queued message holds besides its payload: the message struct,
 * its queue entry, the write request that sends an answer (conn.c checks
 * that this covers them) and the allocator's headers. A 46-byte QUERY
 * holds some 2 KiB: counting wire bytes would let a flood of small
 * messages hold many times the bound. */
#define MR_QUEUE_MESSAGE_OVERHEAD 2560

/* What a message counts against a queue: the memory it holds, its payload
 * plus MR_QUEUE_MESSAGE_OVERHEAD. */
size_t mr_queue_message_bytes(const mr_message *msg);

#endif
