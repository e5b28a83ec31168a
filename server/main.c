/* reconserver: the reconstruction daemon. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"

#include "cgroup.h"
#include "config_dir.h"
#include "log.h"
#include "loops.h"
#include "pool.h"
#include "query.h"
#include "registry.h"
#include "server.h"
#include "external_program.h"
#include "state_dir.h"

#ifndef MR_CONFIG_DIR
#define MR_CONFIG_DIR "configs"
#endif
#ifndef MR_VERSION
#define MR_VERSION "0.0.0"
#endif

static void usage(FILE *out) {
  fprintf(out,
          "usage: reconserver [options]\n"
          "  --listen ADDR:PORT      where to listen (default 127.0.0.1:9002; [::]:PORT for IPv6)\n"
          "  --http ADDR:PORT        serve /healthz, /readyz and /metrics (Prometheus) over HTTP\n"
          "                          there (default: off)\n"
          "  --configs DIR           pipeline configs (default %s)\n"
          "  --log-level LEVEL       error, warn, info (default) or debug\n"
          "  --max-connections N     concurrent clients (default 64)\n"
          "  --loops N               loop threads moving connections' bytes (default: one per\n"
          "                          4 CPUs, 1 to 8)\n"
          "  --warm DIR              before /readyz says ready, replay each recorded session in\n"
          "                          DIR (a client's bytes, CONFIG to CLOSE: ismrmrd_dump's files)\n"
          "                          to this server once per GPU, so that first scans are warm\n"
          "  --gpus all|none|0,1     GPUs to use (default all; none: CPU only)\n"
          "  --fake-gpus N           tests: N pretend GPUs running the CPU's code, placed and\n"
          "                          reported as GPUs 0..N-1 (--gpus picks among them)\n"
          "  --fake-gpu-memory MIB   memory of each fake GPU (default 1024)\n"
          "  --gpu-lanes N           worker threads with their own streams per GPU, so that\n"
          "                          stages and sessions overlap on it (default 4, at most 8;\n"
          "                          each GPU has one more, for real-time sessions)\n"
          "  --drain-timeout MS      after SIGTERM, how long running scans may take (default 30000)\n"
          "  --handshake-timeout MS  from connecting to the config (default 30000)\n"
          "  --idle-timeout MS       silence allowed between two messages of a client (default 120000)\n"
          "  --write-timeout MS      a client reading none of its images that long is dropped\n"
          "                          (default 60000)\n"
          "  --grace MS              after an error, how long to wait for the client's CLOSE;\n"
          "                          after ours, for its EOF (default 5000)\n"
          "  --memory-budget MIB     k-space, images and compute buffers of all sessions together\n"
          "                          (default: half the machine's memory, or of the container's\n"
          "                          cgroup limit; 0: unlimited)\n"
          "  --state-dir DIR         where stored noise measurements and raw dumps live\n"
          "                          (created; default: none, nothing is stored)\n"
          "  --external-dir DIR      programs the external gadget may start (execute: NAME),\n"
          "                          by name (default: none, execute is refused)\n"
          "  --allow-script-external a client's own CONFIG_SCRIPT may use the external gadget\n"
          "                          (default: only installed configs may: it connects to any\n"
          "                          address and starts programs from --external-dir)\n"
          "  --noise-max-entries N   stored noise measurements kept (default 256)\n"
          "  --noise-max-age-hours H older ones are not used (default 168)\n"
          "  --dump-max-mib M        raw stream dumps together (default 1024)\n"
          "  --limit NAME=VALUE      a bound on what clients send (see --limits)\n"
          "  --limits                print every limit and its value, then exit\n"
          "  --describe              print every gadget and its parameters, then exit\n"
          "  --info                  print version, configs and compute devices, then exit\n"
          "  --version               print the version, then exit\n",
          MR_CONFIG_DIR);
}

static void log_pool_line(void *ctx, const char *line) {
  (void)ctx;
  mr_log(MR_LOG_INFO, "%s", line);
}

/* A line an external step's program wrote to its stderr (mr_log escapes it). */
static void log_external_line(const char *who, const char *line) {
  mr_log(MR_LOG_WARN, "external %s: %s", who, line);
}

static void print_limit(void *ctx, const char *name, uint64_t value) {
  fprintf(ctx, "%-20s %llu\n", name, (unsigned long long)value);
}

static int parse_int(const char *flag, const char *text, int min, int max, int *out) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "reconserver: %s must be an integer in %d..%d, got '%s'\n", flag, min, max,
            text);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  mr_server_options opt = {
      .listen = "127.0.0.1:9002",
      .max_connections = 64,
      .drain_timeout_ms = 30000,
      .close_grace_ms = 5000,
      .write_timeout_ms = 60000,
  };
  mr_limits limits = mr_limits_default;
  mr_server_env env = {.limits = &limits, .version = MR_VERSION, .handshake_timeout_ms = 30000,
                       .idle_timeout_ms = 120000, .error_grace_ms = 5000};
  /* Inside a container, its cgroup's limits rather than the host's. */
  uint64_t memory;
  int cpus;
  mr_cgroup_available("", &memory, &cpus);
  opt.loops = mr_loops_default(cpus);
  int budget_mib = (int)(memory / 2 >> 20);
  const char *configs_path = MR_CONFIG_DIR, *gpus = "all", *state_dir = NULL;
  const char *external_dir = NULL;
  int gpu_lanes = 0, fake_gpus = 0, fake_gpu_mib = 1024;
  mr_state_limits state_limits = mr_state_limits_default;
  int noise_entries = state_limits.noise_max_entries;
  int noise_hours = (int)(state_limits.noise_max_age_s / 3600);
  int dump_mib = (int)(state_limits.dump_max_bytes >> 20);
  int describe = 0, info = 0, show_limits = 0;
  enum { OPT_LISTEN = 256, OPT_HTTP, OPT_CONFIGS, OPT_LOG, OPT_MAXCONN, OPT_GPUS, OPT_DRAIN, OPT_HANDSHAKE,
         OPT_IDLE, OPT_WRITE, OPT_GRACE, OPT_BUDGET, OPT_LIMIT, OPT_LIMITS, OPT_DESCRIBE, OPT_INFO,
         OPT_VERSION, OPT_HELP, OPT_STATE_DIR, OPT_NOISE_ENTRIES, OPT_NOISE_HOURS, OPT_DUMP_MIB,
         OPT_GPU_LANES, OPT_EXTERNAL_DIR, OPT_SCRIPT_EXTERNAL, OPT_FAKE_GPUS,
         OPT_FAKE_GPU_MEMORY, OPT_LOOPS, OPT_WARM };
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"http", required_argument, NULL, OPT_HTTP},
      {"configs", required_argument, NULL, OPT_CONFIGS},
      {"log-level", required_argument, NULL, OPT_LOG},
      {"max-connections", required_argument, NULL, OPT_MAXCONN},
      {"loops", required_argument, NULL, OPT_LOOPS},
      {"warm", required_argument, NULL, OPT_WARM},
      {"gpus", required_argument, NULL, OPT_GPUS},
      {"gpu-lanes", required_argument, NULL, OPT_GPU_LANES},
      {"fake-gpus", required_argument, NULL, OPT_FAKE_GPUS},
      {"fake-gpu-memory", required_argument, NULL, OPT_FAKE_GPU_MEMORY},
      {"drain-timeout", required_argument, NULL, OPT_DRAIN},
      {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE},
      {"idle-timeout", required_argument, NULL, OPT_IDLE},
      {"write-timeout", required_argument, NULL, OPT_WRITE},
      {"grace", required_argument, NULL, OPT_GRACE},
      {"memory-budget", required_argument, NULL, OPT_BUDGET},
      {"limit", required_argument, NULL, OPT_LIMIT},
      {"state-dir", required_argument, NULL, OPT_STATE_DIR},
      {"external-dir", required_argument, NULL, OPT_EXTERNAL_DIR},
      {"allow-script-external", no_argument, NULL, OPT_SCRIPT_EXTERNAL},
      {"noise-max-entries", required_argument, NULL, OPT_NOISE_ENTRIES},
      {"noise-max-age-hours", required_argument, NULL, OPT_NOISE_HOURS},
      {"dump-max-mib", required_argument, NULL, OPT_DUMP_MIB},
      {"limits", no_argument, NULL, OPT_LIMITS},
      {"describe", no_argument, NULL, OPT_DESCRIBE},
      {"info", no_argument, NULL, OPT_INFO},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  int ch;
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (ch) {
    case OPT_LISTEN:
      opt.listen = optarg;
      break;
    case OPT_HTTP:
      opt.http = optarg;
      break;
    case OPT_CONFIGS:
      configs_path = optarg;
      break;
    case OPT_LOG: {
      int level = mr_log_level_parse(optarg);
      if (level < 0) {
        fprintf(stderr, "reconserver: --log-level must be error, warn, info or debug\n");
        return 2;
      }
      mr_log_set_level((mr_log_level)level);
      break;
    }
    case OPT_MAXCONN:
      if (parse_int("--max-connections", optarg, 1, 100000, &opt.max_connections) < 0)
        return 2;
      break;
    case OPT_LOOPS:
      if (parse_int("--loops", optarg, 1, 64, &opt.loops) < 0)
        return 2;
      break;
    case OPT_WARM:
      opt.warm_dir = optarg;
      break;
    case OPT_GPUS:
      gpus = optarg;
      break;
    case OPT_GPU_LANES:
      if (parse_int("--gpu-lanes", optarg, 1, MR_GPU_LANES_MAX, &gpu_lanes) < 0)
        return 2;
      break;
    case OPT_FAKE_GPUS:
      if (parse_int("--fake-gpus", optarg, 1, 64, &fake_gpus) < 0)
        return 2;
      break;
    case OPT_FAKE_GPU_MEMORY:
      if (parse_int("--fake-gpu-memory", optarg, 1, INT32_MAX, &fake_gpu_mib) < 0)
        return 2;
      break;
    case OPT_DRAIN:
      if (parse_int("--drain-timeout", optarg, 0, 86400000, &opt.drain_timeout_ms) < 0)
        return 2;
      break;
    case OPT_HANDSHAKE:
      if (parse_int("--handshake-timeout", optarg, 1, 86400000, &env.handshake_timeout_ms) < 0)
        return 2;
      break;
    case OPT_IDLE:
      if (parse_int("--idle-timeout", optarg, 1, 86400000, &env.idle_timeout_ms) < 0)
        return 2;
      break;
    case OPT_WRITE:
      if (parse_int("--write-timeout", optarg, 1, 86400000, &opt.write_timeout_ms) < 0)
        return 2;
      break;
    case OPT_GRACE:
      if (parse_int("--grace", optarg, 0, 600000, &opt.close_grace_ms) < 0)
        return 2;
      env.error_grace_ms = opt.close_grace_ms;
      break;
    case OPT_BUDGET:
      if (parse_int("--memory-budget", optarg, 0, INT32_MAX, &budget_mib) < 0)
        return 2;
      break;
    case OPT_LIMIT: {
      char name[64];
      const char *eq = strchr(optarg, '=');
      size_t n = eq != NULL ? (size_t)(eq - optarg) : 0;
      if (eq == NULL || n >= sizeof name) {
        fprintf(stderr, "reconserver: --limit expects NAME=VALUE, got '%s'\n", optarg);
        return 2;
      }
      memcpy(name, optarg, n);
      name[n] = '\0';
      if (mr_limits_set(&limits, name, eq + 1) < 0) {
        fprintf(stderr, "reconserver: --limit %s: unknown limit or bad value (see --limits)\n",
                optarg);
        return 2;
      }
      break;
    }
    case OPT_LIMITS:
      show_limits = 1;
      break;
    case OPT_STATE_DIR:
      state_dir = optarg;
      break;
    case OPT_EXTERNAL_DIR:
      external_dir = optarg;
      break;
    case OPT_SCRIPT_EXTERNAL:
      env.script_external = 1;
      break;
    case OPT_NOISE_ENTRIES:
      if (parse_int("--noise-max-entries", optarg, 1, 1000000, &noise_entries) < 0)
        return 2;
      break;
    case OPT_NOISE_HOURS:
      if (parse_int("--noise-max-age-hours", optarg, 1, 24 * 365 * 10, &noise_hours) < 0)
        return 2;
      break;
    case OPT_DUMP_MIB:
      if (parse_int("--dump-max-mib", optarg, 1, INT32_MAX, &dump_mib) < 0)
        return 2;
      break;
    case OPT_DESCRIBE:
      describe = 1;
      break;
    case OPT_INFO:
      info = 1;
      break;
    case OPT_VERSION:
      printf("reconserver %s\n", MR_VERSION);
      return 0;
    case 'h':
    case OPT_HELP:
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "reconserver: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (describe) {
    mr_registry_describe(stdout);
    return 0;
  }
  if (show_limits) {
    mr_limits_each(&limits, print_limit, stdout);
    return 0;
  }
  mr_budget_set((uint64_t)budget_mib << 20);
  mr_limits_install(&limits); /* for checks past the decoder (dicom_out's planes) */

  mr_err err = {0};
  int rc = mr_external_dir_set(external_dir, &err);
  if (rc < 0) {
    fprintf(stderr, "reconserver: --external-dir: %s\n", mr_err_text(&err, rc));
    return 1;
  }
  mr_external_log_set(log_external_line);
  mr_config_dir configs;
  rc = mr_config_dir_load(configs_path, &configs, &err);
  if (rc < 0) {
    fprintf(stderr, "reconserver: %s\n", mr_err_text(&err, rc));
    return 1;
  }
  state_limits.noise_max_entries = noise_entries;
  state_limits.noise_max_age_s = (int64_t)noise_hours * 3600;
  state_limits.dump_max_bytes = (uint64_t)dump_mib << 20;
  if (state_dir != NULL && (rc = mr_state_dir_open(state_dir, &state_limits, &err)) < 0) {
    fprintf(stderr, "reconserver: --state-dir: %s\n", mr_err_text(&err, rc));
    mr_config_dir_free(&configs);
    return 1;
  }
  mr_pool_opts popts = {.gpus = gpus, .cpu_threads = cpus, .gpu_lanes = gpu_lanes,
                        .fake_gpus = fake_gpus,
                        .fake_gpu_memory = (size_t)fake_gpu_mib << 20,
                        .log = log_pool_line};
  mr_pool *pool = NULL;
  if ((rc = mr_pool_create(&popts, &pool, &err)) < 0) {
    fprintf(stderr, "reconserver: --gpus %s: %s\n", gpus, mr_err_text(&err, rc));
    mr_config_dir_free(&configs);
    mr_state_dir_close();
    return 1;
  }
  env.configs = &configs;
  env.pool = pool;
  if (info) {
    size_t len;
    char *text = mr_query_answer(&env, "gadgetron::info", &len);
    fputs(text != NULL ? text : "out of memory\n", stdout);
    free(text);
  } else {
    rc = mr_server_run(&opt, &env, &err);
  }
  mr_pool_destroy(pool);
  mr_config_dir_free(&configs);
  mr_state_dir_close();
  if (rc < 0) {
    fprintf(stderr, "reconserver: %s\n", mr_err_text(&err, rc));
    return 1;
  }
  return 0;
}
