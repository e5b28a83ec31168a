/* The CPUs this process may run on: its CPU affinity (taskset, a
 * container's cpuset), else the machine's online CPUs. What the server's
 * CPU threads, its GPU workers' spin and its container sizing count, so
 * that a server pinned to 16 of 64 cores starts 16 CPU threads, not 64. */
#ifndef MR_BASE_CPUS_H
#define MR_BASE_CPUS_H

int mr_cpus_usable(void);

#endif
