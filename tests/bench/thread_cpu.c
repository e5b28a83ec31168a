#include "thread_cpu.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAMPLE_US 10000

/* One thread's name (digits dropped) and CPU seconds from
 * /proc/pid/task/tid/stat; 0, or -1 when it is gone. */
static int read_thread(pid_t pid, pid_t tid, char name[16], double *seconds) {
  char path[96], line[1024];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t len = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[len] = '\0';
  /* "tid (comm) state ...": comm may hold spaces, so from the last ')'. */
  char *open = strchr(line, '('), *close = strrchr(line, ')');
  if (open == NULL || close == NULL || close < open)
    return -1;
  int k = 0;
  for (const char *p = open + 1; p < close && k < 15; p++)
    if (!isdigit((unsigned char)*p))
      name[k++] = *p;
  name[k] = '\0';
  /* Fields after comm: state(3) ... utime(14) stime(15). */
  unsigned long long utime = 0, stime = 0;
  if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
             &stime) != 2)
    return -1;
  *seconds = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
  return 0;
}

static void sample(thread_cpu *t, int first) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)t->pid);
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    pid_t tid = (pid_t)atoi(e->d_name);
    char name[16];
    double s;
    if (tid <= 0 || read_thread(t->pid, tid, name, &s) < 0)
      continue;
    int k = 0;
    while (k < t->ntids && t->tids[k].tid != tid)
      k++;
    if (k == t->ntids) {
      if (k == THREAD_CPU_TIDS)
        continue;
      t->ntids++;
      t->tids[k].tid = tid;
      t->tids[k].first_s = first ? s : 0; /* a thread born meanwhile counts from 0 */
    }
    snprintf(t->tids[k].name, sizeof t->tids[k].name, "%s", name);
    t->tids[k].last_s = s;
  }
  closedir(d);
}

static void *sampler_main(void *arg) {
  thread_cpu *t = arg;
  while (!atomic_load(&t->stop)) {
    usleep(SAMPLE_US);
    sample(t, 0);
  }
  return NULL;
}

int thread_cpu_start(thread_cpu *t, pid_t pid) {
  t->pid = pid;
  t->ntids = 0;
  t->running = 0;
  atomic_init(&t->stop, 0);
  sample(t, 1);
  if (t->ntids == 0 || pthread_create(&t->sampler, NULL, sampler_main, t) != 0)
    return -1;
  t->running = 1;
  return 0;
}

void thread_cpu_stop(thread_cpu *t, thread_cpu_totals *out) {
  memset(out, 0, sizeof *out);
  if (!t->running)
    return;
  atomic_store(&t->stop, 1);
  pthread_join(t->sampler, NULL);
  t->running = 0;
  sample(t, 0);
  for (int i = 0; i < t->ntids; i++) {
    int k = 0;
    while (k < out->n && strcmp(out->name[k], t->tids[i].name) != 0)
      k++;
    if (k == out->n) {
      if (k == THREAD_CPU_NAMES)
        continue;
      snprintf(out->name[out->n++], sizeof out->name[0], "%s", t->tids[i].name);
    }
    out->seconds[k] += t->tids[i].last_s - t->tids[i].first_s;
    out->threads[k]++;
  }
}

void thread_cpu_write(bench_json *j, const thread_cpu_totals *t, double wall_ms) {
  if (t->n == 0 || wall_ms <= 0)
    return;
  json_open(j, "server_cpu", '{');
  for (int k = 0; k < t->n; k++) {
    json_open(j, t->name[k], '{');
    json_num(j, "cores", t->seconds[k] * 1e3 / wall_ms);
    json_int(j, "threads", t->threads[k]);
    json_close(j, '}');
  }
  json_close(j, '}');
}
