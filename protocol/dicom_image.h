/* ISMRMRD images -> DICOM MR Image Storage files (DCMTK), one file per
 * 2D plane (z, then channel), written as Gadgetron's DICOM writer sends
 * them: Part 10 (preamble, meta header), explicit VR little endian.
 *
 * Patient, study and series come from the study (dicom_study.h); the
 * geometry from the image header: ImagePositionPatient is the centre of
 * the plane's first pixel (the ISMRMRD position is the centre of the
 * field of view), ImageOrientationPatient is read_dir then phase_dir,
 * PixelSpacing is field_of_view / matrix_size (row spacing, i.e. along
 * phase_dir, first; directions that are not unit vectors are taken as
 * the scanner axes), SliceThickness field_of_view[2] / matrix_size[2].
 * Pixels are the magnitude (complex types) or the value, stored as
 * unsigned 16 bits: stored = (value - RescaleIntercept) / RescaleSlope,
 * rounded, with the intercept min(0, smallest value) and the slope
 * (largest - intercept) / 65535, so value = stored * slope + intercept to
 * within slope / 2. SeriesNumber is image_series_index, InstanceNumber
 * image_index * planes + plane. */
#ifndef MR_PROTOCOL_DICOM_IMAGE_H
#define MR_PROTOCOL_DICOM_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "dicom_study.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_image;

/* 0 when DICOM files can be written (DCMTK's data dictionary is
 * loaded), else MR_EIO with err. */
int mr_dicom_can_write(mr_err *err);

/* How many DICOM files an image makes: matrix_size[2] x channels. */
unsigned mr_dicom_planes(const struct mr_image *im);

/* Plane `plane` of im (borrowed) as a DICOM file in a new buffer (*out,
 * *len; the caller frees it). st (borrowed) hands out the series UID.
 * MR_EDATA when a pixel is not finite or the plane does not exist,
 * MR_ENOMEM, MR_EIO when DCMTK fails; err says why. */
int mr_dicom_encode(mr_dicom_study *st, const struct mr_image *im, unsigned plane,
                    uint8_t **out, uint32_t *len, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
