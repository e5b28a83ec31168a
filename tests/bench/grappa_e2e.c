/* mr-grappa-e2e: GRAPPA end to end through reconserver on loopback. Starts
 * the server (build/bin/reconserver, --gpus as given), streams a noise line
 * and an accelerated 2D scan of N slices (the synthetic phantom, embedded
 * ACS lines) through the config "grappa", and reports as JSON the time from
 * sending the last acquisition to the server's CLOSE, which follows the
 * last image: the latency a scanner operator waits for. The session is sent
 * --sessions times (default 2), one connection after another to the same
 * server: the first is a fresh server's (what it makes on first use
 * included), the best of the later ones a running server's.
 *
 *   mr-grappa-e2e [--gpus SPEC] [--slices N] [--coils N] [--matrix N]
 *                 [--accel R] [--acs N] [--sessions N] [--json FILE]
 * Run from the source root with MR_BINARY_DIR set to the build tree. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "gadget_harness.h"
#include "grappa_phantom.h"
#include "pool.h"
#include "wire_client.h"

#define MAX_SESSIONS 20

typedef struct line_src {
  const mr_cfloat *kspace;
  int n, y;
  unsigned noise_seed;
} line_src;

static float complex line_value(int c, int s, void *arg) {
  const line_src *l = arg;
  return l->kspace[((size_t)c * l->n + l->y) * l->n + s];
}

static float complex noise_value(int c, int s, void *arg) {
  line_src *l = arg;
  l->noise_seed = l->noise_seed * 1103515245u + 12345u + (unsigned)(c + s);
  float re = (float)((l->noise_seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  l->noise_seed = l->noise_seed * 1103515245u + 12345u;
  float im = (float)((l->noise_seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  return re + I * im;
}

static int send_or_die(int fd, mr_message *m) {
  int rc = mr_test_send(fd, m);
  mr_message_unref(m);
  if (rc != 0) {
    fprintf(stderr, "mr-grappa-e2e: send failed\n");
    exit(1);
  }
  return 0;
}

/* One scan: its k-space, the lines sampled and where the ACS lines are. */
typedef struct scan {
  const mr_cfloat *k;
  int n, nc, accel, nacs, slices;
  const uint8_t *sampled;
  int a0, last; /* the first ACS line, the last sampled line */
} scan;

typedef struct timing {
  int images, got_close;
  double stream_ms, to_close_ms; /* first to last acquisition sent; last sent -> CLOSE */
  char text[256];                /* the server's first TEXT, if any */
} timing;

/* Sends the scan on a connection of its own to the server at port and
 * waits for its CLOSE; 0, or -1 when it cannot connect. */
static int send_session(const scan *sc, int port, timing *t) {
  memset(t, 0, sizeof *t);
  int n = sc->n, fd = mr_test_connect(port);
  if (fd < 0) {
    fprintf(stderr, "mr-grappa-e2e: cannot connect\n");
    return -1;
  }
  const char *xml = mr_harness_accelerated_header(n, n, sc->accel, "embedded");
  send_or_die(fd, mr_message_new_config_file("grappa"));
  send_or_die(fd, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)));
  uint64_t t0 = mr_now_ns();
  line_src l = {sc->k, n, 0, 7};
  mr_message *noise = mr_harness_acquisition(n, sc->nc, 0, 0,
                                             MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT),
                                             noise_value, &l);
  noise->u.acq.head.sample_time_us = 5.0f;
  send_or_die(fd, noise);
  uint64_t t_last = t0;
  for (int s = 0; s < sc->slices; s++)
    for (int y = 0; y < n; y++) {
      if (!sc->sampled[y])
        continue;
      int acs = y >= sc->a0 && y < sc->a0 + sc->nacs, imaging = y % sc->accel == 0;
      uint64_t f = acs ? MR_FLAG(imaging ? ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING
                                         : ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)
                       : 0;
      if (y == sc->last)
        f |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
      l.y = y;
      mr_message *m = mr_harness_acquisition(n, sc->nc, y, 0, f, line_value, &l);
      m->u.acq.head.idx.slice = (uint16_t)s;
      m->u.acq.head.sample_time_us = 5.0f;
      send_or_die(fd, m);
      t_last = mr_now_ns();
    }
  send_or_die(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 120000);
  uint64_t t_close = mr_now_ns();
  t->images = mr_test_reply_count(&r, MR_MSG_IMAGE);
  t->got_close = r.got_close;
  t->stream_ms = (double)(t_last - t0) / 1e6;
  t->to_close_ms = (double)(t_close - t_last) / 1e6;
  const char *text = mr_test_reply_text(&r, "");
  snprintf(t->text, sizeof t->text, "%s", text != NULL ? text : "");
  for (char *c = t->text; *c != '\0'; c++) /* a JSON string's text */
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
      *c = ' ';
  mr_test_reply_free(&r);
  close(fd);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: mr-grappa-e2e [--gpus SPEC] [--slices N] [--coils N] [--matrix N]\n"
             "                     [--accel R] [--acs N] [--sessions N] [--json FILE]\n"
             "GRAPPA end to end through reconserver on loopback; run from the source root\n"
             "with MR_BINARY_DIR set to the build tree. Defaults: --gpus all --slices 20\n"
             "--coils 32 --matrix 256 --accel 4 --acs 24 --sessions 2.\n");
}

/* A whole decimal number in 0..100000, or -1 (atoi would take "x" as 0). */
static int parse_size(const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  return *text != '\0' && *end == '\0' && v >= 0 && v <= 100000 ? (int)v : -1;
}

int main(int argc, char **argv) {
  const char *gpus = "all", *out = NULL;
  int slices = 20, nc = 32, n = 256, accel = 4, nacs = 24, sessions = 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
  }
  if (argc % 2 == 0) {
    fprintf(stderr, "mr-grappa-e2e: every option takes a value (%s has none)\n", argv[argc - 1]);
    usage(stderr);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    int *size = strcmp(argv[i], "--slices") == 0  ? &slices
                : strcmp(argv[i], "--coils") == 0 ? &nc
                : strcmp(argv[i], "--matrix") == 0 ? &n
                : strcmp(argv[i], "--accel") == 0 ? &accel
                : strcmp(argv[i], "--acs") == 0   ? &nacs
                : strcmp(argv[i], "--sessions") == 0 ? &sessions
                                                  : NULL;
    if (strcmp(argv[i], "--gpus") == 0) {
      gpus = argv[i + 1];
    } else if (strcmp(argv[i], "--json") == 0) {
      out = argv[i + 1];
    } else if (size == NULL) {
      fprintf(stderr, "mr-grappa-e2e: unknown argument %s\n", argv[i]);
      usage(stderr);
      return 2;
    } else if ((*size = parse_size(argv[i + 1])) < 0) {
      fprintf(stderr, "mr-grappa-e2e: %s takes a whole number, not '%s'\n", argv[i], argv[i + 1]);
      return 2;
    }
  }
  if (slices < 1 || nc < 1 || n < 16 || accel < 2 || nacs < 1 || nacs > n || sessions < 1 ||
      sessions > MAX_SESSIONS) {
    fprintf(stderr, "mr-grappa-e2e: bad sizes\n");
    return 2;
  }
  /* the data: one phantom k-space, every slice the same */
  mr_pool *pool;
  mr_device *cpu;
  mr_err err = {0};
  if (mr_pool_create(&(mr_pool_opts){.gpus = "none"}, &pool, &err) != 0 ||
      mr_pool_acquire(pool, "cpu", &cpu, &err) != 0) {
    fprintf(stderr, "mr-grappa-e2e: %s\n", err.msg);
    return 1;
  }
  mr_cfloat *k = malloc((size_t)nc * n * n * sizeof *k);
  uint8_t *sampled = malloc(n);
  if (k == NULL || sampled == NULL || grappa_phantom_kspace(cpu, n, n, nc, 0.01, 5, k) != 0) {
    fprintf(stderr, "mr-grappa-e2e: no phantom\n");
    return 1;
  }
  grappa_phantom_pattern(n, accel, 0, nacs, sampled);

  const char *start_args[] = {"--gpus", gpus, NULL};
  mr_test_server server;
  mr_test_server_start(&server, start_args);
  scan sc = {k, n, nc, accel, nacs, slices, sampled, grappa_phantom_acs_start(n, nacs), n - 1};
  while (!sampled[sc.last])
    sc.last--;
  timing t[MAX_SESSIONS];
  int ok = 1;
  for (int i = 0; i < sessions; i++)
    ok &= send_session(&sc, server.port, &t[i]) == 0 && t[i].images == slices;
  double warm = t[0].to_close_ms;
  for (int i = 1; i < sessions; i++)
    warm = i == 1 || t[i].to_close_ms < warm ? t[i].to_close_ms : warm;
  FILE *f = out != NULL ? fopen(out, "w") : stdout;
  if (f == NULL)
    f = stdout;
  fprintf(f,
          "{\"grappa_e2e\": {\"gpus\": \"%s\", \"slices\": %d, \"coils\": %d, \"matrix\": %d, "
          "\"R\": %d, \"acs_lines\": %d, \"sessions\": [",
          gpus, slices, nc, n, accel, nacs);
  for (int i = 0; i < sessions; i++)
    fprintf(f,
            "%s{\"images\": %d, \"got_close\": %d, \"stream_ms\": %.2f, "
            "\"last_acquisition_to_close_ms\": %.2f%s%s%s}",
            i ? ", " : "", t[i].images, t[i].got_close, t[i].stream_ms, t[i].to_close_ms,
            t[i].text[0] ? ", \"server_text\": \"" : "", t[i].text, t[i].text[0] ? "\"" : "");
  fprintf(f,
          "], \"first_session_last_acquisition_to_close_ms\": %.2f, "
          "\"last_acquisition_to_close_ms\": %.2f, \"target\": \"last_acquisition_to_close_ms "
          "(the best session after the first) <= 10 (H100)\"}}\n",
          t[0].to_close_ms, warm);
  if (f != stdout)
    fclose(f);
  mr_test_server_stop(&server);
  free(k);
  free(sampled);
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  return ok ? 0 : 1;
}
