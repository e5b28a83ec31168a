// Internal, CUDA C++ only: what a GPU NUFFT plan holds on its device, shared
// by the transforms (nufft_cuda.cu) and the binning of the sample positions
// (nufft_points_cuda.cu).
#ifndef MR_GPU_NUFFT_CUDA_CUH
#define MR_GPU_NUFFT_CUDA_CUH

#include <cuda_runtime.h>

#include "cuda_internal.cuh"
#include "nufft_impl.h"

struct mr_nufft_cuda {
  float2 *grid = nullptr;  // [batch][nf2][nf1][nf0]
  float *deapod = nullptr; // n0 + n1 + n2
  // The binned positions (on the device; the plan's mr_nufft_points holds
  // only their counts): positions and offsets [npoints] sorted by group
  // (nufft_points.h's arrays, in the group layout above), subproblems
  // [nsubs] as the host's (their entries counted in the bins' sources).
  int4 *pos = nullptr;
  float4 *offset = nullptr;
  // [groups + 1], exclusive sums over the groups (nufft_geom.h's
  // mr_nufft_groups): {samples, entries, subproblems, 0}, a bin's entries
  // and subproblems counted at its last group; the element past the
  // groups holds the totals.
  int4 *group_start = nullptr;
  int4 *subs = nullptr;
  mr_nufft_groups groups{}; // nufft_geom.h
  int sub_entries = 1;      // the last binning's piece size (mr_nufft_sub_entries)
  // The binning's scratch (nufft_points_cuda.cu). Those arrays and the
  // scratch are made for cap_points points (opts.max_points, at plan
  // creation): a trajectory of no more points reuses them, so no
  // set_points allocates.
  char *scratch = nullptr;
  size_t cap_points = 0;
  size_t scan_bytes = 0; // the scan's temporary storage (from the bin count)
  // The bin counts in the scratch are zero: the last binning cleared them,
  // so the next needs no memset.
  bool counts_zeroed = false;
  int coils_per_block = 1; // of the spreading tile
  int pitch[2] = {0, 0};   // tile row and plane pitch (cells)
  int tile_cells = 0;      // per coil, a multiple of 4
  bool wide = false;       // tile keeps rounding remainders (nufft_cuda.cu)
  size_t smem = 0;         // spreading block's shared memory
};

// For benchmarks, on the worker: run(marks) with four CUDA events to record
// (before its first stage and after each of its three), then the stages'
// times in ms.
template <class Fn> int mr_nufft_cuda_time_stages(float ms[3], mr_err *err, Fn run) {
  cudaEvent_t marks[4] = {nullptr, nullptr, nullptr, nullptr};
  int rc = 0;
  for (int i = 0; i < 4 && rc == 0; i++)
    if (cudaEventCreate(&marks[i]) != cudaSuccess)
      rc = mr_err_set(err, MR_EDEVICE, "nufft: cudaEventCreate failed");
  if (rc == 0)
    rc = run(marks);
  if (rc == 0 && cudaEventSynchronize(marks[3]) != cudaSuccess)
    rc = mr_err_set(err, MR_EDEVICE, "nufft: cudaEventSynchronize failed");
  for (int i = 0; i < 3 && rc == 0; i++)
    if (cudaEventElapsedTime(&ms[i], marks[i], marks[i + 1]) != cudaSuccess)
      rc = mr_err_set(err, MR_EDEVICE, "nufft: cudaEventElapsedTime failed");
  for (cudaEvent_t e : marks)
    if (e != nullptr)
      cudaEventDestroy(e);
  return rc;
}

inline mr_nufft_cuda *mr_nufft_cuda_state(const mr_nufft_plan *p) {
  return static_cast<mr_nufft_cuda *>(p->impl);
}

// Frees the binned positions and the binning scratch (stream-ordered) and
// clears the pointers and capacities.
void mr_nufft_cuda_free_points(mr_cuda_ctx *c, mr_nufft_cuda *s);

// At plan creation, on the worker: the binning's memory for
// opts.max_points points, its counts cleared and its kernels loaded (an
// empty binning), so that the first set_points costs what later ones do.
int mr_nufft_cuda_prepare_points(mr_nufft_plan *p, mr_cuda_ctx *c, mr_err *err);

#endif
