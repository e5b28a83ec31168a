// The whole solve of the fused GRAPPA calibration in one cooperative
// kernel: the blocked Cholesky of [M; U] (tiles of NB) and the backward
// solve W L = U L^-H, in double precision, every step separated from the
// next by a grid-wide barrier instead of kernel launches. The library
// version (grappa_chol_cuda.cu: own diagonal kernel, cuBLAS ZTRSM / ZHERK /
// ZGEMM) is a chain of 3 launches per tile of 64 columns, 60-85 us each
// on the H100 although the arithmetic of a step is a few us; here a step is
//   diag:    one block factors the diagonal tile in registers and inverts
//            it in the same sweep (L_kk^-1, no L_kk is kept);
//   panel:   the rows below (of M and of U) become A_ik L_kk^-H, a product
//            with the inverse, pieces of PR rows spread over the blocks;
//   update:  A_ij -= L_ik L_jk^H for the tiles right of the panel, the
//            same pieces;
// and the backward solve goes over the column tiles from the last one:
// G21_j -= W_k L_kj for j < k, the piece of tile k - 1 then turned into
// W_{k-1} = G21_{k-1} L_{k-1}^-1 by the block that updated it. W ends up
// in place of G21 (rows ns .. na of g).
#include <cooperative_groups.h>

#include "grappa_chol.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int NB = MR_GRAPPA_CHOL_TILE;
constexpr int THREADS = 256;
#ifndef MR_GRAPPA_SWEEP_PR
#define MR_GRAPPA_SWEEP_PR 16
#endif
constexpr int PR = MR_GRAPPA_SWEEP_PR; // rows per piece of a product
constexpr int RPT = PR / 16;           // of them per thread
constexpr int COLS = NB / 4;     // columns per thread in the diagonal tile
constexpr int LDY = NB + 1;       // the tile in shared memory, padded: no bank conflicts
constexpr size_t SHARED = (size_t(NB) * LDY + size_t(PR) * NB) * sizeof(double2);

static_assert(THREADS == 4 * NB, "the diagonal tile takes four threads a row");
static_assert(THREADS == 256 && PR % 16 == 0, "a product takes 16 threads a column");

// c + a conj(b)
__device__ inline double2 add_mul_conj(double2 c, double2 a, double2 b) {
  return make_double2(c.x + a.x * b.x + a.y * b.y, c.y + a.y * b.x - a.x * b.y);
}

// L_kk^-1 of the diagonal tile at (k0, k0) of g (its lower triangle, as
// updated by every tile left of it) into inv (column-major, ld NB, upper
// triangle zero); false when a pivot is not positive. Right-looking in
// registers: thread (r, grp) (a warp is 32 rows of one grp) holds row r of
// the columns q = grp + 4 t, each first as the unscaled Cholesky column
// a_rq (a_rq -= a_rc conj(a_qc) / a_cc at step c < q) and, once its step
// q has passed, as the row of Y with L Y = diag(sqrt(a_cc)) (y_rq -=
// a_rc y_cq / a_cc, so that Y = diag(sqrt(a_rr)) L^-1): the factor needs a column only until its step, the
// inverse only after it, so the 64 x 64 values of both fit in 16 per
// thread, and every thread does 16 complex products a step. One barrier a
// step, the published column and row double-buffered.
__device__ bool factor_invert_tile(const double2 *g, int na, int k0, double2 *inv,
                                   double2 *buf) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int r = (warp % 2) * 32 + lane, grp = warp / 2;
  double2 *col = buf, *row = buf + 2 * NB; // [2][NB] each
  double *piv = reinterpret_cast<double *>(buf + 4 * NB);
  const double2 *blk = g + size_t(k0) * na + k0;
  double2 z[COLS];
#pragma unroll
  for (int t = 0; t < COLS; t++) {
    const int q = grp + 4 * t;
    // past L1: with the look-ahead, other blocks wrote the tile just now
    z[t] = q <= r ? __ldcg(blk + size_t(q) * na + r) : make_double2(0.0, 0.0);
  }
  bool bad = false;
  for (int c = 0; c < NB; c++) {
    const int b = (c & 1) * NB;
    // column c of the factor (a_rc, every row) and row c of Y (y_cq, q < c)
#pragma unroll
    for (int t = 0; t < COLS; t++)
      if (grp + 4 * t == c)
        col[b + r] = z[t];
    if (r == c) {
#pragma unroll
      for (int t = 0; t < COLS; t++)
        row[b + grp + 4 * t] = z[t];
    }
    __syncthreads();
    double d = col[b + c].x;
    if (!(d > 0.0)) { // NaN too
      bad = true;
      d = 1.0;
    }
    if (threadIdx.x == 0)
      piv[c] = d;
    // Selects, no branches: the rows of a warp differ in which of their
    // columns take part, and divergent branches in this loop made the
    // tile cost about 110 us on the H100.
    const bool below = r > c;
    const double s = -1.0 / d;
    const double2 a = col[b + r];
    const double2 f = make_double2(a.x * s, a.y * s); // -a_rc / a_cc
    // column c turns into y: y_rc = 0 - f y_cc below the pivot, y_cc = 1
    const double2 yc = below ? f : make_double2(1.0, 0.0);
    const bool turn = r >= c;
#pragma unroll
    for (int t = 0; t < COLS; t++) {
      const int q = grp + 4 * t;
      // q < c: y_rq += f y_cq; c < q <= r: a_rq += f conj(a_qc)
      const bool y_part = q < c;
      const double2 v = (y_part ? row : col)[b + q];
      const double vy = y_part ? v.y : -v.y;
      const double nx = fma(f.x, v.x, fma(-f.y, vy, z[t].x));
      const double ny = fma(f.x, vy, fma(f.y, v.x, z[t].y));
      const bool update = below && (y_part || (q > c && q <= r));
      const bool turned = turn && q == c;
      z[t].x = turned ? yc.x : update ? nx : z[t].x;
      z[t].y = turned ? yc.y : update ? ny : z[t].y;
    }
  }
  __syncthreads(); // piv complete
  // L^-1 = diag(1 / sqrt(a_rr)) Y
  const double s = 1.0 / sqrt(piv[r]);
#pragma unroll
  for (int t = 0; t < COLS; t++) {
    const int q = grp + 4 * t;
    inv[size_t(q) * NB + r] = q <= r ? make_double2(z[t].x * s, z[t].y * s)
                                     : make_double2(0.0, 0.0);
  }
  return !bad;
}

// acc = X Y^H for the piece X (PR x NB: X(r, m) = x[m ldx + r]) and the
// tile Y (NB x NB: Y(q, m) = y[m ldy + q], or, adjoint, conj(y[q ldy + m])),
// both through shared memory. Thread (tr, cg) gets rows tr + 16 h and
// columns cg + 16 u.
__device__ void piece_product(const double2 *x, int ldx, const double2 *y, int ldy,
                              bool adjoint, double2 *sh, double2 acc[RPT][4]) {
  double2 *ys = sh, *xs = sh + NB * LDY;
  __syncthreads(); // the last product is done with sh
  for (int e = threadIdx.x; e < NB * NB; e += THREADS) {
    const int fast = e % NB, slow = e / NB;
    if (adjoint) { // read along y's columns: fast = m, slow = q
      double2 v = y[size_t(slow) * ldy + fast];
      ys[fast * LDY + slow] = make_double2(v.x, -v.y);
    } else {
      ys[slow * LDY + fast] = y[size_t(slow) * ldy + fast];
    }
  }
  for (int e = threadIdx.x; e < PR * NB; e += THREADS)
    xs[e] = x[size_t(e / PR) * ldx + e % PR];
  __syncthreads();
  const int tr = threadIdx.x % 16, cg = threadIdx.x / 16;
#pragma unroll
  for (int h = 0; h < RPT; h++)
#pragma unroll
    for (int u = 0; u < 4; u++)
      acc[h][u] = make_double2(0.0, 0.0);
#pragma unroll 4
  for (int m = 0; m < NB; m++) {
    double2 xr[RPT];
#pragma unroll
    for (int h = 0; h < RPT; h++)
      xr[h] = xs[m * PR + tr + 16 * h];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const double2 v = ys[m * LDY + cg + 16 * u];
#pragma unroll
      for (int h = 0; h < RPT; h++)
        acc[h][u] = add_mul_conj(acc[h][u], xr[h], v);
    }
  }
}

// The piece C (PR x NB at c, ld ldc) = acc, or -= acc.
__device__ void piece_store(double2 *c, int ldc, const double2 acc[RPT][4], bool subtract) {
  const int tr = threadIdx.x % 16, cg = threadIdx.x / 16;
#pragma unroll
  for (int h = 0; h < RPT; h++)
#pragma unroll
    for (int u = 0; u < 4; u++) {
      double2 *p = c + size_t(cg + 16 * u) * ldc + tr + 16 * h;
      double2 v = acc[h][u];
      if (subtract) {
        double2 o = *p;
        v = make_double2(o.x - v.x, o.y - v.y);
      }
      *p = v;
    }
}

struct sweep_args {
  double2 *g;   // [M; U], na x ns, column-major
  int na, ns;
  int pieces;   // row pieces of PR holding data: ceil((ns + nt) / PR)
  int upieces;  // of them below ns: ceil(nt / PR)
  double2 *inv; // ns / NB tiles of NB^2
  int *status;
  int *ready;   // look-ahead: diagonal pieces updated so far
  unsigned long long *stamps; // per barrier, %globaltimer of block 0 (or null)
};

__device__ inline void stamp(const sweep_args &a, int n) {
  if (a.stamps != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    a.stamps[n] = t;
  }
}

#ifndef MR_GRAPPA_SWEEP_LOOKAHEAD
#define MR_GRAPPA_SWEEP_LOOKAHEAD 1
#endif

// Item it of the trailing update at step k: a piece of column tile j > k,
// counted from the diagonal down, loses L_ik L_jk^H.
__device__ void update_item(const sweep_args &a, int k, int it, double2 *sh,
                            double2 acc[RPT][4]) {
  const int k0 = k * NB, na = a.na;
  int j = k + 1, rest = it;
  while (rest >= a.pieces - j * NB / PR) {
    rest -= a.pieces - j * NB / PR;
    j++;
  }
  const int r0 = (j * NB / PR + rest) * PR;
  double2 *g = a.g;
  piece_product(g + size_t(k0) * na + r0, na, g + size_t(k0) * na + j * NB, na, false, sh, acc);
  piece_store(g + size_t(j) * NB * na + r0, na, acc, true);
}

__device__ void diag(const sweep_args &a, int k, double2 *sh) {
  if (!factor_invert_tile(a.g, a.na, k * NB, a.inv + size_t(k) * NB * NB, sh) &&
      threadIdx.x == 0)
    atomicOr(a.status, 1);
}

__global__ void __launch_bounds__(THREADS, 1) chol_sweep(sweep_args a) {
  extern __shared__ double2 sh[];
  cg::grid_group grid = cg::this_grid();
  const int tiles = a.ns / NB, na = a.na, dp = NB / PR; // dp: pieces of a diagonal tile
  // Look-ahead: the pieces of the next diagonal tile are updated first (by
  // blocks 0 .. dp - 1), and block 0, once they are, factors that tile
  // while the other blocks update the rest.
  const bool ahead = MR_GRAPPA_SWEEP_LOOKAHEAD && int(gridDim.x) > dp;
  double2 *g = a.g;
  double2 acc[RPT][4];
  int n = 0;
  stamp(a, n++);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0)
      *a.ready = 0; // others touch it after the barrier below
    diag(a, 0, sh);
  }
  for (int k = 0; k < tiles; k++) {
    const int k0 = k * NB;
    if (k > 0 && !ahead) {
      if (blockIdx.x == 0)
        diag(a, k, sh);
    }
    if (k == 0 || !ahead)
      grid.sync();
    stamp(a, n++);
    // panel: pieces below the tile
    const int first = (k0 + NB) / PR;
    for (int it = blockIdx.x; it < a.pieces - first; it += gridDim.x) {
      double2 *x = g + size_t(k0) * na + size_t(first + it) * PR;
      piece_product(x, na, a.inv + size_t(k) * NB * NB, NB, false, sh, acc);
      piece_store(x, na, acc, false);
    }
    grid.sync();
    stamp(a, n++);
    // update: column tiles j > k, the pieces from the diagonal down
    int items = 0;
    for (int j = k + 1; j < tiles; j++)
      items += a.pieces - j * NB / PR;
    if (ahead && k + 1 < tiles) {
      if (int(blockIdx.x) < dp)
        update_item(a, k, blockIdx.x, sh, acc);
      if (blockIdx.x == 0) {
        if (threadIdx.x == 0) {
          const int want = (k + 1) * (dp - 1);
          while (*reinterpret_cast<volatile int *>(a.ready) < want)
            ;
          __threadfence();
        }
        __syncthreads();
        diag(a, k + 1, sh);
      } else {
        if (int(blockIdx.x) < dp) {
          __threadfence();
          __syncthreads();
          if (threadIdx.x == 0)
            atomicAdd(a.ready, 1);
        }
        for (int it = dp + blockIdx.x - 1; it < items; it += gridDim.x - 1)
          update_item(a, k, it, sh, acc);
      }
    } else {
      for (int it = blockIdx.x; it < items; it += gridDim.x)
        update_item(a, k, it, sh, acc);
    }
    grid.sync();
    stamp(a, n++);
  }
  // backward: W_{last} first, then per k the updates by W_k
  const int ns = a.ns;
  {
    const int k0 = (tiles - 1) * NB;
    for (int p = blockIdx.x; p < a.upieces; p += gridDim.x) {
      double2 *x = g + size_t(k0) * na + ns + p * PR;
      piece_product(x, na, a.inv + size_t(tiles - 1) * NB * NB, NB, true, sh, acc);
      piece_store(x, na, acc, false);
    }
  }
  grid.sync();
  stamp(a, n++);
  for (int k = tiles - 1; k > 0; k--) {
    const int k0 = k * NB;
    for (int it = blockIdx.x; it < a.upieces * k; it += gridDim.x) {
      const int p = it % a.upieces, j = it / a.upieces;
      double2 *c = g + size_t(j) * NB * na + ns + p * PR;
      // G21_j -= W_k L_kj: Y(q, m) = conj(L_kj(m, q))
      piece_product(g + size_t(k0) * na + ns + p * PR, na, g + size_t(j) * NB * na + k0, na,
                    true, sh, acc);
      piece_store(c, na, acc, true);
      if (j == k - 1) { // G21_{k-1} is final: W_{k-1} = G21_{k-1} L^-1
        __syncthreads();
        piece_product(c, na, a.inv + size_t(j) * NB * NB, NB, true, sh, acc);
        piece_store(c, na, acc, false);
      }
    }
    grid.sync();
    stamp(a, n++);
  }
}

} // namespace

int mr_grappa_chol_sweep_init(int *grid) {
  MR_CU(cudaFuncSetAttribute(chol_sweep, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(SHARED)));
  int dev = 0, sms = 0, per_sm = 0;
  MR_CU(cudaGetDevice(&dev));
  MR_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  MR_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, chol_sweep, THREADS, SHARED));
  *grid = per_sm * sms;
  return 0;
}

int mr_grappa_chol_sweep_stamps(int ns) { return 4 * (ns / NB) + 1; }

int mr_grappa_chol_sweep(mr_cuda_ctx *c, int grid, double2 *g, int na, int ns, int nt, int nseg,
                         size_t seg_stride, double2 *inv, int *status, int *ready,
                         unsigned long long *stamps) {
  if (grid < 1)
    return mr_fail(MR_EINVAL, "grappa: no block of the solve fits on the device");
  for (int s = 0; s < nseg; s++) {
    sweep_args a{g + s * seg_stride,
                 na,
                 ns,
                 (ns + nt + PR - 1) / PR,
                 (nt + PR - 1) / PR,
                 inv + size_t(s) * (ns / NB) * NB * NB,
                 status,
                 ready,
                 s == 0 ? stamps : nullptr};
    void *args[] = {&a};
    MR_CU(cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(chol_sweep), dim3(grid),
                                      dim3(THREADS), args, SHARED, c->compute));
  }
  return 0;
}
