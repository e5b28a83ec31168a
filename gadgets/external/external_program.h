/* The programs the external gadget may start (`execute: NAME`): only
 * executables of the server's --external-dir, by name (never a path, as
 * for configs), one per session. The program gets a connected socket as
 * file descriptor 3 (MR_EXTERNAL_FD=3 in its environment), /dev/null as
 * stdin and stdout; its stderr goes to the server log, escaped, at most
 * MR_PROGRAM_LOG_LINES lines of MR_PROGRAM_LINE_BYTES per program. It runs
 * in a process group of its own, killed whole when the session ends, and
 * is always reaped. What it started that left the group (setsid) is
 * found too: the server is a child subreaper (once an --external-dir is
 * set), so such a process is reparented to it when its parent dies, and
 * every program's environment carries a token of its own
 * (MR_EXTERNAL_ID=serverpid.n), which its descendants inherit; at the
 * end, inherited processes with the program's token are killed and reaped
 * too. If the server itself is killed, the program gets SIGKILL
 * (PR_SET_PDEATHSIG); its escaped descendants then survive unless the
 * server runs in a cgroup of its own that is killed whole (systemd's
 * KillMode=control-group, a container), or they cleared their environment. */
#ifndef MR_GADGETS_EXTERNAL_PROGRAM_H
#define MR_GADGETS_EXTERNAL_PROGRAM_H

#include <pthread.h>
#include <sys/types.h>

#include "error.h"

#define MR_PROGRAM_LOG_LINES 100
#define MR_PROGRAM_LINE_BYTES 300

/* Where programs come from (reconserver --external-dir); NULL: nowhere
 * (execute is refused). Set once at start-up, before any session. The
 * directory must exist; setting one makes this process a child subreaper
 * (prctl PR_SET_CHILD_SUBREAPER). */
int mr_external_dir_set(const char *path, mr_err *err);
/* Where the programs' stderr lines go (the server's log; line is raw, the
 * receiver escapes it). NULL drops them. Set once at start-up. */
void mr_external_log_set(void (*log)(const char *who, const char *line));
/* One line to that log (dropped when none is set). */
void mr_external_log(const char *who, const char *line);

typedef struct mr_program {
  pid_t pid;
  char who[160]; /* "program 'x' (pid N)" for messages */
  char id[48];   /* "MR_EXTERNAL_ID=serverpid.n": in its environment, and its descendants' */
  int err_fd;    /* the read end of its stderr */
  pthread_t relay;
  int relaying;
  pthread_mutex_t mu;
  int stop;                               /* under mu: the relay leaves */
  char last_line[MR_PROGRAM_LINE_BYTES];  /* its last stderr line, escaped (under mu) */
} mr_program;

/* Starts NAME of the external directory with args (split at spaces; no
 * quoting) and a socket to it in *fd (the caller's end, close-on-exec).
 * MR_EINVAL for a name that is not a plain name, MR_ENOENT for one that
 * is not an executable file there or when there is no directory. */
int mr_program_start(const char *name, const char *args, mr_program *p, int *fd, mr_err *err);

/* Waits up to grace_ms for it to exit by itself, then kills its process
 * group and what of its descendants this process inherited; reaps them, reads the rest of its stderr and stops the relay. Its
 * last stderr line, escaped, goes into last (size bytes; "" when none;
 * last may be NULL). Returns its wait status when it ended by itself
 * within grace_ms, -1 when it had to be killed. */
int mr_program_end(mr_program *p, int grace_ms, char *last, size_t size);

#endif
