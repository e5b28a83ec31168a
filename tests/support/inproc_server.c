#include "inproc_server.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "conn.h"
#include "log.h"
#include "test_support.h"

static int admit(void *ctx) {
  mr_inproc_server *s = ctx;
  if (atomic_fetch_add(&s->nopen, 1) < s->host.max_connections)
    return 1;
  atomic_fetch_sub(&s->nopen, 1);
  return 0;
}

static void release(void *ctx) { atomic_fetch_sub(&((mr_inproc_server *)ctx)->nopen, 1); }

static int open_count(void *ctx) { return atomic_load(&((mr_inproc_server *)ctx)->nopen); }

/* Stopping and its last connection gone: closing the wake handle lets the
 * loop end. */
static void maybe_end(mr_inproc_server *s) {
  if (s->stopping && s->host.nconns == 0 && !uv_is_closing((uv_handle_t *)&s->wake))
    uv_close((uv_handle_t *)&s->wake, NULL);
}

static void closed(void *ctx) { maybe_end(ctx); }

static void on_wake(uv_async_t *a) {
  mr_inproc_server *s = a->data;
  uv_mutex_lock(&s->lock);
  int fds[64], n = s->nfds, stop = s->stop;
  for (int i = 0; i < n; i++)
    fds[i] = s->fds[i];
  s->nfds = 0;
  uv_mutex_unlock(&s->lock);
  for (int i = 0; i < n; i++)
    mr_conn_accept(&s->host, fds[i]);
  if (stop) {
    s->stopping = 1;
    maybe_end(s);
  }
}

static void loop_main(void *arg) {
  mr_inproc_server *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
}

void mr_inproc_server_init(mr_inproc_server *s) {
  *s = (mr_inproc_server){0};
  signal(SIGPIPE, SIG_IGN); /* as mr_server_run: a vanished peer costs an EPIPE */
  mr_log_set_level(MR_LOG_WARN);
  char path[4096];
  snprintf(path, sizeof path, "%s/configs", mr_test_source_dir());
  mr_err err = {0};
  if (mr_config_dir_load(path, &s->configs, &err) < 0)
    fail_msg("configs: %s", err.msg);
  mr_pool_opts popts = {.gpus = "none", .cpu_threads = 2};
  if (mr_pool_create(&popts, &s->pool, &err) < 0)
    fail_msg("pool: %s", err.msg);
  s->limits = mr_limits_default;
  /* reconserver's defaults (server/main.c). */
  s->env = (mr_server_env){.configs = &s->configs, .pool = s->pool, .limits = &s->limits,
                           .version = MR_VERSION, .handshake_timeout_ms = 30000,
                           .idle_timeout_ms = 120000, .error_grace_ms = 5000};
  s->host = (mr_conn_host){.env = &s->env, .max_connections = 64, .drain_timeout_ms = 30000,
                           .close_grace_ms = 5000, .write_timeout_ms = 60000, .admit = admit,
                           .release = release, .open_count = open_count, .closed = closed,
                           .ctx = s};
}

void mr_inproc_server_start(mr_inproc_server *s) {
  assert_int_equal(uv_loop_init(&s->loop), 0);
  s->host.loop = &s->loop;
  assert_int_equal(uv_mutex_init(&s->lock), 0);
  assert_int_equal(uv_async_init(&s->loop, &s->wake, on_wake), 0);
  s->wake.data = s;
  assert_int_equal(uv_thread_create(&s->thread, loop_main, s), 0);
}

int mr_inproc_server_connect(mr_inproc_server *s) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  uv_mutex_lock(&s->lock);
  assert_true(s->nfds < (int)(sizeof s->fds / sizeof *s->fds));
  s->fds[s->nfds++] = sv[0];
  uv_async_send(&s->wake);
  uv_mutex_unlock(&s->lock);
  return sv[1];
}

void mr_inproc_server_stop(mr_inproc_server *s) {
  uv_mutex_lock(&s->lock);
  s->stop = 1;
  uv_async_send(&s->wake);
  uv_mutex_unlock(&s->lock);
  uv_thread_join(&s->thread);
  assert_int_equal(uv_loop_close(&s->loop), 0);
  uv_mutex_destroy(&s->lock);
  mr_pool_destroy(s->pool);
  mr_config_dir_free(&s->configs);
}
