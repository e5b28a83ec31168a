#include "bart_cfl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfl.h"
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

void bart_run(const char *command, const size_t dims[4], const mr_cfloat *in, size_t out_n,
              mr_cfloat *out) {
  char dir[] = "/tmp/mr_bart_XXXXXX", cmd[512], in_name[64], out_name[64];
  if (mkdtemp(dir) == NULL)
    fail_msg("mkdtemp failed");
  snprintf(in_name, sizeof in_name, "%s/in", dir);
  snprintf(out_name, sizeof out_name, "%s/out", dir);
  const long in_dims[4] = {(long)dims[0], (long)dims[1], (long)dims[2], (long)dims[3]};
  if (cfl_write(in_name, 4, in_dims, in) != 0)
    fail_msg("cannot write %s.cfl", in_name);
  snprintf(cmd, sizeof cmd, "bart %s %s %s > /dev/null", command, in_name, out_name);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
  long out_dims[CFL_MAX_DIMS];
  mr_cfloat *got = cfl_read(out_name, out_dims);
  if (got == NULL || (size_t)cfl_size(out_dims) < out_n)
    fail_msg("%s.cfl: cannot read %zu values", out_name, out_n);
  memcpy(out, got, out_n * sizeof *out);
  free(got);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fail_msg("%s failed", cmd);
}
