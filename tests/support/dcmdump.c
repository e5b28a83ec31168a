#include "dcmdump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mr_test_have_dcmdump(void) { return system("dcmdump --version >/dev/null 2>&1") == 0; }

char *mr_test_dcmdump(const char *path) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "dcmdump +L '%s' 2>&1", path);
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap);
  for (size_t got; text != NULL && (got = fread(text + n, 1, cap - n - 1, p)) > 0;) {
    n += got;
    if (n + 1 == cap)
      text = realloc(text, cap *= 2);
  }
  int rc = pclose(p);
  if (text == NULL || rc != 0) {
    free(text);
    return NULL;
  }
  text[n] = '\0';
  return text;
}

char *mr_test_dcmdump_bytes(const void *bytes, size_t len) {
  char path[] = "/tmp/mr-dicom-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return NULL;
  ssize_t put = write(fd, bytes, len);
  close(fd);
  char *text = put == (ssize_t)len ? mr_test_dcmdump(path) : NULL;
  unlink(path);
  return text;
}

int mr_test_dcm_value(const char *dump, const char *tag, char *out, size_t size) {
  const char *line = strstr(dump, tag);
  if (line == NULL || strlen(line) < strlen(tag) + 4)
    return -1;
  const char *v = line + strlen(tag) + 4; /* " VR " */
  const char *end;
  if (*v == '[')
    end = strchr(++v, ']');
  else
    end = strstr(v, " #");
  if (end == NULL)
    return -1;
  while (end > v && end[-1] == ' ')
    end--;
  snprintf(out, size, "%.*s", (int)(end - v), v);
  return 0;
}

int mr_test_dcm_numbers(const char *dump, const char *tag, double *out, int n) {
  char v[512];
  if (mr_test_dcm_value(dump, tag, v, sizeof v) < 0)
    return -1;
  char *p = v;
  for (int i = 0; i < n; i++) {
    char *end;
    out[i] = strtod(p, &end);
    if (end == p || (i + 1 < n && *end != '\\'))
      return -1;
    p = end + 1;
  }
  return 0;
}

static int unit(const float v[3]) {
  return fabs(sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]) - 1) < 1e-3;
}

const char *mr_test_dcm_matches(const char *dump, const ISMRMRD_ImageHeader *h, const float *px,
                                unsigned plane) {
  static char why[256];
  double rows, cols, spacing[2], thick, orient[6], pos[3], slope, intercept;
  if (mr_test_dcm_numbers(dump, "(0028,0010)", &rows, 1) < 0 ||
      mr_test_dcm_numbers(dump, "(0028,0011)", &cols, 1) < 0 ||
      mr_test_dcm_numbers(dump, "(0028,0030)", spacing, 2) < 0 ||
      mr_test_dcm_numbers(dump, "(0018,0050)", &thick, 1) < 0 ||
      mr_test_dcm_numbers(dump, "(0020,0037)", orient, 6) < 0 ||
      mr_test_dcm_numbers(dump, "(0020,0032)", pos, 3) < 0 ||
      mr_test_dcm_numbers(dump, "(0028,1053)", &slope, 1) < 0 ||
      mr_test_dcm_numbers(dump, "(0028,1052)", &intercept, 1) < 0)
    return "a geometry or rescale tag is missing";
  if (rows != h->matrix_size[1] || cols != h->matrix_size[0])
    return "Rows / Columns differ from the matrix";
  double dx = h->field_of_view[0] / h->matrix_size[0], dy = h->field_of_view[1] / h->matrix_size[1],
         dz = h->field_of_view[2] / h->matrix_size[2];
  if (fabs(spacing[0] - dy) > 1e-4 || fabs(spacing[1] - dx) > 1e-4 || fabs(thick - dz) > 1e-4)
    return "PixelSpacing or SliceThickness differ from field_of_view / matrix_size";
  /* Copied out: the packed header's floats may be misaligned. */
  float r[3] = {1, 0, 0}, p[3] = {0, 1, 0}, s[3] = {0, 0, 1}, hr[3], hp[3], hs[3];
  memcpy(hr, h->read_dir, sizeof hr);
  memcpy(hp, h->phase_dir, sizeof hp);
  memcpy(hs, h->slice_dir, sizeof hs);
  if (unit(hr) && unit(hp) && unit(hs)) {
    memcpy(r, hr, sizeof r);
    memcpy(p, hp, sizeof p);
    memcpy(s, hs, sizeof s);
  }
  double z = (double)(plane % h->matrix_size[2]) - 0.5 * (h->matrix_size[2] - 1);
  for (int k = 0; k < 3; k++) {
    double want = h->position[k] - (0.5 * h->field_of_view[0] - 0.5 * dx) * r[k] -
                  (0.5 * h->field_of_view[1] - 0.5 * dy) * p[k] + z * dz * s[k];
    if (fabs(orient[k] - r[k]) > 1e-5 || fabs(orient[3 + k] - p[k]) > 1e-5)
      return "ImageOrientationPatient differs from read_dir / phase_dir";
    if (fabs(pos[k] - want) > 1e-3 * (1 + fabs(want))) {
      snprintf(why, sizeof why, "ImagePositionPatient[%d] is %g, the image says %g", k, pos[k],
               want);
      return why;
    }
  }
  const char *ow = strstr(dump, "(7fe0,0010) OW ");
  if (ow == NULL || slope <= 0)
    return "no 16-bit PixelData or no positive RescaleSlope";
  ow += strlen("(7fe0,0010) OW ");
  size_t n = (size_t)h->matrix_size[0] * h->matrix_size[1];
  const float *v = px + n * plane;
  for (size_t i = 0; i < n; i++) {
    char *next;
    unsigned long stored = strtoul(ow, &next, 16);
    if (next == ow)
      return "PixelData has fewer values than pixels";
    double got = stored * slope + intercept;
    if (fabs(got - v[i]) > 0.5 * slope * 1.0001 + 1e-9 * fabs(v[i])) {
      snprintf(why, sizeof why, "pixel %zu is %g in DICOM, %g in the image", i, got, v[i]);
      return why;
    }
    ow = next + (*next == '\\');
  }
  return NULL;
}
