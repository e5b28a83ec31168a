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
 * - epi (2D, simulate_epi.c): echo trains. The readout is oversampled
 *   twice (encoded x 2n, recon x n), n lines in `shots` interleaved
 *   segments (idx.segment), each after three navigators at ky = 0 flagged
 *   IS_PHASECORR_DATA (forward, reversed, forward, as Siemens writes them);
 *   the echoes alternate in polarity, every reversed one flagged IS_REVERSE
 *   with its samples in time order. `ghost` gives the reversed readouts
 *   (echoes and navigator) of shot s the odd/even error a scanner's
 *   gradient delay and eddy currents make: the image times
 *   exp(i (ghost[0] (1 + s / 10) + ghost[1] x / X)), x across the readout's
 *   field of view X (centred), i.e. their k-space shifted by ghost[1] / 2 pi
 *   samples, exact for the analytic phantom. With `ramp` the readout runs
 *   over a trapezoid (ramps of 0.2 of the readout each, 2n samples: a
 *   flat-top step of 1.25 samples) described by the encoding's
 *   trajectoryDescription in Gadgetron's convention (ConventionalEPI:
 *   rampUpTime, rampDownTime, flatTopTime, acqDelayTime, numSamples in
 *   microseconds, dwellTime); without it the samples lie on the grid and
 *   no description is written. `accel` R keeps every R-th line and adds a
 *   reference scan of 24 central lines (IS_PARALLEL_CALIBRATION, with its
 *   own navigators) before the imaging shots; the header's
 *   parallelImaging says R. The header's trajectory is epi, or cartesian
 *   with `claim_cartesian` (what siemens_to_ismrmrd writes).
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
  MR_SIM_EPI, /* simulate_epi.c */
} mr_sim_trajectory;

/* EPI (simulate_epi.c): echo trains of a Cartesian 2D scan. */
typedef struct mr_sim_epi {
  int shots;          /* segments, each with its navigators; 0 or 1: single-shot */
  int ramp;           /* readouts sampled on the gradient's ramps too */
  double ghost[2];    /* odd/even error: constant (rad) and across the readout FOV (rad) */
  int accel;          /* in-plane acceleration R (every R-th line) with 24 calibration lines;
                         0 or 1: none */
  int claim_cartesian;/* the header says cartesian (as siemens_to_ismrmrd writes EPI) */
  int slices;         /* slices, each its own object (0 or 1: one; with multiband M, 0: M) */
  int leak_probe;     /* 1 + the only slice whose signal is in the collapsed data; 0: all */
  int volumes;        /* the slices (groups) repeated, an fMRI series (0 or 1: once) */
} mr_sim_epi;

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
  int multiband;    /* 2D cartesian (simulate_sms.h) or epi: slices excited together; 0: none */
  int caipi;        /* with multiband: CAIPI shift FOV / caipi; 0: none */
  mr_sim_epi epi;   /* trajectory epi */
  unsigned seed;    /* of the noise (and of the sampling pattern) */
  /* Undersampled Cartesian scans (simulate_sampled.h): an mr_sampling_kind,
   * 0 (MR_SAMPLING_FULL) for the plain Cartesian writer */
  int sampling;
  double acceleration; /* overall R >= 1 */
  int calibration;     /* fully sampled centre: lines (2D), points per side (3D) */
  int partitions;      /* 3D: kz points, 0 for n */
  const char *path; /* the HDF5 file to create (an existing one is refused) */
} mr_sim_options;

/* (EPI, continued) Several slices Z (`slices`; with `multiband` M, Z a
 * multiple of M, M by default): slice z lies at z mm along the slice
 * normal (the readouts' position) and holds the object moved by
 * (3 ((z mod 8) - (min(Z, 8) - 1)/2), +-2) pixels, and the coils see it
 * through a complex factor per coil and slice (the coil nearest along z
 * brightest), so collapsed slices can be told apart. With `multiband` M
 * the scan is a single-band reference of every slice (all lines, one train
 * each, IS_PARALLEL_CALIBRATION, LAST_IN_SLICE at its end, idx.slice z),
 * then the G = Z / M collapsed groups (idx.slice g, at g mm): group g the
 * sum of slices g, g + G, ..., g + (M - 1) G, its j-th shifted by
 * j FOV / `caipi` along y (blipped CAIPI), or the probed slice alone
 * (`leak_probe`: a measurement of slice leakage; the other groups empty);
 * the header's parallelImaging carries ISMRMRD's multiband section
 * (multiband_factor M, spacing dZ G mm, deltaKz 1 / (caipi dZ)). With
 * `volumes` V the slices (single-band) or groups (multiband) are acquired
 * V times, volume v in idx.repetition v (LAST_IN_REPETITION at its end),
 * the reference scans (multiband's single-band one, in-plane R's lines)
 * only before the first: an fMRI series; the volumes' samples are the same
 * but for the noise. The truth "phantom" is n x n x Z. */

/* Parses "radial", "golden", "spiral", "cartesian", "tiny-golden" or "epi";
 * -1 otherwise. */
int mr_sim_trajectory_parse(const char *name);

/* The shift (pixels) of the moving object in frame f of a matrix n. */
void mr_sim_motion(int n, int f, double shift[3]);

/* Writes the dataset (group "dataset"). Errors name the option or the file. */
int mr_simulate(const mr_sim_options *o, mr_err *err);
/* The same for trajectory epi (called by mr_simulate). */
int mr_simulate_epi(const mr_sim_options *o, mr_err *err);

/* `reconclient simulate ARGS`: argv[0] is "simulate". Returns the exit
 * status (0, 1 on failure, 2 on a usage error). */
int mr_simulate_command(int argc, char **argv);

#endif
