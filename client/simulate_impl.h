/* Internal to the simulator: what simulate.c shares with the other kinds of
 * scan (simulate_epi.c, simulate_sampled.c). */
#ifndef MR_CLIENT_SIMULATE_IMPL_H
#define MR_CLIENT_SIMULATE_IMPL_H

#include <complex.h>
#include <stdint.h>

#include <ismrmrd/dataset.h>

#include "simulate.h"

/* Gaussian samples of standard deviation sigma (Box-Muller on a xorshift
 * generator seeded from the options' seed). */
typedef struct mr_sim_noise {
  uint64_t state;
  double sigma;
} mr_sim_noise;

void mr_sim_noise_init(mr_sim_noise *g, const mr_sim_options *o);

/* The ISMRMRD header of a simulated scan into buf: what every kind shares
 * (the measurement under the protocol name "reconclient simulate
 * <protocol>", the receiver channels, the field strength) around the
 * kind's own <encoding> elements. */
void mr_sim_header(char *buf, size_t size, const char *protocol, int coils,
                   const char *encodings);
double complex mr_sim_gaussian(mr_sim_noise *g);
/* Advances g past `count` draws of mr_sim_gaussian (nothing when its
 * sigma is 0: then nothing is drawn). */
void mr_sim_noise_skip(mr_sim_noise *g, size_t count);

/* What every kind's readout header shares (h zeroed before): readout
 * `index` as scan counter and time stamp, samples with the centre at the
 * middle, every coil active, a 2 us dwell, the axes along x, y, z. */
void mr_sim_readout(ISMRMRD_AcquisitionHeader *h, size_t index, int samples, int coils);

/* A kind of scan, as the dataset writer takes it. */
typedef struct mr_sim_scan {
  size_t readouts;
  /* readout i's header (zeroed before) */
  void (*head)(void *arg, size_t i, ISMRMRD_AcquisitionHeader *h);
  /* its samples (and trajectory) into a's arrays, g adding the noise:
   * one draw for each of a's samples of every channel, which is how the
   * writer knows where the next readout's noise begins; values: room for
   * one sample of every coil */
  void (*fill)(void *arg, size_t i, mr_sim_noise *g, double complex *values,
               ISMRMRD_Acquisition *a);
  /* 1: fill may run for several readouts at once (it writes nothing it
   * shares), so the writer's threads fill a batch side by side */
  int parallel;
  /* the ground truth array(s) (the HDF5 lock held) */
  int (*truth)(void *arg, ISMRMRD_Dataset *d, mr_err *err);
  void *arg;
} mr_sim_scan;

/* Creates o->path with the header xml, the scan's readouts and its truth. */
int mr_sim_write(const mr_sim_options *o, const char *xml, const mr_sim_scan *scan, mr_err *err);

/* Writes the ground truth as the complex array "phantom" (the HDF5 lock
 * held): the object at the pixel centres of an n^rank grid, moved by
 * shifts[f] (pixels; NULL: none) for each of count frames or slices (one
 * more dimension when count > 1). */
int mr_sim_write_truth(ISMRMRD_Dataset *d, int rank, int n, size_t count,
                       const double (*shifts)[3], mr_err *err);

#endif
