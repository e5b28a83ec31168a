// The blocked right-looking Cholesky of the fused GRAPPA calibration, and
// the solve that follows it, in
// double precision (realistic ACS data make M ill-conditioned: a single-
// precision factor leaves weights errors of 1e-2; the products below run on
// the H100's FP64 tensor cores, as fast as FP32 without them). The
// matrix is [M; U] (M Hermitian, U the right-hand sides as extra rows), so
// one sweep factors M and applies L^-H to U. Two levels: panels of PANEL
// columns, each factored in tiles of NB columns,
//   tile:   one thread block factors the diagonal tile in shared memory
//           and inverts it (chol_tile);
//   below:  the rows below, of M and of U, become A_ik L_kk^-H, one ZGEMM
//           with that inverse;
//   inner:  the panel's columns right of the tile lose L_ik L_jk^H (ZGEMM);
// then the columns right of the panel lose the panel's product with itself
// (ZHERK on M's lower part and ZGEMM on the U rows, with the panel's width
// as inner dimension). Look-ahead: the next panel's columns are updated
// first, the rest on a side stream beside the factorisation of that next
// panel. Everything forks from and joins back into the compute stream, so
// a captured graph of the calibration holds it all. On the H100 (Table 5.1
// at 32 / 64 / 128 coils, measured in single precision) panels of 256 beat
// 64 by 1% / 2% / 7%, 512 tied with 256, one GEMM for the whole trailing
// update instead of HERK + GEMM lost at 128 coils, and look-ahead gained 3%.
// The tile steps are a dependent chain (10 at 32 coils, 40 at 128), so
// their latency sets the solve's time: the tile kernel avoids a barrier
// per column, and the product with the inverse (6-20 us on the H100)
// replaces cuBLAS's ZTRSM, which walks the tile's columns (30 us a tile,
// 32 coils).
// The solve W L = U L^-H that remains goes backwards over the column tiles
// with the same inverses: two ZGEMMs a tile.
#include "grappa_chol.cuh"

#include <algorithm>

namespace {

constexpr int NB = MR_GRAPPA_CHOL_TILE;
constexpr int PANEL = 4 * NB;
constexpr int SUB = 16;       // columns of a sub-panel of the diagonal tile
constexpr int LDS = NB + 1;   // odd: a row and a column of 16-byte elements hit distinct banks
constexpr int THREADS = 512;  // 16 warps: 4 per SM partition
constexpr int GROUPS = THREADS / 64; // thread groups of 64 rows (or columns)
constexpr unsigned FULL = 0xffffffffu;
constexpr size_t TILE_SHARED = 2 * size_t(NB) * LDS * sizeof(double2);
constexpr int STAMPS = MR_GRAPPA_TILE_PHASES + 1; // a stamped tile kernel's clock64() stamps

__device__ inline double2 sub_mul_conj(double2 c, double2 a, double2 b) {
  // c - a conj(b)
  return make_double2(c.x - (a.x * b.x + a.y * b.y), c.y - (a.y * b.x - a.x * b.y));
}

__device__ inline double2 sub_mul(double2 c, double2 a, double2 b) {
  // c - a b
  return make_double2(c.x - (a.x * b.x - a.y * b.y), c.y - (a.x * b.y + a.y * b.x));
}

__device__ inline unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline double2 shfl2(double2 v, int lane) {
  return make_double2(__shfl_sync(FULL, v.x, lane), __shfl_sync(FULL, v.y, lane));
}

// One warp: the SUB x SUB block at (J, J) of the tile a (already updated
// by the sub-panels left of it) becomes its factor L_JJ (lower triangle),
// and the same block of x its inverse L_JJ^-1 (upper triangle zero). Lane
// r (and r + 16, which repeats it) holds row r in registers; a column step
// is one shuffle of the pivot, one reciprocal square root, and shuffles of
// the column for the update: no barrier, no division chain. Entries above
// the diagonal are never read (selects, not products, keep them out), so
// the tile's upper triangle may hold anything. Returns true where a pivot
// was not positive (it is then taken as 1 and the factor is garbage).
// This warp's work is most of the tile kernel's time (H100: the kernel
// takes 45 us, its other warps wait at the barrier for two thirds of their
// cycles): some 2,000 dependent instructions a block, shuffles and FP64 at
// 18 cycles an instruction. A variant with the column loops rolled (the
// registers shifting a column a step, a row's halves in two lanes) took
// 47 us; the code's size is not what bounds it. Sub-panels of 8 columns
// (factor and inverse in one loop, 1 / L_cc from the rsqrt, no spills
// where this kernel spills 20 bytes at 128 registers) took 47.5-49.7 us
// against 40.7-42.4: the extra sub-panels cost more than they saved.
// Measured by phase (mr-bench grappa, gpu_tile_phase_us) a 16-column factor
// takes 2.9 us and the inverse 2.3 (0.18 and 0.14 us a column step), 21 of
// the block's 38 us. The inverse's column steps inside the factor's (1 /
// L_cc from the rsqrt, L_rc from the registers: two chains interleaved)
// took 48 us against 41: 100 bytes of spills, and no overlap gained.
__device__ bool factor_sub(double2 *a, double2 *x, int J, int lane, long long *stamp_factor) {
  const int r = lane & (SUB - 1);
  bool bad = false;
  {
    double2 v[SUB];
#pragma unroll
    for (int q = 0; q < SUB; q++)
      v[q] = a[(J + q) * LDS + J + r];
#pragma unroll
    for (int c = 0; c < SUB; c++) {
      double d = __shfl_sync(FULL, v[c].x, c);
      if (!(d > 0.0)) { // NaN too; the same d in every lane
        bad = true;
        d = 1.0;
      }
      const double rs = rsqrt(d);
      const double2 m = r > c ? make_double2(v[c].x * rs, v[c].y * rs) : make_double2(0.0, 0.0);
      v[c] = r == c ? make_double2(d * rs, 0.0) : m;
#pragma unroll
      for (int q = c + 1; q < SUB; q++)
        v[q] = sub_mul_conj(v[q], m, shfl2(m, q));
    }
    if (lane < SUB) {
#pragma unroll
      for (int q = 0; q < SUB; q++)
        if (q <= r)
          a[(J + q) * LDS + J + r] = v[q];
    }
  }
  __syncwarp();
  if (stamp_factor != nullptr && lane == 0)
    *stamp_factor = clock64();
  // L z = I column by column: row c of z is final (but for its division by
  // L_cc) at step c; the rows below lose (L_rc / L_cc) z_c.
  double2 z[SUB];
#pragma unroll
  for (int q = 0; q < SUB; q++)
    z[q] = make_double2(q == r ? 1.0 : 0.0, 0.0);
  double scale = 1.0;
#pragma unroll
  for (int c = 0; c < SUB; c++) {
    const double ic = 1.0 / a[(J + c) * LDS + J + c].x;
    const double2 l = a[(J + c) * LDS + J + r];
    const double2 f = r > c ? make_double2(l.x * ic, l.y * ic) : make_double2(0.0, 0.0);
    scale = r == c ? ic : scale;
#pragma unroll
    for (int q = 0; q <= c; q++)
      z[q] = sub_mul(z[q], f, shfl2(z[q], c));
  }
  if (lane < SUB) {
#pragma unroll
    for (int q = 0; q < SUB; q++)
      x[(J + q) * LDS + J + r] = make_double2(z[q].x * scale, z[q].y * scale);
  }
  return bad;
}

// The NB x NB diagonal tile at (k0, k0) of g: L in place of its lower
// triangle, and L^-1 (column-major, ld NB, upper triangle zero) into inv.
// In shared memory (a: the tile, x: the inverse growing from I), in four
// sub-panels of SUB columns: one warp factors and inverts the SUB x SUB
// diagonal block (factor_sub); then all threads turn the rows below into
// A L_JJ^-H and the sub-panel's rows of x into L_JJ^-1 (B), and update the
// trailing tile and the rows of x below by the sub-panel (each thread one
// row, reading the other operand as a broadcast). Four barriers a sub-panel.
// H100: 45 us a tile (the previous kernel with a barrier a column and
// cuBLAS ZTRSM for the rows below: 60-85 us a tile step with the panel's
// ZGEMM); the product of the rows below with the inverse takes 6-20 us.
// Blocks 1.. copy the rows below the tile, [k0 + NB, k0 + NB + below_rows)
// of the same columns, into below (ld ld) for the product with L^-H that
// follows (cuBLAS cannot multiply in place).
template <bool Stamped>
__global__ void __launch_bounds__(THREADS, 1)
    chol_tile(double2 *g, int ld, int k0, int below_rows, double2 *inv, double2 *below,
              int *status, long long *stamps) {
  if (blockIdx.x > 0) {
    const size_t n = size_t(below_rows) * NB, step = size_t(gridDim.x - 1) * blockDim.x;
    for (size_t e = (blockIdx.x - 1) * size_t(blockDim.x) + threadIdx.x; e < n; e += step) {
      const size_t c = e / below_rows, r = e % below_rows;
      below[c * ld + r] = g[(k0 + c) * ld + k0 + NB + r];
    }
    return;
  }
  // Stamped (the test hook only): thread 0 writes clock64() at each phase
  // boundary (MR_GRAPPA_TILE_PHASES in grappa_impl.h says which), and the
  // global timer at entry and end, which turn the cycles into time.
  const bool stamper = Stamped && threadIdx.x == 0;
  if (stamper) {
    stamps[0] = clock64();
    stamps[STAMPS] = (long long)globaltimer_ns();
  }
  extern __shared__ double2 sm[];
  double2 *a = sm, *x = sm + NB * LDS; // element (r, c) at c * LDS + r
  double2 *blk = g + size_t(k0) * ld + k0;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  for (int e = t; e < NB * NB; e += THREADS) {
    const int r = e % NB, c = e / NB;
    a[c * LDS + r] = blk[size_t(c) * ld + r];
    x[c * LDS + r] = make_double2(r == c ? 1.0 : 0.0, 0.0);
  }
  // Thread (row, grp): each of the four warps of an SM partition takes a
  // different half of the rows and group, so the partitions share the work.
  const int row = ((w >> 2) & 1) * 32 + lane, grp = (w & 3) + 4 * (w >> 3);
  bool bad = false;
  __syncthreads();
  if (stamper)
    stamps[1] = clock64();
#pragma unroll
  for (int j = 0; j < NB / SUB; j++) {
    const int J = j * SUB, K = J + SUB; // this sub-panel: columns [J, K)
    long long *st = Stamped ? stamps + 2 + 6 * j : nullptr; // see MR_GRAPPA_TILE_PHASES
    if (w == 0)
      bad |= factor_sub(a, x, J, lane, Stamped ? st : nullptr);
    if (stamper)
      st[1] = clock64();
    __syncthreads();
    if (stamper)
      st[2] = clock64();
    // The rows below, L_rJ = A_rJ L_JJ^-H (row r >= K, columns J + grp,
    // J + grp + 8), and x's rows [J, K), L_JJ^-1 B (column col < J).
    double2 p0 = make_double2(0, 0), p1 = p0, b0 = p0, b1 = p0;
    const int i0 = grp, i1 = grp + GROUPS;
    if (K < NB && row >= K) {
#pragma unroll
      for (int k = 0; k < SUB; k++) {
        const double2 v = a[(J + k) * LDS + row];
        p0 = sub_mul_conj(p0, v, x[(J + k) * LDS + J + i0]);
        p1 = sub_mul_conj(p1, v, x[(J + k) * LDS + J + i1]);
      }
    }
    if (row < J) {
#pragma unroll
      for (int k = 0; k < SUB; k++) {
        const double2 v = x[row * LDS + J + k];
        b0 = sub_mul(b0, x[(J + k) * LDS + J + i0], v);
        b1 = sub_mul(b1, x[(J + k) * LDS + J + i1], v);
      }
    }
    __syncthreads();
    if (stamper)
      st[3] = clock64();
    if (K < NB && row >= K) { // the sums were formed negated
      a[(J + i0) * LDS + row] = make_double2(-p0.x, -p0.y);
      a[(J + i1) * LDS + row] = make_double2(-p1.x, -p1.y);
    }
    if (row < J) {
      x[row * LDS + J + i0] = make_double2(-b0.x, -b0.y);
      x[row * LDS + J + i1] = make_double2(-b1.x, -b1.y);
    }
    __syncthreads();
    if (stamper)
      st[4] = clock64();
    if (K < NB && row >= K) {
      double2 l[SUB];
#pragma unroll
      for (int k = 0; k < SUB; k++)
        l[k] = a[(J + k) * LDS + row];
      // the trailing tile's lower triangle: column c of this row
#pragma unroll
      for (int i = 0; i < (NB - K) / GROUPS; i++) {
        const int c = K + grp + i * GROUPS;
        if (c <= row) {
          double2 s = a[c * LDS + row];
#pragma unroll
          for (int k = 0; k < SUB; k++)
            s = sub_mul_conj(s, l[k], a[(J + k) * LDS + c]);
          a[c * LDS + row] = s;
        }
      }
      // the rows of x below: column col of this row loses L_rJ x's rows [J, K)
#pragma unroll
      for (int i = 0; i < K / GROUPS; i++) {
        const int col = grp + i * GROUPS;
        double2 s = x[col * LDS + row];
#pragma unroll
        for (int k = 0; k < SUB; k++)
          s = sub_mul(s, l[k], x[col * LDS + J + k]);
        x[col * LDS + row] = s;
      }
    }
    __syncthreads(); // before the next sub-panel's diagonal block is read
    if (stamper)
      st[5] = clock64();
  }
  for (int e = t; e < NB * NB; e += THREADS) {
    const int r = e % NB, c = e / NB;
    if (c <= r)
      blk[size_t(c) * ld + r] = a[c * LDS + r];
    inv[c * NB + r] = x[c * LDS + r];
  }
  if (bad && t == 0)
    atomicOr(status, 1);
  if (Stamped) {
    __syncthreads();
    if (stamper) {
      stamps[STAMPS - 1] = clock64();
      stamps[STAMPS + 1] = (long long)globaltimer_ns();
    }
  }
}

// The tile kernel as the calibration runs it, and stamped (the test hook's).
using tile_kernel = void (*)(double2 *, int, int, int, double2 *, double2 *, int *, long long *);
const tile_kernel tile_kernels[2] = {chol_tile<false>, chol_tile<true>};

// C (rows x cols at (r0, c0)) -= A A'^H with A the rows [r0, ..) and A' the
// rows [c0, ..) of columns [k0, k0 + k): the full block, both triangles.
int gemm_update(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int k0, int k, int r0, int rows,
                int c0, int cols, mr_err *err) {
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0), minus = make_cuDoubleComplex(-1, 0);
  const cuDoubleComplex *p = gc + size_t(k0) * na;
  MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_C, rows, cols, k, &minus, p + r0, na,
                        p + c0, na, &one, gc + size_t(c0) * na + r0, na));
  return 0;
}

// The trailing update by columns [k0, k0 + k) (factored) of columns
// [c0, ns), rows [c0, na): M's lower part by CHERK, the U rows by CGEMM;
// on the stream the cuBLAS handle is set to.
int trailing(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int ns, int k0, int k, int c0,
             mr_err *err) {
  const double one = 1.0, minus = -1.0;
  MR_CUBLAS(cublasZherk(c->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, ns - c0, k, &minus,
                        gc + size_t(k0) * na + c0, na, &one, gc + size_t(c0) * na + c0, na));
  return gemm_update(c, gc, na, k0, k, ns, na - ns, c0, ns - c0, err);
}

// One tile step: the diagonal tile at (k0, k0) factored and inverted
// (L_kk^-1 into inv_k), then the rows below it, [k0 + NB, na), become
// A_ik L_kk^-H: one ZGEMM with the inverse (on the FP64 tensor cores)
// instead of cuBLAS's ZTRSM, which walks the tile's columns.
// mid (may be null) is recorded between the two.
// stamps (may be null; the test hook's): the stamped tile kernel runs,
// writing there.
int tile_step(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int k0, double2 *inv_k, double2 *below,
              int *status, mr_err *err, cudaEvent_t mid = nullptr, long long *stamps = nullptr) {
  const int k1 = k0 + NB, rows = na - k1;
  const size_t per_block = size_t(THREADS) * 8;
  const unsigned copiers = unsigned(
      std::min<size_t>(64, std::max<size_t>(1, (size_t(rows) * NB + per_block - 1) / per_block)));
  tile_kernels[stamps != nullptr]<<<rows > 0 ? 1 + copiers : 1, THREADS, TILE_SHARED,
                                     c->compute>>>(
      reinterpret_cast<double2 *>(gc), na, k0, rows, inv_k, below, status, stamps);
  MR_LAUNCHED(chol_tile);
  if (mid != nullptr)
    MR_CU(cudaEventRecord(mid, c->compute));
  if (rows > 0) {
    const cuDoubleComplex one = make_cuDoubleComplex(1, 0), zero = make_cuDoubleComplex(0, 0);
    MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_C, rows, NB, NB, &one,
                          reinterpret_cast<const cuDoubleComplex *>(below), na,
                          reinterpret_cast<const cuDoubleComplex *>(inv_k), NB, &zero,
                          gc + size_t(k0) * na + k1, na));
  }
  return 0;
}

// Columns [p0, p1), rows [p0, na), already updated by everything left of
// them: factored tile by tile; inv receives the tiles' inverses (tile k at
// inv + k NB^2).
int factor_panel(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int p0, int p1, double2 *inv,
                 double2 *below, int *status, mr_err *err) {
  for (int k0 = p0; k0 < p1; k0 += NB) {
    const int k1 = k0 + NB;
    int rc = tile_step(c, gc, na, k0, inv + size_t(k0 / NB) * NB * NB, below, status, err);
    if (rc == 0 && k1 < p1)
      rc = gemm_update(c, gc, na, k0, NB, k1, na - k1, k1, p1 - k1, err);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int factor_one(mr_cuda_ctx *c, const mr_grappa_chol_side &side, double2 *g, int na, int ns,
               double2 *inv, double2 *below, int *status, mr_err *err) {
  auto *gc = reinterpret_cast<cuDoubleComplex *>(g);
  bool pending = false; // trailing work on the side stream not yet joined
  int rc = 0;
  for (int p0 = 0; rc == 0 && p0 < ns; p0 += PANEL) {
    const int p1 = ns - p0 < PANEL ? ns : p0 + PANEL;
    if ((rc = factor_panel(c, gc, na, p0, p1, inv, below, status, err)) < 0 || p1 >= ns)
      break;
    // The next panel's columns (all their rows) here, once the side stream
    // has finished its update of them; the rest there.
    if (pending) {
      MR_CU(cudaStreamWaitEvent(c->compute, side.join, 0));
      pending = false;
    }
    const int p2 = ns - p1 < PANEL ? ns : p1 + PANEL;
    if ((rc = gemm_update(c, gc, na, p0, p1 - p0, p1, na - p1, p1, p2 - p1, err)) < 0)
      break;
    if (p2 < ns) {
      MR_CU(cudaEventRecord(side.fork, c->compute));
      MR_CU(cudaStreamWaitEvent(side.stream, side.fork, 0));
      MR_CUBLAS(cublasSetStream(c->blas, side.stream));
      rc = trailing(c, gc, na, ns, p0, p1 - p0, p2, err);
      MR_CUBLAS(cublasSetStream(c->blas, c->compute));
      MR_CU(cudaEventRecord(side.join, side.stream));
      pending = true;
    }
  }
  if (pending)
    MR_CU(cudaStreamWaitEvent(c->compute, side.join, 0));
  return rc;
}

} // namespace

int mr_grappa_chol_init(mr_err *err) {
  for (tile_kernel k : tile_kernels)
    MR_CU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(TILE_SHARED)));
  return 0;
}

int mr_grappa_chol_solve(mr_cuda_ctx *c, double2 *g, int na, int ns, int nt, int nseg,
                         size_t seg_stride, const double2 *inv, double2 *w, int ldw, mr_err *err) {
  const int tiles = ns / NB;
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0), zero = make_cuDoubleComplex(0, 0),
                        minus = make_cuDoubleComplex(-1, 0);
  for (int s = 0; s < nseg; s++) {
    auto *gc = reinterpret_cast<cuDoubleComplex *>(g + s * seg_stride);
    auto *ws = reinterpret_cast<cuDoubleComplex *>(w + s * size_t(ldw) * ns);
    auto *is = reinterpret_cast<const cuDoubleComplex *>(inv + size_t(s) * tiles * NB * NB);
    for (int k = tiles - 1; k >= 0; k--) {
      const int k0 = k * NB;
      // W_k = (G21_k, updated by every later block) L_kk^-1
      MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, nt, NB, NB, &one,
                            gc + size_t(k0) * na + ns, na, is + size_t(k) * NB * NB, NB, &zero,
                            ws + size_t(k0) * ldw, ldw));
      // G21_j -= W_k L_kj for the blocks j < k
      if (k0 > 0)
        MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, nt, k0, NB, &minus,
                              ws + size_t(k0) * ldw, ldw, gc + k0, na, &one, gc + ns, na));
    }
  }
  return 0;
}

int mr_grappa_chol_factor(mr_cuda_ctx *c, const mr_grappa_chol_side &side, double2 *g, int na,
                          int ns, int nseg, size_t seg_stride, double2 *inv, double2 *below,
                          int *status, mr_err *err) {
  const size_t per_seg = size_t(ns / NB) * NB * NB;
  for (int s = 0; s < nseg; s++) {
    int rc = factor_one(c, side, g + s * seg_stride, na, ns, inv + s * per_seg, below, status, err);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int mr_grappa_cuda_chol_tile(mr_device *dev, int rows, double *panel, double *inv, double *tile_ms,
                             double *below_ms, double *phase_us, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    const size_t n = size_t(rows) * NB;
    double2 *g = nullptr, *below = nullptr, *iv = nullptr;
    int *status = nullptr, flag = 0;
    long long *stamps = nullptr, st[STAMPS + 2];
    cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
    int rc = mr_grappa_chol_init(err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&g), n * sizeof(double2), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&below), n * sizeof(double2), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&iv), size_t(NB) * NB * sizeof(double2), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&status), sizeof(int), err);
    if (rc == 0 && phase_us != nullptr)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&stamps), sizeof st, err);
    if (rc == 0) {
      rc = [&] {
        for (cudaEvent_t &e : ev)
          MR_CU(cudaEventCreate(&e));
        MR_CU(cudaMemcpyAsync(g, panel, n * sizeof(double2), cudaMemcpyHostToDevice, c->compute));
        MR_CU(cudaMemsetAsync(status, 0, sizeof(int), c->compute));
        MR_CU(cudaEventRecord(ev[0], c->compute));
        int r = tile_step(c, reinterpret_cast<cuDoubleComplex *>(g), rows, 0, iv, below, status,
                          err, ev[1], stamps);
        if (r < 0)
          return r;
        MR_CU(cudaEventRecord(ev[2], c->compute));
        MR_CU(cudaMemcpyAsync(panel, g, n * sizeof(double2), cudaMemcpyDeviceToHost, c->compute));
        MR_CU(cudaMemcpyAsync(inv, iv, size_t(NB) * NB * sizeof(double2),
                              cudaMemcpyDeviceToHost, c->compute));
        MR_CU(cudaMemcpyAsync(&flag, status, sizeof(int), cudaMemcpyDeviceToHost, c->compute));
        if (stamps != nullptr)
          MR_CU(cudaMemcpyAsync(st, stamps, sizeof st, cudaMemcpyDeviceToHost, c->compute));
        MR_CU(cudaStreamSynchronize(c->compute));
        float t0 = 0, t1 = 0;
        MR_CU(cudaEventElapsedTime(&t0, ev[0], ev[1]));
        MR_CU(cudaEventElapsedTime(&t1, ev[1], ev[2]));
        if (tile_ms != nullptr)
          *tile_ms = t0;
        if (below_ms != nullptr)
          *below_ms = t1;
        if (phase_us != nullptr) { // cycles to microseconds by the global timer's span
          const double us_per_cycle =
              double(st[STAMPS + 1] - st[STAMPS]) * 1e-3 / double(st[STAMPS - 1] - st[0]);
          for (int i = 0; i < MR_GRAPPA_TILE_PHASES; i++)
            phase_us[i] = double(st[i + 1] - st[i]) * us_per_cycle;
        }
        return 0;
      }();
    }
    for (cudaEvent_t e : ev)
      if (e != nullptr)
        cudaEventDestroy(e);
    mr_cuda_free(c, g);
    mr_cuda_free(c, below);
    mr_cuda_free(c, iv);
    mr_cuda_free(c, status);
    mr_cuda_free(c, stamps);
    if (rc == 0 && flag != 0)
      rc = mr_err_set(err, MR_ENUMERIC, "grappa: a diagonal tile is not positive definite");
    return rc;
  });
}
