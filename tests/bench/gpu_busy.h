/* mr-bench load: how busy each GPU's engines were while a case ran, from
 * `nvidia-smi --query-gpu=index,utilization.gpu -lms 100` read on a thread
 * (the share of each sample period in which a kernel ran, as the driver
 * reports it). A lane's busy share counts the time its tasks hold it,
 * host work and waits included; this counts the GPU's own time, so the
 * two together say whether the GPUs or the lanes feeding them are the
 * bound. Nothing is written where nvidia-smi is missing (a machine without
 * a GPU, CI). */
#ifndef MR_BENCH_GPU_BUSY_H
#define MR_BENCH_GPU_BUSY_H

#include <pthread.h>
#include <sys/types.h>

#include "bench.h"

#define GPU_BUSY_MAX 16

typedef struct gpu_busy {
  pid_t child;  /* nvidia-smi; 0 when not started */
  int fd;       /* its output */
  pthread_t reader;
  double sum[GPU_BUSY_MAX]; /* percent, summed over the samples */
  int samples[GPU_BUSY_MAX];
} gpu_busy;

/* Starts nvidia-smi and its reader; 0, or -1 (nothing is sampled). */
int gpu_busy_start(gpu_busy *g);

/* Stops it and writes object "gpu_kernel_busy_share": per nvidia-smi GPU
 * index ("gpu0", ...), the mean share of time a kernel ran; nothing when no
 * sample came. */
void gpu_busy_stop(gpu_busy *g, bench_json *j);

#endif
