/* Internal: a thread that runs calls handed to it, one at a time, in the
 * order they arrive; the caller waits for each. A GPU's worker owns the
 * device's CUDA state, which is created and used on that thread only. */
#ifndef MR_GPU_WORKER_H
#define MR_GPU_WORKER_H

#include <stddef.h>

#include "error.h"

typedef struct mr_worker mr_worker;
/* A call: returns 0 or a negative MR_E* code, with its line in err (the
 * caller's mr_err, written on the worker while the caller waits; NULL for
 * a posted call, which nobody waits for). */
typedef int (*mr_worker_fn)(void *arg, mr_err *err);

/* Starts the thread and runs init(arg, err) on it first. When init fails
 * its code is returned (its line in err) and no worker is left running. */
int mr_worker_start(mr_worker_fn init, void *arg, mr_worker **out, mr_err *err);

/* Runs fn(arg, err) on the worker and returns its result; runs it directly
 * when called from the worker itself. fn writes a failure's line into err
 * (the caller's, which waits meanwhile: the one place a line is written
 * by another thread). */
int mr_worker_call(mr_worker *w, mr_worker_fn fn, void *arg, mr_err *err);

/* Queues fn on the worker with a copy of the `size` bytes at arg and
 * returns at once (runs it directly when called from the worker itself):
 * for work whose caller need not wait, such as queueing a copy. fn's result
 * is not returned and it is given no mr_err (NULL): fn records a failure,
 * its line included, where the caller will look after its next
 * mr_worker_call() (calls run in order). MR_ENOMEM (with its line in err)
 * when the copy cannot be made (fn does not run then). */
int mr_worker_post(mr_worker *w, mr_worker_fn fn, const void *arg, size_t size, mr_err *err);

/* 1 when the calling thread is w's thread. */
int mr_worker_is_current(const mr_worker *w);

/* Runs fini(arg) on the worker, then ends and joins the thread. */
void mr_worker_stop(mr_worker *w, mr_worker_fn fini, void *arg);

#endif
