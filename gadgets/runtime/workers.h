/* A gadget's own worker threads: jobs handed to them run at once, several
 * at a time, and come back to the gadget's stage thread in the order they
 * were given, each with its result and its error line. What the gadget
 * uses to work on independent pieces (GRAPPA's slices on the CPU) side by
 * side while it still emits in order and reports every failure at its
 * place in the stream. A finished job wakes the gadget (mr_gadget_wake),
 * whose wake() takes it back. Every call but the job function itself is
 * made from the gadget's own calls (its stage thread). */
#ifndef MR_GADGETS_WORKERS_H
#define MR_GADGETS_WORKERS_H

#include "error.h"
#include "gadget.h"

/* Runs one job on a worker thread; *own is that thread's own state (NULL
 * at first, kept for its next jobs: a plan), freed by free_own when the
 * thread ends. Returns 0 or a negative MR_E* code with its line in err. */
typedef int (*mr_worker_fn)(void **own, void *job, mr_err *err);

typedef struct mr_workers mr_workers;

/* count threads (named "mr-<name>") that run at most count jobs at once;
 * at most count jobs are given and not yet taken back. Fails (MR_ENOMEM)
 * only when no thread starts. */
int mr_workers_create(int count, const char *name, mr_worker_fn run, void (*free_own)(void *),
                      mr_gadget_ctx *ctx, mr_workers **out, mr_err *err);
/* Jobs given and not yet taken back (0 for NULL). */
int mr_workers_pending(const mr_workers *w);
/* 1 when no more may be given before the oldest is taken back. */
int mr_workers_full(const mr_workers *w);
/* Queues job (not full: check first); the workers own it until it is
 * taken back. */
void mr_workers_give(mr_workers *w, void *job);
/* The oldest job given once it has run (waiting for it when wait is 1),
 * else NULL; *rc is its result and err gets its line. */
void *mr_workers_take(mr_workers *w, int wait, int *rc, mr_err *err);
/* Lets the running jobs end, stops the threads and hands every job not
 * taken back to drop (run or not). NULL is fine. */
void mr_workers_destroy(mr_workers *w, void (*drop)(void *job));

#endif
