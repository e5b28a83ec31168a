/* Internal: a thread that runs calls handed to it, one at a time, in the
 * order they arrive; the caller waits for each. A GPU's worker owns the
 * device's CUDA state, which is created and used on that thread only. */
#ifndef MR_GPU_WORKER_H
#define MR_GPU_WORKER_H

#include <stddef.h>

typedef struct mr_worker mr_worker;
typedef int (*mr_worker_fn)(void *arg);

/* Starts the thread and runs init(arg) on it first. When init fails its
 * code is returned and no worker is left running. */
int mr_worker_start(mr_worker_fn init, void *arg, mr_worker **out);

/* Runs fn(arg) on the worker and returns its result; runs it directly when
 * called from the worker itself. A failure's detail line is carried to the
 * calling thread. */
int mr_worker_call(mr_worker *w, mr_worker_fn fn, void *arg);

/* Queues fn on the worker with a copy of the `size` bytes at arg and
 * returns at once (runs it directly when called from the worker itself):
 * for work whose caller need not wait, such as queueing a copy. fn's result
 * is not returned: fn records a failure where the caller will look after
 * its next mr_worker_call() (calls run in order). MR_ENOMEM when the copy
 * cannot be made (fn does not run then). */
int mr_worker_post(mr_worker *w, mr_worker_fn fn, const void *arg, size_t size);

/* 1 when the calling thread is w's thread. */
int mr_worker_is_current(const mr_worker *w);

/* Runs fini(arg) on the worker, then ends and joins the thread. */
void mr_worker_stop(mr_worker *w, mr_worker_fn fini, void *arg);

#endif
