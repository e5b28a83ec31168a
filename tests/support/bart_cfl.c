#include "bart_cfl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_gpu_common.h"
#include "test_support.h"

int bart_test_init(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--bart") == 0) {
    if (system("command -v bart > /dev/null 2>&1") != 0) {
      fprintf(stderr, "skipped: no bart on the PATH\n");
      exit(MR_TEST_SKIP);
    }
    gpu_test_init(1, argv);
    return 2;
  }
  return gpu_test_init(argc, argv);
}

static FILE *open_file(const char *dir, const char *name, const char *mode) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (f == NULL)
    fail_msg("cannot open %s", path);
  return f;
}

void bart_run(const char *command, const size_t dims[4], const mr_cfloat *in, size_t out_n,
              mr_cfloat *out) {
  char dir[] = "/tmp/mr_bart_XXXXXX", cmd[512];
  if (mkdtemp(dir) == NULL)
    fail_msg("mkdtemp failed");
  FILE *f = open_file(dir, "in.hdr", "w");
  fprintf(f, "# Dimensions\n%zu %zu %zu %zu 1\n", dims[0], dims[1], dims[2], dims[3]);
  fclose(f);
  f = open_file(dir, "in.cfl", "wb");
  size_t n = dims[0] * dims[1] * dims[2] * dims[3], done = fwrite(in, sizeof *in, n, f);
  fclose(f);
  if (done != n)
    fail_msg("%s/in.cfl: wrote %zu of %zu values", dir, done, n);
  snprintf(cmd, sizeof cmd, "bart %s %s/in %s/out > /dev/null", command, dir, dir);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
  f = open_file(dir, "out.cfl", "rb");
  done = fread(out, sizeof *out, out_n, f);
  fclose(f);
  if (done != out_n)
    fail_msg("%s/out.cfl: read %zu of %zu values", dir, done, out_n);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
}
