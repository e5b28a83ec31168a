/* Internal: what a device is made of. C and C++ see the same accessors; the
 * struct itself is for the C files that build and dispatch on devices. */
#ifndef MR_GPU_DEVICE_IMPL_H
#define MR_GPU_DEVICE_IMPL_H

#include "cpu_threads.h"
#include "device.h"
#include "pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_cuda_ctx;

/* The GPU's CUDA state of the calling worker's lane (NULL for the CPU);
 * used on the device's workers only. */
struct mr_cuda_ctx *mr_device_cuda(const mr_device *dev);

/* The pool's CPU threads (any device may use them for host-side loops). */
mr_cpu_threads *mr_device_threads(const mr_device *dev);

/* Posts fn with a copy of the `size` bytes at arg to the worker of each of
 * dev's lanes (not the helpers') but the calling thread's own, and returns
 * at once: for state each lane keeps its own copy of, made ahead of its
 * use there. fn runs on that lane's worker, where mr_device_cuda(dev) is
 * that lane's; one that cannot be queued (out of memory) is skipped. */
void mr_device_post_other_lanes(mr_device *dev, int (*fn)(void *arg, mr_err *err),
                                const void *arg, size_t size);

#ifdef __cplusplus
}

#else
#include <stdatomic.h>

#include "worker.h"

/* A GPU is driven through lanes: each a worker thread with CUDA state of
 * its own (streams, library handles, FFT plans, staging slots), all on the
 * device's one memory pool. A thread that hands work to the GPU always
 * uses the same lane (threads take lanes in turn), so one stage's tasks
 * stay in order while the stages of a session, and sessions, run on the
 * GPU side by side instead of queueing behind one another. A task ends
 * with its lane's streams synchronised, so what it made may be used on any
 * lane afterwards. */
typedef struct mr_gpu_lane {
  struct mr_device *dev;
  mr_worker *worker;
  struct mr_cuda_ctx *cuda; /* created on the worker */
  atomic_llong busy_ns;     /* time spent running tasks (mr_device_lane_busy_s) */
} mr_gpu_lane;

/* A pretend GPU (mr_pool_opts.fake_gpus): the CPU's implementations
 * behind a GPU's place in the pool, with memory of its own to run out of
 * and failures to inject, so placement and fallback are tested without a
 * GPU. */
typedef struct mr_fake_gpu {
  size_t mem_limit;      /* bytes its buffers may hold */
  atomic_size_t mem_used;
  /* Fault injection (mr_pool_fake_fault): tasks and buffers still to
   * succeed before each one fails with fail_code; -1: none fails. */
  atomic_int fail_after;
  int fail_code;
} mr_fake_gpu;

struct mr_device {
  mr_pool *pool;
  int ordinal;                /* CUDA device number (a fake GPU's number); -1 for the CPU */
  int index;                  /* place among the pool's GPUs; -1 for the CPU */
  mr_fake_gpu *fake;          /* a pretend GPU; NULL otherwise */
  atomic_int load;            /* sessions placed; changed under the pool lock */
  atomic_int realtime_sessions; /* of them, real-time ones (device.h) */
  atomic_int turns;           /* lane turns taken by threads (device.c) */
  /* GPU only: nlanes lanes (the real-time lane first, device.h), then
   * (helper_lane 1: a pool of several GPUs) the lane of the threads
   * marked by mr_device_become_helper. */
  mr_gpu_lane lanes[MR_GPU_LANES_ALL + 1];
  int nlanes;                 /* 0 for the CPU */
  int helper_lane;
  mr_cpu_threads *threads;    /* the pool's, shared */
};

/* The lane the calling thread uses on dev (a GPU): its own when it is one
 * of dev's workers, the helpers' lane for a helper. */
mr_gpu_lane *mr_device_lane(mr_device *dev);
/* Marks the calling thread as a helper: a thread that drives a device for
 * a task waiting on another one (a scan split across GPUs). Its calls go
 * to each GPU's helpers' lane, where no task ever waits on another device,
 * so two scans split across the same GPUs the other way round never wait
 * for each other's lanes. */
void mr_device_become_helper(void);
/* Called first on a lane's worker thread: from then on that thread's
 * mr_device_cuda(lane->dev) is the lane's. */
void mr_device_enter_lane(mr_gpu_lane *lane);

/* Fills the pool-independent fields of a CPU device's info. */
void mr_device_cpu_info(mr_device *dev, mr_device_info *info);
/* Fills a fake GPU's info (its memory as its budget stands now). */
void mr_device_fake_info(mr_device *dev, mr_device_info *info);

/* A fake GPU's injected fault: 0 while none is due, else the code to fail
 * with (counting this call against fail_after). 0 for any other device. */
int mr_device_fake_fault(mr_device *dev, const char *what, mr_err *err);
/* Takes / gives back `bytes` of a fake GPU's memory: MR_EDEVMEM when it
 * does not have them. Both do nothing (0) for any other device. */
int mr_device_fake_take(mr_device *dev, size_t bytes, mr_err *err);
void mr_device_fake_give(mr_device *dev, size_t bytes);
#endif

#endif
