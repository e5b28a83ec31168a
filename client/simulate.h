/* `reconclient simulate`: writes an ISMRMRD dataset of the analytic
 * multi-coil phantom (phantom.h) sampled on a radial, golden-angle radial,
 * spiral or Cartesian trajectory, 2D or 3D, with a header that describes it
 * and the ground truth (the object at the pixel centres) as the array
 * "phantom".
 *
 * Trajectories, in cycles per pixel within [-0.5, 0.5):
 * - radial: `spokes` diameters of 2n samples (readout oversampled twice),
 *   evenly spread over 180 degrees; in 3D a "kooshball" whose directions
 *   cover the half sphere evenly (a Fibonacci lattice). Default spokes: pi/2 n
 *   (2D), pi/2 n^2 (3D), the Nyquist counts.
 * - golden: the same spokes in golden-angle order (111.25 degrees apart); in
 *   3D the two-dimensional golden means (Chan et al. 2009).
 * - spiral: `interleaves` Archimedean arms (default n/8), radially Nyquist
 *   spaced, with samples at most 1/(2n) apart along the arm; in 3D a stack
 *   of them over n Cartesian partitions.
 * - cartesian: n lines of n samples (and n partitions in 3D), no
 *   trajectory stored (the Cartesian pipelines take it).
 * Non-Cartesian readouts carry trajectory_dimensions 2 (3 in 3D) and count
 * in kspace_encode_step_1 (interleaves and partitions: steps 1 and 2). */
#ifndef MR_CLIENT_SIMULATE_H
#define MR_CLIENT_SIMULATE_H

#include "error.h"

typedef enum mr_sim_trajectory {
  MR_SIM_RADIAL,
  MR_SIM_GOLDEN,
  MR_SIM_SPIRAL,
  MR_SIM_CARTESIAN,
} mr_sim_trajectory;

typedef struct mr_sim_options {
  mr_sim_trajectory trajectory;
  int matrix;       /* n, 8 .. 512 */
  int three_d;      /* 0 or 1 */
  int coils;        /* 1 .. 64 */
  double noise;     /* standard deviation of each sample's real and imaginary
                       parts (Gaussian), 0 for none */
  int spokes;       /* radial and golden; 0 for the default */
  int interleaves;  /* spiral; 0 for the default */
  unsigned seed;    /* of the noise */
  const char *path; /* the HDF5 file to create (an existing one is refused) */
} mr_sim_options;

/* Parses "radial", "golden", "spiral" or "cartesian"; -1 otherwise. */
int mr_sim_trajectory_parse(const char *name);

/* Writes the dataset (group "dataset"). Errors name the option or the file. */
int mr_simulate(const mr_sim_options *o, mr_err *err);

/* `reconclient simulate ARGS`: argv[0] is "simulate". Returns the exit
 * status (0, 1 on failure, 2 on a usage error). */
int mr_simulate_command(int argc, char **argv);

#endif
