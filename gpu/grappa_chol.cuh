// Internal, CUDA C++ only: the tiled Cholesky factorisation behind the fused
// GRAPPA calibration (grappa_chol_cuda.cu).
#ifndef MR_GPU_GRAPPA_CHOL_CUH
#define MR_GPU_GRAPPA_CHOL_CUH

#include <cuda_runtime.h>

#include <cstddef>

// Tile order; ns and na below are multiples of it.
constexpr int MR_GRAPPA_CHOL_TILE = 64;

// Raises the panel kernel's shared-memory limit; once per device, on it.
int mr_grappa_chol_setup();

// Factors, for each of nseg matrices g + s * seg_stride (column-major, na
// rows, ns columns, leading dimension na), the leading ns x ns block
// G11 = L11 L11^H in place (lower triangle; the upper one is left
// unspecified) and turns the rows below it, G21, into G21 L11^-H. A
// non-positive pivot sets bit 0 of *status (device memory). Queued on
// stream, nothing waited for.
int mr_grappa_chol_factor(cudaStream_t stream, float2 *g, int na, int ns, int nseg,
                          size_t seg_stride, int *status);

#endif
