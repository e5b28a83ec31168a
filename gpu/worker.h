/* Internal: a thread that runs calls handed to it, one at a time, in the
 * order they arrive; the caller waits for each. A GPU's worker owns the
 * device's CUDA state, which is created and used on that thread only. */
#ifndef MR_GPU_WORKER_H
#define MR_GPU_WORKER_H

typedef struct mr_worker mr_worker;
typedef int (*mr_worker_fn)(void *arg);

/* Starts the thread and runs init(arg) on it first. When init fails its
 * code is returned and no worker is left running. */
int mr_worker_start(mr_worker_fn init, void *arg, mr_worker **out);

/* Runs fn(arg) on the worker and returns its result; runs it directly when
 * called from the worker itself. A failure's detail line is carried to the
 * calling thread. */
int mr_worker_call(mr_worker *w, mr_worker_fn fn, void *arg);

/* 1 when the calling thread is w's thread. */
int mr_worker_is_current(const mr_worker *w);

/* Runs fini(arg) on the worker, then ends and joins the thread. */
void mr_worker_stop(mr_worker *w, mr_worker_fn fini, void *arg);

#endif
