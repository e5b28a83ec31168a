#include "gpu_busy.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reads "index, percent" lines until nvidia-smi's output ends. */
static void *read_main(void *arg) {
  gpu_busy *g = arg;
  FILE *f = fdopen(g->fd, "r");
  if (f == NULL) {
    close(g->fd);
    return NULL;
  }
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    int index;
    double percent;
    if (sscanf(line, "%d , %lf", &index, &percent) == 2 && index >= 0 &&
        index < GPU_BUSY_MAX) {
      g->sum[index] += percent;
      g->samples[index]++;
    }
  }
  fclose(f);
  return NULL;
}

int gpu_busy_start(gpu_busy *g) {
  memset(g, 0, sizeof *g);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) /* the server and tools started later inherit neither end */
    return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    execlp("nvidia-smi", "nvidia-smi", "--query-gpu=index,utilization.gpu",
           "--format=csv,noheader,nounits", "-lms", "100", (char *)NULL);
    _exit(127); /* no nvidia-smi: the reader sees the pipe end */
  }
  close(p[1]);
  g->child = pid;
  g->fd = p[0];
  if (pthread_create(&g->reader, NULL, read_main, g) != 0) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    close(p[0]);
    g->child = 0;
    return -1;
  }
  return 0;
}

void gpu_busy_stop(gpu_busy *g, bench_json *j) {
  if (g->child <= 0)
    return;
  kill(g->child, SIGTERM);
  waitpid(g->child, NULL, 0);
  pthread_join(g->reader, NULL); /* the pipe has ended: every sample is in */
  g->child = 0;
  int any = 0;
  for (int i = 0; i < GPU_BUSY_MAX; i++)
    any |= g->samples[i] > 0;
  if (!any)
    return;
  json_open(j, "gpu_kernel_busy_share", '{');
  for (int i = 0; i < GPU_BUSY_MAX; i++)
    if (g->samples[i] > 0) {
      char key[16];
      snprintf(key, sizeof key, "gpu%d", i);
      json_num(j, key, g->sum[i] / g->samples[i] / 100.0);
    }
  json_close(j, '}');
}
