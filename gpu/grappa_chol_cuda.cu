// The tiled right-looking Cholesky of the fused GRAPPA calibration. The
// matrix is [M; U] (M Hermitian, U the right-hand sides as extra rows), so
// one sweep factors M and applies L^-H to U; per tile column k two kernels:
//   panel:  each block factors the diagonal tile (k, k) in shared memory
//           (every block the same, redundantly: cheaper than a launch) and,
//           alongside, turns its tile (i, k) into L_ik = A_ik L_kk^-H;
//   update: each block subtracts L_ik L_jk^H from one tile (i, j), j > k,
//           of the trailing matrix (lower part of M, all of U).
#include "cuda_internal.cuh"
#include "grappa_chol.cuh"

namespace {

constexpr int NB = MR_GRAPPA_CHOL_TILE;
constexpr int LDS = NB + 1; // padded rows: column walks hit distinct banks
constexpr int THREADS = 256;
constexpr int HALF = NB / 2; // update: the inner dimension in two halves
constexpr size_t PANEL_SMEM = size_t(2) * NB * LDS * sizeof(float2);

__device__ inline float2 sub_mul_conj(float2 c, float2 a, float2 b) {
  // c - a conj(b)
  return make_float2(c.x - (a.x * b.x + a.y * b.y), c.y - (a.y * b.x - a.x * b.y));
}

__global__ void __launch_bounds__(THREADS) chol_panel(float2 *g, int na, size_t seg_stride,
                                                      int k, int *status) {
  extern __shared__ float2 smem[];
  float2 *dk = smem;            // tile (k, k): dk[r * LDS + c]
  float2 *pi = smem + NB * LDS; // tile (i, k), i > k
  const int i = k + blockIdx.x, tid = threadIdx.x;
  const bool row = i != k;
  float2 *gs = g + blockIdx.y * seg_stride;
  const float2 *src_k = gs + size_t(k) * NB * na + size_t(k) * NB;
  const float2 *src_i = gs + size_t(k) * NB * na + size_t(i) * NB;
  for (int e = tid; e < NB * NB; e += THREADS) {
    int r = e % NB, c = e / NB;
    dk[r * LDS + c] = src_k[size_t(c) * na + r];
    if (row)
      pi[r * LDS + c] = src_i[size_t(c) * na + r];
  }
  __syncthreads();
  for (int c = 0; c < NB; c++) {
    float d = dk[c * LDS + c].x;
    bool bad = !(d > 0.0f); // NaN too
    if (bad && tid == 0)
      atomicOr(status, 1);
    float sd = bad ? 1.0f : sqrtf(d), inv = 1.0f / sd;
    __syncthreads(); // all have read the pivot before it is replaced
    if (tid < NB) {
      int r = tid;
      if (r > c)
        dk[r * LDS + c] = make_float2(dk[r * LDS + c].x * inv, dk[r * LDS + c].y * inv);
      else if (r == c)
        dk[r * LDS + c] = make_float2(sd, 0.0f);
    } else if (row && tid < 2 * NB) {
      int r = tid - NB;
      pi[r * LDS + c] = make_float2(pi[r * LDS + c].x * inv, pi[r * LDS + c].y * inv);
    }
    __syncthreads();
    // Columns q > c lose column c's contribution: the lower part of the
    // diagonal tile (a w x w square walked, its upper half skipped) and the
    // whole row tile.
    const int w = NB - 1 - c, nd = w * w, total = nd + (row ? NB * w : 0);
    for (int e = tid; e < total; e += THREADS) {
      if (e < nd) {
        int r = c + 1 + e % w, q = c + 1 + e / w;
        if (r >= q)
          dk[r * LDS + q] = sub_mul_conj(dk[r * LDS + q], dk[r * LDS + c], dk[q * LDS + c]);
      } else {
        int e2 = e - nd, r = e2 % NB, q = c + 1 + e2 / NB;
        pi[r * LDS + q] = sub_mul_conj(pi[r * LDS + q], pi[r * LDS + c], dk[q * LDS + c]);
      }
    }
    __syncthreads();
  }
  float2 *dst = gs + size_t(k) * NB * na + size_t(i) * NB;
  const float2 *t = row ? pi : dk;
  for (int e = tid; e < NB * NB; e += THREADS) {
    int r = e % NB, c = e / NB;
    dst[size_t(c) * na + r] = t[r * LDS + c];
  }
}

// Tile (i, j) -= L_ik L_jk^H, i = k + 1 + blockIdx.x, j = k + 1 + blockIdx.y.
// Thread (tx, ty) owns rows tx + 16 a and columns ty + 16 b, a, b < 4: the
// L_ik reads are 16 consecutive values, the L_jk reads broadcasts, and the
// global updates coalesced along the rows.
__global__ void __launch_bounds__(THREADS) chol_update(float2 *g, int na, size_t seg_stride,
                                                       int k) {
  const int i = k + 1 + blockIdx.x, j = k + 1 + blockIdx.y;
  if (i < j)
    return; // upper part of M: never read
  __shared__ float2 as[HALF][NB]; // as[kk][r] = L_ik(r, kk)
  __shared__ float2 bs[HALF][NB]; // bs[kk][c] = L_jk(c, kk)
  float2 *gs = g + blockIdx.z * seg_stride;
  const float2 *li = gs + size_t(k) * NB * na + size_t(i) * NB;
  const float2 *lj = gs + size_t(k) * NB * na + size_t(j) * NB;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float2 acc[4][4];
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      acc[a][b] = make_float2(0.0f, 0.0f);
  for (int h = 0; h < NB; h += HALF) {
    for (int e = threadIdx.x; e < HALF * NB; e += THREADS) {
      int r = e % NB, kk = e / NB;
      as[kk][r] = li[size_t(h + kk) * na + r];
      bs[kk][r] = lj[size_t(h + kk) * na + r];
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < HALF; kk++) {
      float2 x[4], y[4];
#pragma unroll
      for (int a = 0; a < 4; a++)
        x[a] = as[kk][tx + 16 * a];
#pragma unroll
      for (int b = 0; b < 4; b++)
        y[b] = bs[kk][ty + 16 * b];
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) {
          // acc += x conj(y)
          acc[a][b].x += x[a].x * y[b].x + x[a].y * y[b].y;
          acc[a][b].y += x[a].y * y[b].x - x[a].x * y[b].y;
        }
    }
    __syncthreads();
  }
  float2 *cd = gs + size_t(j) * NB * na + size_t(i) * NB;
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) {
      float2 *p = cd + size_t(ty + 16 * b) * na + tx + 16 * a;
      float2 v = *p;
      *p = make_float2(v.x - acc[a][b].x, v.y - acc[a][b].y);
    }
}

} // namespace

int mr_grappa_chol_setup() {
  MR_CU(cudaFuncSetAttribute(chol_panel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(PANEL_SMEM)));
  return 0;
}

int mr_grappa_chol_factor(cudaStream_t stream, float2 *g, int na, int ns, int nseg,
                          size_t seg_stride, int *status) {
  const int tiles = na / NB, cols = ns / NB;
  for (int k = 0; k < cols; k++) {
    chol_panel<<<dim3(unsigned(tiles - k), unsigned(nseg)), THREADS, PANEL_SMEM, stream>>>(
        g, na, seg_stride, k, status);
    MR_LAUNCHED(chol_panel);
    if (k + 1 < cols) {
      chol_update<<<dim3(unsigned(tiles - k - 1), unsigned(cols - k - 1), unsigned(nseg)),
                    THREADS, 0, stream>>>(g, na, seg_stride, k);
      MR_LAUNCHED(chol_update);
    }
  }
  return 0;
}
