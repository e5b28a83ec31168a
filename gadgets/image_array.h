/* Complex images of one slice / contrast / phase / repetition / set,
 * possibly one per coil (fft makes them; coil_combine reduces the coils;
 * image_out turns them into IMAGE messages). Travels as MR_MSG_IMAGE_ARRAY. */
#ifndef MR_GADGETS_IMAGE_ARRAY_H
#define MR_GADGETS_IMAGE_ARRAY_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "message.h"
#include "stream_header.h"

typedef struct mr_image_array {
  size_t nx, ny, nz, nch;
  float complex *data;             /* [ch][z][y][x] */
  ISMRMRD_AcquisitionHeader ref;   /* geometry, time stamps, counters (idx) */
  mr_xyz_f fov_mm;                 /* of the whole image */
} mr_image_array;

/* A zeroed array, counted against the server's memory budget (budget.h).
 * NULL with a line in err (may be NULL) when over the budget or out of
 * memory. */
mr_image_array *mr_image_array_new(size_t nx, size_t ny, size_t nz, size_t nch, mr_err *err);
void mr_image_array_free(mr_image_array *a);

/* Copies everything but the pixels (geometry, counters) from src. */
void mr_image_array_copy_meta(mr_image_array *dst, const mr_image_array *src);

/* Wraps a in an MR_MSG_IMAGE_ARRAY message (takes a); NULL when out of
 * memory (a is freed then). */
mr_message *mr_image_array_message(mr_image_array *a);

static inline size_t mr_image_array_channel_size(const mr_image_array *a) {
  return a->nx * a->ny * a->nz;
}

#endif
