/* mr-bench stream: whole sessions end to end through reconserver on
 * loopback, against a raw copy of the same bytes (issue 11, part 5).
 *
 * The bench starts its own servers (a GPU server with mr-bench's --gpus,
 * all by default, when the pool has a GPU, a CPU server `--gpus none`),
 * generates each case's data
 * with the Debian/our own tools into a temporary directory, loads it into
 * memory as the bytes `reconclient send` would write (stream_session.h),
 * and only then times: per case a raw loopback copy of those bytes to a
 * discarding sink, then the session through each server (stream_replay.h),
 * each the best of N rounds by wall time. The cartesian case also runs the
 * real `reconclient send` from HDF5, what a user sees.
 *
 * A case whose config the servers lack, or whose data cannot be made with
 * the tools of this build, is reported as "skipped" with the reason; a
 * session that fails is reported as "error" and makes the bench exit 1.
 * The targets appear as "target" members beside the figures, never
 * asserted. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "stream_data.h"
#include "stream_replay.h"
#include "stream_server.h"
#include "stream_session.h"
#include "thread_cpu.h"
#include "test_support.h"

#define SILENCE_MS 120000
/* Sending stops at the next image boundary after this long (then CLOSE):
 * a slow server (CG-SENSE on the CPU) must not hold the bench for many
 * minutes; a session cut short is reported as such, with one round. */
#define SEND_CAP_MS 20000.0
/* A server still busy this long after a cut-short session's CLOSE is left
 * (the bench disconnects; the server cancels the session). */
#define DRAIN_MS 20000.0
/* The server's --warm session: the case's first this many slices/frames
 * (volumes: WARM_VOLUMES, each a whole calibrated recon). */
#define WARM_UNITS 20
#define WARM_VOLUMES 2
/* No further rounds after a round this long: its figure is stable enough. */
#define LONG_ROUND_MS 20000.0

enum { GPU, CPU, NSERVERS };
static const char *const server_names[NSERVERS] = {"gpu", "cpu"};

typedef struct target {
  const char *key, *value;
} target;

typedef struct stream_case {
  const char *name, *what;
  const char *config;
  const char *unit;  /* what one image answers: "slices" or "frames"; or "volumes" */
  const char *tool;  /* ISMRMRD_TOOL or SIMULATE */
  const char *args, *quick_args;
  int cpu_only;
  int reconclient;   /* also time `reconclient send` of the file */
  target gpu_targets[3], cpu_targets[2];
  target speedup_target; /* GPU over CPU */
  /* Real-time cases: the GPU server once more with the frames sent at
   * this rate (a scanner's), where latency is measured; 0: not. */
  double pace_per_s;
  target paced_targets[2];
  /* Volumes (an fMRI series): the images each answers (full, --quick) */
  int volume_images, quick_volume_images;
  /* Paced, the whole session (no 20 s cap: a scanner's minutes); not with
   * --quick. Such a case runs in full only when --case names it (it takes
   * minutes); --quick runs it always. */
  int paced_whole;
} stream_case;

/* The real-time cases' session (realtime, realtime_cg and realtime_cs read
 * the same frames), full and --quick. */
#define REALTIME_DATA \
  "--trajectory golden --matrix 128 --coils 16 --samples 256 --spokes 34 --frames 1000"
#define REALTIME_QUICK_DATA \
  "--trajectory golden --matrix 32 --coils 4 --samples 64 --spokes 16 --frames 20"

static const stream_case cases[] = {
    {"cartesian", "256x256, 32 coils, readout oversampling 2, 10 repetitions (one slice image each)",
     "cartesian", "slices", ISMRMRD_TOOL, "-m 256 -c 32 -r 10", "-m 64 -c 4 -r 2", 0, 1,
     {{"ratio_to_raw", "<= 1.5 (H100)"}},
     {{NULL, NULL}},
     {"gpu_speedup_over_cpu", ">= 3 (H100)"}, 0, {{NULL, NULL}}, 0, 0, 0},
    {"cartesian_external",
     "the cartesian case's data and chain with a no-op external step after it: every image to "
     "the example Python step (examples/external/mrd_step.py, started per session from "
     "--external-dir, its start included) and back untouched; compare with the cartesian case",
     "cartesian_external", "slices", ISMRMRD_TOOL, "-m 256 -c 32 -r 10", "-m 64 -c 4 -r 2", 0, 0,
     {{NULL, NULL}},
     {{NULL, NULL}},
     {NULL, NULL}, 0, {{NULL, NULL}}, 0, 0, 0},
    {"cartesian_cpu4", "256x256, 32 coils, readout oversampling 2, 4 repetitions, CPU server only",
     "cartesian", "slices", ISMRMRD_TOOL, "-m 256 -c 32 -r 4", "-m 64 -c 4 -r 2", 1, 0,
     {{NULL, NULL}},
     {{"ratio_to_raw", "<= 2.5 (2-core CPU machine)"}},
     {NULL, NULL}, 0, {{NULL, NULL}}, 0, 0, 0},
    {"grappa",
     "256x256, 32 coils, R=4, 24 ACS lines, readout oversampling 2, a noise scan, 20 images: "
     "the tool writes R shifted repetitions per -r, each with its own ACS lines, so each image "
     "is calibrated, as a slice would be",
     "grappa", "slices", ISMRMRD_TOOL, "-m 256 -c 32 -a 4 -w 24 -r 5 -C",
     "-m 64 -c 8 -a 4 -w 16 -r 1 -C", 0, 0,
     {{"last_acquisition_to_last_image_ms", "<= 10 (H100)"}, {"ratio_to_raw", "<= 1.5 (H100)"}},
     {{NULL, NULL}},
     {NULL, NULL}, 0, {{NULL, NULL}}, 0, 0, 0},
    {"realtime", "golden-angle radial, 128x128, 16 coils, 256 samples per spoke, 34 spokes per "
                 "frame, 1,000 frames; gridding",
     "realtime", "frames", SIMULATE,
     REALTIME_DATA, REALTIME_QUICK_DATA, 0, 0,
     {{"frames_per_s", ">= 1000 (H100)"}},
     {{NULL, NULL}},
     {NULL, NULL},
     1000,
     {{"latency_p99_ms", "<= 5 (H100), frames sent at 1,000 per second"}}, 0, 0, 0},
    {"realtime_cg", "the realtime data through CG-SENSE (10 iterations)", "realtime_cg", "frames",
     SIMULATE,
     REALTIME_DATA, REALTIME_QUICK_DATA, 0, 0,
     {{"frames_per_s", ">= 200 (H100)"}},
     {{NULL, NULL}},
     {NULL, NULL},
     200,
     {{"latency_p99_ms", "<= 15 (H100), frames sent at 200 per second"}}, 0, 0, 0},
    {"realtime_cs", "the realtime data through compressed sensing: TV with the causal temporal "
                    "prior against the last frame (FISTA, 30 iterations), maps tracking",
     "realtime_cs", "frames", SIMULATE,
     REALTIME_DATA, REALTIME_QUICK_DATA, 0, 0,
     {{"frames_per_s", ">= 200 (H100)"}},
     {{NULL, NULL}},
     {NULL, NULL},
     200,
     {{"latency_p99_ms", "<= 15 (H100), frames sent at 200 per second"}}, 0, 0, 0},
    {"fmri",
     "an fMRI series: single-shot EPI 64x64 (readout oversampled 2, ramp-sampled, odd/even "
     "error), 32 coils, in-plane R 2, multiband 4 with CAIPI FOV/3, 60 slices (15 groups) per "
     "volume, 100 volumes, the single-band reference of every slice once before the first; "
     "config epi_sms, 60 images per volume",
     "epi_sms", "volumes", SIMULATE,
     "--trajectory epi --ramp --ghost 0.6,3 --matrix 64 --coils 32 --inplane-accel 2 "
     "--multiband 4 --caipi 3 --slices 60 --volumes 100",
     "--trajectory epi --ramp --ghost 0.6,3 --matrix 32 --coils 8 --inplane-accel 2 "
     "--multiband 2 --caipi 2 --slices 4 --volumes 3",
     0, 0,
     {{"volumes_per_s", ">= 20 (H100), unpaced"}},
     {{NULL, NULL}},
     {NULL, NULL},
     1,
     {{"latency_p99_ms", "<= 50 (H100, GPU server), one volume per TR of 1 s; under 1000 "
                         "(keeping up with real time) for the CPU server on the 2-core CI "
                         "machine (mr-bench stream --case fmri --gpus none)"}},
     60, 4, 1},
};
enum { NCASES = sizeof cases / sizeof *cases };

/* A generated data file, shared by the cases that ask for the same one. */
typedef struct dataset_file {
  char args[256]; /* the generator's arguments */
  char path[PATH_MAX];
  double generate_s;
} dataset_file;

typedef struct stream_bench {
  const bench_ctx *ctx;
  bench_json *j;
  int rounds;
  char tmp[1024];
  stream_tools tools;
  stream_server servers[NSERVERS];
  int running[NSERVERS];
  dataset_file files[NCASES];
  int nfiles;
  int failures; /* sessions that failed: the exit status */
  /* How the servers are started, for a fresh one per case. */
  const char *configs, *gpus[NSERVERS], *ext;
  int starts; /* servers started so far: each its own log file */
  char no_external[PATH_MAX]; /* why cartesian_external cannot run, or "" */
} stream_bench;

/* ---- paths ---------------------------------------------------------- */

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- numbers -------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile q in (0, 1] of sorted v[n]; NaN when n is 0. */
static double percentile(const double *v, int n, double q) {
  if (n == 0)
    return NAN;
  int k = (int)ceil(q * n) - 1;
  return v[k < 0 ? 0 : k];
}

static void write_targets(bench_json *j, const target *t, int n) {
  if (t[0].key == NULL)
    return;
  json_open(j, "target", '{');
  for (int i = 0; i < n && t[i].key != NULL; i++)
    json_str(j, t[i].key, t[i].value);
  json_close(j, '}');
}

/* ---- data ----------------------------------------------------------- */

/* Makes (or finds already made) the case's data file; NULL with a reason
 * in why when the tool is missing or fails. */
static const dataset_file *dataset_for(stream_bench *b, const stream_case *c, char *why,
                                       size_t why_size) {
  const char *args = b->ctx->quick ? c->quick_args : c->args;
  char key[256];
  snprintf(key, sizeof key, "%s %s", c->tool, args);
  for (int i = 0; i < b->nfiles; i++)
    if (strcmp(b->files[i].args, key) == 0)
      return &b->files[i];
  dataset_file *f = &b->files[b->nfiles];
  snprintf(f->args, sizeof f->args, "%s", key);
  snprintf(f->path, sizeof f->path, "%s/data-%d.h5", b->tmp, b->nfiles);
  if (stream_data_generate(&b->tools, c->tool, args, b->tmp, f->path, &f->generate_s, why,
                           why_size) < 0)
    return NULL;
  b->nfiles++;
  return f;
}

/* ---- one server, N rounds ------------------------------------------- */

/* Times the session through server k, sent as fast as it goes or, with
 * paced, at the case's rate (one round, object "<server>_paced"); writes
 * its object; 0, or -1 when a session failed (written as "error").
 * *best_ms: its best wall time. */
static int time_server(stream_bench *b, const stream_case *c, int k, const stream_session *s,
                       double raw_ms, int paced, double cold_ms, double *best_ms) {
  double pace_ms = paced ? 1e3 / c->pace_per_s : 0;
  double cap_ms = paced && c->paced_whole ? 0 : SEND_CAP_MS;
  int rounds = paced ? 1 : b->rounds;
  bench_json *j = b->j;
  stream_server *srv = &b->servers[k];
  stream_timing best = {0};
  char best_log[2048] = "", log[2048];
  double rounds_ms[64];
  int done = 0, failed = 0;
  char error[600] = "";
  *best_ms = NAN;
  /* The server's threads' CPU time in each round; the best round's kept. */
  thread_cpu *cpu = calloc(1, sizeof *cpu);
  thread_cpu_totals cpu_round, cpu_best = {0};
  for (int r = 0; r < rounds && r < 64; r++) {
    stream_timing t;
    int sampling = cpu != NULL && thread_cpu_start(cpu, srv->pid) == 0;
    int rc = stream_replay_server(s, srv->port, pace_ms, cap_ms, DRAIN_MS, SILENCE_MS, &t);
    memset(&cpu_round, 0, sizeof cpu_round);
    if (sampling)
      thread_cpu_stop(cpu, &cpu_round);
    /* A session the bench left ends when the server has noticed: its log
     * line then also says the server is free for the next one. */
    stream_server_session_line(srv, t.abandoned ? (int)DRAIN_MS : 1000, log, sizeof log);
    if (rc < 0) {
      snprintf(error, sizeof error, "%s", t.error);
      snprintf(best_log, sizeof best_log, "%s", log);
      stream_timing_free(&t);
      failed = 1;
      break;
    }
    rounds_ms[done++] = t.wall_ms;
    int cut_short = t.units_sent < s->nunits;
    if (done == 1 || t.wall_ms < best.wall_ms) {
      stream_timing_free(&best);
      best = t;
      snprintf(best_log, sizeof best_log, "%s", log);
      cpu_best = cpu_round;
    } else {
      stream_timing_free(&t);
    }
    if (cut_short || t.wall_ms > LONG_ROUND_MS)
      break;
  }
  free(cpu);
  char name[32];
  snprintf(name, sizeof name, "%s%s", server_names[k], paced ? "_paced" : "");
  json_open(j, name, '{');
  if (paced && c->volume_images > 0) {
    json_str(j, "what", "the same session, the whole of it, as a scanner sends it: each volume "
                        "in its TR (1 / offered_per_s), its slice groups (and before the first "
                        "volume the reference slices) spread evenly over the TR, each group's "
                        "acquisitions no earlier than its time");
    json_num(j, "offered_per_s", c->pace_per_s);
  } else if (paced) {
    json_str(j, "what", "the same session with each frame's acquisitions sent no earlier than "
                        "its frame time at the offered rate, as a scanner sends them");
    json_num(j, "offered_per_s", c->pace_per_s);
  }
  if (failed) {
    json_str(j, "error", error);
    json_str(j, "server_log", best_log);
    json_str(j, "server_log_file", srv->log_path);
    json_close(j, '}');
    stream_timing_free(&best);
    return -1;
  }
  json_open(j, "rounds_ms", '[');
  for (int i = 0; i < done; i++)
    json_num(j, NULL, rounds_ms[i]);
  json_close(j, ']');
  double wall_s = best.wall_ms / 1e3;
  int cut_short = best.units_sent < s->nunits;
  *best_ms = cut_short ? NAN : best.wall_ms;
  json_num(j, "wall_ms", best.wall_ms);
  if (!paced) { /* the first session of a fresh server against the best */
    json_num(j, "first_round_ms", rounds_ms[0]);
    json_num(j, "first_round_ratio_to_best", rounds_ms[0] / best.wall_ms);
    json_num(j, "cold_first_round_ms", cold_ms);
    json_num(j, "cold_first_round_ratio_to_best", cold_ms / best.wall_ms);
    json_str(j, "first_round_target", "first_round_ratio_to_best <= 1.2 (H100)");
  }
  json_num(j, "mb_per_s", (double)best.bytes_sent / 1e6 / wall_s);
  char per_s[64];
  snprintf(per_s, sizeof per_s, "%s_per_s", c->unit);
  /* Cut short: the rate images came at, not the rate of a whole session. */
  int answered = 0;
  for (int u = 0; u < s->nunits; u++)
    answered += !isnan(best.latency_ms[u]);
  json_num(j, per_s, cut_short ? answered / (best.last_image_ms / 1e3)
                               : best.units_sent / wall_s);
  json_int(j, "images", best.images);
  if (best.unmatched_images > 0)
    json_int(j, "unmatched_images", best.unmatched_images);
  if (cut_short) {
    json_int(j, "units_sent", best.units_sent);
    char note[400];
    snprintf(note, sizeof note,
             "cut short: sending stopped after %.0f s at the next %s boundary, then CLOSE%s; "
             "%s_per_s is the %s answered over the time to the last image; latencies are those "
             "of the %s that got %s",
             SEND_CAP_MS / 1e3,
             c->unit[0] == 's' ? "slice" : c->unit[0] == 'v' ? "volume" : "frame",
             best.abandoned ? "; the server was still busy long after and was left (no wall_ms)"
                            : "",
             c->unit, c->unit, c->unit, c->volume_images > 0 ? "all their images" : "an image");
    json_str(j, "note", note);
  }
  double *lat = malloc((size_t)s->nunits * sizeof *lat);
  int n = 0, missing = 0;
  for (int u = 0; lat != NULL && u < s->nunits; u++) {
    if (s->unit_end[u] > best.bytes_sent)
      continue;
    if (isnan(best.latency_ms[u]))
      missing++;
    else
      lat[n++] = best.latency_ms[u];
  }
  if (lat != NULL)
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
  double p99 = lat != NULL ? percentile(lat, n, 0.99) : NAN;
  json_open(j, "latency_ms", '{');
  json_num(j, "p50", lat != NULL ? percentile(lat, n, 0.5) : NAN);
  json_num(j, "p99", p99);
  json_num(j, "max", lat != NULL && n > 0 ? lat[n - 1] : NAN);
  json_close(j, '}');
  free(lat);
  if (paced && !isnan(p99))
    stream_write_late_units(j, s, &best, p99);
  if (missing > 0)
    json_int(j, "without_image", missing);
  json_num(j, "last_acquisition_to_last_image_ms", best.last_image_ms - best.last_acq_ms);
  json_num(j, "last_acquisition_to_close_ms", best.wall_ms - best.last_acq_ms);
  json_num(j, "ratio_to_raw", cut_short ? NAN : best.wall_ms / raw_ms);
  json_str(j, "server_log", best_log);
  thread_cpu_write(j, &cpu_best, best.wall_ms);
  if (paced)
    write_targets(j, c->paced_targets, 2);
  else if (k == GPU)
    write_targets(j, c->gpu_targets, 3);
  else
    write_targets(j, c->cpu_targets, 2);
  json_close(j, '}');
  stream_timing_free(&best);
  return 0;
}

/* (Re)starts server k as the bench does, with --warm warm unless NULL,
 * and waits for its warm-up to end; 0, or -1 with the reason in why (the
 * server is then not running). */
static int start_server(stream_bench *b, int k, const char *warm, char *why, size_t size) {
  const char *extra[7];
  char lanes[16];
  int n = 0;
  if (b->ctx->gpu_lanes > 0 && strcmp(b->gpus[k], "none") != 0) {
    snprintf(lanes, sizeof lanes, "%d", b->ctx->gpu_lanes);
    extra[n++] = "--gpu-lanes";
    extra[n++] = lanes;
  }
  if (b->ext != NULL) {
    extra[n++] = "--external-dir";
    extra[n++] = b->ext;
  }
  if (warm != NULL) {
    extra[n++] = "--warm";
    extra[n++] = warm;
  }
  extra[n] = NULL;
  char log[PATH_MAX + 64];
  snprintf(log, sizeof log, "%s/reconserver-%s-%d.log", b->tmp, server_names[k], b->starts++);
  stream_server_stop(&b->servers[k]);
  b->running[k] = stream_server_start(&b->servers[k], b->tools.server, b->configs, b->gpus[k],
                                      n > 0 ? extra : NULL, log, why, size) == 0;
  if (b->running[k] && warm != NULL &&
      stream_server_wait_line(&b->servers[k], "warm-up done", 600000) < 0) {
    snprintf(why, size, "the server with --warm %s never logged \"warm-up done\"", warm);
    stream_server_stop(&b->servers[k]);
    b->running[k] = 0;
  }
  return b->running[k] ? 0 : -1;
}

/* Before a case is timed on server k: a fresh server without --warm, whose
 * first session (*cold_ms) is what a restart costs unprepared, then a
 * fresh one with --warm of this case's session (its first timed round is
 * then the first session a scanner sends it). -1 when a server cannot
 * start (written as the server's "error"). */
static int fresh_servers(stream_bench *b, const stream_case *c, int k, const stream_session *s,
                         double *cold_ms) {
  char why[1024] = "", dir[PATH_MAX], file[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/warm-%s", b->tmp, c->name);
  snprintf(file, sizeof file, "%s/session", dir);
  int rc = start_server(b, k, NULL, why, sizeof why);
  if (rc == 0) {
    stream_timing t;
    if (stream_replay_server(s, b->servers[k].port, 0, SEND_CAP_MS, DRAIN_MS, SILENCE_MS, &t) ==
            0 &&
        t.units_sent == s->nunits)
      *cold_ms = t.wall_ms;
    char line[2048];
    stream_server_session_line(&b->servers[k], t.abandoned ? (int)DRAIN_MS : 1000, line,
                               sizeof line);
    stream_timing_free(&t);
    /* The session's first WARM_UNITS slices/frames and its CLOSE: its
     * shapes, without the minutes a whole real-time stream takes on the
     * CPU. */
    int warm = c->volume_images > 0 ? WARM_VOLUMES : WARM_UNITS;
    size_t head = s->nunits > warm ? s->unit_end[warm - 1] : s->close_at;
    FILE *f = (mkdir(dir, 0755) == 0 || errno == EEXIST) ? fopen(file, "wb") : NULL;
    rc = f != NULL && fwrite(s->bytes, 1, head, f) == head &&
                 fwrite(s->bytes + s->close_at, 1, s->len - s->close_at, f) ==
                     s->len - s->close_at
             ? 0
             : -1;
    if (f != NULL && fclose(f) != 0)
      rc = -1;
    if (rc < 0)
      snprintf(why, sizeof why, "cannot write %.900s", file);
  }
  if (rc == 0)
    rc = start_server(b, k, dir, why, sizeof why);
  if (rc < 0) {
    json_open(b->j, server_names[k], '{');
    json_str(b->j, "error", why);
    json_close(b->j, '}');
  }
  return rc;
}

/* `reconclient send FILE` against server k, best of N; its object. */
static int time_reconclient(stream_bench *b, const stream_case *c, int k, const char *file,
                            const stream_session *s, double raw_ms) {
  bench_json *j = b->j;
  char port[16], out[PATH_MAX], timeout[16];
  snprintf(port, sizeof port, "%d", b->servers[k].port);
  snprintf(timeout, sizeof timeout, "%d", SILENCE_MS);
  double best = NAN;
  char error[600] = "";
  for (int r = 0; r < b->rounds; r++) {
    snprintf(out, sizeof out, "%s/reconclient-out.h5", b->tmp);
    remove(out);
    const char *argv[] = {b->tools.client, "send", file, "-c", c->config, "-a", "127.0.0.1", "-p",
                          port, "-o", out, "-t", timeout, NULL};
    static char so[4096], se[4096];
    double t0 = bench_now_ms();
    int rc = mr_test_run(argv, b->tmp, so, sizeof so, se, sizeof se);
    double ms = bench_now_ms() - t0;
    char line[2048];
    stream_server_session_line(&b->servers[k], 1000, line, sizeof line);
    remove(out);
    if (rc != 0) {
      char why[300];
      stream_first_line(se, why, sizeof why);
      snprintf(error, sizeof error, "reconclient send exited %d: %s", rc, why);
      break;
    }
    if (!(ms >= best))
      best = ms;
  }
  json_open(j, server_names[k], '{');
  if (error[0] != '\0') {
    json_str(j, "error", error);
  } else {
    json_num(j, "wall_ms", best);
    json_num(j, "mb_per_s", (double)s->len / 1e6 / (best / 1e3));
    json_num(j, "ratio_to_raw", best / raw_ms);
  }
  json_close(j, '}');
  return error[0] != '\0' ? -1 : 0;
}

/* ---- one case ------------------------------------------------------- */

static void run_case(stream_bench *b, const stream_case *c) {
  bench_json *j = b->j;
  json_open(j, c->name, '{');
  json_str(j, "what", c->what);
  json_str(j, "config", c->config);
  char why[1024] = "";
  /* The servers that take part, and whether they know the config. */
  int use[NSERVERS] = {0}, any = 0;
  for (int k = 0; k < NSERVERS; k++) {
    if (!b->running[k] || (c->cpu_only && k == GPU))
      continue;
    int has = stream_server_has_config(&b->servers[k], c->config);
    if (has < 0) { /* it died: the later cases go on without it */
      json_open(j, server_names[k], '{');
      json_str(j, "error", "the server did not answer the configs query (see its log)");
      json_str(j, "server_log_file", b->servers[k].log_path);
      json_close(j, '}');
      b->running[k] = 0;
      b->failures++;
      continue;
    }
    if (has == 0 && strcmp(c->config, "cartesian_external") == 0 && b->no_external[0] != '\0')
      snprintf(why, sizeof why, "%.900s", b->no_external);
    else if (has == 0)
      snprintf(why, sizeof why, "the servers have no config '%s' (not in this build)", c->config);
    use[k] = has == 1;
    any |= use[k];
  }
  if (!any) {
    json_str(j, "skipped", why[0] != '\0' ? why : "no server to run it on");
    json_close(j, '}');
    return;
  }
  const dataset_file *f = dataset_for(b, c, why, sizeof why);
  if (f == NULL) {
    json_str(j, "skipped", why);
    json_close(j, '}');
    return;
  }
  json_str(j, "data", f->args);
  json_num(j, "generate_s", f->generate_s);
  stream_session s;
  mr_err err = {0};
  double t0 = bench_now_ms();
  int volume_images = b->ctx->quick ? c->quick_volume_images : c->volume_images;
  if ((volume_images > 0
           ? stream_session_load_volumes(f->path, c->config, volume_images, &s, &err)
           : stream_session_load(f->path, c->config, &s, &err)) < 0) {
    json_str(j, "error", err.msg);
    json_close(j, '}');
    b->failures++;
    return;
  }
  json_num(j, "load_s", (bench_now_ms() - t0) / 1e3);
  json_int(j, "bytes", (long long)s.len);
  json_int(j, "acquisitions", (long long)s.acquisitions);
  json_int(j, c->unit, s.nunits);
  fprintf(stderr, "mr-bench: stream: %s: %.1f MB, %d %s\n", c->name, s.len / 1e6, s.nunits,
          c->unit);

  double raw_rounds[64], raw_ms = NAN;
  int raw_done = 0;
  stream_timing t;
  for (int r = 0; r < b->rounds && r < 64; r++) {
    if (stream_replay_raw(&s, &t) < 0) {
      json_str(j, "error", t.error);
      break;
    }
    raw_rounds[raw_done++] = t.wall_ms;
    if (!(t.wall_ms >= raw_ms))
      raw_ms = t.wall_ms;
  }
  json_open(j, "raw_copy", '{');
  json_open(j, "rounds_ms", '[');
  for (int i = 0; i < raw_done; i++)
    json_num(j, NULL, raw_rounds[i]);
  json_close(j, ']');
  json_num(j, "wall_ms", raw_ms);
  json_num(j, "mb_per_s", (double)s.len / 1e6 / (raw_ms / 1e3));
  json_close(j, '}');
  if (raw_done < b->rounds) {
    b->failures++;
  } else {
    double best[NSERVERS] = {NAN, NAN};
    for (int k = 0; k < NSERVERS; k++) {
      if (!use[k])
        continue;
      fprintf(stderr, "mr-bench: stream: %s through the %s server\n", c->name, server_names[k]);
      double cold_ms = NAN;
      if (fresh_servers(b, c, k, &s, &cold_ms) < 0) {
        b->failures++;
        continue;
      }
      if (time_server(b, c, k, &s, raw_ms, 0, cold_ms, &best[k]) < 0)
        b->failures++;
    }
    /* Paced on the GPU server; on the CPU server only where there is no
     * GPU server (--gpus none, as in CI's --quick run, or on the 2-core
     * machine, where the fMRI case's CPU target is). A case paced whole
     * takes minutes: not with --quick. */
    int pk = use[GPU] ? GPU : CPU;
    if (use[pk] && c->pace_per_s > 0 && !(c->paced_whole && b->ctx->quick)) {
      double paced_ms;
      fprintf(stderr, "mr-bench: stream: %s through the %s server, paced\n", c->name,
              server_names[pk]);
      if (time_server(b, c, pk, &s, raw_ms, 1, NAN, &paced_ms) < 0)
        b->failures++;
    }
    if (c->speedup_target.key != NULL) {
      json_num(j, c->speedup_target.key, best[CPU] / best[GPU]);
      json_open(j, "target", '{');
      json_str(j, c->speedup_target.key, c->speedup_target.value);
      json_close(j, '}');
    }
    if (c->reconclient) {
      json_open(j, "reconclient_send", '{');
      json_str(j, "what", "the real `reconclient send` of the same HDF5 file (reading, sending, "
                          "receiving and writing the images), process start to exit");
      for (int k = 0; k < NSERVERS; k++)
        if (use[k] && time_reconclient(b, c, k, f->path, &s, raw_ms) < 0)
          b->failures++;
      json_close(j, '}');
    }
  }
  stream_session_free(&s);
  json_close(j, '}');
}

/* ---- the subcommand ------------------------------------------------- */

/* The example external step's directory (for the cartesian_external
 * case): examples/external here, else in the source tree; NULL, with the
 * reason in why, when neither exists or there is no python3 to run it. */
static const char *external_dir(char *why, size_t size) {
  snprintf(why, size, "no python3 on PATH for the example external step");
  if (!mr_test_have_tool("python3"))
    return NULL;
  if (is_dir("examples/external"))
    return "examples/external";
  if (is_dir(MR_BENCH_SOURCE_EXAMPLES "/external"))
    return MR_BENCH_SOURCE_EXAMPLES "/external";
  snprintf(why, size, "no examples/external here nor in the source tree");
  return NULL;
}

/* A configs directory in tmp: links to every config of `configs` and to
 * the external example's cartesian_external.json. 0, or -1 (then the
 * servers run without the external case). */
static int configs_with_external(const char *configs, const char *ext, const char *tmp,
                                 char *out, size_t size) {
  snprintf(out, size, "%s/configs", tmp);
  if (mkdir(out, 0755) != 0)
    return -1;
  DIR *d = opendir(configs);
  if (d == NULL)
    return -1;
  char from[PATH_MAX * 2], to[PATH_MAX * 2], target[PATH_MAX];
  int rc = 0;
  for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 5, ".json") != 0)
      continue;
    snprintf(from, sizeof from, "%s/%s", configs, e->d_name);
    snprintf(to, sizeof to, "%s/%s", out, e->d_name);
    if (realpath(from, target) == NULL || symlink(target, to) != 0)
      rc = -1;
  }
  closedir(d);
  snprintf(from, sizeof from, "%s/configs/cartesian_external.json", ext);
  snprintf(to, sizeof to, "%s/cartesian_external.json", out);
  if (rc == 0 && (realpath(from, target) == NULL || symlink(target, to) != 0))
    rc = -1;
  return rc;
}

int bench_stream(const bench_ctx *ctx) {
  bench_json *j = ctx->json;
  stream_bench b = {.ctx = ctx, .j = j};
  b.rounds = ctx->rounds > 0 ? ctx->rounds : ctx->quick ? 1 : 3;
  stream_tools_find(ctx->server, &b.tools);
  const char *server = b.tools.server, *configs = stream_configs_dir(ctx->configs);
  mr_device *cpu, *gpu;
  if (bench_devices(ctx, &cpu, &gpu) < 0)
    return -1;
  bench_devices_release(ctx, cpu, gpu);
  json_str(j, "server", server);
  json_str(j, "client", b.tools.client);
  json_str(j, "generator", b.tools.generator);
  json_str(j, "configs", configs);
  json_int(j, "rounds", b.rounds);
  if (ctx->quick)
    json_str(j, "quick", "every case shrunk (see its \"data\"): a smoke run, not a measurement");
  json_str(j, "method",
           "each case's session (CONFIG_FILE, HEADER, acquisitions, CLOSE: the bytes reconclient "
           "send writes) is built in memory from the generated HDF5 file before timing; a sender "
           "thread writes it to a server the bench started on loopback while a receiver thread "
           "decodes the images; wall_ms: first byte written -> the server's CLOSE; latency: the "
           "last acquisition of a slice/frame written (send() returned; on a loaded machine an image "
           "can be decoded microseconds before the sender thread notes that time, hence tiny "
           "negative values) -> its image decoded; raw_copy: the same "
           "bytes written the same way to a thread that reads and discards them; every figure "
           "is the best round by wall time, taken in this run");
  const char *names[NCASES];
  for (int i = 0; i < NCASES; i++)
    names[i] = cases[i].name;
  char unknown[64];
  if (bench_unknown_case(ctx->cases, names, NCASES, unknown, sizeof unknown)) {
    char msg[200];
    snprintf(msg, sizeof msg, "--case: no case '%s' (cases: cartesian, cartesian_external, "
                              "cartesian_cpu4, grappa, realtime, realtime_cg, realtime_cs, fmri)",
               unknown);
    json_str(j, "error", msg);
    fprintf(stderr, "mr-bench: stream: %s\n", msg);
    return -1;
  }
  if (access(server, X_OK) != 0 || access(b.tools.client, X_OK) != 0) {
    json_str(j, "error", "reconserver or reconclient not found (build them, or give --server)");
    return -1;
  }
  const char *tmpdir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(b.tmp, sizeof b.tmp, "%s/mr-bench-stream-XXXXXX", tmpdir);
  if (mkdtemp(b.tmp) == NULL) {
    json_str(j, "error", "cannot make a temporary directory");
    return -1;
  }
  /* The external case's config beside the others, its program's directory
   * for --external-dir; without them that case is skipped (no config). */
  const char *ext = external_dir(b.no_external, sizeof b.no_external);
  char ext_configs[PATH_MAX + 32];
  if (ext != NULL && configs_with_external(configs, ext, b.tmp, ext_configs,
                                           sizeof ext_configs) == 0) {
    configs = ext_configs;
    b.no_external[0] = '\0';
    json_str(j, "external_dir", ext);
  } else {
    if (ext != NULL)
      snprintf(b.no_external, sizeof b.no_external, "cannot link the configs in %.900s", b.tmp);
    ext = NULL;
  }
  /* The GPU server gets mr-bench's --gpus (all by default): run once per
   * GPU count (--gpus 0, --gpus 0,1, ...) for the table per count. */
  const char *server_gpus[NSERVERS] = {
      ctx->gpus != NULL && strcmp(ctx->gpus, "none") != 0 ? ctx->gpus : "all", "none"};
  b.configs = configs;
  b.ext = ext;
  b.gpus[GPU] = server_gpus[GPU];
  b.gpus[CPU] = server_gpus[CPU];
  json_open(j, "servers", '{');
  for (int k = 0; k < NSERVERS; k++) {
    json_open(j, server_names[k], '{');
    char why[1024];
    if (k == GPU && mr_pool_gpu_count(ctx->pool) == 0) {
      json_str(j, "skipped", "no GPU found (or mr-bench --gpus none)");
    } else if (start_server(&b, k, NULL, why, sizeof why) < 0) {
      json_str(j, "error", why);
      b.failures++;
    } else {
      char args[300];
      snprintf(args, sizeof args, "--gpus %s", server_gpus[k]);
      if (k == GPU && ctx->gpu_lanes > 0)
        snprintf(args + strlen(args), sizeof args - strlen(args), " --gpu-lanes %d",
                 ctx->gpu_lanes);
      json_str(j, "args", args);
    }
    json_close(j, '}');
  }
  json_close(j, '}');

  json_open(j, "cases", '{');
  for (int i = 0; i < NCASES; i++) {
    if (!bench_listed(ctx->cases, cases[i].name))
      continue;
    if (cases[i].paced_whole && !ctx->quick && ctx->cases == NULL) {
      char why[160];
      snprintf(why, sizeof why, "runs only when named (--case %s): its paced session alone "
                                "takes minutes", cases[i].name);
      json_open(j, cases[i].name, '{');
      json_str(j, "skipped", why);
      json_close(j, '}');
      continue;
    }
    run_case(&b, &cases[i]);
  }
  json_close(j, '}');

  for (int k = 0; k < NSERVERS; k++)
    if (b.running[k])
      stream_server_stop(&b.servers[k]);
  if (b.failures == 0)
    stream_remove_tree(b.tmp);
  else
    json_str(j, "kept_for_inspection", b.tmp);
  return b.failures == 0 ? 0 : -1;
}
