#include "external_program.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file_name.h"

#define MAX_ARGS 32

static char program_dir[PATH_MAX];
static void (*program_log)(const char *who, const char *line);

int mr_external_dir_set(const char *path, mr_err *err) {
  program_dir[0] = '\0';
  if (path == NULL)
    return 0;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return mr_err_set(err, MR_ENOENT, "%s is not a directory", path);
  if (realpath(path, program_dir) == NULL)
    return mr_err_set(err, MR_ENOENT, "cannot resolve %s: %m", path);
  return 0;
}

void mr_external_log_set(void (*log)(const char *who, const char *line)) { program_log = log; }

void mr_external_log(const char *who, const char *line) {
  if (program_log != NULL)
    program_log(who, line);
}

/* Printable ASCII, the rest as \xNN (a line for a client's error text). */
static void escape(const char *in, char *out, size_t size) {
  size_t used = 0;
  for (const unsigned char *p = (const unsigned char *)in; *p != '\0' && used + 5 < size; p++) {
    if (*p >= 0x20 && *p < 0x7f && *p != '\\')
      out[used++] = (char)*p;
    else
      used += (size_t)snprintf(out + used, size - used, "\\x%02x", *p);
  }
  out[used] = '\0';
}

/* One stderr line: to the log while under the cap, and kept as the last. */
static void take_line(mr_program *p, char *line, int *logged) {
  pthread_mutex_lock(&p->mu);
  escape(line, p->last_line, sizeof p->last_line);
  pthread_mutex_unlock(&p->mu);
  if (program_log == NULL)
    return;
  if (*logged < MR_PROGRAM_LOG_LINES)
    program_log(p->who, line);
  else if (*logged == MR_PROGRAM_LOG_LINES)
    program_log(p->who, "(more stderr dropped)");
  (*logged)++;
}

static int stopping(mr_program *p) {
  pthread_mutex_lock(&p->mu);
  int stop = p->stop;
  pthread_mutex_unlock(&p->mu);
  return stop;
}

/* Reads its stderr in lines (cut at MR_PROGRAM_LINE_BYTES) until EOF or
 * until stop and silence; polls, so a grandchild that keeps the pipe open
 * cannot hold it. */
static void *relay_main(void *arg) {
  mr_program *p = arg;
  char line[MR_PROGRAM_LINE_BYTES];
  size_t len = 0;
  int logged = 0;
  for (;;) {
    struct pollfd pf = {p->err_fd, POLLIN, 0};
    if (poll(&pf, 1, 50) <= 0) {
      if (stopping(p))
        break;
      continue;
    }
    char buf[4096];
    ssize_t n = read(p->err_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] != '\n' && len + 1 < sizeof line) {
        line[len++] = buf[i] != '\0' ? buf[i] : ' ';
        continue;
      }
      if (buf[i] != '\n')
        continue; /* the rest of an over-long line is dropped */
      line[len] = '\0';
      take_line(p, line, &logged);
      len = 0;
    }
  }
  if (len > 0) {
    line[len] = '\0';
    take_line(p, line, &logged);
  }
  return NULL;
}

/* Splits args at spaces into argv[1..] (argv[0] is path); the words point
 * into copy. */
static int split_args(char *copy, const char *path, char **argv, mr_err *err) {
  int n = 0;
  argv[n++] = (char *)path;
  for (char *save = NULL, *w = strtok_r(copy, " ", &save); w != NULL;
       w = strtok_r(NULL, " ", &save)) {
    if (n == MAX_ARGS)
      return mr_err_set(err, MR_EINVAL, "more than %d arguments", MAX_ARGS - 1);
    argv[n++] = w;
  }
  argv[n] = NULL;
  return 0;
}

int mr_program_start(const char *name, const char *args, mr_program *p, int *fd, mr_err *err) {
  memset(p, 0, sizeof *p);
  p->pid = -1;
  p->err_fd = -1;
  if (!mr_file_name_is_safe(name))
    return mr_err_set(err, MR_EINVAL, "program name '%.100s' refused: a name, not a path", name);
  if (program_dir[0] == '\0')
    return mr_err_set(err, MR_ENOENT,
                      "program '%.100s' refused: the server has no --external-dir", name);
  char path[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", program_dir, name);
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, X_OK) != 0)
    return mr_err_set(err, MR_ENOENT, "no executable program '%.100s' in --external-dir",
                      name);
  char copy[1024], *argv[MAX_ARGS + 1];
  snprintf(copy, sizeof copy, "%s", args);
  int rc = split_args(copy, path, argv, err);
  if (rc < 0)
    return rc;
  int sv[2], pipefd[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return mr_err_set(err, MR_EIO, "socketpair: %m");
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    close(sv[0]);
    close(sv[1]);
    return mr_err_set(err, MR_EIO, "pipe: %m");
  }
  /* dup2 onto 3 clears close-on-exec there; a descriptor already at 3 would
   * keep it, so the child's end is never 3 itself. */
  int child = sv[1];
  if (child == 3) {
    child = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
    close(sv[1]);
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  posix_spawn_file_actions_adddup2(&fa, child, 3);
  posix_spawnattr_init(&at);
  posix_spawnattr_setpgroup(&at, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                    POSIX_SPAWN_SETSIGDEF);
  char *envp[] = {"MR_EXTERNAL_FD=3", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                  NULL};
  int e = posix_spawn(&p->pid, path, &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(child);
  close(pipefd[1]);
  if (e != 0) {
    p->pid = -1;
    close(sv[0]);
    close(pipefd[0]);
    return mr_err_set(err, MR_EIO, "cannot start program '%.100s': %s", name, strerror(e));
  }
  snprintf(p->who, sizeof p->who, "program '%.100s' (pid %d)", name, (int)p->pid);
  p->err_fd = pipefd[0];
  pthread_mutex_init(&p->mu, NULL);
  p->relaying = pthread_create(&p->relay, NULL, relay_main, p) == 0;
  *fd = sv[0];
  return 0;
}

int mr_program_end(mr_program *p, int grace_ms, char *last, size_t size) {
  if (p->pid <= 0)
    return -1;
  int status = 0;
  pid_t got = 0;
  for (int waited = 0; (got = waitpid(p->pid, &status, WNOHANG)) == 0 && waited < grace_ms;
       waited += 5)
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  kill(-p->pid, SIGKILL); /* its process group: whatever it started too */
  int killed = got == 0;
  if (killed)
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
      ;
  p->pid = -1;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_mutex_unlock(&p->mu);
  if (p->relaying)
    pthread_join(p->relay, NULL);
  close(p->err_fd);
  if (last != NULL)
    snprintf(last, size, "%s", p->last_line);
  pthread_mutex_destroy(&p->mu);
  return killed ? -1 : status;
}
