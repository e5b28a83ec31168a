/* Where the samples of an EPI readout lie along kx, in Gadgetron's
 * ConventionalEPI convention (the encoding's trajectoryDescription): the
 * readout gradient's trapezoid (ramp up, flat top, ramp down; times in
 * microseconds), samples from acq_delay on, dwell apart, each at the
 * gradient's area up to the end of its dwell time, scaled so that the
 * area sampled spans the encoded matrix (nx grid steps) and centred
 * halfway through the trapezoid. A reversed readout's sample q lies at
 * minus a forward one's. Shared by the simulator (client/) and the EPI
 * step (gadgets/epi/). */
#ifndef MR_PROTOCOL_EPI_TRAPEZOID_H
#define MR_PROTOCOL_EPI_TRAPEZOID_H

typedef struct mr_epi_trapezoid {
  double ramp_up, flat_top, ramp_down, acq_delay; /* microseconds */
  double dwell;                                   /* microseconds */
  int samples;
} mr_epi_trapezoid;

/* 1 when the samples fit the trapezoid: a positive dwell and flat top,
 * the first sample within the ramp up, the last past the flat top's start
 * and within the ramp down (what the formula assumes). */
int mr_epi_trapezoid_valid(const mr_epi_trapezoid *t);

/* Sample q's position (grid steps from the centre) of a forward readout. */
double mr_epi_trapezoid_position(const mr_epi_trapezoid *t, int nx, int q);

#endif
