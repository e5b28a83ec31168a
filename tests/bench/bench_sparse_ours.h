/* mr-bench sparse: our solver alone, through the gpu/ API (gpu/sparse's
 * mr_sparse_solve with gpu/coil's ESPIRiT maps), one device task per
 * solve: the adapter between the bench's scans and that API.
 *
 * Built only where gpu/sparse/sparse.h and gpu/coil/espirit.h exist
 * (tests/bench/CMakeLists.txt); elsewhere bench_sparse_ours_available()
 * says 0 and the bench reports these rows as "missing". */
#ifndef MR_BENCH_SPARSE_OURS_H
#define MR_BENCH_SPARSE_OURS_H

#include "device.h"
#include "sparse_scan.h"

typedef struct sparse_ours_run {
  const char *regularizer; /* "wavelet", "tv" or "l2" */
  double lambda;           /* relative, as the `cs` config's */
  int iterations;
  const float complex *maps; /* [coil][z][y][x] maps to use (BART's), or NULL:
                                ours by ESPIRiT (then maps_ms is theirs) */
  float complex *maps_out;   /* NULL, or where the maps used are copied */
} sparse_ours_run;

typedef struct sparse_ours_result {
  double maps_ms;   /* ESPIRiT maps from the scan's calibration region */
  double solve_ms;  /* the solve, one device task */
  int iterations;   /* done */
} sparse_ours_result;

/* 1 when this build has the solver. */
int bench_sparse_ours_available(void);

/* Uploads the scan to dev, computes the maps and solves, each timed
 * (maps_ms and solve_ms; the uploads and downloads outside), and writes
 * the image (dims[0] * dims[1] * dims[2] pixels) to image. Negative
 * MR_E* on failure, with gpu/'s line in err. */
int bench_sparse_ours_solve(mr_device *dev, const sparse_scan *scan, const sparse_ours_run *run,
                            float complex *image, sparse_ours_result *result, mr_err *err);

#endif
