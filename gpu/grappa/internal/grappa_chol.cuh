// Internal, CUDA C++ only: the blocked Cholesky factorisation behind the
// fused GRAPPA calibration (grappa_chol_cuda.cu).
#ifndef MR_GPU_GRAPPA_CHOL_CUH
#define MR_GPU_GRAPPA_CHOL_CUH

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_internal.cuh"
#include "grappa_impl.h"

// Block order of the factorisation; ns and na below are multiples of it.
constexpr int MR_GRAPPA_CHOL_TILE = MR_GRAPPA_TILE;

// The side stream the trailing updates run on beside the next panel, and
// the events that fork it from the compute stream and join it back.
struct mr_grappa_chol_side {
  cudaStream_t stream;
  cudaEvent_t fork, join;
};

// Lets the diagonal-tile kernel take its shared memory; once per device
// before the first factorisation (not inside a graph capture).
int mr_grappa_chol_init(mr_err *err);

// Factors, in double precision, for each of nseg matrices g + s * seg_stride (column-major, na
// rows, ns columns, leading dimension na), the leading ns x ns block
// G11 = L11 L11^H in place (lower triangle; the upper one is left
// unspecified) and turns the rows below it, G21, into G21 L11^-H; inv
// receives the inverses L_kk^-1 of the diagonal tiles (nseg * ns / TILE
// tiles of TILE^2 values, column-major, upper triangle zero); below is
// scratch of na * TILE values. A non-positive pivot sets bit 0 of *status
// (device memory). Queued on the compute stream (own kernels and cuBLAS,
// part of it on side), nothing waited for; the cuBLAS handle is left on
// the compute stream.
int mr_grappa_chol_factor(mr_cuda_ctx *c, const mr_grappa_chol_side &side, double2 *g, int na,
                          int ns, int nseg, size_t seg_stride, double2 *inv, double2 *below,
                          int *status, mr_err *err);

// After mr_grappa_chol_factor: W (nt x ns per segment, at w + s ldw ns,
// leading dimension ldw >= nt) with W L = G21 (so W = U M^-1), by the
// diagonal tiles' inverses inv the factorisation left; the rows G21
// (ns .. ns + nt) of g overwritten on the way. Queued on the compute
// stream.
int mr_grappa_chol_solve(mr_cuda_ctx *c, double2 *g, int na, int ns, int nt, int nseg,
                         size_t seg_stride, const double2 *inv, double2 *w, int ldw, mr_err *err);

#endif
