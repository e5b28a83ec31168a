// The blocked right-looking Cholesky of the fused GRAPPA calibration, and
// the solve that follows it, in
// double precision (realistic ACS data make M ill-conditioned: a single-
// precision factor leaves weights errors of 1e-2; the products below run on
// the H100's FP64 tensor cores, as fast as FP32 without them). The
// matrix is [M; U] (M Hermitian, U the right-hand sides as extra rows), so
// one sweep factors M and applies L^-H to U. Two levels: panels of PANEL
// columns, each factored in tiles of NB columns,
//   diag:   one thread block factors the diagonal tile in shared memory;
//   TRSM:   the rows below, of M and of U, become A_ik L_kk^-H (cuBLAS);
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
// The solve W L = U L^-H that remains goes backwards over the column tiles
// with their inverses (all tiles inverted at once, in one launch): two
// ZGEMMs a tile, where cuBLAS's ZTRSM with the few (n_tgt) rows of U walks
// the columns in a kernel a tile of 30 us each (H100, 32 coils).
#include "grappa_chol.cuh"

namespace {

constexpr int NB = MR_GRAPPA_CHOL_TILE;
constexpr int PANEL = 4 * NB;
constexpr int THREADS = 1024;
constexpr int G = THREADS / NB, PER = NB / G;

__device__ inline double2 sub_mul_conj(double2 c, double2 a, double2 b) {
  // c - a conj(b)
  return make_double2(c.x - (a.x * b.x + a.y * b.y), c.y - (a.y * b.x - a.x * b.y));
}

// The NB x NB diagonal tile at (k0, k0) of g: L in place of its lower
// triangle. Thread (r, grp) owns row r of the columns congruent to grp
// modulo G; one barrier per column. The columns are kept unscaled while
// they update the rest (a_rq -= a_rc conj(a_qc) / a_cc) and divided by the
// root of their pivot at the end. The tile (64 KiB in double) lives in
// dynamic shared memory, above the 48 KiB a static array may take.
constexpr size_t DIAG_SHARED = NB * NB * sizeof(double2) + NB * sizeof(double);

__global__ void __launch_bounds__(THREADS) chol_diag(double2 *g, int ld, int k0, int *status) {
  extern __shared__ double2 a[]; // a[c * NB + r]: element (r, c); then piv
  double *piv = reinterpret_cast<double *>(a + NB * NB);
  const int r = threadIdx.x % NB, grp = threadIdx.x / NB;
  double2 *blk = g + size_t(k0) * ld + k0;
  for (int c = grp; c < NB; c += G)
    a[c * NB + r] = blk[size_t(c) * ld + r];
  bool bad = false;
  for (int c = 0; c < NB; c++) {
    __syncthreads(); // column c is final
    double d = a[c * NB + c].x;
    if (!(d > 0.0)) { // NaN too
      bad = true;
      d = 1.0;
    }
    if (r > c) {
      double s = 1.0 / d;
      double2 x = a[c * NB + r];
      x = make_double2(x.x * s, x.y * s);
#pragma unroll
      for (int t = 0; t < PER; t++) {
        int q = c + 1 + grp + t * G;
        if (q <= r)
          a[q * NB + r] = sub_mul_conj(a[q * NB + r], x, a[c * NB + q]);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < NB) {
    double d = a[threadIdx.x * NB + threadIdx.x].x;
    piv[threadIdx.x] = d > 0.0 ? sqrt(d) : 1.0;
  }
  __syncthreads();
  for (int c = grp; c <= r; c += G) {
    double2 v = a[c * NB + r];
    double s = 1.0 / piv[c];
    blk[size_t(c) * ld + r] = r == c ? make_double2(piv[c], 0.0) : make_double2(v.x * s, v.y * s);
  }
  if (bad && threadIdx.x == 0)
    atomicOr(status, 1);
}

// L_kk^-1 of every diagonal tile (block k of segment blockIdx.y) into
// inv + (seg * tiles + k) NB^2 (column-major, ld NB), by forward
// substitution on all NB columns at once: after step i, row i of x is final
// but for its division by L_ii. Thread (r, grp) as in chol_diag.
constexpr size_t INV_SHARED = 2 * NB * NB * sizeof(double2);

__global__ void __launch_bounds__(THREADS)
    invert_tiles(const double2 *g, int ld, size_t seg_stride, double2 *inv) {
  extern __shared__ double2 l[]; // l[c * NB + r]: L_kk (r, c)
  double2 *x = l + NB * NB;
  const int r = threadIdx.x % NB, grp = threadIdx.x / NB, k0 = blockIdx.x * NB;
  const double2 *blk = g + blockIdx.y * seg_stride + size_t(k0) * ld + k0;
  for (int c = grp; c < NB; c += G) {
    l[c * NB + r] = blk[size_t(c) * ld + r];
    x[c * NB + r] = make_double2(r == c ? 1.0 : 0.0, 0.0);
  }
  for (int i = 0; i < NB; i++) {
    __syncthreads();
    if (r > i) {
      double2 li = l[i * NB + r];
      double s = 1.0 / l[i * NB + i].x;
      double2 f = make_double2(li.x * s, li.y * s);
#pragma unroll
      for (int t = 0; t < PER; t++) {
        int j = grp + t * G;
        if (j <= i) {
          double2 xi = x[j * NB + i], xr = x[j * NB + r];
          x[j * NB + r] = make_double2(xr.x - (f.x * xi.x - f.y * xi.y),
                                       xr.y - (f.x * xi.y + f.y * xi.x));
        }
      }
    }
  }
  __syncthreads();
  double2 *out = inv + (size_t(blockIdx.y) * gridDim.x + blockIdx.x) * NB * NB;
  double s = 1.0 / l[r * NB + r].x;
  for (int c = grp; c < NB; c += G) {
    double2 v = x[c * NB + r];
    out[c * NB + r] = make_double2(v.x * s, v.y * s);
  }
}

// C (rows x cols at (r0, c0)) -= A A'^H with A the rows [r0, ..) and A' the
// rows [c0, ..) of columns [k0, k0 + k): the full block, both triangles.
int gemm_update(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int k0, int k, int r0, int rows,
                int c0, int cols) {
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0), minus = make_cuDoubleComplex(-1, 0);
  const cuDoubleComplex *p = gc + size_t(k0) * na;
  MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_C, rows, cols, k, &minus, p + r0, na,
                        p + c0, na, &one, gc + size_t(c0) * na + r0, na));
  return 0;
}

// The trailing update by columns [k0, k0 + k) (factored) of columns
// [c0, ns), rows [c0, na): M's lower part by CHERK, the U rows by CGEMM;
// on the stream the cuBLAS handle is set to.
int trailing(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int ns, int k0, int k, int c0) {
  const double one = 1.0, minus = -1.0;
  MR_CUBLAS(cublasZherk(c->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, ns - c0, k, &minus,
                        gc + size_t(k0) * na + c0, na, &one, gc + size_t(c0) * na + c0, na));
  return gemm_update(c, gc, na, k0, k, ns, na - ns, c0, ns - c0);
}

// Columns [p0, p1), rows [p0, na), already updated by everything left of
// them: factored tile by tile.
int factor_panel(mr_cuda_ctx *c, cuDoubleComplex *gc, int na, int p0, int p1, int *status) {
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0);
  for (int k0 = p0; k0 < p1; k0 += NB) {
    const int k1 = k0 + NB;
    chol_diag<<<1, THREADS, DIAG_SHARED, c->compute>>>(reinterpret_cast<double2 *>(gc), na, k0,
                                                       status);
    MR_LAUNCHED(chol_diag);
    MR_CUBLAS(cublasZtrsm(c->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C,
                          CUBLAS_DIAG_NON_UNIT, na - k1, NB, &one, gc + size_t(k0) * na + k0, na,
                          gc + size_t(k0) * na + k1, na));
    if (k1 < p1) {
      int rc = gemm_update(c, gc, na, k0, NB, k1, na - k1, k1, p1 - k1);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

int factor_one(mr_cuda_ctx *c, const mr_grappa_chol_side &side, double2 *g, int na, int ns,
               int *status) {
  auto *gc = reinterpret_cast<cuDoubleComplex *>(g);
  bool pending = false; // trailing work on the side stream not yet joined
  int rc = 0;
  for (int p0 = 0; rc == 0 && p0 < ns; p0 += PANEL) {
    const int p1 = ns - p0 < PANEL ? ns : p0 + PANEL;
    if ((rc = factor_panel(c, gc, na, p0, p1, status)) < 0 || p1 >= ns)
      break;
    // The next panel's columns (all their rows) here, once the side stream
    // has finished its update of them; the rest there.
    if (pending) {
      MR_CU(cudaStreamWaitEvent(c->compute, side.join, 0));
      pending = false;
    }
    const int p2 = ns - p1 < PANEL ? ns : p1 + PANEL;
    if ((rc = gemm_update(c, gc, na, p0, p1 - p0, p1, na - p1, p1, p2 - p1)) < 0)
      break;
    if (p2 < ns) {
      MR_CU(cudaEventRecord(side.fork, c->compute));
      MR_CU(cudaStreamWaitEvent(side.stream, side.fork, 0));
      MR_CUBLAS(cublasSetStream(c->blas, side.stream));
      rc = trailing(c, gc, na, ns, p0, p1 - p0, p2);
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

int mr_grappa_chol_init(void) {
  MR_CU(cudaFuncSetAttribute(chol_diag, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(DIAG_SHARED)));
  MR_CU(cudaFuncSetAttribute(invert_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(INV_SHARED)));
  return 0;
}

int mr_grappa_chol_solve(mr_cuda_ctx *c, double2 *g, int na, int ns, int nt, int nseg,
                         size_t seg_stride, double2 *inv, double2 *w, int ldw) {
  const int tiles = ns / NB;
  invert_tiles<<<dim3(unsigned(tiles), unsigned(nseg)), THREADS, INV_SHARED, c->compute>>>(
      g, na, seg_stride, inv);
  MR_LAUNCHED(invert_tiles);
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
                          int ns, int nseg, size_t seg_stride, int *status) {
  for (int s = 0; s < nseg; s++) {
    int rc = factor_one(c, side, g + s * seg_stride, na, ns, status);
    if (rc < 0)
      return rc;
  }
  return 0;
}
