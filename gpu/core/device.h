/* A device: the place gpu/ operations run, either the CPU or one GPU.
 *
 * Devices belong to an mr_pool (pool.h), which hands them to sessions. Every
 * operation takes the device it runs on (or a plan or buffer made on one);
 * the memory it is given must live there: host memory for the CPU device,
 * memory from mr_buf_create() (buf.h) for a GPU.
 *
 * Threading: each GPU has one worker thread that owns its CUDA state
 * (streams, cuBLAS/cuFFT/cuSOLVER handles, memory pool, plan cache). An
 * operation called from any other thread is handed to that worker and waits
 * for it, so every call outside a task is synchronous. To issue a sequence of
 * operations with one hand-off and no synchronisation between them, put them
 * in a task and call mr_device_run(): inside a task, operations on the same
 * device run directly on the worker, queued in order on its stream, and the
 * task ends with one synchronisation. CPU operations run on the calling
 * thread and spread large loops over the pool's CPU threads. Any thread may
 * call into any device; a device's calls are serialised on its worker. */
#ifndef MR_GPU_DEVICE_H
#define MR_GPU_DEVICE_H

#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_device mr_device;

typedef struct mr_device_info {
  int ordinal;       /* CUDA device number; -1 for the CPU */
  char name[128];    /* "NVIDIA H100 80GB HBM3", or the CPU model */
  size_t mem_total;  /* bytes of device memory (host RAM for the CPU) */
  size_t mem_free;   /* bytes free now */
  int cc_major;      /* compute capability; 0.0 for the CPU */
  int cc_minor;
  int units;         /* multiprocessors, or CPU threads used */
  int load;          /* sessions placed on it now */
} mr_device_info;

/* A unit of work for mr_device_run(): returns 0 or a negative MR_E* code
 * and writes its failure's line into err (mr_err_set(), which keeps the
 * first error), as every gpu/ call does with the mr_err it is given. On a
 * GPU the task runs on the device's worker thread while the caller waits:
 * err is the caller's own (NULL: no line wanted). */
typedef int (*mr_device_task)(mr_device *dev, void *arg, mr_err *err);

/* 1 for a GPU that runs the CUDA backend, 0 for the CPU and for a fake
 * GPU (pool.h: a pretend one, which runs the CPU's implementations): what
 * operations dispatch on. */
int mr_device_is_gpu(const mr_device *dev);

/* The device's place among the pool's GPUs, 0 .. mr_pool_gpu_count()-1,
 * for a real or a fake GPU; -1 for the CPU: what placement, fallback and
 * reports go by. */
int mr_device_gpu_index(const mr_device *dev);

/* CUDA device number (a fake GPU's own number), or -1 for the CPU. Two
 * logical devices on one GPU (pool.h, share_gpus) have the same. */
int mr_device_ordinal(const mr_device *dev);

/* Real-time work (the threads of a session whose config says "priority":
 * "realtime"): the calling thread's tasks go to the lanes kept for real-time
 * work on each GPU, whose streams run at the device's highest priority. 0
 * turns it off again. */
void mr_device_set_realtime(int on);
/* Whether the calling thread does real-time work. */
int mr_device_is_realtime(void);
/* A real-time session placed on dev begins (+1) or ends (-1). A GPU's
 * first lane (pool.h: one more than gpu_lanes) is the real-time lane: no
 * other thread's task runs there while a real-time session may come, so
 * a stream's first frame never queues behind a heavy session's task that
 * began before the stream did. While k real-time sessions are on dev
 * beside others, its first min(k, lanes - 1) lanes take only real-time
 * threads' tasks and the others share the remaining lanes, so a frame
 * never queues behind a heavy session's task on a lane's worker, nor
 * behind another real-time session's while lanes are spare; while every
 * session on dev is real-time they take all its lanes. NULL (the CPU) is
 * ignored. */
void mr_device_count_realtime_session(mr_device *dev, int delta);

/* The lane (0..nlanes-1) a thread takes by its turn: among the real-time
 * lanes for a real-time thread, among the others for the rest, with
 * realtime_sessions real-time sessions of the `sessions` placed on the
 * device (see above). */
int mr_device_lane_pick(int nlanes, int realtime_thread, int realtime_sessions, int sessions,
                        int turn);

/* The lanes whose time is counted: a GPU's (pool.h, gpu_lanes), 1 for a
 * fake GPU (its tasks run on their callers), 0 for the CPU. */
int mr_device_lane_count(const mr_device *dev);
/* Seconds lane `lane` has spent running tasks since the pool started,
 * from a task's start to its streams' synchronisation (the time it holds
 * the lane; queued tasks wait meanwhile); for the metrics' busy counters. */
double mr_device_lane_busy_s(const mr_device *dev, int lane);

/* Copies `bytes` between host memory and memory on dev (a pointer into an
 * mr_buf of dev, or an offset into one): for code that has the pointer an
 * operation was given, such as an operator split across devices. Upload
 * returns once host may be reused, download once host holds the bytes,
 * both ordered after the work queued on dev before them. Borrow both. */
int mr_device_upload(mr_device *dev, void *dst, const void *host, size_t bytes, mr_err *err);
int mr_device_download(mr_device *dev, void *host, const void *src, size_t bytes, mr_err *err);

/* Copies `bytes` from src, memory on src_dev, to dst, memory on dst_dev:
 * between two GPUs directly over their link where they can reach each
 * other (NVLink: a 3D scan's image in tens of microseconds, where a round
 * trip through host memory took milliseconds), else staged by the driver;
 * within one GPU (two logical devices of it) a device copy; between fake
 * GPUs or CPUs a memcpy. Runs on src_dev's lane (directly inside a task
 * there), after the work queued on it; returns once dst holds the bytes.
 * Nothing on dst_dev may use dst meanwhile. A GPU and a non-GPU device
 * together: MR_EINVAL. Borrows both. */
int mr_device_copy_to(mr_device *src_dev, const void *src, mr_device *dst_dev, void *dst,
                      size_t bytes, mr_err *err);

/* Runs task(dev, arg, err) on dev's worker (directly when already there,
 * and on the calling thread for the CPU), waits for it and for all the
 * device work it queued, and returns its result; a device error found while
 * waiting is returned when the task itself succeeded. The task's line (or
 * the wait's) is in err on return. Borrows arg. */
int mr_device_run(mr_device *dev, mr_device_task task, void *arg, mr_err *err);

/* Times task as mr_device_run() would run it: `warmup` untimed runs, then
 * `reps` timed ones, writing each run's milliseconds to ms[0..reps-1]. GPU
 * runs are timed with CUDA events on the worker's compute stream, CPU runs
 * with the monotonic clock. For benchmarks. */
int mr_device_time(mr_device *dev, mr_device_task task, void *arg, int warmup, int reps, double *ms,
                   mr_err *err);

/* Fills *info (memory figures are read now). */
int mr_device_info_get(mr_device *dev, mr_device_info *info, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
