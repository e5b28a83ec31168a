/* mr-bench stream: a reconserver the bench starts for itself, on a free
 * loopback port, its log in a file. */
#ifndef MR_BENCH_STREAM_SERVER_H
#define MR_BENCH_STREAM_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct stream_server {
  pid_t pid;
  int port;
  int http_port; /* given --http 127.0.0.1:0 in extra; else 0 */
  char log_path[512];
  long log_read; /* bytes of the log already looked at */
} stream_server;

/* Starts bin --listen 127.0.0.1:0 --configs configs --gpus gpus and the
 * further arguments of extra (NULL-terminated, at most 16; extra may be
 * NULL), its stderr in log_path, and waits (up to 30 s) until its log
 * names the port. Returns 0, or -1 with the reason (the log's last line)
 * in why. */
int stream_server_start(stream_server *s, const char *bin, const char *configs, const char *gpus,
                        const char *const *extra, const char *log_path, char *why,
                        size_t why_size);

/* Waits up to wait_ms for a log line (written since the last look)
 * containing text, and moves past it; 0, or -1 when none came. */
int stream_server_wait_line(stream_server *s, const char *text, int wait_ms);

/* SIGTERM, then waits (SIGKILL after 10 s). */
void stream_server_stop(stream_server *s);

/* 1 when the server has a config (or alias) called name, 0 when not, -1
 * when it cannot be asked (QUERY mrrecon::configs). */
int stream_server_has_config(const stream_server *s, const char *name);

/* The newest per-connection log line of a session ("... config=NAME ...
 * gadgets=...") written since the last call, waiting up to wait_ms for
 * one; "" if none. */
void stream_server_session_line(stream_server *s, int wait_ms, char *line, size_t size);

/* Each GPU's lanes' busy seconds from the server's /metrics
 * (mrrecon_gpu_lane_busy_seconds_total; -1 for a lane it does not list):
 * the number of GPUs listed, or -1 when the server has no --http or cannot
 * be asked. */
#define STREAM_LANES 9
int stream_server_lanes_busy(const stream_server *s, double busy[][STREAM_LANES], int max_gpus);

/* Every gadget's time summed over the next `sessions` per-connection log
 * lines ("... gadgets=name=1.2ms,..."), waiting up to wait_ms for them:
 * the number of lines summed, -1 when the log cannot be read. */
#define STREAM_GADGETS 32
typedef struct stream_gadgets {
  int sessions;
  int n;
  char name[STREAM_GADGETS][40];
  double ms[STREAM_GADGETS];
} stream_gadgets;
int stream_server_gadget_totals(stream_server *s, int sessions, int wait_ms, stream_gadgets *t);

#endif
