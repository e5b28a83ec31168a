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
 * - tiny-golden (2D): spokes pi / (phi + 6) = 23.63 degrees apart, the 7th
 *   tiny golden angle (Wundrak et al. 2016); the header says goldenangle.
 *   Radial kinds take `samples` per spoke (default 2n: the readout
 *   oversampled twice), k from -0.5 in steps of 1/samples.
 * - spiral: `interleaves` Archimedean arms (default n/8), radially Nyquist
 *   spaced, with samples at most 1/(2n) apart along the arm; in 3D a stack
 *   of them over n Cartesian partitions.
 * - cartesian: n lines of n samples (and n partitions in 3D), no
 *   trajectory stored (the Cartesian pipelines take it).
 * Non-Cartesian readouts carry trajectory_dimensions 2 (3 in 3D) and count
 * in kspace_encode_step_1 (interleaves and partitions: steps 1 and 2).
 *
 * Real-time streams (`frames` > 0; radial kinds, 2D): `frames` frames of
 * `spokes` spokes, the angle sequence running on across frames (golden and
 * tiny-golden: a new trajectory every frame; radial: the same evenly spread
 * spokes every frame). Spoke i of frame f has kspace_encode_step_1 = i and
 * repetition = f, FIRST_IN_SLICE and FIRST_IN_REPETITION on a frame's first
 * spoke, LAST_IN_SLICE and LAST_IN_REPETITION on its last; the header's
 * kspace_encoding_step_1 limit is 0 .. spokes - 1 (how gadgets/frames.c
 * finds K) and its repetition limit 0 .. frames - 1. With `moving` the
 * object moves under the fixed coils: frame f is shifted along x by
 * n/16 sin(2 pi f / 16) pixels, and the ground truth "phantom" then holds
 * every frame (n x n x frames). */
#ifndef MR_CLIENT_SIMULATE_H
#define MR_CLIENT_SIMULATE_H

#include "error.h"

typedef enum mr_sim_trajectory {
  MR_SIM_RADIAL,
  MR_SIM_GOLDEN,
  MR_SIM_SPIRAL,
  MR_SIM_CARTESIAN,
  MR_SIM_TINY_GOLDEN,
} mr_sim_trajectory;

typedef struct mr_sim_options {
  mr_sim_trajectory trajectory;
  int matrix;       /* n, 8 .. 512 */
  int three_d;      /* 0 or 1 */
  int coils;        /* 1 .. 64 */
  double noise;     /* standard deviation of each sample's real and imaginary
                       parts (Gaussian), 0 for none */
  int spokes;       /* radial kinds: spokes (per frame with `frames`); 0 for the default */
  int samples;      /* radial kinds: samples per spoke; 0 for 2n */
  int frames;       /* radial kinds, 2D: a real-time stream of this many frames; 0: none */
  int moving;       /* with frames: the object moves from frame to frame */
  int interleaves;  /* spiral; 0 for the default */
  int multiband;    /* cartesian 2D: slices excited together (simulate_sms.h); 0: none */
  int caipi;        /* with multiband: CAIPI shift FOV / caipi; 0: none */
  unsigned seed;    /* of the noise (and of the sampling pattern) */
  /* Undersampled Cartesian scans (simulate_sampled.h): an mr_sampling_kind,
   * 0 (MR_SAMPLING_FULL) for the plain Cartesian writer */
  int sampling;
  double acceleration; /* overall R >= 1 */
  int calibration;     /* fully sampled centre: lines (2D), points per side (3D) */
  int partitions;      /* 3D: kz points, 0 for n */
  const char *path; /* the HDF5 file to create (an existing one is refused) */
} mr_sim_options;

/* Parses "radial", "golden", "spiral", "cartesian" or "tiny-golden"; -1
 * otherwise. */
int mr_sim_trajectory_parse(const char *name);

/* The shift (pixels) of the moving object in frame f of a matrix n. */
void mr_sim_motion(int n, int f, double shift[3]);

/* Writes the dataset (group "dataset"). Errors name the option or the file. */
int mr_simulate(const mr_sim_options *o, mr_err *err);

/* `reconclient simulate ARGS`: argv[0] is "simulate". Returns the exit
 * status (0, 1 on failure, 2 on a usage error). */
int mr_simulate_command(int argc, char **argv);

#endif
