/* `reconclient simulate --trajectory cartesian --sampling vd|poisson`: an
 * undersampled Cartesian scan as a scanner writes it.
 *
 * The analytic phantom's k-space (phantom.h) on the full Cartesian grid:
 * n readout samples (x, no oversampling) by n phase encodes (y,
 * kspace_encode_step_1) by, in 3D, `partitions` partitions (z,
 * kspace_encode_step_2; default n). The field of view is n pixels along
 * every axis, so fewer partitions than n make thicker partitions (k_z at
 * the same 1/n spacing, over a smaller range). Only the phase encodes of the
 * sampling mask (sampling.h) are written, in order (z, then y), each one
 * readout of every coil; those of the fully sampled centre are flagged
 * ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING (ISMRMRD's embedded ACS). The
 * first readout is FIRST_IN_SLICE, the last LAST_IN_SLICE,
 * LAST_IN_REPETITION and LAST_IN_MEASUREMENT. The header's encoding limits
 * span the whole grid with centres n/2 (and partitions/2), and, when R > 1,
 * its parallelImaging gives the acceleration as the nearest integer factors
 * (2D: round(R) along step 1; 3D: the pair whose product is nearest R,
 * step 1's the larger) and calibrationMode "embedded" ("other" without a
 * calibration region).
 *
 * Beside the data, two arrays:
 * - "phantom": the object at the pixel centres (complex, n x n [x
 *   partitions]), as every simulated dataset has;
 * - "reference": the noiseless fully sampled image (float, same size): the
 *   root sum of squares over coils of the unitary centred inverse FFT of
 *   the whole grid, what the `cartesian` config returns for the noiseless
 *   scan at R 1. Image quality of an undersampled reconstruction is
 *   measured against it.
 *
 * The grid is computed once (on every core) and held in memory: coils x n
 * x n x partitions complex floats. */
#ifndef MR_CLIENT_SIMULATE_SAMPLED_H
#define MR_CLIENT_SIMULATE_SAMPLED_H

#include "error.h"
#include "simulate.h"

int mr_simulate_sampled(const mr_sim_options *o, mr_err *err);

#endif
