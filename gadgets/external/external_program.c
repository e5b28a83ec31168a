#include "external_program.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file_name.h"
#include "thread_name.h"

#define MAX_ARGS 32
/* Rounds of looking for inherited descendants: each round's kills may
 * hand their own children to us. */
#define ORPHAN_ROUNDS 8

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
  /* What a program starts and leaves behind (setsid) comes to us, not to
   * init, when its parent dies: mr_program_end finds it there. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return mr_err_set(err, MR_EIO, "cannot become a child subreaper: %m");
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
  mr_thread_name("mr-ext-relay");
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

/* The child's side of mr_program_start: its own process group, killed
 * with the server (PR_SET_PDEATHSIG, and not started at all if the server
 * is already gone), /dev/null as stdin and stdout, stderr to the relay,
 * the socket as descriptor 3, default signals, nothing blocked. */
static _Noreturn void exec_program(pid_t parent, int err_fd, int sock, const char *path,
                                   char **argv, char **envp) {
  setpgid(0, 0);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
    _exit(127);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC), out = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err_fd, 2) < 0 ||
      dup2(sock, 3) < 0)
    _exit(127);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    sigaction(sig, &dfl, NULL); /* SIGKILL, SIGSTOP and the reserved ones refuse: fine */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(path, argv, envp);
  _exit(127);
}

/* Whether process `pid`'s environment holds the entry `id` exactly. */
static int has_entry(pid_t pid, const char *id) {
  char path[64], env[65536];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, env, sizeof env - 1);
  close(fd);
  if (n <= 0)
    return 0;
  env[n] = '\0';
  size_t idlen = strlen(id);
  for (char *e = env; e < env + n; e += strlen(e) + 1)
    if (strncmp(e, id, idlen) == 0 && e[idlen] == '\0')
      return 1;
  return 0;
}

/* The parent of process `pid` from /proc/pid/stat (after its name, which
 * may hold spaces and parentheses), or -1. */
static pid_t parent_of(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0)
    return -1;
  stat[n] = '\0';
  const char *close_paren = strrchr(stat, ')');
  char state;
  int ppid;
  if (close_paren == NULL || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
    return -1;
  return (pid_t)ppid;
}

/* Kills and reaps our children (inherited as the subreaper) whose
 * environment carries the program's id: what it started and left behind.
 * Returns how many. */
static int kill_inherited(const mr_program *p) {
  DIR *proc = opendir("/proc");
  if (proc == NULL)
    return 0;
  pid_t self = getpid();
  int found = 0;
  for (struct dirent *d; (d = readdir(proc)) != NULL;) {
    char *end;
    long pid = strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || parent_of((pid_t)pid) != self || !has_entry((pid_t)pid, p->id))
      continue;
    kill((pid_t)pid, SIGKILL);
    while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
      ;
    found++;
  }
  closedir(proc);
  return found;
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
  static atomic_uint started;
  pid_t parent = getpid();
  snprintf(p->id, sizeof p->id, "MR_EXTERNAL_ID=%d.%u", (int)parent,
           atomic_fetch_add(&started, 1) + 1);
  char *envp[] = {"MR_EXTERNAL_FD=3", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                  p->id, NULL};
  /* fork, not posix_spawn: the child must ask for PR_SET_PDEATHSIG itself.
   * Between fork and exec only async-signal-safe calls. */
  p->pid = fork();
  if (p->pid == 0)
    exec_program(parent, pipefd[1], child, path, argv, envp);
  int e = errno;
  close(child);
  close(pipefd[1]);
  if (p->pid < 0) {
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
  for (int round = 0; round < ORPHAN_ROUNDS && kill_inherited(p) > 0; round++)
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
