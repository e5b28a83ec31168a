/* One DICOM MR Image Storage file from a plane's values and the study
 * (DCMTK, C++ behind a C interface): dicom_image.c fills the plane from an
 * ISMRMRD image; this writes the data set and serialises it as
 * Gadgetron's DICOM writer does (Part 10, explicit VR little endian). */
#ifndef MR_PROTOCOL_DICOM_FILE_H
#define MR_PROTOCOL_DICOM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "dicom_study.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_dicom_plane {
  uint16_t rows, columns;
  const uint16_t *pixels;       /* rows x columns, row by row; borrowed */
  double rescale_slope, rescale_intercept;
  double position[3];           /* centre of the first pixel, mm */
  double orientation[6];        /* row direction, then column direction */
  double pixel_spacing[2];      /* between rows, between columns, mm */
  double slice_thickness, slice_location;
  const char *series_uid;       /* borrowed */
  const char *image_type;       /* "M", "P", "R", "I" */
  int three_d;                  /* MRAcquisitionType 3D */
  unsigned series_number, instance_number, acquisition_number;
} mr_dicom_plane;

/* 0 when DCMTK can write files (its data dictionary is loaded: from
 * DCMDICTPATH, or the package's default path), else MR_EIO with err. */
int mr_dicom_ready(mr_err *err);

/* Writes the file into a new buffer (*out, *len; the caller frees it).
 * 0, or MR_EIO / MR_ENOMEM with err. */
int mr_dicom_write(const mr_dicom_plane *p, const mr_dicom_study *st, uint8_t **out,
                   uint32_t *len, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
