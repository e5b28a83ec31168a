/* mr-load: concurrent clients against one reconserver, each scan checked
 * by content, throughput and latency as JSON.
 *
 *   mr-load -p PORT [-c CLIENTS] [-n SCANS] [-m MATRIX] [-k COILS] [-w MS]
 *
 * Every scan is a point source at a pixel of its own (client and scan
 * number decide where), so its image must peak exactly there: an image
 * that went to the wrong client, or one mixed from two scans, fails the
 * check. Latency is from the scan's CLOSE to the server's CLOSE. */
#include <complex.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "encode.h"
#include "gadget_harness.h"
#include "wire_client.h"

typedef struct load {
  int port, clients, scans, matrix, coils;
  int wait_ms; /* between a scan's last acquisition and its CLOSE */
} load;

typedef struct client {
  const load *cfg;
  int id;
  double *latency_ms; /* one per scan */
  int ok, errors, mismatched;
  double bytes_sent;
} client;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Line e1 of the k-space of a unit point at pixel (x, y) of an n x n
 * image, in the centered convention (image = backward transform of
 * k-space). Coil c sees it with weight 1 + c/8. */
typedef struct point_line {
  int n, x, y, e1;
} point_line;

static float complex point_kspace(int c, int s, void *arg) {
  const point_line *p = arg;
  double ph = -2.0 * M_PI *
              ((double)(p->x - p->n / 2) * (s - p->n / 2) +
               (double)(p->y - p->n / 2) * (p->e1 - p->n / 2)) /
              p->n;
  return (float complex)((1.0 + c / 8.0) * cexp(I * ph));
}

/* Sends one message; counts its bytes. */
static int put(int fd, mr_message *m, double *bytes) {
  uint8_t *b;
  size_t len;
  int rc = m != NULL ? mr_encode_flat(m, &b, &len) : -1;
  mr_message_unref(m);
  if (rc != 0)
    return -1;
  rc = mr_test_send_bytes(fd, b, len);
  free(b);
  *bytes += (double)len;
  return rc;
}

/* The pixel of scan `scan` of client `id`: distinct for every scan. */
static void pixel_of(const load *cfg, int id, int scan, int *x, int *y) {
  int k = id * cfg->scans + scan, n = cfg->matrix;
  *x = 1 + k % (n - 2);
  *y = 1 + (k / (n - 2)) % (n - 2);
}

static int check_image(const load *cfg, const mr_message *m, int x, int y) {
  const mr_image *im = &m->u.image;
  int n = cfg->matrix;
  if (im->head.data_type != ISMRMRD_FLOAT || im->head.matrix_size[0] != n ||
      im->head.matrix_size[1] != n)
    return 0;
  const float *px = im->data;
  int best = 0;
  for (int i = 1; i < n * n; i++)
    if (px[i] > px[best])
      best = i;
  return best == y * n + x;
}

static void run_scan(client *c, int scan) {
  const load *cfg = c->cfg;
  int n = cfg->matrix, x, y;
  pixel_of(cfg, c->id, scan, &x, &y);
  int fd = mr_test_connect(cfg->port);
  if (fd < 0) {
    c->errors++;
    fprintf(stderr, "mr-load: client %d scan %d: cannot connect: %s\n", c->id, scan,
            strerror(errno));
    return;
  }
  const char *xml = mr_harness_cartesian_header(n, n, 1, n, n, 1);
  put(fd, mr_message_new_config_file("default.xml"), &c->bytes_sent);
  put(fd, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)), &c->bytes_sent);
  for (int e1 = 0; e1 < n; e1++) {
    point_line p = {n, x, y, e1};
    mr_message *m = mr_harness_acquisition(n, cfg->coils, e1, 0,
                                           e1 == n - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                           point_kspace, &p);
    if (m != NULL) {
      m->u.acq.head.scan_counter = (uint32_t)e1;
      m->u.acq.head.measurement_uid = (uint32_t)(c->id * 1000 + scan);
    }
    put(fd, m, &c->bytes_sent);
  }
  if (cfg->wait_ms > 0) /* a scanner still acquiring: the session stays open */
    nanosleep(&(struct timespec){cfg->wait_ms / 1000, cfg->wait_ms % 1000 * 1000000L}, NULL);
  double t0 = now_s();
  put(fd, mr_message_new(MR_MSG_CLOSE), &c->bytes_sent);
  mr_test_reply r;
  mr_test_receive(fd, &r, 60000);
  c->latency_ms[scan] = 1e3 * (now_s() - t0);
  close(fd);
  int images = mr_test_reply_count(&r, MR_MSG_IMAGE), right = 0;
  for (int i = 0; i < r.n; i++)
    if (r.msgs[i]->kind == MR_MSG_IMAGE)
      right += check_image(cfg, r.msgs[i], x, y) &&
               r.msgs[i]->u.image.head.measurement_uid == (uint32_t)(c->id * 1000 + scan);
  if (!r.got_close || mr_test_reply_count(&r, MR_MSG_TEXT) > 0) {
    c->errors++;
    fprintf(stderr, "mr-load: client %d scan %d: %s\n", c->id, scan,
            mr_test_reply_count(&r, MR_MSG_TEXT) ? mr_test_reply_text(&r, "")
                                                 : "no CLOSE from the server");
  }
  else if (images != 1 || right != 1)
    c->mismatched++;
  else
    c->ok++;
  mr_test_reply_free(&r);
}

static void *client_main(void *arg) {
  client *c = arg;
  for (int s = 0; s < c->cfg->scans; s++)
    run_scan(c, s);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(FILE *f) {
  fprintf(f, "usage: mr-load -p PORT [-c CLIENTS] [-n SCANS] [-m MATRIX] [-k COILS] [-w MS]\n"
             "CLIENTS concurrent clients (default 32) each run SCANS scans (default 20) of a\n"
             "MATRIX x MATRIX (default 64) COILS-coil (default 8) Cartesian slice; every image\n"
             "is checked by content. Prints JSON; scans_per_s counts successful scans only.\n"
             "-w MS: each scan waits MS ms after its last line before its CLOSE (default 0),\n"
             "so that many sessions are open at once.\n");
}

/* A whole decimal integer in 0..INT32_MAX, or -1 (atoi would take "x" as 0). */
static int parse_count(const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  return *text != '\0' && *end == '\0' && v >= 0 && v <= INT32_MAX ? (int)v : -1;
}

int main(int argc, char **argv) {
  load cfg = {.port = 9002, .clients = 32, .scans = 20, .matrix = 64, .coils = 8};
  static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "p:c:n:m:k:w:h", longopts, NULL)) != -1) {
    int *field = ch == 'p' ? &cfg.port
                 : ch == 'c' ? &cfg.clients
                 : ch == 'n' ? &cfg.scans
                 : ch == 'm' ? &cfg.matrix
                 : ch == 'k' ? &cfg.coils
                 : ch == 'w' ? &cfg.wait_ms
                             : NULL;
    if (ch == 'h') {
      usage(stdout);
      return 0;
    }
    if (field == NULL) { /* an unknown option, or one without its value */
      usage(stderr);
      return 2;
    }
    if ((*field = parse_count(optarg)) < 0) {
      fprintf(stderr, "mr-load: -%c takes a non-negative integer, not '%s'\n", ch, optarg);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mr-load: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (cfg.port < 1 || cfg.port > 65535) {
    fprintf(stderr, "mr-load: -p takes a port in 1..65535\n");
    return 2;
  }
  if (cfg.clients < 1 || cfg.scans < 1 || cfg.matrix < 8 || cfg.coils < 1 ||
      (long long)cfg.clients * cfg.scans > (long long)(cfg.matrix - 2) * (cfg.matrix - 2)) {
    fprintf(stderr, "mr-load: need clients*scans <= (matrix-2)^2 distinct pixels\n");
    return 2;
  }
  client *cs = calloc((size_t)cfg.clients, sizeof *cs);
  double *lat = calloc((size_t)(cfg.clients * cfg.scans), sizeof *lat);
  pthread_t *threads = calloc((size_t)cfg.clients, sizeof *threads);
  double t0 = now_s();
  for (int i = 0; i < cfg.clients; i++) {
    cs[i] = (client){.cfg = &cfg, .id = i, .latency_ms = lat + i * cfg.scans};
    pthread_create(&threads[i], NULL, client_main, &cs[i]);
  }
  int ok = 0, errors = 0, mismatched = 0;
  double bytes = 0;
  for (int i = 0; i < cfg.clients; i++) {
    pthread_join(threads[i], NULL);
    ok += cs[i].ok;
    errors += cs[i].errors;
    mismatched += cs[i].mismatched;
    bytes += cs[i].bytes_sent;
  }
  double secs = now_s() - t0;
  int total = cfg.clients * cfg.scans;
  qsort(lat, (size_t)total, sizeof *lat, cmp_double);
  printf("{\"clients\": %d, \"scans_per_client\": %d, \"matrix\": %d, \"coils\": %d,\n"
         " \"scans\": %d, \"ok\": %d, \"errors\": %d, \"mismatched\": %d,\n"
         " \"seconds\": %.3f, \"scans_per_s\": %.1f, \"mb_per_s\": %.1f,\n"
         " \"latency_ms\": {\"p50\": %.2f, \"p99\": %.2f, \"max\": %.2f}}\n",
         cfg.clients, cfg.scans, cfg.matrix, cfg.coils, total, ok, errors, mismatched, secs,
         ok / secs, bytes / secs / 1e6, lat[total / 2], lat[(int)(0.99 * (total - 1))],
         lat[total - 1]);
  free(cs);
  free(lat);
  free(threads);
  return ok == total ? 0 : 1;
}
