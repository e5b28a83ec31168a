/* reconclient: talks to a reconstruction server (ours or Gadgetron 4.x). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "net.h"
#include "query.h"
#include "send.h"
#include "simulate.h"

#define DEFAULT_TIMEOUT_MS 60000

static void usage(FILE *out) {
  fprintf(out,
          "usage: reconclient COMMAND [options]\n"
          "commands:\n"
          "  send DATA.h5   stream an ISMRMRD dataset through a server config; write the images\n"
          "  ping           ask the server's version; exit 0 if it answers in time\n"
          "  info           print the server's description and its compute devices\n"
          "  configs        list the server's configs\n"
          "  simulate       write a simulated non-Cartesian (or Cartesian) dataset; see simulate -h\n"
          "options of every command:\n"
          "  -a, --address HOST      server host name or address (default 127.0.0.1)\n"
          "  -p, --port PORT         server port (default 9002)\n"
          "  -t, --timeout MS        give up when the server is silent this long, connecting\n"
          "                          included (default %d)\n"
          "options of send:\n"
          "  -c, --config NAME       a config installed on the server (default default.xml)\n"
          "  -C, --config-file FILE  a JSON config sent with the data (CONFIG_SCRIPT)\n"
          "  -o, --out FILE          HDF5 file for the images (default out.h5)\n"
          "  -g, --in-group NAME     dataset group in DATA.h5 (default dataset)\n"
          "  -G, --out-group NAME    group for the images in FILE (default: the config name);\n"
          "                          an existing group is never appended to\n"
          "      --png DIR           also write each 2D image as an 8-bit PNG into DIR\n"
          "      --dicom DIR         where the server's DICOM files go (default .), named as\n"
          "                          Gadgetron's client names them: GROUP_000000.dcm, ...\n"
          "      --dicom-images      also write each image as DICOM files into the --dicom DIR\n"
          "      --max-files N       write at most N files into the PNG and DICOM folders\n"
          "                          together; more fails the command (default %u)\n",
          DEFAULT_TIMEOUT_MS, MR_SEND_MAX_FILES);
}

static int parse_int(const char *flag, const char *text, int min, int max, int *out) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "reconclient: %s must be an integer in %d..%d, got '%s'\n", flag, min, max,
            text);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int fail(const mr_err *err, int rc) {
  fprintf(stderr, "reconclient: %s\n", mr_err_text(err, rc));
  return 1;
}

static int cmd_send(const mr_send_options *o) {
  mr_send_report rep;
  mr_err err = {0};
  int rc = mr_send_run(o, &rep, &err);
  if (rep.images > 0) {
    double mb = (double)rep.acq_bytes / 1e6;
    printf("%llu image%s -> %s:/%s (%llu acquisitions", (unsigned long long)rep.images,
           rep.images == 1 ? "" : "s", o->out_path, rep.out_group,
           (unsigned long long)rep.acquisitions);
    if (rep.waveforms > 0)
      printf(", %llu waveforms", (unsigned long long)rep.waveforms);
    printf(", %.1f MB", mb);
    if (rep.acq_seconds > 0)
      printf(" sent at %.0f MB/s", mb / rep.acq_seconds);
    printf("; %.2f s in all)\n", rep.seconds);
  }
  return rc < 0 ? fail(&err, rc) : 0;
}

static int cmd_query(const char *command, const char *host, int port, int timeout_ms) {
  static const char *const version[] = {"gadgetron::version"};
  static const char *const info[] = {"gadgetron::info", "gadgetron::cuda::devices"};
  static const char *const configs[] = {"mrrecon::configs"};
  const char *const *keys = configs;
  size_t n = 1;
  if (strcmp(command, "ping") == 0) {
    keys = version;
  } else if (strcmp(command, "info") == 0) {
    keys = info;
    n = 2;
  }
  char *answers[2] = {NULL, NULL};
  mr_err err = {0};
  int64_t start = mr_net_now_ms();
  int rc = mr_query_ask(host, port, timeout_ms, keys, n, answers, &err);
  if (rc == 0) {
    /* What a server answers is escaped: it must not drive the terminal. */
    if (keys == version) {
      printf("server version ");
      mr_escape_write(stdout, answers[0], strlen(answers[0]), MR_ESCAPE_KEEP_UTF8);
      printf(" at %s:%d answered in %lld ms\n", host, port,
             (long long)(mr_net_now_ms() - start));
    } else if (keys == info) {
      size_t len = strlen(answers[0]);
      mr_escape_write(stdout, answers[0], len, MR_ESCAPE_KEEP_LINES | MR_ESCAPE_KEEP_UTF8);
      printf("%scuda devices: ", len > 0 && answers[0][len - 1] == '\n' ? "" : "\n");
      mr_escape_write(stdout, answers[1], strlen(answers[1]), MR_ESCAPE_KEEP_UTF8);
      printf("\n");
    } else {
      rc = mr_query_print_configs(answers[0], stdout, &err);
    }
  }
  for (size_t i = 0; i < n; i++)
    free(answers[i]);
  return rc < 0 ? fail(&err, rc) : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *command = argv[1];
  if (strcmp(command, "simulate") == 0)
    return mr_simulate_command(argc - 1, argv + 1);
  int is_send = strcmp(command, "send") == 0;
  if (!is_send && strcmp(command, "ping") != 0 && strcmp(command, "info") != 0 &&
      strcmp(command, "configs") != 0) {
    fprintf(stderr, "reconclient: unknown command '%s' (send, ping, info, configs)\n", command);
    return 2;
  }
  mr_send_options o = {
      .in_group = "dataset",
      .config_name = "default.xml",
      .out_path = "out.h5",
      .host = "127.0.0.1",
      .port = 9002,
      .timeout_ms = DEFAULT_TIMEOUT_MS,
  };
  enum { OPT_PNG = 256, OPT_DICOM, OPT_DICOM_IMAGES, OPT_MAX_FILES };
  static const struct option longopts[] = {
      {"address", required_argument, NULL, 'a'},  {"port", required_argument, NULL, 'p'},
      {"timeout", required_argument, NULL, 't'},  {"config", required_argument, NULL, 'c'},
      {"config-file", required_argument, NULL, 'C'}, {"out", required_argument, NULL, 'o'},
      {"in-group", required_argument, NULL, 'g'}, {"out-group", required_argument, NULL, 'G'},
      {"png", required_argument, NULL, OPT_PNG},  {"help", no_argument, NULL, 'h'},
      {"dicom", required_argument, NULL, OPT_DICOM},
      {"dicom-images", no_argument, NULL, OPT_DICOM_IMAGES},
      {"max-files", required_argument, NULL, OPT_MAX_FILES},
      {NULL, 0, NULL, 0},
  };
  /* getopt sees the command as its argv[0]. */
  int ch;
  while ((ch = getopt_long(argc - 1, argv + 1, "a:p:t:c:C:o:g:G:h", longopts, NULL)) != -1) {
    if (!is_send && ch != 'a' && ch != 'p' && ch != 't' && ch != 'h' && ch != '?') {
      fprintf(stderr, "reconclient: %s takes only -a, -p and -t\n", command);
      return 2;
    }
    switch (ch) {
    case 'a':
      o.host = optarg;
      break;
    case 'p':
      if (parse_int("-p", optarg, 1, 65535, &o.port) < 0)
        return 2;
      break;
    case 't':
      if (parse_int("-t", optarg, 1, 86400000, &o.timeout_ms) < 0)
        return 2;
      break;
    case 'c':
      o.config_name = optarg;
      break;
    case 'C':
      o.config_script = optarg;
      break;
    case 'o':
      o.out_path = optarg;
      break;
    case 'g':
      o.in_group = optarg;
      break;
    case 'G':
      o.out_group = optarg;
      break;
    case OPT_PNG:
      o.png_dir = optarg;
      break;
    case OPT_DICOM:
      o.dicom_dir = optarg;
      break;
    case OPT_DICOM_IMAGES:
      o.dicom_images = 1;
      break;
    case OPT_MAX_FILES: {
      int n;
      if (parse_int("--max-files", optarg, 1, INT32_MAX, &n) < 0)
        return 2;
      o.max_files = (unsigned)n;
      break;
    }
    case 'h':
      usage(stdout);
      return 0;
    default: /* getopt said which option */
      usage(stderr);
      return 2;
    }
  }
  int rest = argc - 1 - optind;
  if (!is_send) {
    if (rest != 0) {
      fprintf(stderr, "reconclient: %s takes no arguments\n", command);
      return 2;
    }
    return cmd_query(command, o.host, o.port, o.timeout_ms);
  }
  if (rest != 1) {
    fprintf(stderr, "reconclient: send takes one dataset file (reconclient send DATA.h5)\n");
    return 2;
  }
  o.data_path = argv[1 + optind];
  return cmd_send(&o);
}
