/* Measurement dependencies end to end, with the bytes Gadgetron's client
 * (gadgetron_ismrmrd_client 4.x) writes: the noise scan on its own
 * connection with `default_measurement_dependencies.xml` (answered by
 * CLOSE alone), the dependency query (the client's XML script and CLOSE,
 * answered by one 1019 message and CLOSE), then the imaging scan, whose
 * header names the noise: prewhitened with the stored noise exactly as
 * with the same noise lines in the scan, its images saying which noise.
 * The store survives a restart. Also isalive.xml (CLOSE alone),
 * ismrmrd_dump.xml (the stream stored byte for byte), and a Gadgetron XML
 * chain as CONFIG_SCRIPT. */
#include <complex.h>
#include <dirent.h>
#include <math.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "test_support.h"
#include "wire_client.h"

#define NOISE_ID "42563_35189578_35189583_24"
enum { NX = 64, NY = 32, NCH = 4, NOISE_LINES = 24 };

static mr_test_server server;
static char state_dir[256];

static void start_server(void) {
  const char *args[] = {"--state-dir", state_dir, NULL};
  mr_test_server_start(&server, args);
}

static int setup(void **state) {
  (void)state;
  snprintf(state_dir, sizeof state_dir, "%s", mr_test_tmpdir("deps"));
  start_server();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  assert_int_equal(mr_test_server_stop(&server), 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", state_dir);
  assert_int_equal(system(cmd), 0);
  return 0;
}

/* Bytes as the client writes them, little-endian. */
typedef struct bytes {
  uint8_t *p;
  size_t n, cap;
} bytes;

static void put(bytes *b, const void *data, size_t len) {
  if (b->n + len > b->cap) {
    b->cap = (b->n + len) * 2;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
}

static void put_id(bytes *b, uint16_t id) { put(b, &id, 2); }

/* send_gadgetron_configuration_file: the name in a zeroed 1024-byte field. */
static void config_file(bytes *b, const char *name) {
  char field[1024] = {0};
  memcpy(field, name, strlen(name));
  put_id(b, 1);
  put(b, field, sizeof field);
}

/* send_gadgetron_configuration_script and _parameters: u32 length, text. */
static void text_message(bytes *b, uint16_t id, const char *text) {
  uint32_t len = (uint32_t)strlen(text);
  put_id(b, id);
  put(b, &len, 4);
  put(b, text, len);
}

/* Correlated, deterministic coil noise. */
static float complex noise_value(int c, int s, void *arg) {
  int line = *(int *)arg;
  uint32_t h = (uint32_t)(line * 7919 + s * 104729 + 1) * 2654435761u;
  float g1 = (float)((h >> 8) & 0xffff) / 65536.0f - 0.5f;
  float g2 = (float)((h >> 4) & 0xfff) / 4096.0f - 0.5f;
  return (1.0f + 0.3f * c) * (g1 + I * g2) + 0.4f * (g2 - I * g1) * (c % 2);
}

/* send_ismrmrd_acquisition: id, the 340-byte header, the samples. */
static void acquisition(bytes *b, int line, int noise) {
  int arg = line;
  mr_message *m = mr_harness_acquisition(NX, NCH, noise ? 0 : line, 0,
                                         noise ? MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)
                                         : line == NY - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)
                                                          : 0,
                                         noise ? noise_value : mr_harness_smooth_line, &arg);
  m->u.acq.head.sample_time_us = noise ? 5.0f : 2.5f;
  m->u.acq.head.scan_counter = (uint32_t)line;
  put_id(b, 1008);
  put(b, &m->u.acq.head, sizeof m->u.acq.head);
  put(b, m->u.acq.data, (size_t)NX * NCH * sizeof(float complex));
  mr_message_unref(m);
}

static const char *header(const char *info) {
  static char xml[4096];
  const char *base = mr_harness_cartesian_header(NX, NY, 1, NX / 2, NY, 1);
  size_t open = strlen("<ismrmrdHeader>");
  snprintf(xml, sizeof xml, "%.*s<measurementInformation>%s</measurementInformation>%s",
           (int)open, base, info, base + open);
  return xml;
}

#define IMAGING_INFO                                                                             \
  "<measurementID>42563_35189578_35189583_25</measurementID>"                                    \
  "<measurementDependency><dependencyType>SenMap</dependencyType><measurementID>" NOISE_ID     \
  "</measurementID></measurementDependency><measurementDependency><dependencyType>Noise"        \
  "</dependencyType><measurementID>" NOISE_ID "</measurementID></measurementDependency>"

/* The noise scan's stream (without its config). */
static void noise_stream(bytes *b, const char *id) {
  char info[256];
  snprintf(info, sizeof info, "<measurementID>%s</measurementID>", id);
  text_message(b, 3, header(info));
  for (int l = 0; l < NOISE_LINES; l++)
    acquisition(b, l, 1);
  put_id(b, 4);
}

/* Sends b on a new connection; everything the server answers, up to its
 * closing the socket. */
static size_t exchange(const bytes *b, uint8_t *reply, size_t size) {
  int fd = mr_test_connect(server.port);
  assert_true(fd >= 0);
  assert_int_equal(mr_test_send_bytes(fd, b->p, b->n), 0);
  size_t got = 0;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    assert_true(poll(&p, 1, 20000) == 1);
    ssize_t n = read(fd, reply + got, size - got);
    assert_true(n >= 0);
    if (n == 0)
      break;
    got += (size_t)n;
    assert_true(got < size);
  }
  close(fd);
  return got;
}

/* Sends b on a new connection and reads the answer as messages. */
static void send_and_receive(const bytes *b, mr_test_reply *r) {
  int fd = mr_test_connect(server.port);
  assert_true(fd >= 0);
  assert_int_equal(mr_test_send_bytes(fd, b->p, b->n), 0);
  mr_test_receive(fd, r, 20000);
  close(fd);
  assert_true(r->got_close);
}

static const uint8_t close_bytes[2] = {4, 0};

/* The query exactly as get_noise_statistics() builds it. */
static void dependency_query(bytes *b, const char *measurement) {
  char xml[2048];
  snprintf(xml, sizeof xml,
           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "      <gadgetronStreamConfiguration xsi:schemaLocation=\"http://gadgetron.sf.net/"
           "gadgetron gadgetron.xsd\"\n"
           "        xmlns=\"http://gadgetron.sf.net/gadgetron\"\n"
           "      xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\n"
           "\n"
           "    <writer>\n"
           "      <slot>1019</slot>\n"
           "      <dll>gadgetron_mricore</dll>\n"
           "      <classname>DependencyQueryWriter</classname>\n"
           "    </writer>\n"
           "\n"
           "    <gadget>\n"
           "      <name>NoiseSummary</name>\n"
           "      <dll>gadgetron_mricore</dll>\n"
           "      <classname>NoiseSummaryGadget</classname>\n"
           "\n"
           "      <property>\n"
           "         <name>noise_file</name>\n"
           "         <value>GadgetronNoiseCovarianceMatrix_%s</value>\n"
           "      </property>\n"
           "    </gadget>\n"
           "\n"
           "</gadgetronStreamConfiguration>\n",
           measurement);
  text_message(b, 2, xml);
  put_id(b, 4);
}

/* The client's reading of the answer: one 1019 (u64 length, meta XML),
 * then CLOSE; the meta's text in meta. */
static void read_query_answer(const uint8_t *reply, size_t n, char *meta, size_t size) {
  assert_true(n >= 12);
  uint16_t id;
  uint64_t len;
  memcpy(&id, reply, 2);
  memcpy(&len, reply + 2, 8);
  assert_int_equal(id, 1019);
  assert_int_equal(n, 2 + 8 + len + 2);
  assert_memory_equal(reply + 10 + len, close_bytes, 2);
  assert_true(len < size);
  memcpy(meta, reply + 10, len);
  meta[len] = '\0';
}

/* A meta value as ISMRMRD's MetaContainer reads it; NAN when absent. */
static double meta_value(const char *meta, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "<name>%s</name><value>", name);
  const char *at = strstr(meta, key);
  return at != NULL ? strtod(at + strlen(key), NULL) : NAN;
}

/* The sigmas the noise lines we send have (double precision). */
static void expected_sigmas(double *lo, double *hi, double *mean) {
  double power[NCH] = {0};
  for (int l = 0; l < NOISE_LINES; l++)
    for (int c = 0; c < NCH; c++)
      for (int s = 0; s < NX; s++) {
        float complex v = noise_value(c, s, &l);
        power[c] += (double)crealf(v * conjf(v));
      }
  *lo = INFINITY, *hi = 0, *mean = 0;
  for (int c = 0; c < NCH; c++) {
    double sigma = sqrt(power[c] / (NOISE_LINES * NX));
    *lo = fmin(*lo, sigma), *hi = fmax(*hi, sigma), *mean += sigma / NCH;
  }
}

static void query_succeeds(const char *measurement) {
  bytes q = {0};
  dependency_query(&q, measurement);
  static uint8_t reply[1 << 16];
  char meta[4096];
  read_query_answer(reply, exchange(&q, reply, sizeof reply), meta, sizeof meta);
  free(q.p);
  /* Gadgetron 4's NoiseSummaryGadget order, status last. */
  const char *order[] = {"noise_dwell_time_us", "min_sigma", "max_sigma", "mean_sigma",
                         "channels", "status</name><value>success"};
  const char *at = meta;
  for (size_t i = 0; i < 6; i++) {
    assert_non_null(at = strstr(at, order[i]));
  }
  double lo, hi, mean;
  expected_sigmas(&lo, &hi, &mean);
  assert_true(meta_value(meta, "noise_dwell_time_us") == 5.0);
  assert_true(meta_value(meta, "channels") == NCH);
  assert_true(fabs(meta_value(meta, "min_sigma") / lo - 1) < 1e-6);
  assert_true(fabs(meta_value(meta, "max_sigma") / hi - 1) < 1e-6);
  assert_true(fabs(meta_value(meta, "mean_sigma") / mean - 1) < 1e-6);
}

static void query_fails(const char *measurement) {
  bytes q = {0};
  dependency_query(&q, measurement);
  uint8_t reply[4096];
  char meta[1024];
  read_query_answer(reply, exchange(&q, reply, sizeof reply), meta, sizeof meta);
  free(q.p);
  assert_non_null(strstr(meta, "<name>status</name><value>failed</value>"));
  assert_null(strstr(meta, "success"));
}

/* An imaging scan on config name; its one image's pixels (NX/2 x NY
 * floats) and attributes. */
static void imaging_scan(const char *config, const char *info, int noise_lines, float *pixels,
                         char *attributes, size_t size) {
  bytes b = {0};
  config_file(&b, config);
  text_message(&b, 3, header(info));
  for (int l = 0; l < noise_lines; l++)
    acquisition(&b, l, 1);
  for (int l = 0; l < NY; l++)
    acquisition(&b, l, 0);
  put_id(&b, 4);
  mr_test_reply r;
  send_and_receive(&b, &r);
  free(b.p);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_TEXT), 0);
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 1);
  const mr_image *im = &r.msgs[0]->u.image;
  assert_int_equal(im->data_bytes, (size_t)NX / 2 * NY * sizeof(float));
  memcpy(pixels, im->data, im->data_bytes);
  snprintf(attributes, size, "%s", im->attributes);
  mr_test_reply_free(&r);
}

static void noise_dependency_workflow(void **state) {
  (void)state;
  /* Before the noise scan: not found, as Gadgetron says it. */
  query_fails(NOISE_ID);
  /* The noise scan on its own connection: nothing comes back but CLOSE. */
  bytes noise = {0};
  config_file(&noise, "default_measurement_dependencies.xml");
  noise_stream(&noise, NOISE_ID);
  uint8_t reply[4096];
  size_t n = exchange(&noise, reply, sizeof reply);
  free(noise.p);
  assert_int_equal(n, 2);
  assert_memory_equal(reply, close_bytes, 2);
  /* The client's query now finds it. */
  query_succeeds(NOISE_ID);
  query_fails("42563_35189578_35189583_99");
  query_fails("../../etc/passwd");
  /* The imaging scan without noise lines uses the stored noise: the same
   * image as with those noise lines in the scan. */
  static float stored[NX / 2 * NY], inscan[NX / 2 * NY], plain[NX / 2 * NY];
  char attr_stored[4096], attr_inscan[4096], attr_plain[4096];
  imaging_scan("default_optimized.xml", IMAGING_INFO, 0, stored, attr_stored,
               sizeof attr_stored);
  imaging_scan("default_optimized.xml", "", NOISE_LINES, inscan, attr_inscan, sizeof attr_inscan);
  imaging_scan("default_optimized.xml", "", 0, plain, attr_plain, sizeof attr_plain);
  assert_memory_equal(stored, inscan, sizeof stored);
  assert_true(mr_test_rel_error_f(plain, stored, NX / 2 * NY) > 1e-3); /* it did whiten */
  assert_non_null(strstr(attr_stored, "<name>NoiseSource</name><value>" NOISE_ID "</value>"));
  assert_non_null(strstr(attr_inscan, "<name>NoiseSource</name><value>scan</value>"));
  assert_null(strstr(attr_plain, "NoiseSource"));
  /* A restart keeps it. */
  assert_int_equal(mr_test_server_stop(&server), 0);
  start_server();
  query_succeeds(NOISE_ID);
}

/* Gadgetron's own default_measurement_dependencies.xml as CONFIG_SCRIPT. */
static void noise_config_as_xml_script(void **state) {
  (void)state;
  static const char xml[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<gadgetronStreamConfiguration xsi:schemaLocation=\"http://gadgetron.sf.net/gadgetron "
      "gadgetron.xsd\"\n        xmlns=\"http://gadgetron.sf.net/gadgetron\"\n"
      "        xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\n"
      "    <gadget>\n        <name>NoiseAdjust</name>\n        <dll>gadgetron_mricore</dll>\n"
      "        <classname>NoiseAdjustGadget</classname>\n        <property>\n"
      "            <name>pass_nonconformant_data</name>\n            <value>true</value>\n"
      "        </property>\n    </gadget>\n</gadgetronStreamConfiguration>\n";
  bytes b = {0};
  text_message(&b, 2, xml);
  noise_stream(&b, "xml_noise_1");
  uint8_t reply[4096];
  size_t n = exchange(&b, reply, sizeof reply);
  free(b.p);
  assert_int_equal(n, 2);
  query_succeeds("xml_noise_1");
}

/* gadgetron_ismrmrd_client -q -c isalive.xml: the name, then CLOSE. */
static void isalive_answers_close(void **state) {
  (void)state;
  bytes b = {0};
  config_file(&b, "isalive.xml");
  put_id(&b, 4);
  uint8_t reply[64];
  size_t n = exchange(&b, reply, sizeof reply);
  free(b.p);
  assert_int_equal(n, 2);
  assert_memory_equal(reply, close_bytes, 2);
}

/* ismrmrd_dump.xml: CLOSE alone, and the stream stored as it came. */
static void dump_stores_the_stream(void **state) {
  (void)state;
  bytes stream = {0}, b = {0};
  text_message(&stream, 3, header("<measurementID>dumped_1</measurementID>"));
  for (int l = 0; l < NY; l++)
    acquisition(&stream, l, 0);
  put_id(&stream, 4);
  config_file(&b, "ismrmrd_dump.xml");
  put(&b, stream.p, stream.n);
  uint8_t reply[64];
  size_t n = exchange(&b, reply, sizeof reply);
  assert_int_equal(n, 2);
  assert_memory_equal(reply, close_bytes, 2);
  char path[512];
  snprintf(path, sizeof path, "%s/dumps", state_dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  int files = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    files++;
    assert_non_null(strstr(e->d_name, "-dumped_1-"));
    char file[1024];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    uint8_t *got = malloc(stream.n + 1);
    size_t len = fread(got, 1, stream.n + 1, f);
    fclose(f);
    assert_int_equal(len, stream.n);
    assert_memory_equal(got, stream.p, stream.n);
    free(got);
  }
  closedir(d);
  assert_int_equal(files, 1);
  free(stream.p);
  free(b.p);
}

/* A noise scan whose measurementID could name a path: refused with a
 * line, nothing written outside the store. */
static void hostile_noise_id_refused(void **state) {
  (void)state;
  bytes b = {0};
  config_file(&b, "default_measurement_dependencies.xml");
  noise_stream(&b, "../../escaped");
  mr_test_reply r;
  send_and_receive(&b, &r);
  free(b.p);
  assert_non_null(mr_test_reply_text(&r, "cannot name a stored noise"));
  mr_test_reply_free(&r);
  char path[512];
  snprintf(path, sizeof path, "%s/../escaped.noise", state_dir);
  assert_int_equal(access(path, F_OK), -1);
  query_fails("../../escaped");
}

static int count_dumps(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/dumps", state_dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  int files = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    files += e->d_name[0] != '.' || strncmp(e->d_name, ".tmp-", 5) == 0;
  closedir(d);
  return files;
}

/* --dump-max-mib 1: a longer stream is refused and leaves nothing; two
 * that fit one by one but not together leave the newer. */
static void dumps_are_bounded(void **state) {
  (void)state;
  assert_int_equal(mr_test_server_stop(&server), 0);
  const char *args[] = {"--state-dir", state_dir, "--dump-max-mib", "1", NULL};
  mr_test_server_start(&server, args);
  const int line_bytes = 2 + 340 + NX * NCH * 8;
  for (int round = 0; round < 3; round++) {
    int lines = round == 0 ? (1 << 20) / line_bytes + 10 : (1 << 20) / line_bytes * 2 / 3;
    bytes b = {0};
    config_file(&b, "ismrmrd_dump.xml");
    text_message(&b, 3, header("<measurementID>big</measurementID>"));
    for (int l = 0; l < lines; l++)
      acquisition(&b, l % NY, 0);
    put_id(&b, 4);
    mr_test_reply r;
    send_and_receive(&b, &r);
    free(b.p);
    if (round == 0)
      assert_non_null(mr_test_reply_text(&r, "would together pass the limit of 1048576 bytes"));
    else
      assert_int_equal(r.n, 1);
    mr_test_reply_free(&r);
    assert_int_equal(count_dumps(), round == 0 ? 0 : 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(noise_dependency_workflow, setup, teardown),
      cmocka_unit_test_setup_teardown(noise_config_as_xml_script, setup, teardown),
      cmocka_unit_test_setup_teardown(isalive_answers_close, setup, teardown),
      cmocka_unit_test_setup_teardown(dump_stores_the_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(hostile_noise_id_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(dumps_are_bounded, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
