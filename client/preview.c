#include "preview.h"

#include <assert.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"
#include "png_file.h"

#define LOW_PERCENTILE 1.0
#define HIGH_PERCENTILE 99.5

/* Pixel i of an ISMRMRD image as a magnitude. */
static float magnitude(const void *data, uint16_t type, size_t i) {
  switch (type) {
  case ISMRMRD_USHORT:
    return ((const uint16_t *)data)[i];
  case ISMRMRD_SHORT:
    return (float)abs(((const int16_t *)data)[i]);
  case ISMRMRD_UINT:
    return (float)((const uint32_t *)data)[i];
  case ISMRMRD_INT:
    return fabsf((float)((const int32_t *)data)[i]);
  case ISMRMRD_FLOAT:
    return fabsf(((const float *)data)[i]);
  case ISMRMRD_DOUBLE:
    return (float)fabs(((const double *)data)[i]);
  case ISMRMRD_CXFLOAT:
    return cabsf(((const float complex *)data)[i]);
  case ISMRMRD_CXDOUBLE:
    return (float)cabs(((const double complex *)data)[i]);
  default:
    return 0;
  }
}

/* The k-th smallest of v[0..n) (Wirth's selection; reorders v). */
static float select_kth(float *v, ptrdiff_t n, ptrdiff_t k) {
  ptrdiff_t l = 0, m = n - 1;
  while (l < m) {
    float x = v[k];
    ptrdiff_t i = l, j = m;
    do {
      while (v[i] < x)
        i++;
      while (x < v[j])
        j--;
      if (i <= j) {
        float t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    } while (i <= j);
    if (j < k)
      l = i;
    if (k < i)
      m = j;
  }
  return v[k];
}

/* The display window of n magnitudes (reorders mag). */
static void window(float *mag, size_t n, float *lo, float *hi) {
  ptrdiff_t klo = (ptrdiff_t)(LOW_PERCENTILE / 100.0 * (double)(n - 1));
  ptrdiff_t khi = (ptrdiff_t)(HIGH_PERCENTILE / 100.0 * (double)(n - 1));
  *hi = select_kth(mag, (ptrdiff_t)n, khi);
  *lo = select_kth(mag, (ptrdiff_t)n, klo);
  if (!(*hi > *lo)) { /* a flat image: show it against its full range */
    float mn = mag[0], mx = mag[0];
    for (size_t i = 1; i < n; i++) {
      mn = fminf(mn, mag[i]);
      mx = fmaxf(mx, mag[i]);
    }
    *lo = mn;
    *hi = mx;
  }
}

int mr_preview_write(const char *dir, const char *stem, const mr_image *im, mr_err *err) {
  const ISMRMRD_ImageHeader *h = &im->head;
  /* The header, not a product of its fields, says how many pixels there
   * are: it must match the buffer first. */
  if (mr_payload_image_matches(im) < 0)
    return mr_err_set(err, MR_EDATA,
                      "image %s: %u x %u x %u pixels x %u channels of data_type %u do not match "
                      "its %zu bytes of data",
                      stem, h->matrix_size[0], h->matrix_size[1], h->matrix_size[2], h->channels,
                      h->data_type, im->data_bytes);
  if (im->data_bytes == 0)
    return mr_err_set(err, MR_EDATA, "image %s has no pixels", stem);
  size_t nx = h->matrix_size[0], ny = h->matrix_size[1], nz = h->matrix_size[2];
  size_t nc = h->channels, plane = nx * ny, n = im->data_bytes / mr_image_pixel_bytes(h->data_type);
  assert(nc * nz * plane == n); /* mr_payload_image_matches */
  float *mag = calloc(n, sizeof *mag), *sorted = malloc(n * sizeof *sorted);
  uint8_t *gray = malloc(plane);
  int rc = 0;
  if (mag == NULL || sorted == NULL || gray == NULL) {
    rc = mr_err_set(err, MR_ENOMEM, "out of memory writing PNGs of %s", stem);
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    float m = magnitude(im->data, h->data_type, i);
    mag[i] = isfinite(m) ? m : 0.0f;
  }
  memcpy(sorted, mag, n * sizeof *mag);
  float lo = 0, hi = 0;
  window(sorted, n, &lo, &hi);
  float scale = hi > lo ? 255.0f / (hi - lo) : 0.0f;
  for (size_t c = 0; c < nc && rc == 0; c++) {
    for (size_t z = 0; z < nz && rc == 0; z++) {
      const float *p = mag + (c * nz + z) * plane;
      for (size_t i = 0; i < plane; i++) {
        float v = (p[i] - lo) * scale;
        gray[i] = (uint8_t)(v <= 0.0f ? 0.0f : v >= 255.0f ? 255.0f : v + 0.5f);
      }
      char path[4096], zs[16] = "", cs[16] = "";
      if (nz > 1)
        snprintf(zs, sizeof zs, "_z%03u", (unsigned)z);
      if (nc > 1)
        snprintf(cs, sizeof cs, "_c%02u", (unsigned)c);
      snprintf(path, sizeof path, "%s/%s%s%s.png", dir, stem, zs, cs);
      char why[256];
      if (mr_png_file_write(path, gray, (uint32_t)nx, (uint32_t)ny, why, sizeof why) < 0)
        rc = mr_err_set(err, MR_EIO, "cannot write %s: %s", path, why);
    }
  }
done:
  free(mag);
  free(sorted);
  free(gray);
  return rc;
}
