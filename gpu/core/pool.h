/* The device pool: discovers GPUs, starts one worker thread per GPU and a
 * set of CPU threads, and places sessions on devices.
 *
 * One pool per process (the server makes it from --gpus). A CPU-only pool
 * ("none") touches no CUDA library and is cheap to create, so tests and
 * gadgets may make their own. */
#ifndef MR_GPU_POOL_H
#define MR_GPU_POOL_H

#include "device.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_pool mr_pool;

#define MR_GPU_LANES_DEFAULT 4
#define MR_GPU_LANES_MAX 8
/* A GPU's lanes: gpu_lanes, and before them the real-time lane (device.h),
 * which no other work takes while a real-time session may come. */
#define MR_GPU_LANES_ALL (MR_GPU_LANES_MAX + 1)

typedef struct mr_pool_opts {
  /* "all" (every GPU found; the default when NULL), "none" (CPU only), or
   * a comma-separated list of CUDA device numbers, e.g. "0,1". "all" on a
   * machine without a GPU or without the CUDA driver gives a CPU-only pool,
   * said once through log; a listed device that is missing is an error. */
  const char *gpus;
  /* Threads for CPU operations, the calling thread included; 0: one per
   * CPU the process may run on (its affinity: base/cpus.h). */
  int cpu_threads;
  /* Lanes per GPU (device_impl.h: worker threads with streams of their
   * own, so that stages and sessions overlap on the device); 0: the
   * default, MR_GPU_LANES_DEFAULT; at most 8. Each GPU has one more, the
   * real-time lane (device.h). */
  int gpu_lanes;
  /* Tests and CI: N pretend GPUs (at most 64) instead of the CUDA devices.
   * Each runs the CPU's implementations (mr_device_is_gpu() says 0) but is
   * placed, budgeted, described and counted as GPU 0..N-1 (its memory is
   * fake_gpu_memory bytes, out of memory is MR_EDEVMEM; faults can be
   * injected, mr_pool_fake_fault), and gpus picks among them as among
   * real ones. 0: the real GPUs. */
  int fake_gpus;
  size_t fake_gpu_memory; /* bytes per fake GPU; 0: 1 GiB */
  /* 1: a GPU listed more than once in gpus ("0,0") becomes that many
   * logical devices on it, each with lanes (streams, handles) of its own,
   * placed and used as separate GPUs: to run the code that splits a scan
   * across GPUs on a machine with one. 0: a repeated number is an error. */
  int share_gpus;
  /* Receives the one-line discovery messages; NULL writes them to stderr. */
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
} mr_pool_opts;

/* Creates a pool; opts may be NULL (all GPUs, all CPUs, stderr). The GPU
 * workers are running when this returns. */
int mr_pool_create(const mr_pool_opts *opts, mr_pool **out, mr_err *err);

/* Stops the workers and frees the pool. Every device must be released and
 * every buffer and plan made on it destroyed first. NULL is ignored. */
void mr_pool_destroy(mr_pool *pool);

/* Number of GPUs in the pool (0 for a CPU-only pool). */
int mr_pool_gpu_count(const mr_pool *pool);

/* Places a session: want is "auto" (the GPU with the fewest sessions, else
 * the CPU), "cpu", or a CUDA device number ("0") which must be in the pool.
 * Adds one to the device's load; give it back with mr_pool_release(). The
 * device is borrowed from the pool. */
int mr_pool_acquire(mr_pool *pool, const char *want, mr_device **out,
                    mr_err *err);

/* Places one more device for a session or scan that holds held[0..nheld)
 * already (NULL entries and the CPU ignored): the least loaded GPU of the
 * pool not among them, for a scan split across GPUs or a fallback from a
 * GPU that failed. MR_ENOENT when every GPU is held. Adds one to its load;
 * give it back with mr_pool_release(). */
int mr_pool_acquire_other(mr_pool *pool, mr_device *const *held, size_t nheld,
                          mr_device **out, mr_err *err);

/* Ends a placement made by mr_pool_acquire() or mr_pool_acquire_other(). */
void mr_pool_release(mr_pool *pool, mr_device *dev);

/* Fault injection on fake GPU `index` (a pool made with fake_gpus): after
 * `after` more of its tasks (mr_device_run) and buffer creations succeed,
 * each one fails with `code` (MR_EDEVICE: the GPU failed; MR_EDEVMEM: out
 * of memory) until called again; after < 0 clears it. MR_EINVAL for a
 * device that is not a fake GPU. */
int mr_pool_fake_fault(mr_pool *pool, int index, int after, int code, mr_err *err);

typedef enum mr_pool_format {
  MR_POOL_TEXT, /* one line per device, for reconserver --info */
  MR_POOL_JSON  /* {"devices":[{...}]}, for QUERY gadgetron::cuda::devices */
} mr_pool_format;

/* Describes every device (the CPU last) in the chosen format; *out is a
 * NUL-terminated string the caller takes and frees with free(). A GPU's
 * figures (its memory_free included) are those read when the pool started,
 * with its current load: describing never goes through a GPU worker, so it
 * never waits behind a session's work there. */
int mr_pool_describe(mr_pool *pool, mr_pool_format format, char **out, mr_err *err);

/* GPU i (0 .. mr_pool_gpu_count()-1) of the pool: its start-up figures, its
 * current load, and its memory free now as the driver reports it (read on
 * the calling thread: it never waits behind a session's work). For the
 * metrics endpoint. 0, or MR_EINVAL for a bad index. */
int mr_pool_gpu_info(mr_pool *pool, int i, mr_device_info *out);
/* GPU i's lanes' busy seconds (device.h, mr_device_lane_busy_s) into
 * busy_s[0..max-1]; returns how many lanes it has (0 for a bad i). Reads
 * counters only: never waits for the GPU. */
int mr_pool_gpu_lanes_busy(mr_pool *pool, int i, double *busy_s, int max);

#ifdef __cplusplus
}
#endif

#endif
