/* The memory and CPUs a container grants: the limits of the cgroup this
 * process runs in (cgroup v2: memory.max, cpu.max; v1:
 * memory.limit_in_bytes, cpu.cfs_quota_us / cpu.cfs_period_us), so the
 * default memory budget and thread counts follow `docker run --memory 256m
 * --cpus 2` instead of the host's totals. */
#ifndef MR_SERVER_CGROUP_H
#define MR_SERVER_CGROUP_H

#include <stdint.h>

typedef struct mr_cgroup_limits {
  uint64_t memory_bytes; /* 0: no limit */
  double cpus;           /* quota / period; 0: no limit */
} mr_cgroup_limits;

/* Reads the limits from the tree under root ("" for this machine's
 * /proc/self/cgroup and /sys/fs/cgroup; a test points it at a fake tree).
 * The tightest limit on the way from the process's cgroup up to the
 * hierarchy's root applies; a missing or unreadable file is no limit. */
void mr_cgroup_read(const char *root, mr_cgroup_limits *out);

/* The host's physical memory and online CPUs, lowered to the cgroup's
 * limits under root (CPUs rounded up, at least 1). */
void mr_cgroup_available(const char *root, uint64_t *memory_bytes, int *cpus);

#endif
