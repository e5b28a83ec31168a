/* Writes the fuzzers' seed corpus: sessions as real clients send them.
 *
 *   mr-fuzz-corpus OUTDIR [DATA.h5 ...]
 *
 * A few hand-made sessions (queries only, the noise-dependency query, a
 * JSON CONFIG_SCRIPT, a header-less CLOSE, Python-style NUL-terminated
 * strings, NHLBI-compressed lines, a server's DICOM message), seeds of
 * the NHLBI decoder and of the XML readers, and, for each ISMRMRD file, the session reconclient
 * would send for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "encode.h"
#include "gadget_harness.h"
#include "nhlbi_encode.h"

typedef struct stream {
  FILE *f;
  size_t bytes, cap;
} stream;

static void put(stream *s, mr_message *m) {
  uint8_t *b;
  size_t len;
  if (m != NULL && s->bytes < s->cap && mr_encode_flat(m, &b, &len) == 0) {
    fwrite(b, 1, len, s->f);
    s->bytes += len;
    free(b);
  }
  mr_message_unref(m);
}

static stream open_stream(const char *dir, const char *name, size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  stream s = {fopen(path, "wb"), 0, cap};
  if (s.f == NULL) {
    perror(path);
    exit(1);
  }
  return s;
}

static mr_message *text(mr_message_kind kind, const char *t, int nul) {
  return mr_message_new_text(kind, t, strlen(t) + (nul ? 1 : 0));
}

static float complex ramp(int c, int s, void *arg) {
  (void)arg;
  return (float)(s - 4) + I * (float)c;
}

/* compress: 0 plain, else NHLBI lines alternating -P 12 and -T 0.01. */
static void synthetic_scan(stream *s, int nul, int compress) {
  put(s, text(MR_MSG_HEADER, mr_harness_cartesian_header(16, 8, 1, 8, 8, 1), nul));
  for (int e1 = 0; e1 < 8; e1++) {
    mr_message *m = mr_harness_acquisition(
        16, 2, e1, 0, e1 == 7 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0, ramp, NULL);
    if (compress && m != NULL)
      mr_test_nhlbi_compress_acquisition(m, e1 % 2 ? 12 : 0, 0.01f);
    put(s, m);
  }
  put(s, mr_message_new(MR_MSG_CLOSE));
}

/* A seed of the nhlbi target: u16 samples, u8 channels, the block. */
static void nhlbi_seed(const char *dir, const char *name, int samples, int channels,
                       unsigned bits, float tolerance) {
  size_t n = 2 * (size_t)samples * channels;
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = (float)((int)(i * 37 % 101) - 50) * 0.75f;
  uint8_t *block = NULL;
  size_t len = 0;
  int rc = bits > 0 ? mr_test_nhlbi_precision(v, n, bits, &block, &len)
                    : mr_test_nhlbi_tolerance(v, n, tolerance, &block, &len);
  stream s = open_stream(dir, name, SIZE_MAX);
  uint8_t head[3] = {(uint8_t)samples, (uint8_t)(samples >> 8), (uint8_t)channels};
  if (rc == 0) {
    fwrite(head, 1, 3, s.f);
    fwrite(block, 1, len, s.f);
  }
  fclose(s.f);
  free(block);
  free(v);
}

/* A seed of the xml target: the text alone. */
static void xml_seed(const char *dir, const char *name, const char *xml) {
  stream s = open_stream(dir, name, SIZE_MAX);
  fwrite(xml, 1, strlen(xml), s.f);
  fclose(s.f);
}

static void xml_seeds(const char *dir) {
  xml_seed(dir, "xml_header", mr_harness_cartesian_header(16, 8, 1, 8, 8, 1));
  xml_seed(dir, "xml_header_study",
           "<?xml version=\"1.0\"?><ismrmrdHeader xmlns=\"http://www.ismrm.org/ISMRMRD\">"
           "<subjectInformation><patientName>P\xc3\xa9</patientName><patientID>7</patientID>"
           "</subjectInformation><studyInformation><studyDate>2024-05-17</studyDate>"
           "<studyInstanceUID>1.2.3</studyInstanceUID></studyInformation>"
           "<measurementInformation><measurementID>M1</measurementID><measurementDependency>"
           "<dependencyType>Noise</dependencyType><measurementID>N1</measurementID>"
           "</measurementDependency></measurementInformation>"
           "<sequenceParameters><TR>4.5</TR><TE>2</TE><TI>300</TI></sequenceParameters>"
           "</ismrmrdHeader>");
  xml_seed(dir, "xml_gadgetron_chain",
           "<gadgetronStreamConfiguration><gadget><name>A</name>"
           "<classname>AcquisitionAccumulateTriggerGadget</classname></gadget><gadget>"
           "<name>R</name><classname>SimpleReconGadget</classname></gadget><gadget><name>E"
           "</name><classname>ExtractGadget</classname><property><name>extract_mask</name>"
           "<value>8</value></property></gadget></gadgetronStreamConfiguration>");
  xml_seed(dir, "xml_dependency_query",
           "<gadgetronStreamConfiguration><gadget><classname>NoiseSummaryGadget</classname>"
           "<property><name>noise_file</name><value>GadgetronNoiseCovarianceMatrix_42</value>"
           "</property></gadget></gadgetronStreamConfiguration>");
  xml_seed(dir, "xml_entity",
           "<!DOCTYPE ismrmrdHeader [<!ENTITY a \"aaaaaaaa\">]><ismrmrdHeader>"
           "<measurementInformation><measurementID>&a;&a;</measurementID>"
           "</measurementInformation></ismrmrdHeader>");
}

static void hand_made(const char *dir) {
  stream s = open_stream(dir, "queries", SIZE_MAX);
  put(&s, mr_message_new_query(MR_MSG_QUERY, 1, "gadgetron::version", 18));
  put(&s, mr_message_new_query(MR_MSG_QUERY, 2, "mrrecon::configs\0", 17));
  put(&s, mr_message_new(MR_MSG_CLOSE));
  fclose(s.f);

  s = open_stream(dir, "dependency_query", SIZE_MAX);
  put(&s, text(MR_MSG_CONFIG_SCRIPT,
               "<?xml version=\"1.0\"?><gadgetronStreamConfiguration><gadget>"
               "<classname>NoiseSummaryGadget</classname></gadget></gadgetronStreamConfiguration>",
               0));
  put(&s, mr_message_new(MR_MSG_CLOSE));
  fclose(s.f);

  s = open_stream(dir, "header_less_close", SIZE_MAX);
  put(&s, mr_message_new_config_file("default.xml"));
  put(&s, mr_message_new(MR_MSG_CLOSE));
  fclose(s.f);

  s = open_stream(dir, "config_script_python_style", SIZE_MAX);
  put(&s, text(MR_MSG_CONFIG_SCRIPT,
               "{\"name\":\"s\",\"gadgets\":[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
               "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\",\"type\":\"complex\"}]}",
               1));
  put(&s, text(MR_MSG_TEXT, "hello", 1));
  synthetic_scan(&s, 1, 0);
  fclose(s.f);

  s = open_stream(dir, "cartesian_synthetic", SIZE_MAX);
  put(&s, mr_message_new_config_file("default.xml"));
  synthetic_scan(&s, 0, 0);
  fclose(s.f);

  s = open_stream(dir, "cartesian_nhlbi_compressed", SIZE_MAX);
  put(&s, mr_message_new_config_file("default.xml"));
  synthetic_scan(&s, 0, 1);
  fclose(s.f);

  /* What a server answers with a DICOM writer (message 1018), for the
   * decoder; the session refuses it from a client. */
  s = open_stream(dir, "dicom_from_server", SIZE_MAX);
  uint8_t *file = malloc(132);
  if (file != NULL) {
    memset(file, 0, 132);
    memcpy(file + 128, "DICM", 4);
  }
  put(&s, file != NULL ? mr_message_new_dicom(file, 132, "image_1_000001",
                                              "<ismrmrdMeta></ismrmrdMeta>")
                       : NULL);
  put(&s, mr_message_new(MR_MSG_CLOSE));
  fclose(s.f);

  nhlbi_seed(dir, "nhlbi_precision_3bits", 5, 1, 3, 0);
  nhlbi_seed(dir, "nhlbi_precision_16bits", 16, 2, 16, 0);
  nhlbi_seed(dir, "nhlbi_tolerance", 32, 3, 0, 0.3f);
  xml_seeds(dir);
}

/* The session for one ISMRMRD file, cut off at cap bytes of data. */
static int from_dataset(const char *dir, const char *path, int index) {
  mr_dataset *ds = NULL;
  mr_err err = {0};
  if (mr_dataset_open(path, "dataset", &ds, &err) < 0) {
    fprintf(stderr, "mr-fuzz-corpus: %s\n", err.msg);
    return 1;
  }
  char name[64];
  snprintf(name, sizeof name, "dataset_%d", index);
  stream s = open_stream(dir, name, 256u << 10);
  put(&s, mr_message_new_config_file("default.xml"));
  put(&s, text(MR_MSG_HEADER, mr_dataset_header(ds), 0));
  mr_message *m = NULL;
  while (mr_dataset_next(ds, &m, &err) == 0 && m != NULL)
    put(&s, m);
  s.cap = SIZE_MAX;
  put(&s, mr_message_new(MR_MSG_CLOSE));
  fclose(s.f);
  mr_dataset_close(ds);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: mr-fuzz-corpus OUTDIR [DATA.h5 ...]\n"
             "writes the fuzzers' seed sessions into OUTDIR (which must exist): hand-made\n"
             "ones, NHLBI decoder and XML reader seeds, and the session reconclient sends for each DATA.h5\n");
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  /* It takes no options: anything like one is a mistake, not a folder. */
  for (int i = 1; i < argc; i++)
    if (argv[i][0] == '-') {
      fprintf(stderr, "mr-fuzz-corpus: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  hand_made(argv[1]);
  int failed = 0;
  for (int i = 2; i < argc; i++)
    failed |= from_dataset(argv[1], argv[i], i - 2);
  return failed;
}
