/* mr-bench load: GPU-bound load through one reconserver (issue 25, items 1
 * and 3): N sessions of a heavy config at once, and a real-time stream's
 * latency alone and beside a heavy neighbour on the same GPU.
 *
 * The bench starts one server with mr-bench's --gpus (and --fake-gpus),
 * generates each case's data as `mr-bench stream` does (stream_data.h),
 * loads it into memory once (stream_session.h), sends one untimed session
 * (the server's first, warming it), then replays the session from N
 * threads at once (stream_replay.h: each a sender and a receiver thread).
 * Run once per GPU list (--gpus 0, 0,1, 0,1,2,3) for the table per GPU
 * count; scripts/device-run.sh's multigpu area does, one file per case and
 * count. The figures are the aggregate rate (every session's images over
 * the time from the first byte to the last CLOSE), the per-session wall
 * times and the per-image latencies (last acquisition of a slice or frame
 * written -> its image decoded; the sessions send as fast as the server
 * reads, so this includes the time spent in the server's input queue). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "gpu_busy.h"
#include "stream_data.h"
#include "stream_replay.h"
#include "stream_server.h"
#include "stream_session.h"
#include "thread_cpu.h"

#define SILENCE_MS 120000
#define MAX_SESSIONS 256

typedef struct load_data {
  const char *tool, *args, *quick_args;
  const char *config;
  const char *unit; /* what one image answers: "slices", "frames" or "scans" */
} load_data;

static const load_data realtime_cg = {
    SIMULATE, "--trajectory golden --matrix 128 --coils 16 --samples 256 --spokes 34 --frames 200",
    "--trajectory golden --matrix 32 --coils 4 --samples 64 --spokes 16 --frames 10",
    "realtime_cg", "frames"};
static const load_data grappa = {ISMRMRD_TOOL, "-m 256 -c 32 -a 4 -w 24 -r 5 -C",
                                 "-m 32 -c 4 -a 2 -w 8 -r 1 -C", "grappa", "slices"};
static const load_data cgsense3d = {
    SIMULATE, "--trajectory radial --3d --matrix 64 --coils 16 --spokes 4096",
    "--trajectory radial --3d --matrix 12 --coils 2 --spokes 100", "iterative", "scans"};
static const load_data realtime = {
    SIMULATE, "--trajectory golden --matrix 128 --coils 16 --samples 256 --spokes 34 --frames 2000",
    "--trajectory golden --matrix 32 --coils 4 --samples 64 --spokes 16 --frames 40",
    "realtime", "frames"};

typedef struct load_case {
  const char *name, *what;
  const load_data *data;
  int sessions; /* default concurrency (mr-bench --sessions overrides) */
} load_case;

static const load_case cases[] = {
    {"realtime_cg", "N real-time CG-SENSE streams at once (golden-angle radial, 128x128, 16 coils, "
                    "34 spokes of 256 samples per frame, 200 frames each, 10 CG iterations)",
     &realtime_cg, 16},
    {"grappa", "N GRAPPA series at once (256x256, 32 coils, R=4, 24 ACS lines, a noise scan, 20 "
               "images each calibrated on its own ACS lines)",
     &grappa, 16},
    {"cgsense3d", "N 3D CG-SENSE scans at once (3D radial, 64^3, 16 coils, 4,096 spokes; config "
                  "iterative: maps estimated, 30 CG iterations)",
     &cgsense3d, 16},
};
enum { NCASES = sizeof cases / sizeof *cases };

/* The real-time stream beside a heavy neighbour (item 3). */
#define NEIGHBOUR_CASE "realtime_neighbour"
#define REALTIME_PER_S 1000.0 /* frames per second sent, as a scanner does */
#define REALTIME_QUICK_PER_S 100.0
#define AFTER_START_SHARE 0.05 /* the stream's first frames, left out of the steady state */

typedef struct load_bench {
  const bench_ctx *ctx;
  bench_json *j;
  char tmp[1024];
  stream_tools tools;
  stream_server server;
  int nfiles;
  int failures;
} load_bench;

/* ---- numbers -------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts v[n] and writes {p50, p99, max} as object key (nearest rank). */
static void write_percentiles(bench_json *j, const char *key, double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  json_open(j, key, '{');
  json_num(j, "p50", n > 0 ? v[(int)ceil(0.5 * n) - 1] : NAN);
  json_num(j, "p99", n > 0 ? v[(int)ceil(0.99 * n) - 1] : NAN);
  json_num(j, "max", n > 0 ? v[n - 1] : NAN);
  json_close(j, '}');
}

/* ---- sessions on threads -------------------------------------------- */

/* One replay thread: one session (or, as a neighbour, one after another
 * until stop is set). */
typedef struct replay {
  const stream_session *s;
  int port;
  double pace_ms;
  double start_ms;      /* bench_now_ms() when it began */
  stream_timing t;      /* the (last) session's timing */
  int rc;
  atomic_int *stop;     /* a neighbour: repeat until set; NULL: once */
  int completed;        /* sessions that ended well */
  double busy_ms;       /* a neighbour: the time its sessions took */
} replay;

/* One raw copy: the session's bytes written the same way to a thread that
 * reads and discards them (stream_replay_raw). */
static void *raw_main(void *arg) {
  replay *r = arg;
  r->start_ms = bench_now_ms();
  r->rc = stream_replay_raw(r->s, &r->t);
  return NULL;
}

static void *replay_main(void *arg) {
  replay *r = arg;
  r->start_ms = bench_now_ms();
  do {
    stream_timing_free(&r->t);
    r->rc = stream_replay_server(r->s, r->port, r->pace_ms, 0, 0, SILENCE_MS, &r->t);
    r->completed += r->rc == 0;
  } while (r->rc == 0 && r->stop != NULL && !atomic_load(r->stop));
  r->busy_ms = bench_now_ms() - r->start_ms;
  return NULL;
}

/* Runs fn on each of r[0..n), a thread each, all at once, and waits for
 * them; how many ran (a thread that cannot start ends the starting). */
static int run_all(replay *r, int n, void *(*fn)(void *)) {
  pthread_t *threads = calloc((size_t)n, sizeof *threads);
  int started = 0;
  while (threads != NULL && started < n &&
         pthread_create(&threads[started], NULL, fn, &r[started]) == 0)
    started++;
  for (int i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  free(threads);
  return started;
}

/* When the last of the first `started` replays that ended well ended
 * (bench_now_ms), t0 when none did. */
static double last_end(const replay *r, int started, double t0) {
  double end = t0;
  for (int i = 0; i < started; i++)
    if (r[i].rc == 0 && r[i].start_ms + r[i].t.wall_ms > end)
      end = r[i].start_ms + r[i].t.wall_ms;
  return end;
}

/* Loads data's session (generating its file first); 0 or -1 with the
 * reason written as "skipped" (no tool) or "error". */
static int load_session(load_bench *b, const load_data *d, stream_session *s) {
  bench_json *j = b->j;
  const char *args = b->ctx->quick ? d->quick_args : d->args;
  char path[1200], why[1024];
  snprintf(path, sizeof path, "%s/data-%d.h5", b->tmp, b->nfiles++);
  double secs;
  if (stream_data_generate(&b->tools, d->tool, args, b->tmp, path, &secs, why, sizeof why) < 0) {
    json_str(j, "skipped", why);
    return -1;
  }
  mr_err err = {0};
  if (stream_session_load(path, d->config, s, &err) < 0) {
    json_str(j, "error", err.msg);
    b->failures++;
    return -1;
  }
  remove(path); /* in memory now; the disk is not needed */
  char data[300];
  snprintf(data, sizeof data, "%s %s", d->tool, args);
  json_str(j, "data", data);
  json_str(j, "config", d->config);
  json_int(j, "bytes_per_session", (long long)s->len);
  json_int(j, d->unit, s->nunits);
  return 0;
}

/* The server's first session of this data, untimed but reported: whatever
 * it prepares on first use is then ready for the timed sessions. */
static int warm_up(load_bench *b, const stream_session *s) {
  stream_timing t;
  int rc = stream_replay_server(s, b->server.port, 0, 0, 0, SILENCE_MS, &t);
  json_num(b->j, "first_session_ms", rc == 0 ? t.wall_ms : NAN);
  if (rc < 0) {
    json_str(b->j, "error", t.error);
    b->failures++;
  }
  stream_timing_free(&t);
  return rc;
}

/* Writes an "errors" member for failed replays; their count. */
static int write_errors(bench_json *j, const replay *r, int n) {
  int failed = 0;
  for (int i = 0; i < n; i++)
    failed += r[i].rc < 0;
  if (failed > 0) {
    json_open(j, "errors", '[');
    for (int i = 0; i < n; i++)
      if (r[i].rc < 0)
        json_str(j, NULL, r[i].t.error);
    json_close(j, ']');
  }
  return failed;
}

/* ---- where the time went -------------------------------------------- */

#define MAX_GPUS 16

/* Each GPU lane's share of the case's wall time spent running tasks (the
 * server's busy counters, after less before): whether the GPUs' lanes were
 * the bound. Nothing when the server gives no counters. */
static void write_lanes_busy(bench_json *j, const double before[][STREAM_LANES],
                             const double after[][STREAM_LANES], int gpus, double wall_ms) {
  if (gpus <= 0 || wall_ms <= 0)
    return;
  json_open(j, "lane_busy_share", '{');
  for (int g = 0; g < gpus && g < MAX_GPUS; g++) {
    char key[16];
    snprintf(key, sizeof key, "gpu%d", g);
    json_open(j, key, '[');
    for (int l = 0; l < STREAM_LANES && after[g][l] >= 0; l++)
      json_num(j, NULL, (after[g][l] - before[g][l]) * 1e3 / wall_ms);
    json_close(j, ']');
  }
  json_close(j, '}');
}

/* The gadgets' time per session, averaged over the case's session lines
 * in the server's log (time a gadget held its stage's thread, waits for a
 * GPU lane included). */
static void write_gadget_times(bench_json *j, stream_server *srv, int sessions) {
  stream_gadgets t;
  if (stream_server_gadget_totals(srv, sessions, 5000, &t) <= 0)
    return;
  json_int(j, "gadget_sessions", t.sessions);
  json_open(j, "gadget_ms_per_session", '{');
  for (int k = 0; k < t.n; k++)
    json_num(j, t.name[k], t.ms[k] / t.sessions);
  json_close(j, '}');
}

/* ---- N sessions at once --------------------------------------------- */

/* The same n sessions at once as raw copies, each to its own discarding
 * thread: the host's ceiling for n loopback connections (its memory copies
 * and TCP), which no server can pass. Writes object "raw_copy"; its wall
 * time, or NAN. */
static double raw_copies(bench_json *j, const stream_session *s, int n) {
  replay *r = calloc((size_t)n, sizeof *r);
  double wall = NAN;
  json_open(j, "raw_copy", '{');
  for (int i = 0; r != NULL && i < n; i++)
    r[i] = (replay){.s = s};
  double t0 = bench_now_ms();
  int started = r != NULL ? run_all(r, n, raw_main) : 0, ok = 0;
  double end = last_end(r, started, t0);
  for (int i = 0; i < started; i++) {
    ok += r[i].rc == 0;
    stream_timing_free(&r[i].t);
  }
  if (ok == n && n > 0) {
    wall = end - t0;
    json_num(j, "wall_ms", wall);
    json_num(j, "mb_per_s", (double)s->len * n / 1e6 / (wall / 1e3));
  } else {
    json_str(j, "error", "the raw copies failed");
  }
  json_close(j, '}');
  free(r);
  return wall;
}

static void run_case(load_bench *b, const load_case *c) {
  bench_json *j = b->j;
  json_open(j, c->name, '{');
  json_str(j, "what", c->what);
  stream_session s;
  int n = b->ctx->sessions > 0 ? b->ctx->sessions : b->ctx->quick ? 4 : c->sessions;
  if (n > MAX_SESSIONS)
    n = MAX_SESSIONS;
  if (load_session(b, c->data, &s) < 0) {
    json_close(j, '}');
    return;
  }
  json_int(j, "sessions", n);
  fprintf(stderr, "mr-bench: load: %s: %d sessions of %.1f MB at once\n", c->name, n,
          s.len / 1e6);
  double raw_wall = raw_copies(j, &s, n);
  b->failures += isnan(raw_wall);
  replay *r = calloc((size_t)n, sizeof *r);
  if (r == NULL || warm_up(b, &s) < 0) {
    if (r == NULL)
      json_str(j, "error", "out of memory");
    free(r);
    stream_session_free(&s);
    json_close(j, '}');
    return;
  }
  /* With --rounds N, N - 1 untimed rounds of the n sessions first: what a
   * server meets once (pinning host memory for n sessions' buffers at once,
   * its memory pools growing) apart from the steady state. */
  int warm_rounds = b->ctx->rounds > 1 ? b->ctx->rounds - 1 : 0;
  int warm_failed = 0;
  if (warm_rounds > 0)
    json_open(j, "warm_round_wall_ms", '[');
  for (int w = 0; w < warm_rounds; w++) {
    for (int i = 0; i < n; i++)
      r[i] = (replay){.s = &s, .port = b->server.port};
    double w0 = bench_now_ms();
    int begun = run_all(r, n, replay_main), ok = begun == n;
    for (int i = 0; i < begun; i++)
      ok &= r[i].rc == 0;
    json_num(j, NULL, ok ? last_end(r, begun, w0) - w0 : NAN);
    warm_failed += !ok;
    for (int i = 0; i < begun; i++)
      stream_timing_free(&r[i].t);
  }
  if (warm_rounds > 0)
    json_close(j, ']');
  if (warm_failed > 0) {
    json_str(j, "warm_round_error", "a session of a warm round failed");
    b->failures++;
  }
  /* The warm-up sessions' lines are not the case's: read past them (a
   * line is written as its session ends, which may be after its CLOSE). */
  stream_gadgets warm_lines;
  stream_server_gadget_totals(&b->server, 1 + warm_rounds * n, 5000, &warm_lines);
  double busy0[MAX_GPUS][STREAM_LANES], busy1[MAX_GPUS][STREAM_LANES];
  int gpus = stream_server_lanes_busy(&b->server, busy0, MAX_GPUS);
  thread_cpu *cpu = calloc(1, sizeof *cpu);
  if (cpu != NULL && thread_cpu_start(cpu, b->server.pid) < 0) {
    free(cpu);
    cpu = NULL;
  }
  gpu_busy busy;
  int sampling = gpu_busy_start(&busy) == 0;
  for (int i = 0; i < n; i++)
    r[i] = (replay){.s = &s, .port = b->server.port};
  double t0 = bench_now_ms();
  int started = run_all(r, n, replay_main);
  thread_cpu_totals cpu_totals = {0};
  if (cpu != NULL)
    thread_cpu_stop(cpu, &cpu_totals);
  free(cpu);
  if (gpus > 0 && stream_server_lanes_busy(&b->server, busy1, MAX_GPUS) != gpus)
    gpus = 0;
  double end = last_end(r, started, t0);
  long long bytes = 0;
  int images = 0, nlat = 0;
  double *lat = malloc((size_t)n * (size_t)s.nunits * sizeof *lat);
  double *wall = malloc((size_t)n * sizeof *wall);
  int nw = 0;
  for (int i = 0; i < started; i++) {
    if (r[i].rc < 0)
      continue;
    bytes += (long long)r[i].t.bytes_sent;
    images += r[i].t.images - r[i].t.unmatched_images;
    if (wall != NULL)
      wall[nw++] = r[i].t.wall_ms;
    for (int u = 0; lat != NULL && u < s.nunits; u++)
      if (!isnan(r[i].t.latency_ms[u]))
        lat[nlat++] = r[i].t.latency_ms[u];
  }
  int ok = started - write_errors(j, r, started);
  if (started < n)
    json_str(j, "error", "cannot start a thread for every session");
  b->failures += n - ok;
  double secs = (end - t0) / 1e3;
  json_int(j, "sessions_ok", ok);
  json_num(j, "wall_ms", end - t0);
  json_num(j, "sessions_per_s", ok / secs);
  char per_s[64];
  snprintf(per_s, sizeof per_s, "%s_per_s", c->data->unit);
  if (strcmp(c->data->unit, "scans") != 0)
    json_num(j, per_s, images / secs);
  json_int(j, "images", images);
  json_num(j, "mb_per_s", (double)bytes / 1e6 / secs);
  if (!isnan(raw_wall) && ok == n)
    json_num(j, "ratio_to_raw", (end - t0) / raw_wall);
  if (lat != NULL && wall != NULL) {
    write_percentiles(j, "session_ms", wall, nw);
    write_percentiles(j, "latency_ms", lat, nlat);
  }
  write_lanes_busy(j, (const double(*)[STREAM_LANES])busy0, (const double(*)[STREAM_LANES])busy1,
                   gpus, end - t0);
  if (sampling)
    gpu_busy_stop(&busy, j);
  thread_cpu_write(j, &cpu_totals, end - t0);
  write_gadget_times(j, &b->server, started);
  for (int i = 0; i < n; i++)
    stream_timing_free(&r[i].t);
  free(lat);
  free(wall);
  free(r);
  stream_session_free(&s);
  json_close(j, '}');
}

/* ---- a real-time stream beside a heavy neighbour -------------------- */

/* The paced real-time stream once, with neighbour (NULL: alone) replayed
 * over and over on its own thread meanwhile; writes object key. */
static void realtime_beside(load_bench *b, const char *key, const stream_session *rt,
                            double pace_ms, const stream_session *neighbour, double alone_p99,
                            double *p99) {
  bench_json *j = b->j;
  atomic_int stop;
  atomic_init(&stop, 0);
  replay nb = {.s = neighbour, .port = b->server.port, .stop = &stop};
  pthread_t thread;
  int with = neighbour != NULL;
  if (with && pthread_create(&thread, NULL, replay_main, &nb) != 0) {
    json_open(j, key, '{');
    json_str(j, "error", "cannot start the neighbour's thread");
    json_close(j, '}');
    b->failures++;
    return;
  }
  if (with) /* the neighbour's first data on the GPU before the stream starts */
    usleep(b->ctx->quick ? 20000 : 200000);
  replay r = {.s = rt, .port = b->server.port, .pace_ms = pace_ms};
  replay_main(&r);
  atomic_store(&stop, 1);
  if (with)
    pthread_join(thread, NULL);
  json_open(j, key, '{');
  *p99 = NAN;
  if (write_errors(j, &r, 1) + (with ? write_errors(j, &nb, 1) : 0) > 0) {
    b->failures++;
  } else {
    /* The stream's start apart: a frame that queues behind a task already
     * on the lane a new real-time session takes delays the frames after it
     * until the backlog drains; latency_after_start_ms leaves out the first
     * AFTER_START_SHARE of the frames, so a stall at the start and one in
     * the steady state read apart. */
    int n = 0, n_after = 0, skip = (int)ceil(AFTER_START_SHARE * rt->nunits);
    double *lat = malloc((size_t)rt->nunits * sizeof *lat);
    double *after = malloc((size_t)rt->nunits * sizeof *after);
    for (int u = 0; lat != NULL && after != NULL && u < rt->nunits; u++)
      if (!isnan(r.t.latency_ms[u])) {
        lat[n++] = r.t.latency_ms[u];
        if (u >= skip)
          after[n_after++] = r.t.latency_ms[u];
      }
    json_num(j, "frames_per_s", (r.t.images - r.t.unmatched_images) / (r.t.wall_ms / 1e3));
    if (lat != NULL && n > 0) {
      write_percentiles(j, "latency_ms", lat, n);
      *p99 = lat[(int)ceil(0.99 * n) - 1];
      stream_write_late_units(j, rt, &r.t, *p99);
    }
    if (after != NULL && n_after > 0) {
      json_int(j, "after_start_frames_left_out", skip);
      write_percentiles(j, "latency_after_start_ms", after, n_after);
    }
    free(lat);
    free(after);
    if (with) {
      json_int(j, "neighbour_sessions", nb.completed);
      json_num(j, "neighbour_sessions_per_s", nb.completed / (nb.busy_ms / 1e3));
      json_num(j, "p99_ratio_to_alone", *p99 / alone_p99);
    }
  }
  json_close(j, '}');
  stream_timing_free(&r.t);
  stream_timing_free(&nb.t);
}

static void run_neighbour(load_bench *b) {
  bench_json *j = b->j;
  double per_s = b->ctx->quick ? REALTIME_QUICK_PER_S : REALTIME_PER_S;
  json_open(j, NEIGHBOUR_CASE, '{');
  json_str(j, "what", "one real-time gridding stream (config realtime, 128x128, 16 coils) paced "
                      "as a scanner sends it, alone and then beside a heavy session repeated "
                      "without pause on the same server (a GRAPPA series, a 3D CG-SENSE scan; "
                      "with one GPU, the same GPU): the stream's frame latency");
  json_num(j, "offered_per_s", per_s);
  if (mr_pool_gpu_count(b->ctx->pool) > 1)
    json_str(j, "note", "the server has several GPUs: the neighbour may be placed on another "
                        "GPU than the stream (run with --gpus 0 for one shared GPU)");
  stream_session rt, heavy[2];
  static const char *const names[2] = {"grappa", "cgsense3d"};
  const load_data *data[2] = {&grappa, &cgsense3d};
  int have[2] = {0, 0};
  json_open(j, "realtime", '{');
  int ok = load_session(b, &realtime, &rt) == 0 && warm_up(b, &rt) == 0;
  json_close(j, '}');
  json_open(j, "neighbours", '{');
  for (int k = 0; k < 2 && ok; k++) {
    json_open(j, names[k], '{');
    have[k] = load_session(b, data[k], &heavy[k]) == 0;
    if (have[k] && warm_up(b, &heavy[k]) < 0) {
      stream_session_free(&heavy[k]);
      have[k] = 0;
    }
    json_close(j, '}');
  }
  json_close(j, '}');
  if (ok) {
    double alone, p99;
    realtime_beside(b, "alone", &rt, 1e3 / per_s, NULL, NAN, &alone);
    for (int k = 0; k < 2; k++) {
      char key[64];
      snprintf(key, sizeof key, "beside_%s", names[k]);
      if (have[k])
        realtime_beside(b, key, &rt, 1e3 / per_s, &heavy[k], alone, &p99);
    }
    json_open(j, "target", '{');
    json_str(j, "p99_ratio_to_alone", "<= 2 (H100)");
    json_str(j, "latency_p99_ms", "<= 10 (H100), beside either neighbour");
    json_close(j, '}');
    stream_session_free(&rt);
  }
  for (int k = 0; k < 2; k++)
    if (have[k])
      stream_session_free(&heavy[k]);
  json_close(j, '}');
}

/* ---- the subcommand ------------------------------------------------- */

int bench_load(const bench_ctx *ctx) {
  bench_json *j = ctx->json;
  load_bench b = {.ctx = ctx, .j = j};
  stream_tools_find(ctx->server, &b.tools);
  const char *configs = stream_configs_dir(ctx->configs);
  mr_device *cpu, *gpu;
  if (bench_devices(ctx, &cpu, &gpu) < 0)
    return -1;
  bench_devices_release(ctx, cpu, gpu);
  const char *gpus = ctx->gpus != NULL ? ctx->gpus : "all";
  json_int(j, "gpu_count", mr_pool_gpu_count(ctx->pool));
  if (ctx->fake_gpus > 0)
    json_int(j, "fake_gpus", ctx->fake_gpus);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_str(j, "host", host);
  json_str(j, "server", b.tools.server);
  if (ctx->quick)
    json_str(j, "quick", "every case shrunk (see its \"data\"): a smoke run, not a measurement");
  json_str(j, "method",
           "one reconserver with --gpus as given; each case's session (the bytes reconclient "
           "send writes) is built in memory from generated data, sent once untimed "
           "(first_session_ms), then replayed by N client threads at once, each writing as fast "
           "as the server reads while a receiver thread decodes the images; wall_ms: the first "
           "byte to the last CLOSE; rates: every session's images over wall_ms; session_ms: each "
           "session's first byte to its CLOSE; latency_ms: a slice's/frame's last acquisition "
           "written -> its image decoded, over all sessions (input queueing included); raw_copy: "
           "the same N sessions written at once the same way to threads that read and discard "
           "them, the host's ceiling for N loopback connections; ratio_to_raw: wall_ms over "
           "raw_copy's");
  static const char *const names[] = {"realtime_cg", "grappa", "cgsense3d", NEIGHBOUR_CASE};
  char unknown[64];
  if (bench_unknown_case(ctx->cases, names, 4, unknown, sizeof unknown)) {
    char msg[200];
    snprintf(msg, sizeof msg, "--case: no case '%s' (cases: realtime_cg, grappa, cgsense3d, "
                              NEIGHBOUR_CASE ")", unknown);
    json_str(j, "error", msg);
    fprintf(stderr, "mr-bench: load: %s\n", msg);
    return -1;
  }
  if (access(b.tools.server, X_OK) != 0 || access(b.tools.client, X_OK) != 0) {
    json_str(j, "error", "reconserver or reconclient not found (build them, or give --server)");
    return -1;
  }
  const char *tmpdir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(b.tmp, sizeof b.tmp, "%s/mr-bench-load-XXXXXX", tmpdir);
  if (mkdtemp(b.tmp) == NULL) {
    json_str(j, "error", "cannot make a temporary directory");
    return -1;
  }
  char fake[16], lanes[16], log[1100], why[1024];
  snprintf(fake, sizeof fake, "%d", ctx->fake_gpus);
  snprintf(lanes, sizeof lanes, "%d", ctx->gpu_lanes);
  /* --http for the lanes' busy counters (/metrics). */
  const char *extra[7] = {"--http", "127.0.0.1:0"};
  int nextra = 2;
  if (ctx->fake_gpus > 0) {
    extra[nextra++] = "--fake-gpus";
    extra[nextra++] = fake;
  }
  if (ctx->gpu_lanes > 0) {
    extra[nextra++] = "--gpu-lanes";
    extra[nextra++] = lanes;
  }
  extra[nextra] = NULL;
  snprintf(log, sizeof log, "%s/reconserver.log", b.tmp);
  char args[300];
  snprintf(args, sizeof args, "--gpus %s%s%s%s%s", gpus, ctx->fake_gpus > 0 ? " --fake-gpus " : "",
           ctx->fake_gpus > 0 ? fake : "", ctx->gpu_lanes > 0 ? " --gpu-lanes " : "",
           ctx->gpu_lanes > 0 ? lanes : "");
  json_str(j, "server_args", args);
  if (stream_server_start(&b.server, b.tools.server, configs, gpus, extra, log, why,
                          sizeof why) < 0) {
    json_str(j, "error", why);
    b.failures++;
  } else {
    json_open(j, "cases", '{');
    for (int i = 0; i < NCASES; i++)
      if (bench_listed(ctx->cases, cases[i].name))
        run_case(&b, &cases[i]);
    if (bench_listed(ctx->cases, NEIGHBOUR_CASE))
      run_neighbour(&b);
    json_close(j, '}');
    stream_server_stop(&b.server);
  }
  if (b.failures == 0)
    stream_remove_tree(b.tmp);
  else
    json_str(j, "kept_for_inspection", b.tmp);
  return b.failures == 0 ? 0 : -1;
}
