/* Reading DICOM files back with DCMTK's dcmdump, for the DICOM tests: the
 * dump as text, a tag's value, and one check of a file against the
 * ISMRMRD image it was made from (geometry and pixel values, as
 * protocol/dicom_image.h promises), written independently of it. */
#ifndef MR_TEST_DCMDUMP_H
#define MR_TEST_DCMDUMP_H

#include <stddef.h>

#include <ismrmrd/ismrmrd.h>

/* 1 when dcmdump runs. */
int mr_test_have_dcmdump(void);
/* `dcmdump +L path` (every value in full): malloc'ed text, NULL when
 * dcmdump fails or cannot read the file. */
char *mr_test_dcmdump(const char *path);
/* The same for bytes in memory (written to a temporary file). */
char *mr_test_dcmdump_bytes(const void *bytes, size_t len);
/* The value of tag "(gggg,eeee)": the text in [ ], else what follows the
 * VR, trailing spaces dropped. 0, or -1 when the tag is absent. */
int mr_test_dcm_value(const char *dump, const char *tag, char *out, size_t size);
/* n numbers of a multi-valued tag ("a\b\c"); 0 or -1. */
int mr_test_dcm_numbers(const char *dump, const char *tag, double *out, int n);
/* NULL when the dump is plane `plane` of an image with header h and
 * pixels px (real values, x fastest, planes of x*y): Rows, Columns,
 * PixelSpacing, SliceThickness, ImageOrientationPatient,
 * ImagePositionPatient (centre of the first pixel), and every pixel
 * within half a rescale step; else a line (static) saying what differs. */
const char *mr_test_dcm_matches(const char *dump, const ISMRMRD_ImageHeader *h, const float *px,
                                unsigned plane);

#endif
