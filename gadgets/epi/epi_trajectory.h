/* Where the samples of an EPI readout lie along kx, from the encoding's
 * trajectoryDescription in Gadgetron's convention (ConventionalEPI:
 * rampUpTime, flatTopTime, rampDownTime, acqDelayTime, numSamples,
 * dwellTime; protocol/epi_trapezoid.h has the formula). Without a
 * description the samples lie on the grid (numSamples must then be nx),
 * a reversed readout's in mirror order. Positions are in grid steps from
 * the grid's centre (index nx / 2). */
#ifndef MR_GADGETS_EPI_TRAJECTORY_H
#define MR_GADGETS_EPI_TRAJECTORY_H

#include "error.h"
#include "stream_header.h"

/* fwd and rev get `samples` positions each. MR_EHEADER, with a line naming
 * the parameter, for a description that lacks one or holds values that
 * make no trapezoid; MR_EDATA when `samples` is not what it says (or, with
 * no description, not nx: ramp-sampled EPI needs one). d may be NULL. */
int mr_epi_positions(const mr_trajectory_description *d, int nx, int samples, double *fwd,
                     double *rev, mr_err *err);

#endif
