/* mr-bench sparse: one undersampled Cartesian scan in memory, as every
 * method of the bench gets it (BART through .cfl files, ours through the
 * gpu/ API or a server). */
#ifndef MR_BENCH_SPARSE_SCAN_H
#define MR_BENCH_SPARSE_SCAN_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sparse_scan {
  size_t dims[3];        /* x (readout), y, z (1 in 2D) */
  size_t coils;
  float complex *kspace; /* [coil][z][y][x], zero where not acquired */
  uint8_t *mask;         /* [z][y]: 1 where the line at (y, z) was acquired */
  float *reference;      /* [z][y][x]: the noiseless fully sampled image */
  int calibration;       /* fully sampled centre lines (2D) or points per side (3D) */
} sparse_scan;

#endif
