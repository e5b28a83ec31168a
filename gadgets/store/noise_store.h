/* Noise measurements kept across connections: what a noise-only session
 * (Gadgetron's `default_measurement_dependencies.xml`) measured, stored
 * under its header's measurementID in the state directory (state_dir.h),
 * for a later scan whose header names it as its Noise dependency, and for
 * Gadgetron's dependency query (docs/protocol.md rule 6).
 *
 * What is kept are the sums noise_adjust gathers (not a finished
 * covariance), so a stored noise whitens exactly as the same lines would
 * inside the scan, Ledoit-Wolf shrinkage included. One file per id,
 * `noise/<id>.noise`; ids are checked with mr_state_name_ok(). Bounded by
 * mr_state_limits (count and age): a save prunes, a load refuses (and
 * removes) what is too old. */
#ifndef MR_GADGETS_NOISE_STORE_H
#define MR_GADGETS_NOISE_STORE_H

#include <complex.h>
#include <stdint.h>

#include "error.h"

/* The most channels a stored noise may have. */
#define MR_NOISE_MAX_CHANNELS 1024

typedef struct mr_noise_stats {
  int nch;              /* 0: nothing gathered */
  float dwell_us;       /* the noise lines' sample time */
  uint64_t samples;     /* per channel */
  double fourth;        /* sum over samples of |x|^4 (|x| over channels) */
  double complex *cov;  /* [nch][nch], lower triangle: sum of x x^H (owned) */
} mr_noise_stats;

/* Allocates the sums for nch channels (zeroed). */
int mr_noise_stats_init(mr_noise_stats *s, int nch, float dwell_us);
void mr_noise_stats_free(mr_noise_stats *s);

/* Per-channel noise standard deviations sqrt(C_cc), C = cov / samples:
 * smallest, largest and mean. */
void mr_noise_stats_sigmas(const mr_noise_stats *s, double *min, double *max, double *mean);

/* Stores s under id (borrows both). MR_EINVAL for an id that cannot name
 * a file, MR_ENOTSUP when no state directory is open. */
int mr_noise_store_save(const char *id, const mr_noise_stats *s, mr_err *err);

/* Loads the noise stored under id into out (which then owns its sums).
 * MR_ENOENT when none is stored, it is older than the age limit, or no
 * state directory is open; MR_EDATA when the file is damaged. */
int mr_noise_store_load(const char *id, mr_noise_stats *out, mr_err *err);

#endif
