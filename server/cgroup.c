#include "cgroup.h"
#include "cpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* v1 reports "no limit" as a page-rounded LONG_MAX; anything this large
 * is no limit. */
#define V1_UNLIMITED (UINT64_C(1) << 62)

typedef struct paths {
  char v2[512];     /* the process's v2 cgroup, "" when none */
  char memory[512]; /* its v1 memory cgroup */
  char cpu[512];    /* its v1 cpu cgroup */
} paths;

/* Does the comma-separated list have this controller? */
static int has_controller(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p != '\0';) {
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return 1;
    p += len + (end != NULL);
  }
  return 0;
}

/* Lines "id:controllers:path" of /proc/self/cgroup. */
static void read_paths(const char *root, paths *out) {
  memset(out, 0, sizeof *out);
  char file[1024], line[1024];
  snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
  FILE *f = fopen(file, "r");
  if (f == NULL)
    return;
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL)
      continue;
    *c1 = *c2 = '\0';
    const char *controllers = c1 + 1, *path = c2 + 1;
    if (strcmp(line, "0") == 0 && *controllers == '\0')
      snprintf(out->v2, sizeof out->v2, "%s", path);
    if (has_controller(controllers, "memory"))
      snprintf(out->memory, sizeof out->memory, "%s", path);
    if (has_controller(controllers, "cpu"))
      snprintf(out->cpu, sizeof out->cpu, "%s", path);
  }
  fclose(f);
}

/* The first line of dir/name into line; 0 when there is none. */
static int read_line(const char *dir, const char *name, char *line, size_t cap) {
  char file[2048];
  snprintf(file, sizeof file, "%s/%s", dir, name);
  FILE *f = fopen(file, "r");
  if (f == NULL)
    return 0;
  int ok = fgets(line, (int)cap, f) != NULL;
  fclose(f);
  return ok;
}

/* A number at the start of text, or 0 (as for "max"). */
static double number(const char *text) {
  char *end;
  double v = strtod(text, &end);
  return end != text ? v : 0;
}

/* One cgroup directory's limit; 0 for none. */
typedef double (*limit_fn)(const char *dir);

static double v2_memory(const char *dir) {
  char line[64];
  return read_line(dir, "memory.max", line, sizeof line) ? number(line) : 0;
}

static double v2_cpus(const char *dir) {
  char line[64];
  double quota, period;
  if (!read_line(dir, "cpu.max", line, sizeof line) ||
      sscanf(line, "%lf %lf", &quota, &period) != 2 || !(period > 0))
    return 0; /* "max 100000" */
  return quota / period;
}

static double v1_memory(const char *dir) {
  char line[64];
  double v = read_line(dir, "memory.limit_in_bytes", line, sizeof line) ? number(line) : 0;
  return v < (double)V1_UNLIMITED ? v : 0;
}

static double v1_cpus(const char *dir) {
  char quota[64], period[64];
  if (!read_line(dir, "cpu.cfs_quota_us", quota, sizeof quota) ||
      !read_line(dir, "cpu.cfs_period_us", period, sizeof period))
    return 0;
  double q = strtod(quota, NULL), p = strtod(period, NULL); /* quota -1: none */
  return q > 0 && p > 0 ? q / p : 0;
}

/* The tightest limit in the cgroup at path under base and in each of its
 * ancestors. A container often sees its own cgroup mounted as the root
 * while /proc/self/cgroup names the host's path: directories that do not
 * exist give no limit. */
static double tightest(const char *base, const char *path, limit_fn limit) {
  double best = 0;
  size_t len = strlen(path);
  for (;;) {
    while (len > 0 && path[len - 1] == '/')
      len--;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s%.*s", base, (int)len, path);
    double v = limit(dir);
    if (v > 0 && (best == 0 || v < best))
      best = v;
    if (len == 0)
      return best;
    while (len > 0 && path[len - 1] != '/')
      len--;
  }
}

static int exists(const char *root, const char *rel) {
  char file[1024];
  snprintf(file, sizeof file, "%s%s", root, rel);
  return access(file, F_OK) == 0;
}

void mr_cgroup_read(const char *root, mr_cgroup_limits *out) {
  paths p;
  read_paths(root, &p);
  char base[1024];
  memset(out, 0, sizeof *out);
  if (exists(root, "/sys/fs/cgroup/cgroup.controllers")) { /* v2 */
    snprintf(base, sizeof base, "%s/sys/fs/cgroup", root);
    out->memory_bytes = (uint64_t)tightest(base, p.v2, v2_memory);
    out->cpus = tightest(base, p.v2, v2_cpus);
    return;
  }
  snprintf(base, sizeof base, "%s/sys/fs/cgroup/memory", root);
  out->memory_bytes = (uint64_t)tightest(base, p.memory, v1_memory);
  /* The cpu hierarchy is mounted as "cpu" or "cpu,cpuacct". */
  snprintf(base, sizeof base, "%s/sys/fs/cgroup/%s", root,
           exists(root, "/sys/fs/cgroup/cpu") ? "cpu" : "cpu,cpuacct");
  out->cpus = tightest(base, p.cpu, v1_cpus);
}

void mr_cgroup_available(const char *root, uint64_t *memory_bytes, int *cpus) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  int n = mr_cpus_usable();
  mr_cgroup_limits lim;
  mr_cgroup_read(root, &lim);
  if (lim.memory_bytes > 0 && (memory == 0 || lim.memory_bytes < memory))
    memory = lim.memory_bytes;
  if (lim.cpus > 0 && ceil(lim.cpus) < n)
    n = (int)ceil(lim.cpus);
  *memory_bytes = memory;
  *cpus = n > 0 ? n : 1;
}
