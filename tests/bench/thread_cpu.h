/* mr-bench load: the CPU time a process's threads spend, summed by thread
 * name (digits dropped: mr-loop0..3 are "mr-loop", mr-gpu1-lane2 is
 * "mr-gpu-lane"), sampled from /proc while a case runs, so that a bound
 * outside the GPUs shows where it is (loops near one core each, the
 * sessions' threads, the CPU helpers). Threads that start and end between
 * two samples (10 ms apart) are missed, and a thread's last 10 ms may be. */
#ifndef MR_BENCH_THREAD_CPU_H
#define MR_BENCH_THREAD_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "bench.h"

#define THREAD_CPU_TIDS 4096
#define THREAD_CPU_NAMES 32

typedef struct thread_cpu {
  pid_t pid;
  pthread_t sampler;
  atomic_int stop;
  int running;
  int ntids;
  struct {
    pid_t tid;
    char name[16]; /* digits dropped */
    double first_s, last_s; /* CPU seconds at its first and last sample */
  } tids[THREAD_CPU_TIDS];
} thread_cpu;

/* Starts sampling pid's threads (the threads present now count from
 * now on, later ones from their start); 0, or -1 when /proc cannot be read
 * or no thread can be started. */
int thread_cpu_start(thread_cpu *t, pid_t pid);

typedef struct thread_cpu_totals {
  int n;
  char name[THREAD_CPU_NAMES][16];
  double seconds[THREAD_CPU_NAMES];
  int threads[THREAD_CPU_NAMES];
} thread_cpu_totals;

/* Stops sampling (one last sample first) and sums by name. */
void thread_cpu_stop(thread_cpu *t, thread_cpu_totals *out);

/* Writes object "server_cpu": per name the cores busy on average over
 * wall_ms ("cores": a loop near 1 is a loop-bound run, the CPU helpers or
 * the sessions' threads near the host's cores a CPU-bound one) and the
 * threads seen; nothing for no totals. */
void thread_cpu_write(bench_json *j, const thread_cpu_totals *t, double wall_ms);

#endif
