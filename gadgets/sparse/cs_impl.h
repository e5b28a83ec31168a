/* Internal: what cs.c (one buffer at a time) and cs_series.c (a dynamic
 * series' frames together) share: the step's state, the calibration
 * region and the coil maps. */
#ifndef MR_GADGETS_CS_IMPL_H
#define MR_GADGETS_CS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "fft.h"
#include "gadget.h"
#include "image_array.h"
#include "kspace.h"
#include "placement.h"
#include "sparse.h"

/* Fewest fully sampled centre lines (and, in 3D, partitions) that make
 * maps. */
#define MIN_CALIB 6

enum { MAPS_LOWRES, MAPS_ESPIRIT };

/* The frames of one slice / contrast / set held for a joint solve: each
 * the message (a reference) and, when calibration lines were merged in,
 * the merged copy (owned), which is the frame's k-space then. */
typedef struct series {
  uint16_t key[3]; /* slice, contrast, set */
  size_t frames;
  mr_message **msgs;
  mr_kspace **merged;
} series;

typedef struct cs_gadget {
  int regularizer;
  double lambda, temporal_lambda;
  int iterations;
  double tolerance;
  int maps;
  int device, fallback;
  mr_placement place;
  int on_device;          /* image_out takes device data */
  mr_sparse_plan *plan;   /* for the last shape */
  mr_fft_plan *maps_fft;  /* the coil images' transform (lowres), for the last shape */
  series *series;         /* temporal_lambda > 0: the frames held, per slice */
  size_t nseries;
} cs_gadget;

/* What one solve needs to make its maps: the step, a buffer of the
 * shape (its coils, matrix) and the fully sampled centre. */
typedef struct cs_job {
  cs_gadget *s;
  mr_kspace *k;         /* borrowed */
  size_t calib[2];      /* lines, partitions of the fully sampled centre */
  size_t n[3];          /* the cropped image */
  const mr_cancel *cancel; /* the chain's (mr_gadget_cancel), asked every iteration */
  mr_image_array *out;  /* made here */
} cs_job;

/* The fully sampled centre of a mask [ne2][ne1]: widths in lines and
 * partitions (partitions 1 in 2D). */
void mr_cs_calibration_box(const uint8_t *sampled, size_t ne1, size_t ne2, size_t *wy,
                           size_t *wz);
/* MR_EDATA with the step's line when calib (lines, partitions) is too
 * small for maps (frames: the centre every frame of a series sampled),
 * else 0. */
int mr_cs_no_calibration(mr_gadget_ctx *ctx, const mr_kspace *k, const size_t calib[2],
                         int frames);
/* The coil maps of j's shape from kspace (on dev) into maps, by the step's
 * estimator over j's calibration region. */
int mr_cs_coil_maps(cs_job *j, mr_device *dev, const mr_cfloat *kspace, mr_cfloat *maps,
                    mr_err *err);

/* cs_series.c: holds msg's buffer (merged: its copy with the calibration
 * lines, taken) as the next frame of its slice's series. */
int mr_cs_series_hold(cs_gadget *s, mr_gadget_ctx *ctx, mr_message *msg, mr_kspace *merged);
/* The step's flush: every held series solved, its images emitted. */
int mr_cs_series_flush(void *state, mr_gadget_ctx *ctx, mr_emit *out);
/* Drops every held series. */
void mr_cs_series_free(cs_gadget *s);

#endif
