// GRAPPA on a GPU. The fused calibration never forms A (n_src x positions):
// the readout taps make it block Toeplitz, so with the ACS data of each
// source line (and target line) laid out as rows Z with zero gaps between
// PE positions,
//   M[(b, j), (b', j')] = sum_x Z_b[x] conj(Z_b'[x + j' - j])   (lag j' - j)
//   U[t, (b', j')]      = sum_x T_t[x] conj(Z_b'[x + j' - dro])
// minus the few readout positions past the segment's ends that the lagged
// sums take in (and the equations power clipping drops), a rank-ncorr
// correction. The lagged sums are kro batched GEMMs of (kpe nc)^2 and
// (R-1) nc x kpe nc outputs, split along the inner dimension so that the
// small outputs still fill the GPU; then [M; U] is assembled, corrected,
// regularised, factored by one blocked Cholesky sweep (grappa_chol_cuda.cu),
// and a blocked backward solve with the inverted diagonal tiles gives W
// (the hybrid method factors M with cuSOLVER and solves by two TRSMs). From the normalised rows on,
// everything is in double precision: realistic ACS data (smooth coil
// sensitivities, a little noise) make M so ill-conditioned at chi = 1e-4
// that single precision, in the products as much as in the factor, leaves
// weights errors near 1e-2 against a double-precision solve; in double
// they are at the rounding of the float weights. cuBLAS runs the double
// products on the H100's FP64 tensor cores (67 TFLOP/s, the FP32 rate
// without tensor cores). Everything is queued on the compute stream,
// captured once as a CUDA graph and replayed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "cuda_internal.cuh"
#include "grappa_chol.cuh"
#include "grappa_impl.h"

namespace {

constexpr int THREADS = 256;
constexpr int SELECT_THREADS = 1024;
constexpr int TILE = MR_GRAPPA_CHOL_TILE;

int round_up(int n, int m) { return (n + m - 1) / m * m; }

struct fused_shape {
  int pad;    // zero columns around each PE position: kro - 1
  int pitch;  // columns per PE position: widest window + pad
  int nchunk; // inner-dimension pieces of the lagged products
  int kc;     // columns per piece
  int lt;     // columns of Z per segment: 2 pad + nchunk kc
  int ns, na; // [M; U]: ns columns (n_src padded to tiles), na rows
  int nex;    // correction columns for the positions past the ends
  int ncorr;  // ... and for the dropped equations
};

struct scratch {
  // prepare
  double *line_power = nullptr; // [nacs][nro]
  double *col_power = nullptr;  // [nseg][npe * nro_max], equation q = i n + c
  double *psi = nullptr;        // [nseg][npe]
  uint8_t *discard = nullptr;   // [nseg][npe * nro_max]
  int *dropped = nullptr;       // [nseg][ndisc_max]: the discarded q, ascending
  // fused
  fused_shape f{};
  // fused, all in double precision
  double2 *zs = nullptr, *zt = nullptr;  // [nseg][lt][nb_src], [nseg][lt][n_tgt]
  double2 *fs = nullptr, *ft = nullptr;  // per piece: [nseg][nchunk][kro][...]
  double2 *fs_sum = nullptr, *ft_sum = nullptr; // [nseg][kro][...] (= fs, ft for one piece)
  double2 *gm = nullptr;                 // [nseg][ns][na]
  double2 *corr = nullptr;               // [nseg][ncorr][na]
  double2 *inv = nullptr;                // fused: [nseg][ns / TILE][TILE^2], L_kk^-1
  double2 *below = nullptr;              // fused: [TILE][na], the rows below a diagonal tile
  double2 *wsol = nullptr;               // fused: [nseg][ns][n_tgt], W
  const double2 **ptrs = nullptr;        // batched-GEMM pointer arrays
  int *status = nullptr;                 // [0]: flags; [1 + s]: potrf info (hybrid)
  cuDoubleComplex *potrf_work = nullptr; // hybrid: cuSOLVER's workspace
  int potrf_lwork = 0;
  // The calibration as a CUDA graph, replayed while the arguments repeat;
  // no_graph once capturing failed (the calls then run directly).
  cudaGraphExec_t exec = nullptr;
  const mr_cfloat *key_acs = nullptr;
  size_t key_cs = 0;
  mr_cfloat *key_weights = nullptr;
  bool no_graph = false;
  mr_grappa_chol_side side{};           // fused: the factorisation's side stream
};

scratch *state(mr_grappa_plan *p) { return static_cast<scratch *>(p->backend); }

__device__ inline double power_of(mr_cfloat v) {
  // |v|^2 exactly as the CPU backend sums it: no fused multiply-adds
  return __dadd_rn(__dmul_rn(double(v.re), double(v.re)), __dmul_rn(double(v.im), double(v.im)));
}

// ---- prepare: equation powers, normalisation, power clipping -----------

__global__ void line_powers(mr_grappa_geom g, const mr_cfloat *acs, size_t cs, double *out) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < size_t(g.nacs) * g.nro;
       e += size_t(gridDim.x) * blockDim.x) {
    double sum = 0;
    for (int k = 0; k < g.nc; k++)
      sum = __dadd_rn(sum, power_of(acs[k * cs + e]));
    out[e] = sum;
  }
}

__global__ void column_powers(mr_grappa_geom g, const double *lp, double *out) {
  const int s = blockIdx.y, n = g.c0[s + 1] - g.c0[s], c0 = g.c0[s];
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < g.npe * n;
       e += gridDim.x * blockDim.x) {
    int i = e / n, c = e % n;
    double pa = 0, pb = 0;
    for (int p = 0; p < g.kpe; p++)
      for (int j = 0; j < g.kro; j++)
        pa = __dadd_rn(pa, lp[size_t(i + p * g.accel) * g.nro + c0 + c + j]);
    for (int m = 1; m < g.accel; m++)
      pb = __dadd_rn(pb, lp[size_t(i + g.dpe + m) * g.nro + c0 + c + g.dro]);
    out[size_t(s) * g.npe * g.nro_max + e] =
        __dadd_rn(__dmul_rn(pa, double(g.n_tgt)), __dmul_rn(pb, double(g.n_src)));
  }
}

// One warp per (segment, PE position): psi = (sum of its powers)^(-eta/2).
__global__ void normalisation(mr_grappa_geom g, float eta, const double *cp, double *psi) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= g.nseg * g.npe)
    return;
  const int s = warp / g.npe, i = warp % g.npe, n = g.c0[s + 1] - g.c0[s];
  const double *row = cp + size_t(s) * g.npe * g.nro_max + size_t(i) * n;
  double sum = 0;
  for (int c = lane; c < n; c += 32)
    sum += row[c];
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_down_sync(0xffffffffu, sum, o);
  if (lane == 0)
    psi[warp] = sum > 0 ? pow(sum, -0.5 * double(eta)) : 0.0;
}

// Exclusive prefix sum of flag over the block; *total receives the sum.
__device__ int block_scan(int flag, int *warp_sums, int *total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  int incl = flag;
  for (int o = 1; o < 32; o <<= 1) {
    int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o)
      incl += v;
  }
  if (lane == 31)
    warp_sums[warp] = incl;
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int w = 0; w < nwarps; w++) {
      int v = warp_sums[w];
      warp_sums[w] = run;
      run += v;
    }
    *total = run;
  }
  __syncthreads();
  int result = warp_sums[warp] + incl - flag;
  __syncthreads(); // warp_sums is reused by the next call
  return result;
}

// Power clipping, one block per segment: the ndisc equations of largest
// power (the earlier one among equals), as the CPU's sort picks them. A
// radix select on the powers' bit patterns (non-negative doubles order as
// their bits) finds the ndisc-th largest key; then, in index order, the
// keys above it and the first of the equal ones are marked and listed.
__global__ void __launch_bounds__(SELECT_THREADS)
    select_dropped(mr_grappa_geom g, const double *cp, uint8_t *discard, int *dropped) {
  __shared__ unsigned hist[256];
  __shared__ unsigned long long prefix_s;
  __shared__ int remaining_s, total_s;
  __shared__ int warp_sums[SELECT_THREADS / 32];
  const int s = blockIdx.x, n = g.npe * (g.c0[s + 1] - g.c0[s]), want = g.ndisc[s];
  const unsigned long long *key =
      reinterpret_cast<const unsigned long long *>(cp + size_t(s) * g.npe * g.nro_max);
  uint8_t *mark = discard + size_t(s) * g.npe * g.nro_max;
  int *list = dropped + size_t(s) * g.ndisc_max;
  for (int q = threadIdx.x; q < n; q += blockDim.x)
    mark[q] = 0;
  if (want == 0)
    return;
  unsigned long long prefix = 0, mask = 0;
  int remaining = want; // how many of the keys matching prefix still to take
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
      hist[b] = 0;
    __syncthreads();
    for (int q = threadIdx.x; q < n; q += blockDim.x)
      if ((key[q] & mask) == prefix)
        atomicAdd(&hist[(key[q] >> shift) & 255], 1u);
    __syncthreads();
    if (threadIdx.x == 0) {
      int b = 255;
      while (b > 0 && int(hist[b]) < remaining) {
        remaining -= int(hist[b]);
        b--;
      }
      prefix_s = prefix | (static_cast<unsigned long long>(b) << shift);
      remaining_s = remaining;
    }
    __syncthreads();
    prefix = prefix_s;
    remaining = remaining_s;
    mask |= 255ull << shift;
    __syncthreads();
  }
  // prefix is the threshold key; `remaining` of its equals are taken, the
  // earliest first.
  int ties_before = 0, listed = 0;
  for (int base = 0; base < n; base += blockDim.x) {
    int q = base + threadIdx.x;
    int tie = q < n && key[q] == prefix;
    int rank = block_scan(tie, warp_sums, &total_s) + ties_before;
    int take = q < n && (key[q] > prefix || (tie && rank < remaining));
    ties_before += total_s;
    int pos = block_scan(take, warp_sums, &total_s) + listed;
    if (take) {
      mark[q] = 1;
      list[pos] = q;
    }
    listed += total_s;
  }
}

// ---- the explicit matrices (direct method) ------------------------------

__global__ void build_explicit(mr_grappa_geom g, int s, const mr_cfloat *acs, size_t cs,
                               const double *psi, const uint8_t *discard, float2 *a, float2 *b) {
  const int n = g.c0[s + 1] - g.c0[s], c0 = g.c0[s], eqs = g.npe * n;
  const size_t na = size_t(g.n_src) * eqs, total = na + size_t(g.n_tgt) * eqs;
  const uint8_t *mark = discard + size_t(s) * g.npe * g.nro_max;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    bool in_a = e < na;
    size_t e2 = in_a ? e : e - na;
    int rows = in_a ? g.n_src : g.n_tgt, r = int(e2 % rows), q = int(e2 / rows);
    int i = q / n, c = q % n;
    float w = mark[q] ? 0.0f : float(psi[s * g.npe + i]);
    size_t at;
    if (in_a) {
      int bb = r / g.kro, j = r % g.kro, k = bb / g.kpe, p = bb % g.kpe;
      at = k * cs + size_t(i + p * g.accel) * g.nro + c0 + c + j;
    } else {
      int k = r / (g.accel - 1), m = r % (g.accel - 1) + 1;
      at = k * cs + size_t(i + g.dpe + m) * g.nro + c0 + c + g.dro;
    }
    mr_cfloat v = acs[at];
    (in_a ? a : b)[e2] = make_float2(w * v.re, w * v.im);
  }
}

// ---- the fused calibration ------------------------------------------------

// Z rows: source rows b = coil kpe + p (ACS line i + p R) and target rows
// t = coil (R-1) + m - 1 (line i + dpe + m), sample c0 + w at column
// pad + i pitch + w, w < the window; zero elsewhere.
__global__ void build_rows(mr_grappa_geom g, fused_shape f, const mr_cfloat *acs, size_t cs,
                           const double *psi, double2 *zs, double2 *zt) {
  const size_t per_seg_s = size_t(f.lt) * g.nb_src, per_seg_t = size_t(f.lt) * g.n_tgt;
  const size_t ns_all = per_seg_s * g.nseg, total = ns_all + per_seg_t * g.nseg;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    bool src = e < ns_all;
    size_t e2 = src ? e : e - ns_all, per = src ? per_seg_s : per_seg_t;
    int rows = src ? g.nb_src : g.n_tgt;
    int s = int(e2 / per), r = int(e2 % per % rows), t = int(e2 % per / rows) - f.pad;
    double2 v = make_double2(0.0, 0.0);
    int i = t / f.pitch, w = t % f.pitch, width = g.c0[s + 1] - g.c0[s] + g.kro - 1;
    if (t >= 0 && i < g.npe && w < width) {
      int k, line;
      if (src) {
        k = r / g.kpe;
        line = i + (r % g.kpe) * g.accel;
      } else {
        k = r / (g.accel - 1);
        line = i + g.dpe + r % (g.accel - 1) + 1;
      }
      mr_cfloat a = acs[k * cs + size_t(line) * g.nro + g.c0[s] + w];
      double scale = psi[s * g.npe + i];
      v = make_double2(scale * a.re, scale * a.im);
    }
    (src ? zs : zt)[e2] = v;
  }
}

// out[s][d][...] = sum over pieces of part[s][piece][d][...].
__global__ void sum_pieces(const double2 *part, int nchunk, size_t per_piece, int nseg,
                           double2 *out) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < per_piece * nseg;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t s = e / per_piece, o = e % per_piece;
    const double2 *p = part + s * nchunk * per_piece + o;
    double2 v = p[0];
    for (int c = 1; c < nchunk; c++) {
      v.x += p[c * per_piece].x;
      v.y += p[c * per_piece].y;
    }
    out[e] = v;
  }
}

// [M; U] from the lagged sums: column c = (b', j'), row r = (b, j) of M
// (rows below ns: targets t of U); padding gets the identity / zeros.
__global__ void assemble(mr_grappa_geom g, fused_shape f, const double2 *fs, const double2 *ft,
                         double2 *gm) {
  const size_t per_seg = size_t(f.ns) * f.na, nb = g.nb_src;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < per_seg * g.nseg;
       e += size_t(gridDim.x) * blockDim.x) {
    int s = int(e / per_seg), r = int(e % per_seg % f.na), c = int(e % per_seg / f.na);
    double2 v = make_double2(0.0, 0.0);
    if (c >= g.n_src) {
      if (r == c)
        v.x = 1.0;
    } else if (r < g.n_src) {
      int b = r / g.kro, j = r % g.kro, b2 = c / g.kro, j2 = c % g.kro, d = j2 - j;
      const double2 *lag = fs + (size_t(s) * g.kro + (d >= 0 ? d : -d)) * nb * nb;
      if (d >= 0)
        v = lag[size_t(b2) * nb + b];
      else {
        v = lag[size_t(b) * nb + b2];
        v.y = -v.y;
      }
    } else if (r >= f.ns && r - f.ns < g.n_tgt) {
      int t = r - f.ns, b2 = c / g.kro, j2 = c % g.kro;
      v = ft[((size_t(s) * g.kro + j2) * nb + b2) * g.n_tgt + t];
    }
    gm[e] = v;
  }
}

// The correction columns: the virtual positions c in [-pad, 0) and
// [n, n + pad) of each PE position (the lagged sums include them, A does
// not), then the dropped equations; rows as in [M; U], normalised.
__global__ void build_corrections(mr_grappa_geom g, fused_shape f, const mr_cfloat *acs,
                                  size_t cs, const double *psi, const int *dropped,
                                  double2 *corr) {
  const size_t per_seg = size_t(f.ncorr) * f.na;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < per_seg * g.nseg;
       e += size_t(gridDim.x) * blockDim.x) {
    int s = int(e / per_seg), r = int(e % per_seg % f.na), q = int(e % per_seg / f.na);
    int n = g.c0[s + 1] - g.c0[s], width = n + g.kro - 1, i, pos;
    bool live = true;
    if (q < f.nex) {
      i = q / (2 * f.pad);
      int x = q % (2 * f.pad);
      pos = x < f.pad ? x - f.pad : n + x - f.pad;
    } else {
      int dq = q - f.nex;
      live = dq < g.ndisc[s];
      int eq = live ? dropped[size_t(s) * g.ndisc_max + dq] : 0;
      i = eq / n;
      pos = eq % n;
    }
    int k = -1, line = 0, w = 0;
    if (r < g.n_src) {
      int b = r / g.kro;
      k = b / g.kpe;
      line = i + (b % g.kpe) * g.accel;
      w = pos + r % g.kro;
    } else if (r >= f.ns && r - f.ns < g.n_tgt) {
      int t = r - f.ns;
      k = t / (g.accel - 1);
      line = i + g.dpe + t % (g.accel - 1) + 1;
      w = pos + g.dro;
    }
    double2 v = make_double2(0.0, 0.0);
    if (live && k >= 0 && w >= 0 && w < width) {
      mr_cfloat a = acs[k * cs + size_t(line) * g.nro + g.c0[s] + w];
      double scale = psi[s * g.npe + i];
      v = make_double2(scale * a.re, scale * a.im);
    }
    corr[e] = v;
  }
}

// lambda = chi trace(M) / n_src onto M's diagonal, one block per segment;
// a trace of zero (no signal) sets bit 1 of *status.
__global__ void regularise(mr_grappa_geom g, fused_shape f, float chi, double2 *gm,
                           int *status) {
  __shared__ double part[THREADS];
  double2 *m = gm + size_t(blockIdx.x) * f.ns * f.na;
  double sum = 0;
  for (int r = threadIdx.x; r < g.n_src; r += blockDim.x)
    sum += m[size_t(r) * f.na + r].x;
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int o = THREADS / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o)
      part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  double trace = part[0];
  if (!(trace > 0)) {
    if (threadIdx.x == 0)
      atomicOr(status, 2);
    return;
  }
  double lambda = double(chi) * trace / g.n_src;
  for (int r = threadIdx.x; r < g.n_src; r += blockDim.x)
    m[size_t(r) * f.na + r].x += lambda;
}

// weights[s] (n_src x n_tgt) = W^H with W (n_tgt x n_src, leading dimension
// ldw, segments stride apart) after the solve: a 32 x 32 tile per block
// through shared memory.
__global__ void export_weights(mr_grappa_geom g, const double2 *wsol, int ldw, size_t stride,
                               mr_cfloat *weights) {
  __shared__ double2 tile[32][33];
  const int s = blockIdx.z, t0 = blockIdx.x * 32, src0 = blockIdx.y * 32;
  const double2 *w = wsol + size_t(s) * stride;
  mr_cfloat *out = weights + size_t(s) * g.n_src * g.n_tgt;
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    int t = t0 + threadIdx.x, src = src0 + y;
    if (t < g.n_tgt && src < g.n_src)
      tile[y][threadIdx.x] = w[size_t(src) * ldw + t];
  }
  __syncthreads();
  for (int y = threadIdx.y; y < 32; y += blockDim.y) {
    int src = src0 + threadIdx.x, t = t0 + y;
    if (t < g.n_tgt && src < g.n_src) {
      double2 v = tile[threadIdx.x][y];
      out[size_t(t) * g.n_src + src] = mr_cfloat{float(v.x), float(-v.y)};
    }
  }
}

// ---- filling ----------------------------------------------------------------

__global__ void gather_sources(mr_grappa_geom g, const mr_cfloat *kspace, int ne1,
                               const int *lines, int nblk, int x0, size_t cols, float2 *src) {
  const size_t per_coil = size_t(ne1) * g.nro;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < cols * g.n_src;
       e += size_t(gridDim.x) * blockDim.x) {
    int r = int(e % g.n_src);
    size_t col = e / g.n_src;
    int x = x0 + int(col / nblk), sline = lines[col % nblk];
    int b = r / g.kro, j = r % g.kro, k = b / g.kpe, p = b % g.kpe;
    int y = sline + (p - g.kpe / 2 + 1) * g.accel, xx = x + j - g.dro;
    float2 v = make_float2(0.0f, 0.0f);
    if (y >= 0 && y < ne1 && xx >= 0 && xx < g.nro) {
      mr_cfloat a = kspace[k * per_coil + size_t(y) * g.nro + xx];
      v = make_float2(a.re, a.im);
    }
    src[e] = v;
  }
}

__global__ void scatter_targets(mr_grappa_geom g, const float2 *tv, const int *lines, int nblk,
                                int x0, size_t cols, const uint8_t *sampled, int ne1,
                                mr_cfloat *kspace) {
  const size_t per_coil = size_t(ne1) * g.nro;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < cols * g.n_tgt;
       e += size_t(gridDim.x) * blockDim.x) {
    int t = int(e % g.n_tgt);
    size_t col = e / g.n_tgt;
    int x = x0 + int(col / nblk), y = lines[col % nblk] + t % (g.accel - 1) + 1;
    if (y < 0 || y >= ne1 || sampled[y])
      continue;
    float2 v = tv[e];
    kspace[(t / (g.accel - 1)) * per_coil + size_t(y) * g.nro + x] = mr_cfloat{v.x, v.y};
  }
}

// ---- plan scratch ---------------------------------------------------------

// Pieces of the lagged products: enough output tiles (about 128 x 128
// each) to give every multiprocessor two, without pieces shorter than 256.
fused_shape make_shape(const mr_grappa_geom &g, int sms) {
  fused_shape f;
  f.pad = g.kro - 1;
  f.pitch = g.nro_max + g.kro - 1 + f.pad;
  int inner = g.npe * f.pitch;
  int tiles = ((g.nb_src + 127) / 128) * ((g.nb_src + 127) / 128) * g.kro * g.nseg;
  int want = (2 * sms + tiles - 1) / tiles, most = std::max(1, inner / 256);
  f.nchunk = std::max(1, std::min(std::min(want, most), 64));
  f.kc = (inner + f.nchunk - 1) / f.nchunk;
  f.lt = 2 * f.pad + f.nchunk * f.kc;
  f.ns = round_up(g.n_src, TILE);
  f.na = f.ns + round_up(g.n_tgt, TILE);
  f.nex = g.npe * 2 * f.pad;
  f.ncorr = f.nex + g.ndisc_max;
  return f;
}

template <class T> int alloc(mr_cuda_ctx *c, T **p, size_t count, mr_err *err) {
  return mr_cuda_alloc(c, reinterpret_cast<void **>(p), count * sizeof(T), err);
}

void release(mr_cuda_ctx *c, scratch *s) {
  void *all[] = {s->line_power, s->col_power, s->psi, s->discard, s->dropped, s->zs, s->zt,
                 s->fs, s->ft, s->gm, s->corr, s->inv, s->below, s->wsol, s->ptrs, s->status,
                 s->potrf_work};
  if (s->exec != nullptr)
    cudaGraphExecDestroy(s->exec);
  if (s->side.stream != nullptr)
    cudaStreamDestroy(s->side.stream);
  if (s->side.fork != nullptr)
    cudaEventDestroy(s->side.fork);
  if (s->side.join != nullptr)
    cudaEventDestroy(s->side.join);
  for (void *p : all)
    mr_cuda_free(c, p);
  if (s->fs_sum != s->fs)
    mr_cuda_free(c, s->fs_sum);
  if (s->ft_sum != s->ft)
    mr_cuda_free(c, s->ft_sum);
}

// Device pointer arrays for the two batched products, item (s, piece, lag):
// A, B and C of the source products, then of the target ones.
int fill_pointers(mr_cuda_ctx *c, const mr_grappa_geom &g, scratch *s, mr_err *err) {
  const fused_shape &f = s->f;
  const size_t items = size_t(g.nseg) * f.nchunk * g.kro, nb = g.nb_src, nt = g.n_tgt;
  const double2 **host = static_cast<const double2 **>(malloc(6 * items * sizeof *host));
  if (host == nullptr)
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory");
  for (int sg = 0; sg < g.nseg; sg++)
    for (int ch = 0; ch < f.nchunk; ch++)
      for (int d = 0; d < g.kro; d++) {
        size_t it = (size_t(sg) * f.nchunk + ch) * g.kro + d;
        const double2 *zs = s->zs + size_t(sg) * f.lt * nb, *zt = s->zt + size_t(sg) * f.lt * nt;
        size_t col = size_t(f.pad) + size_t(ch) * f.kc;
        host[it] = zs + col * nb;
        host[items + it] = zs + (col + d) * nb;
        host[2 * items + it] = s->fs + it * nb * nb;
        host[3 * items + it] = zt + col * nt;
        host[4 * items + it] = zs + (col + d - g.dro) * nb;
        host[5 * items + it] = s->ft + it * nt * nb;
      }
  cudaError_t e = cudaMemcpyAsync(s->ptrs, host, 6 * items * sizeof *host,
                                  cudaMemcpyHostToDevice, c->compute);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(c->compute); // host array freed next
  free(host);
  if (e != cudaSuccess)
    return mr_cuda_fail(e, "cudaMemcpyAsync(grappa pointers)", __FILE__, __LINE__, err);
  return 0;
}

int create(mr_cuda_ctx *c, mr_grappa_plan *p, scratch *s, mr_err *err) {
  const mr_grappa_geom &g = p->g;
  const size_t per_seg = size_t(g.npe) * g.nro_max;
  int rc = alloc(c, &s->line_power, size_t(g.nacs) * g.nro, err);
  if (rc == 0)
    rc = alloc(c, &s->col_power, per_seg * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->psi, size_t(g.npe) * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->discard, per_seg * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->dropped, size_t(std::max(g.ndisc_max, 1)) * g.nseg, err);
  if (rc < 0 || p->opts.method == MR_GRAPPA_DIRECT)
    return rc;
  fused_shape &f = s->f;
  f = make_shape(g, c->props.multiProcessorCount);
  const size_t nb = g.nb_src, nt = g.n_tgt, per_lag = size_t(g.nseg) * g.kro;
  const size_t items = per_lag * f.nchunk;
  if (rc == 0)
    rc = alloc(c, &s->zs, size_t(f.lt) * nb * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->zt, size_t(f.lt) * nt * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->fs, items * nb * nb, err);
  if (rc == 0)
    rc = alloc(c, &s->ft, items * nt * nb, err);
  if (rc == 0 && f.nchunk > 1)
    rc = alloc(c, &s->fs_sum, per_lag * nb * nb, err);
  if (rc == 0 && f.nchunk > 1)
    rc = alloc(c, &s->ft_sum, per_lag * nt * nb, err);
  if (f.nchunk == 1) {
    s->fs_sum = s->fs;
    s->ft_sum = s->ft;
  }
  if (rc == 0)
    rc = alloc(c, &s->gm, size_t(f.ns) * f.na * g.nseg, err);
  if (rc == 0 && f.ncorr > 0)
    rc = alloc(c, &s->corr, size_t(f.ncorr) * f.na * g.nseg, err);
  if (rc == 0)
    rc = alloc(c, &s->ptrs, 6 * items, err);
  if (rc == 0)
    rc = alloc(c, &s->status, 1 + size_t(g.nseg), err);
  if (rc == 0 && p->opts.method == MR_GRAPPA_HYBRID) {
    MR_CUSOLVER(cusolverDnZpotrf_bufferSize(c->solver, CUBLAS_FILL_MODE_LOWER, g.n_src,
                                            reinterpret_cast<cuDoubleComplex *>(s->gm), f.na,
                                            &s->potrf_lwork));
    rc = alloc(c, &s->potrf_work, size_t(std::max(s->potrf_lwork, 1)), err);
  }
  if (rc == 0 && p->opts.method == MR_GRAPPA_FUSED) {
    if ((rc = mr_grappa_chol_init(err)) < 0 ||
        (rc = alloc(c, &s->inv, size_t(f.ns) * TILE * g.nseg, err)) < 0 ||
        (rc = alloc(c, &s->below, size_t(f.na) * TILE, err)) < 0 ||
        (rc = alloc(c, &s->wsol, size_t(f.ns) * nt * g.nseg, err)) < 0)
      return rc;
    MR_CU(cudaStreamCreateWithFlags(&s->side.stream, cudaStreamNonBlocking));
    MR_CU(cudaEventCreateWithFlags(&s->side.fork, cudaEventDisableTiming));
    MR_CU(cudaEventCreateWithFlags(&s->side.join, cudaEventDisableTiming));
  }
  if (rc == 0)
    rc = fill_pointers(c, g, s, err);
  return rc;
}

unsigned grid(const mr_cuda_ctx *c, size_t n) { return mr_grid_for(c, n, THREADS); }

int prepare_on_worker(mr_cuda_ctx *c, mr_grappa_plan *p, const mr_cfloat *acs, size_t cs,
                      mr_err *err) {
  const mr_grappa_geom &g = p->g;
  scratch *s = state(p);
  line_powers<<<grid(c, size_t(g.nacs) * g.nro), THREADS, 0, c->compute>>>(g, acs, cs,
                                                                           s->line_power);
  MR_LAUNCHED(line_powers);
  column_powers<<<dim3(grid(c, size_t(g.npe) * g.nro_max), unsigned(g.nseg)), THREADS, 0,
                  c->compute>>>(g, s->line_power, s->col_power);
  MR_LAUNCHED(column_powers);
  unsigned warps = unsigned(g.nseg * g.npe);
  normalisation<<<(warps * 32 + THREADS - 1) / THREADS, THREADS, 0, c->compute>>>(
      g, p->opts.eta, s->col_power, s->psi);
  MR_LAUNCHED(normalisation);
  select_dropped<<<unsigned(g.nseg), SELECT_THREADS, 0, c->compute>>>(g, s->col_power,
                                                                      s->discard, s->dropped);
  MR_LAUNCHED(select_dropped);
  return 0;
}

int gemm_batched(mr_cuda_ctx *c, int m, int n, int k, const double2 *const *a, int lda,
                 const double2 *const *b, int ldb, double2 *const *out, int ldc, int count,
                 mr_err *err) {
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0), zero = make_cuDoubleComplex(0, 0);
  MR_CUBLAS(cublasZgemmBatched(c->blas, CUBLAS_OP_N, CUBLAS_OP_C, m, n, k, &one,
                               reinterpret_cast<const cuDoubleComplex *const *>(a), lda,
                               reinterpret_cast<const cuDoubleComplex *const *>(b), ldb, &zero,
                               reinterpret_cast<cuDoubleComplex *const *>(out), ldc, count));
  return 0;
}

// built (may be null) is recorded once [M; U] is built and regularised.
int fused_on_worker(mr_cuda_ctx *c, mr_grappa_plan *p, const mr_cfloat *acs, size_t cs,
                    mr_cfloat *weights, cudaEvent_t built, mr_err *err) {
  const mr_grappa_geom &g = p->g;
  scratch *s = state(p);
  const fused_shape &f = s->f;
  const int nb = g.nb_src, nt = g.n_tgt, items = g.nseg * f.nchunk * g.kro;
  MR_CU(cudaMemsetAsync(s->status, 0, (1 + size_t(g.nseg)) * sizeof(int), c->compute));
  int rc = prepare_on_worker(c, p, acs, cs, err);
  if (rc < 0)
    return rc;
  size_t zn = size_t(f.lt) * (nb + nt) * g.nseg;
  build_rows<<<grid(c, zn), THREADS, 0, c->compute>>>(g, f, acs, cs, s->psi, s->zs, s->zt);
  MR_LAUNCHED(build_rows);
  double2 *const *ptrs = const_cast<double2 *const *>(s->ptrs);
  const double2 *const *cptrs = s->ptrs;
  if ((rc = gemm_batched(c, nb, nb, f.kc, cptrs, nb, cptrs + items, nb, ptrs + 2 * items, nb, items,
                         err)) < 0 ||
      (rc = gemm_batched(c, nt, nb, f.kc, cptrs + 3 * items, nt, cptrs + 4 * items, nb,
                         ptrs + 5 * items, nt, items, err)) < 0)
    return rc;
  if (f.nchunk > 1) {
    size_t per_s = size_t(g.kro) * nb * nb, per_t = size_t(g.kro) * nt * nb;
    sum_pieces<<<grid(c, per_s * g.nseg), THREADS, 0, c->compute>>>(s->fs, f.nchunk, per_s,
                                                                     g.nseg, s->fs_sum);
    MR_LAUNCHED(sum_pieces);
    sum_pieces<<<grid(c, per_t * g.nseg), THREADS, 0, c->compute>>>(s->ft, f.nchunk, per_t,
                                                                     g.nseg, s->ft_sum);
    MR_LAUNCHED(sum_pieces);
  }
  const size_t gsize = size_t(f.ns) * f.na;
  assemble<<<grid(c, gsize * g.nseg), THREADS, 0, c->compute>>>(g, f, s->fs_sum, s->ft_sum,
                                                                  s->gm);
  MR_LAUNCHED(assemble);
  if (f.ncorr > 0) {
    build_corrections<<<grid(c, size_t(f.ncorr) * f.na * g.nseg), THREADS, 0, c->compute>>>(
        g, f, acs, cs, s->psi, s->dropped, s->corr);
    MR_LAUNCHED(build_corrections);
    const cuDoubleComplex minus = make_cuDoubleComplex(-1, 0), one = make_cuDoubleComplex(1, 0);
    auto *corr = reinterpret_cast<const cuDoubleComplex *>(s->corr);
    MR_CUBLAS(cublasZgemmStridedBatched(
        c->blas, CUBLAS_OP_N, CUBLAS_OP_C, f.na, f.ns, f.ncorr, &minus, corr, f.na,
        (long long)f.ncorr * f.na, corr, f.na, (long long)f.ncorr * f.na, &one,
        reinterpret_cast<cuDoubleComplex *>(s->gm), f.na, (long long)gsize, g.nseg));
  }
  regularise<<<unsigned(g.nseg), THREADS, 0, c->compute>>>(g, f, p->opts.chi, s->gm, s->status);
  MR_LAUNCHED(regularise);
  if (built != nullptr)
    MR_CU(cudaEventRecord(built, c->compute));
  const cuDoubleComplex one = make_cuDoubleComplex(1, 0);
  if (p->opts.method == MR_GRAPPA_HYBRID) {
    // M = L L^H by cuSOLVER, then U L^-H and (U L^-H) L^-1 by two TRSMs
    for (int sg = 0; sg < g.nseg; sg++) {
      cuDoubleComplex *m = reinterpret_cast<cuDoubleComplex *>(s->gm) + sg * gsize;
      MR_CUSOLVER(cusolverDnZpotrf(c->solver, CUBLAS_FILL_MODE_LOWER, g.n_src, m, f.na,
                                   s->potrf_work, s->potrf_lwork, s->status + 1 + sg));
      MR_CUBLAS(cublasZtrsm(c->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C,
                            CUBLAS_DIAG_NON_UNIT, nt, g.n_src, &one, m, f.na, m + f.ns, f.na));
      MR_CUBLAS(cublasZtrsm(c->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                            CUBLAS_DIAG_NON_UNIT, nt, g.n_src, &one, m, f.na, m + f.ns, f.na));
    }
  } else if ((rc = mr_grappa_chol_factor(c, s->side, s->gm, f.na, f.ns, g.nseg, gsize, s->inv,
                                         s->below, s->status, err)) < 0 ||
             (rc = mr_grappa_chol_solve(c, s->gm, f.na, f.ns, nt, g.nseg, gsize, s->inv, s->wsol,
                                        nt, err)) < 0)
    return rc;
  const bool fused = p->opts.method == MR_GRAPPA_FUSED;
  dim3 tiles(unsigned((nt + 31) / 32), unsigned((g.n_src + 31) / 32), unsigned(g.nseg));
  export_weights<<<tiles, dim3(32, 8), 0, c->compute>>>(
      g, fused ? s->wsol : s->gm + f.ns, fused ? nt : f.na,
      fused ? size_t(f.ns) * nt : gsize, weights);
  MR_LAUNCHED(export_weights);
  return 0;
}

// The calibration through a CUDA graph: captured on the first call (and
// again when the arguments change), replayed after, so the host queues one
// launch instead of every kernel and library call. Where capturing fails
// (a library call that cannot be captured), the plan runs its calls
// directly from then on.
int calibrate_on_worker(mr_cuda_ctx *c, mr_grappa_plan *p, const mr_cfloat *acs, size_t cs,
                        mr_cfloat *weights, mr_err *err) {
  scratch *s = state(p);
  if (s->exec != nullptr && s->key_acs == acs && s->key_cs == cs && s->key_weights == weights) {
    MR_CU(cudaGraphLaunch(s->exec, c->compute));
    return 0;
  }
  if (!s->no_graph) {
    if (s->exec != nullptr) {
      MR_CU(cudaGraphExecDestroy(s->exec));
      s->exec = nullptr;
    }
    cudaGraph_t graph = nullptr;
    MR_CU(cudaStreamBeginCapture(c->compute, cudaStreamCaptureModeThreadLocal));
    int rc = fused_on_worker(c, p, acs, cs, weights, nullptr, err);
    cudaError_t e = cudaStreamEndCapture(c->compute, &graph);
    if (rc == 0 && e == cudaSuccess)
      e = cudaGraphInstantiate(&s->exec, graph, 0);
    if (graph != nullptr)
      cudaGraphDestroy(graph);
    if (rc == 0 && e == cudaSuccess) {
      s->key_acs = acs;
      s->key_cs = cs;
      s->key_weights = weights;
      MR_CU(cudaGraphLaunch(s->exec, c->compute));
      return 0;
    }
    s->exec = nullptr;
    s->no_graph = true;
    cudaGetLastError();
  }
  return fused_on_worker(c, p, acs, cs, weights, nullptr, err);
}

// The calibration's calls directly (not as the graph), between events.
int steps_on_worker(mr_cuda_ctx *c, mr_grappa_plan *p, const mr_cfloat *acs, size_t cs,
                    mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err) {
  cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < 3 && e == cudaSuccess; i++)
    e = cudaEventCreate(&ev[i]);
  int rc = e == cudaSuccess ? 0 : mr_cuda_fail(e, "cudaEventCreate", __FILE__, __LINE__, err);
  if (rc == 0 && (e = cudaEventRecord(ev[0], c->compute)) != cudaSuccess)
    rc = mr_cuda_fail(e, "cudaEventRecord", __FILE__, __LINE__, err);
  if (rc == 0)
    rc = fused_on_worker(c, p, acs, cs, weights, ev[1], err);
  if (rc == 0 && (e = cudaEventRecord(ev[2], c->compute)) == cudaSuccess)
    e = cudaEventSynchronize(ev[2]);
  float t01 = 0, t12 = 0;
  if (rc == 0 && e == cudaSuccess && (e = cudaEventElapsedTime(&t01, ev[0], ev[1])) == cudaSuccess)
    e = cudaEventElapsedTime(&t12, ev[1], ev[2]);
  if (rc == 0 && e != cudaSuccess)
    rc = mr_cuda_fail(e, "cudaEventElapsedTime(grappa steps)", __FILE__, __LINE__, err);
  for (cudaEvent_t x : ev)
    if (x != nullptr)
      cudaEventDestroy(x);
  *build_ms = t01;
  *solve_ms = t12;
  return rc;
}

} // namespace

int mr_grappa_cuda_create(mr_grappa_plan *p, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    scratch *s = new (std::nothrow) scratch;
    if (s == nullptr)
      return mr_err_set(err, MR_ENOMEM, "grappa: out of memory");
    int rc = create(c, p, s, err);
    if (rc < 0) {
      release(c, s);
      delete s;
      return rc;
    }
    p->backend = s;
    return 0;
  });
}

void mr_grappa_cuda_destroy(mr_grappa_plan *p) {
  mr_on_worker(p->dev, nullptr, [&] {
    scratch *s = state(p);
    if (s != nullptr) {
      release(mr_device_cuda(p->dev), s);
      delete s;
      p->backend = nullptr;
    }
    return 0;
  });
}

int mr_grappa_cuda_prepare(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                           mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return prepare_on_worker(mr_device_cuda(p->dev), p, acs, coil_stride, err);
  });
}

int mr_grappa_cuda_build(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s,
                         mr_cfloat *a, mr_cfloat *b, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    const mr_grappa_geom &g = p->g;
    scratch *st = state(p);
    size_t n = size_t(g.npe) * (g.c0[s + 1] - g.c0[s]) * (g.n_src + g.n_tgt);
    build_explicit<<<grid(c, n), THREADS, 0, c->compute>>>(
        g, s, acs, coil_stride, st->psi, st->discard, reinterpret_cast<float2 *>(a),
        reinterpret_cast<float2 *>(b));
    MR_LAUNCHED(build_explicit);
    return 0;
  });
}

int mr_grappa_cuda_fused(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                         mr_cfloat *weights, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return calibrate_on_worker(mr_device_cuda(p->dev), p, acs, coil_stride, weights, err);
  });
}

int mr_grappa_cuda_fused_steps(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                               mr_cfloat *weights, double *build_ms, double *solve_ms,
                               mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return steps_on_worker(mr_device_cuda(p->dev), p, acs, coil_stride, weights, build_ms, solve_ms,
                           err);
  });
}

int mr_grappa_cuda_status(mr_grappa_plan *p, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    int flags[1 + MR_GRAPPA_MAX_SEGMENTS];
    MR_CU(cudaMemcpyAsync(flags, state(p)->status, (1 + size_t(p->g.nseg)) * sizeof(int),
                          cudaMemcpyDeviceToHost, c->compute));
    MR_CU(cudaStreamSynchronize(c->compute));
    int flag = flags[0];
    for (int sg = 0; sg < p->g.nseg; sg++)
      if (flags[1 + sg] != 0)
        flag |= 1; // potrf: not positive definite (or a rejected argument)
    if (flag & 2)
      return mr_err_set(err, MR_ENUMERIC, "grappa: the ACS lines carry no signal");
    if (flag & 1)
      return mr_err_set(err, MR_ENUMERIC,
                        "grappa: the calibration system is not positive definite (raise chi)");
    return 0;
  });
}

int mr_grappa_cuda_im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1, const int *lines,
                          int nblk, int x0, int x1, mr_cfloat *src, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    size_t cols = size_t(x1 - x0) * nblk;
    gather_sources<<<grid(c, cols * p->g.n_src), THREADS, 0, c->compute>>>(
        p->g, kspace, ne1, lines, nblk, x0, cols, reinterpret_cast<float2 *>(src));
    MR_LAUNCHED(gather_sources);
    return 0;
  });
}

int mr_grappa_cuda_scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk,
                           int x0, int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace,
                           mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    size_t cols = size_t(x1 - x0) * nblk;
    scatter_targets<<<grid(c, cols * p->g.n_tgt), THREADS, 0, c->compute>>>(
        p->g, reinterpret_cast<const float2 *>(tv), lines, nblk, x0, cols, sampled, ne1,
        kspace);
    MR_LAUNCHED(scatter_targets);
    return 0;
  });
}
