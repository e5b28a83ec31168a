#include "cfl.h"

#include <stdio.h>
#include <stdlib.h>

int cfl_write(const char *name, int ndims, const long *dims, const float complex *data) {
  char path[4096];
  long n = 1;
  snprintf(path, sizeof path, "%s.hdr", name);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fprintf(f, "# Dimensions\n");
  for (int d = 0; d < ndims; d++) {
    fprintf(f, "%ld ", dims[d]);
    n *= dims[d];
  }
  fprintf(f, "\n");
  if (fclose(f) != 0)
    return -1;
  snprintf(path, sizeof path, "%s.cfl", name);
  if ((f = fopen(path, "wb")) == NULL)
    return -1;
  int ok = fwrite(data, sizeof *data, (size_t)n, f) == (size_t)n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

long cfl_size(const long dims[CFL_MAX_DIMS]) {
  long n = 1;
  for (int d = 0; d < CFL_MAX_DIMS; d++)
    n *= dims[d];
  return n;
}

float complex *cfl_read(const char *name, long dims[CFL_MAX_DIMS]) {
  char path[4096], line[1024];
  for (int d = 0; d < CFL_MAX_DIMS; d++)
    dims[d] = 1;
  snprintf(path, sizeof path, "%s.hdr", name);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    if (line[0] == '#')
      continue;
    char *p = line, *end;
    for (int d = 0; d < CFL_MAX_DIMS; d++, p = end) {
      long v = strtol(p, &end, 10);
      if (end == p)
        break;
      dims[d] = v;
      found = v > 0;
    }
  }
  fclose(f);
  long n = cfl_size(dims);
  if (!found || n <= 0)
    return NULL;
  snprintf(path, sizeof path, "%s.cfl", name);
  float complex *data = malloc((size_t)n * sizeof *data);
  if (data == NULL || (f = fopen(path, "rb")) == NULL) {
    free(data);
    return NULL;
  }
  int ok = fread(data, sizeof *data, (size_t)n, f) == (size_t)n;
  fclose(f);
  if (!ok) {
    free(data);
    return NULL;
  }
  return data;
}
