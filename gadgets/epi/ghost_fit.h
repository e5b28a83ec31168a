/* The Nyquist-ghost correction from an echo train's navigators, as
 * Gadgetron's EPICorrGadget fits it: the phase of the reversed navigator's
 * profile against the forward ones' (their mean: the first and third
 * navigator straddle the second in time, so a drift between them cancels),
 * summed over coils, fitted constant + linear across the readout where
 * there is signal (MR_GHOST_SIGNAL_FLOOR): the slope
 * from the phase of the products of neighbouring pixels (no unwrapping; the
 * pixels weighted by their signal), then the constant with the slope
 * removed. Optionally filtered over the last `filter` fits of the same
 * slice and segment (repetitions): the mean slope and the phase of the
 * mean unit constant. */
#ifndef MR_GADGETS_GHOST_FIT_H
#define MR_GADGETS_GHOST_FIT_H

#include "cfloat.h"

#define MR_GHOST_FILTER_MAX 64
/* Pixels whose coil-summed product is under this fraction of the largest
 * are left out of the fit. */
#define MR_GHOST_SIGNAL_FLOOR 0.1

typedef struct mr_ghost_fit {
  double constant; /* rad */
  double slope;    /* rad per pixel of the readout */
} mr_ghost_fit;

/* Fits the profiles (nx x ncoils each, column-major): fwd the forward
 * navigators' mean, rev the reversed one. */
mr_ghost_fit mr_ghost_fit_profiles(const mr_cfloat *fwd, const mr_cfloat *rev, int nx,
                                   int ncoils);

/* The last fits of one slice and segment. */
typedef struct mr_ghost_history {
  mr_ghost_fit fits[MR_GHOST_FILTER_MAX];
  int count, next;
} mr_ghost_history;

/* Adds fit and returns the mean of the last `filter` (1 .. MR_GHOST_FILTER_MAX). */
mr_ghost_fit mr_ghost_history_add(mr_ghost_history *h, mr_ghost_fit fit, int filter);

/* The factors exp(-i (constant + slope x)) at x = j - nx/2, j < nx: what the
 * reversed readouts' profiles are multiplied by. */
void mr_ghost_correction(mr_ghost_fit fit, int nx, mr_cfloat *factors);

#endif
