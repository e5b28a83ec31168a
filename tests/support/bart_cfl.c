#include "bart_cfl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

int bart_cfl_have_bart(void) { return system("command -v bart > /dev/null 2>&1") == 0; }

static FILE *open_file(const char *base, const char *ext, const char *mode) {
  char path[512];
  snprintf(path, sizeof path, "%s.%s", base, ext);
  FILE *f = fopen(path, mode);
  if (f == NULL)
    fail_msg("cannot open %s", path);
  return f;
}

void bart_cfl_write(const char *base, const size_t dims[4], const mr_cfloat *x) {
  FILE *f = open_file(base, "hdr", "w");
  fprintf(f, "# Dimensions\n%zu %zu %zu %zu 1\n", dims[0], dims[1], dims[2], dims[3]);
  fclose(f);
  f = open_file(base, "cfl", "wb");
  size_t n = dims[0] * dims[1] * dims[2] * dims[3];
  size_t wrote = fwrite(x, sizeof *x, n, f);
  fclose(f);
  if (wrote != n)
    fail_msg("%s.cfl: wrote %zu of %zu values", base, wrote, n);
}

void bart_cfl_read(const char *base, size_t n, mr_cfloat *x) {
  FILE *f = open_file(base, "cfl", "rb");
  size_t got = fread(x, sizeof *x, n, f);
  fclose(f);
  if (got != n)
    fail_msg("%s.cfl: read %zu of %zu values", base, got, n);
}
