#include "dicom_image.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdlib.h>
#include <string.h>

#include "dicom_file.h"
#include "message.h"

int mr_dicom_can_write(mr_err *err) { return mr_dicom_ready(err); }

unsigned mr_dicom_planes(const mr_image *im) {
  return (unsigned)im->head.matrix_size[2] * im->head.channels;
}

/* Pixel i of the image as a real value: the magnitude of complex ones. */
static double pixel(const mr_image *im, size_t i) {
  const void *d = im->data;
  switch (im->head.data_type) {
  case ISMRMRD_USHORT:
    return ((const uint16_t *)d)[i];
  case ISMRMRD_SHORT:
    return ((const int16_t *)d)[i];
  case ISMRMRD_UINT:
    return ((const uint32_t *)d)[i];
  case ISMRMRD_INT:
    return ((const int32_t *)d)[i];
  case ISMRMRD_FLOAT:
    return ((const float *)d)[i];
  case ISMRMRD_DOUBLE:
    return ((const double *)d)[i];
  case ISMRMRD_CXFLOAT:
    return cabsf(((const float complex *)d)[i]);
  case ISMRMRD_CXDOUBLE:
    return cabs(((const double complex *)d)[i]);
  }
  return NAN;
}

static const char *image_type(uint16_t t) {
  switch (t) {
  case ISMRMRD_IMTYPE_PHASE:
    return "P";
  case ISMRMRD_IMTYPE_REAL:
    return "R";
  case ISMRMRD_IMTYPE_IMAG:
    return "I";
  }
  return "M";
}

/* The value a DS string holds once written (dicom_file.cc keeps 16
 * characters): quantising with it makes stored * slope + intercept the
 * value a reader computes. */
static double as_written(double v) {
  char s[32];
  for (int digits = 10; digits > 0; digits--)
    if (snprintf(s, sizeof s, "%.*g", digits, v) <= 16)
      break;
  return strtod(s, NULL);
}

static double norm(const float v[3]) {
  return sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
}

static void geometry(const ISMRMRD_ImageHeader *h, unsigned z, mr_dicom_plane *p) {
  /* Copied out: the packed header's floats may be misaligned. Directions
   * that are not unit vectors (ISMRMRD's phantom generator leaves them
   * zero) are taken as the scanner axes: DICOM needs some. */
  float read[3], phase[3], slice[3];
  memcpy(read, h->read_dir, sizeof read);
  memcpy(phase, h->phase_dir, sizeof phase);
  memcpy(slice, h->slice_dir, sizeof slice);
  if (fabs(norm(read) - 1) > 1e-3 || fabs(norm(phase) - 1) > 1e-3 || fabs(norm(slice) - 1) > 1e-3) {
    static const float x[3] = {1, 0, 0}, y[3] = {0, 1, 0}, zz[3] = {0, 0, 1};
    memcpy(read, x, sizeof x);
    memcpy(phase, y, sizeof y);
    memcpy(slice, zz, sizeof zz);
  }
  double dx = (double)h->field_of_view[0] / h->matrix_size[0];
  double dy = (double)h->field_of_view[1] / h->matrix_size[1];
  double dz = (double)h->field_of_view[2] / h->matrix_size[2];
  double off_x = -0.5 * h->field_of_view[0] + 0.5 * dx;
  double off_y = -0.5 * h->field_of_view[1] + 0.5 * dy;
  double off_z = ((double)z - 0.5 * (h->matrix_size[2] - 1)) * dz;
  double normal = 0;
  for (int k = 0; k < 3; k++) {
    p->position[k] = h->position[k] + off_x * read[k] + off_y * phase[k] + off_z * slice[k];
    p->orientation[k] = read[k];
    p->orientation[3 + k] = phase[k];
    normal += (h->position[k] + off_z * slice[k]) * slice[k];
  }
  p->pixel_spacing[0] = dy;
  p->pixel_spacing[1] = dx;
  p->slice_thickness = dz;
  p->slice_location = normal;
}

int mr_dicom_encode(mr_dicom_study *st, const mr_image *im, unsigned plane, uint8_t **out,
                    uint32_t *len, mr_err *err) {
  const ISMRMRD_ImageHeader *h = &im->head;
  unsigned planes = mr_dicom_planes(im);
  if (plane >= planes)
    return mr_err_set(err, MR_EDATA, "DICOM: image %u has %u planes, not %u", h->image_index,
                      planes, plane + 1);
  size_t n = (size_t)h->matrix_size[0] * h->matrix_size[1];
  size_t first = n * plane;
  double lo = 0, hi = 0;
  for (size_t i = 0; i < n; i++) {
    double v = pixel(im, first + i);
    if (!isfinite(v))
      return mr_err_set(err, MR_EDATA, "DICOM: image %u has a pixel that is not finite (%zu)",
                        h->image_index, i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  mr_dicom_plane p = {0};
  p.rescale_intercept = as_written(lo);
  p.rescale_slope = as_written(hi > lo ? (hi - p.rescale_intercept) / 65535.0 : 1.0);
  uint16_t *px = malloc(n > 0 ? n * sizeof *px : 1);
  if (px == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory for a DICOM plane of %zu pixels", n);
  for (size_t i = 0; i < n; i++) {
    double s = nearbyint((pixel(im, first + i) - p.rescale_intercept) / p.rescale_slope);
    px[i] = (uint16_t)(s < 0 ? 0 : s > 65535 ? 65535 : s);
  }
  p.rows = h->matrix_size[1];
  p.columns = h->matrix_size[0];
  p.pixels = px;
  geometry(h, plane % h->matrix_size[2], &p);
  p.series_uid = mr_dicom_series_uid(st, h->image_series_index);
  p.image_type = image_type(h->image_type);
  p.three_d = h->matrix_size[2] > 1;
  p.series_number = h->image_series_index;
  p.instance_number = (unsigned)h->image_index * planes + plane;
  p.acquisition_number = h->repetition + 1u;
  int rc = mr_dicom_write(&p, st, out, len, err);
  free(px);
  return rc;
}
