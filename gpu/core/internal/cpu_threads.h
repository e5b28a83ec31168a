/* Internal: the CPU threads that split large loops of CPU operations.
 *
 * Any number of threads may run parallel loops at once; each loop's caller
 * works on its own loop too, so a loop always progresses even when every
 * helper thread is busy with other callers' loops. */
#ifndef MR_GPU_CPU_THREADS_H
#define MR_GPU_CPU_THREADS_H

#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_cpu_threads mr_cpu_threads;

/* fn handles items [begin, end). */
typedef void (*mr_range_fn)(void *arg, size_t begin, size_t end);

/* nthreads counts the caller, so nthreads - 1 helper threads start. */
int mr_cpu_threads_create(int nthreads, mr_cpu_threads **out, mr_err *err);
void mr_cpu_threads_destroy(mr_cpu_threads *t);
int mr_cpu_threads_count(const mr_cpu_threads *t);

/* Calls fn over [0, n) in ranges of at least `grain` items spread over the
 * threads, and returns when all are done. */
void mr_cpu_parallel_for(mr_cpu_threads *t, size_t n, size_t grain,
                         mr_range_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
