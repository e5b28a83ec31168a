/* Complex images of one slice / contrast / phase / repetition / set,
 * possibly one per coil (fft makes them; coil_combine reduces the coils;
 * image_out turns them into IMAGE messages). Travels as MR_MSG_IMAGE_ARRAY.
 *
 * Where the pixels live: in host memory (`data`), on a device (`dev`, an
 * mr_buf from gpu/core/buf.h), or both. A GPU gadget that hands its result to a
 * gadget which also works on the device (see handoff.h) leaves it on the
 * device only; mr_image_array_on() gives the pixels on the device a
 * consumer works on, copying them across once when they live elsewhere.
 * Both copies are counted against the memory budget. */
#ifndef MR_GADGETS_IMAGE_ARRAY_H
#define MR_GADGETS_IMAGE_ARRAY_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"
#include "error.h"
#include "message.h"
#include "stream_header.h"

struct mr_buf;

typedef struct mr_image_array {
  size_t nx, ny, nz, nch;
  float complex *data;             /* [ch][z][y][x] on the host; NULL while
                                      the pixels live on a device only */
  struct mr_buf *dev;              /* the same on a GPU, or NULL. Owned. */
  ISMRMRD_AcquisitionHeader ref;   /* geometry, time stamps, counters (idx) */
  mr_xyz_f fov_mm;                 /* of the whole image */
  /* Changes when the calibration the images came from changes (grappa
   * counts calibrations per slice): coil maps made for an older
   * generation are stale (coil_combine). */
  uint32_t calib_generation;
} mr_image_array;

/* A zeroed array in host memory, counted against the server's memory
 * budget (budget.h). NULL with a line in err (may be NULL) when over the
 * budget or out of memory. */
mr_image_array *mr_image_array_new(size_t nx, size_t ny, size_t nz, size_t nch, mr_err *err);
/* An array whose pixels (contents undefined) live on dev only: on a GPU an
 * mr_buf there, on the CPU host memory as from mr_image_array_new. */
mr_image_array *mr_image_array_new_on(mr_device *dev, size_t nx, size_t ny, size_t nz,
                                      size_t nch, mr_err *err);
void mr_image_array_free(mr_image_array *a);

/* The pixels as a pointer on dev (host memory for the CPU device), copied
 * there once when they live elsewhere (the copy is kept). NULL with a line
 * in err when over the budget or out of memory. Borrowed from a. */
mr_cfloat *mr_image_array_on(mr_image_array *a, mr_device *dev, mr_err *err);
/* The pixels in host memory, downloaded once when they live on a device
 * only. NULL with a line in err on failure. */
float complex *mr_image_array_host(mr_image_array *a, mr_err *err);

/* Moves the pixels to host memory: downloads them once when they live on a
 * device only, then frees the device copy. */
int mr_image_array_to_host(mr_image_array *a, mr_err *err);

/* Copies everything but the pixels (geometry, counters) from src. */
void mr_image_array_copy_meta(mr_image_array *dst, const mr_image_array *src);

/* Wraps a in an MR_MSG_IMAGE_ARRAY message (takes a); NULL when out of
 * memory (a is freed then). */
mr_message *mr_image_array_message(mr_image_array *a);

struct mr_kspace;
struct mr_gadget_ctx;
struct mr_emit;
/* The end of a gadget that makes images from k-space: gives a the geometry,
 * counters and calibration generation of k, wraps it and hands it to the
 * rest of the chain (takes a; borrows k). Returns what mr_emit_message()
 * returns, or the failure, reported through ctx, when out of memory. */
int mr_image_array_emit(mr_image_array *a, const struct mr_kspace *k,
                        struct mr_gadget_ctx *ctx, struct mr_emit *out);

static inline size_t mr_image_array_channel_size(const mr_image_array *a) {
  return a->nx * a->ny * a->nz;
}

#endif
