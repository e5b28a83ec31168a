/* Undersampling patterns of Cartesian scans: which phase encodes a scan
 * acquires, as a mask over the phase-encode grid (1: acquired).
 *
 * - Variable-density lines (2D): ny phase-encode lines, the `calibration`
 *   lines around the centre (ny/2) all acquired, the rest drawn at random
 *   without replacement with weights (1 - |ky| / (ny/2))^2, so the density
 *   falls from the centre to the edge; round(ny / R) lines in all.
 * - Variable-density Poisson disc (3D): a ky-kz grid of ny x nz points, the
 *   calibration x calibration block around (ny/2, nz/2) all acquired (each
 *   side clamped to the grid), the others taken by dart throwing in a
 *   random order: a point is taken when no point taken before it lies
 *   closer than its radius r0 (1 + 2 |k|), |k| the distance from the centre
 *   normalised per axis (1 on the grid's edges), so points are spread
 *   evenly (no clusters, no holes) and thin out towards the edges. r0 is
 *   found by bisection so the pattern holds round(ny nz / R) points to
 *   within 2 % (or as near as the grid allows).
 *
 * R is the overall acceleration: grid points over acquired points. Both
 * are seeded, the same for the same arguments on every machine. */
#ifndef MR_CLIENT_SAMPLING_H
#define MR_CLIENT_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum mr_sampling_kind {
  MR_SAMPLING_FULL,    /* every phase encode */
  MR_SAMPLING_VD,      /* variable-density random lines (2D) */
  MR_SAMPLING_POISSON, /* variable-density Poisson disc over ky-kz (3D) */
} mr_sampling_kind;

/* Parses "vd" or "poisson"; -1 otherwise. */
int mr_sampling_parse(const char *name);

/* What to sample. */
typedef struct mr_sampling {
  mr_sampling_kind kind;
  int ny, nz;       /* the phase-encode grid; nz 1 for lines */
  double r;         /* overall acceleration, >= 1 */
  int calibration;  /* fully sampled centre: lines (2D), points per side (3D) */
  unsigned seed;
} mr_sampling;

/* Fills mask (ny * nz bytes, ky fastest) and returns the number of
 * acquired points, or a negative error: a calibration region of more
 * points than the acceleration allows, an acceleration that leaves fewer
 * than 2 points, a kind that does not fit the grid (lines need nz 1,
 * Poisson disc nz > 1). For a Poisson disc, *r0 (unless NULL) receives the
 * radius scale used (0 for the other kinds). */
long mr_sampling_mask(const mr_sampling *s, uint8_t *mask, double *r0, mr_err *err);

/* 1 when (y, z) lies in the fully sampled centre of s's grid. */
int mr_sampling_in_calibration(const mr_sampling *s, int y, int z);

/* The Poisson-disc radius at (y, z) of s's grid for scale r0, in grid
 * steps: r0 (1 + 2 |k|). */
double mr_sampling_radius(const mr_sampling *s, double r0, int y, int z);

#endif
