/* Internal: a NUFFT plan's sample positions, placed on its grid and sorted
 * into bins once per trajectory (here on the host for the CPU; the GPU
 * builds the same placement, bins and subproblems on its device in the
 * group layout of nufft_geom.h, where a bin's entries are whole groups of
 * sorted samples rather than a list, nufft_points_cuda.cu, and the plan's
 * copy holds only their counts).
 *
 * Samples are sorted by the bin holding their footprint's first grid point,
 * so neighbouring sorted samples touch neighbouring grid memory. Each bin
 * also lists every sample whose footprint reaches into it ("entries"): the
 * spreading is output-driven, one bin at a time, each bin gathering the
 * contributions of its entries into a private tile and writing its own grid
 * cells alone. For the GPU, bins with many entries are cut into pieces
 * ("subproblems") of at most max_entries, one thread block each. */
#ifndef MR_GPU_NUFFT_POINTS_H
#define MR_GPU_NUFFT_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_threads.h"
#include "nufft_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_nufft_points {
  size_t npoints;
  int32_t (*pos)[4];  /* by sorted index: footprint start s per dimension
                         (mr_nufft_place), then the sample's original index */
  float (*offset)[4]; /* by sorted index: a per dimension, then 0 */
  size_t nbins;
  int32_t *bin_start; /* [nbins + 1]: bin b's entries are entries[bin_start[b]
                         .. bin_start[b + 1]) */
  int32_t *entries;   /* sorted sample index of each (bin, sample) pair */
  size_t nentries;
  /* Work units of the GPU spreading: {bin, first entry, end entry, split},
   * split = 1 when the bin has several (they add into the grid rather than
   * store). Every bin has at least one, so every grid cell is written. */
  int32_t (*subs)[4];
  size_t nsubs;
} mr_nufft_points;

/* Places and sorts npoints positions k[npoints][g->rank] (borrowed) into
 * *out (zeroed by the caller or freed before), using the CPU threads t.
 * MR_EINVAL for a position that is not finite (the caller keeps npoints
 * within 2^28, so that every entry index fits int32). */
int mr_nufft_points_build(const mr_nufft_geom *g, size_t npoints, const float *k,
                          size_t max_entries, mr_cpu_threads *t, mr_nufft_points *out, mr_err *err);
void mr_nufft_points_free(mr_nufft_points *p);

/* Largest and least bin piece one GPU thread block spreads. */
#define MR_NUFFT_MAX_SUB_ENTRIES 1024
#define MR_NUFFT_MIN_SUB_ENTRIES 256

/* The piece size (max_entries) for npoints positions on g: four times a
 * bin's expected share of the entries, within MR_NUFFT_MIN_SUB_ENTRIES ..
 * MR_NUFFT_MAX_SUB_ENTRIES. A crowded bin (the centre of a
 * radial, spiral or Parboil trajectory) is then cut into pieces of at most
 * four average bins' work, instead of leaving its thread blocks running
 * long after the others; on a uniform trajectory no bin is cut. */
size_t mr_nufft_sub_entries(const mr_nufft_geom *g, size_t npoints);

/* Bin b's first grid index and extent along each dimension. */
void mr_nufft_bin_box(const mr_nufft_geom *g, size_t b, int b0[3], int ext[3]);

#ifdef __cplusplus
}
#endif

#endif
