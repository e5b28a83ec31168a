#include "inproc_server.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "log.h"
#include "loops.h"
#include "metrics.h"
#include "test_support.h"

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
  s->opt = (mr_server_options){.max_connections = 64, .drain_timeout_ms = 30000,
                               .close_grace_ms = 5000, .write_timeout_ms = 60000, .loops = 1};
}

void mr_inproc_server_start(mr_inproc_server *s) {
  mr_metrics_init(&s->configs, s->opt.max_connections);
  assert_int_equal(uv_loop_init(&s->acceptor_loop), 0);
  s->acceptor = (mr_server){.loop = &s->acceptor_loop, .listen_fd = -1, .reserve_fd = -1,
                            .opt = s->opt, .env = &s->env};
  mr_err err = {0};
  if (mr_loops_start(&s->acceptor, s->opt.loops, NULL, &err) < 0)
    fail_msg("loops: %s", err.msg);
}

int mr_inproc_server_connect(mr_inproc_server *s) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  mr_loops_hand(s->acceptor.loops, sv[0]);
  return sv[1];
}

void mr_inproc_server_stop(mr_inproc_server *s) {
  mr_loops_stop(s->acceptor.loops);
  mr_loops_join(s->acceptor.loops);
  assert_int_equal(uv_loop_close(&s->acceptor_loop), 0);
  mr_pool_destroy(s->pool);
  mr_config_dir_free(&s->configs);
}
