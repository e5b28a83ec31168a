// The GPU NUFFT.
//
// Spreading (ADJOINT) is output-driven, Gregerson's sector design carried to
// 3D and to today's GPUs: one thread block per bin (or per piece of a
// crowded bin) keeps the bin's grid cells, for several coils at once, in
// shared memory as a software-managed cache; the samples whose footprints
// reach into the bin, sorted once per trajectory into groups on the GPU
// itself (nufft_geom.h, nufft_points_cuda.cu) and read from the bin's
// sources (runs of its own and its lower neighbours' groups), are staged through
// shared memory a batch at a time (so their loads are in flight
// together), and each warp adds one sample's
// footprint, clipped to the bin, with its lanes on neighbouring cells,
// the kernel evaluated once per tap and shared through shared memory. A
// block then stores its own cells: no atomics on the grid and no zeroing
// pass, except for the pieces of a crowded bin, which add.
//
// The tile accumulates in fixed point, in 32-bit integers on split real
// and imaginary planes: a shared-memory integer add is one native
// instruction, where a float atomicAdd on shared memory compiles to a
// compare-and-swap loop that retries wherever footprints overlap (near
// the k-space centre of radial and spiral trajectories: those loops were
// most of the spreading time). Each block scales its coils' samples so that
// one contribution stays under 2^22 and the sum of all of its entries
// under 2^30 (from each coil's largest |re|, |im| over the block's entries,
// found first), and converts back to float when it stores. One plane
// rounds each contribution to 2^-22 of the coil's largest sample (2^-20
// for a piece of 1024 entries): 1e-6 to 5e-6 of relative error in 3D,
// where the kernel's taps are small (3D radial at tol 1e-5 measured
// 1.2e-5 against 8e-6 in float). So below a tolerance of 1e-4 a third
// plane holds the contributions' rounding remainders, scaled again, the
// real and the imaginary one in 16 bits each of one integer (one add for
// both; their sums stay within 15 bits, and a sum of packed pairs is the
// pair of sums): a further 2^-5 (1024 entries) to 2^-7 (256) of that step
// and finer for fewer entries. Integer sums are exact and do not depend on
// the order of the adds, so the spreading is deterministic too.
//
// Interpolation (FORWARD) runs one thread per sample in sorted order, so a
// warp's footprints overlap and its grid reads hit the cache.
//
// The FFT is cuFFT's, uncentred (grid origin 0), unnormalised; deapodizing
// and cropping (or padding) are one pass each, launched over rows so that no
// thread divides.
#include <initializer_list>
#include <new>

#include "cuda_internal.cuh"
#include "nufft_cuda.cuh"

namespace {

constexpr int THREADS = 256;                   // spreading block
constexpr int WARPS = THREADS / 32;
constexpr int BATCH = 256;                     // samples staged per round
constexpr int MAX_COILS_PER_BLOCK = 8;
constexpr size_t TILE_BUDGET = size_t(80) << 10; // bytes of tile per block
// Fixed point: x + MAGIC (1.5 x 2^23) holds round(x) in its low mantissa
// bits for |x| < 2^22, so one FFMA converts (and rounds) a contribution.
constexpr float MAGIC = 12582912.0f;
constexpr int MAGIC_BITS = 0x4B400000;
constexpr float CONTRIBUTION_BOUND = 4.1e6f; // just under 2^22
constexpr float SUM_BOUND = 1073741824.0f;   // 2^30: no sum overflows 2^31
constexpr float REMAINDER_SUM_BOUND = 32767.0f; // a 16-bit half of the third plane
static_assert(MR_NUFFT_MAX_SUB_ENTRIES <= 16383, "a piece's remainder sums must fit 15 bits");
// Tolerances below this keep the rounding remainders (the wide tile).
constexpr double WIDE_BELOW_TOL = 1e-4;
constexpr int ROW_THREADS = 128;                // deapodize and pad passes
// A spreading block's shared memory at most: the tile budget (a tile never
// passes it: 16^3 x 17/16 cells or 32 x 63 cells of one coil, three planes
// of 4 bytes, is less),
// staged samples for 8 coils, kernel taps. Every plan raises the kernels'
// limit to this same value, so plans of different sizes never undo
// each other's setting.
constexpr size_t MAX_SMEM = TILE_BUDGET + size_t(BATCH) * (16 + 16 + 8 * MAX_COILS_PER_BLOCK) +
                            size_t(WARPS) * 3 * MR_NUFFT_MAX_WIDTH * sizeof(float);

using nufft_cuda = mr_nufft_cuda;

nufft_cuda *state(const mr_nufft_plan *p) { return mr_nufft_cuda_state(p); }

struct geom_args {
  int w, rank;
  float beta, inv_half_width;
  int n[3], nf[3], origin[3], bin[3], nbins[3];
};

geom_args geom_of(const mr_nufft_geom &g) {
  geom_args a;
  a.w = g.width;
  a.rank = g.rank;
  a.beta = g.beta;
  a.inv_half_width = g.inv_half_width;
  for (int d = 0; d < 3; d++) {
    a.n[d] = g.n[d];
    a.nf[d] = g.nf[d];
    a.origin[d] = g.origin[d];
    a.bin[d] = g.bin[d];
    a.nbins[d] = g.nbins[d];
  }
  return a;
}

// Integer planes of a spreading tile per coil.
template <bool WIDE> constexpr int PLANES = WIDE ? 3 : 2;

__device__ inline float component(const float4 &v, int d) {
  return d == 0 ? v.x : d == 1 ? v.y : v.z;
}
__device__ inline int component(const int4 &v, int d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }
// a[d] for a run-time d, by selects: indexing would put a in local memory.
__device__ inline int pick(const int a[3], int d) { return d == 0 ? a[0] : d == 1 ? a[1] : a[2]; }

__device__ inline void bin_box(const geom_args &g, int bin, int b0[3], int ext[3]) {
  int idx[3] = {bin % g.nbins[0], bin / g.nbins[0] % g.nbins[1], bin / (g.nbins[0] * g.nbins[1])};
#pragma unroll
  for (int d = 0; d < 3; d++) {
    b0[d] = idx[d] * g.bin[d];
    ext[d] = min(g.bin[d], g.nf[d] - b0[d]);
  }
}

struct spread_args {
  geom_args g;
  const int4 *pos;
  const float4 *offset;
  const int4 *group_start; // nufft_cuda.cuh's layout
  mr_nufft_groups groups;
  const int4 *subs; // {bin, first entry, end entry, split}
  int sub_entries;  // the pieces' size (mr_nufft_sub_entries)
  const float2 *in; // [nvec][npoints]
  int npoints, nvec;
  float2 *grid;
  size_t grid_size; // cells per vector
  int coils_per_block, pitch0, pitch1, tile_cells;
};

__device__ __forceinline__ int fixed_point(float x_plus_magic) {
  return __float_as_int(x_plus_magic) - MAGIC_BITS;
}

// Adds k v (v: a sample already scaled to fixed point) into a cell of the
// tile: acc[0] real, acc[cells] imaginary; when WIDE, acc[2 cells] their
// rounding remainders times `wide`, the real one in the low 16 bits and
// the imaginary one above.
template <bool WIDE>
__device__ __forceinline__ void add_fixed(int *acc, int cells, float k, float2 v, float wide) {
  float r = fmaf(k, v.x, MAGIC), i = fmaf(k, v.y, MAGIC);
  atomicAdd(acc, fixed_point(r));
  atomicAdd(acc + cells, fixed_point(i));
  if (WIDE) {
    // the remainder k v - round(k v), exact in one FMA, in [-1/2, 1/2]
    float rr = fmaf(k, v.x, MAGIC - r), ri = fmaf(k, v.y, MAGIC - i);
    unsigned lr = unsigned(fixed_point(fmaf(rr, wide, MAGIC)));
    unsigned li = unsigned(fixed_point(fmaf(ri, wide, MAGIC)));
    atomicAdd(reinterpret_cast<unsigned *>(acc + 2 * cells), lr + (li << 16));
  }
}

// The real and imaginary remainder sums of a packed third-plane cell.
__device__ __forceinline__ float2 unpack_remainders(int packed) {
  int re = int(short(packed & 0xffff)); // its sum is within 15 bits
  return make_float2(float(re), float((packed - re) >> 16));
}

// i / n for 0 <= i < 4096 and 1 <= n <= 16, given inv = 1 / n to a few
// ulp: (i + 0.5) / n lies at least 1/32 from an integer, far more than
// the rounding.
__device__ __forceinline__ int small_quotient(int i, float inv) {
  return int((float(i) + 0.5f) * inv);
}

// One sample's footprint, clipped to the block's bin, added by one warp.
template <int RANK, bool WIDE>
__device__ __forceinline__ void spread_one(const spread_args &a, const int b0[3], const int ext[3],
                                           int4 s, float4 off, const float2 *vals, int nc,
                                           float *ker, int *acc, float wide) {
  const int lane = threadIdx.x & 31;
  int lo[3] = {0, 0, 0}, cnt[3] = {1, 1, 1}, tap[3] = {0, 0, 0};
#pragma unroll
  for (int d = 0; d < RANK; d++)
    cnt[d] = mr_nufft_clip(component(s, d), a.g.w, a.g.nf[d], b0[d], ext[d], &lo[d], &tap[d]);
  // The taps' kernel values, ker[d ks + j], one lane each: a stride of w
  // where all ranks' taps fit one pass of the warp.
  const int ks = RANK * a.g.w <= 32 ? a.g.w : MR_NUFFT_MAX_WIDTH;
  for (int l = lane; l < RANK * ks; l += 32) {
    int d = (l >= ks) + (l >= 2 * ks), j = l - d * ks;
    if (j < pick(cnt, d))
      ker[l] = mr_nufft_kernel(component(off, d) - float(pick(tap, d) + j), a.g.inv_half_width,
                               a.g.beta);
  }
  __syncwarp();
  // Lane (x, r) takes column x of the clipped box in rows r, r + step, ...
  // of its cnt[1] x cnt[2] rows (y fastest), step = 32 / cnt[0] rows a
  // pass (lanes past step cnt[0] idle: at most 4 of 32 up to width 8), so
  // that it keeps its x tap in a register and steps y and z by adds. (An
  // earlier walk took cell i = lane, lane + 32, ... of the whole box, two
  // quotients a cell; walking z per lane, with the x-y kernel product
  // kept, measured 20% slower: fewer lanes busy on small boxes.)
  const float inv0 = __fdividef(1.0f, float(cnt[0])), inv1 = __fdividef(1.0f, float(cnt[1]));
  const int step = small_quotient(32, inv0), r0 = small_quotient(lane, inv0);
  const int x = lane - r0 * cnt[0], rows = cnt[1] * cnt[2];
  if (r0 < step) {
    const float kx = ker[x];
    // row r = z cnt[1] + y, 0 <= y < cnt[1]; a step of rows adds
    // step_z planes and step_y rows, with at most one carry
    const int step_z = RANK == 3 ? small_quotient(step, inv1) : 0;
    const int step_y = step - step_z * cnt[1];
    int z = RANK == 3 ? small_quotient(r0, inv1) : 0, y = r0 - z * cnt[1];
    for (int r = r0; r < rows; r += step) {
      float k = kx * ker[ks + y];
      if (RANK == 3)
        k *= ker[2 * ks + z];
      int cell = ((lo[2] + z) * a.pitch1 + lo[1] + y) * a.pitch0 + lo[0] + x;
      for (int c = 0; c < nc; c++)
        add_fixed<WIDE>(acc + c * PLANES<WIDE> * a.tile_cells + cell, a.tile_cells, k, vals[c],
                        wide);
      y += step_y;
      z += step_z;
      if (RANK == 3 && y >= cnt[1]) {
        y -= cnt[1];
        z++;
      }
    }
  }
  __syncwarp();
}

// A bin's sources (nufft_geom.h) in shared memory: where each one's
// samples start in the sorted arrays, and where its entries start among
// the bin's (prefix[sources]: all of them): the bin's entry e is sample
// start[j] + e - prefix[j] of the source j whose range holds it. A block
// takes its piece's entries in stride: entry first + m stride for its m-th
// (the pieces of a crowded bin, k of P, take k, k + P, ...: each then
// holds a share of every source, the home bin's whole footprints and the
// neighbours' clipped ones alike; cut in runs, the home's pieces took
// longer than the others, 3D radial type 1 at 1e-6 10% longer in all).
struct bin_sources {
  int *start, *prefix;
  int count;         // its sources
  int first, stride; // the piece's first entry of the bin, the stride
  __device__ int sample(int m) const {
    int e = first + m * stride, lo = 0, hi = count; // prefix[lo] <= e < prefix[hi]
    while (hi - lo > 1) {
      int mid = (lo + hi) >> 1;
      if (prefix[mid] <= e)
        lo = mid;
      else
        hi = mid;
    }
    return start[lo] + e - prefix[lo];
  }
};

// The entries of piece sub of a bin of `entries` (its first entry:
// bin_first), into src.first and src.stride; returns how many. A piece of
// a bin that was not cut holds them all.
__device__ int piece_of(int4 sub, int bin_first, int entries, int sub_entries, bin_sources &src) {
  if (sub.w == 0) {
    src.first = 0;
    src.stride = 1;
    return sub.z - sub.y;
  }
  int pieces = (entries + sub_entries - 1) / sub_entries;
  src.first = (sub.y - bin_first) / sub_entries;
  src.stride = pieces;
  return (entries - src.first + pieces - 1) / pieces;
}

// Fills src for bin b, by warp 0 (a lane takes up to four sources, one
// scan of the warp their prefix); the block synchronises before use.
__device__ void load_sources(const spread_args &a, int b, bin_sources &src) {
  constexpr int PER_LANE = (MR_NUFFT_MAX_SOURCES + 31) / 32;
  const int lane = threadIdx.x & 31, n = a.groups.sources;
  int start[PER_LANE], len[PER_LANE], sum = 0;
#pragma unroll
  for (int u = 0; u < PER_LANE; u++) {
    int j = lane * PER_LANE + u, first, end;
    start[u] = len[u] = 0;
    if (j < n) {
      mr_nufft_source(&a.groups, b, j, &first, &end);
      start[u] = a.group_start[first].x;
      len[u] = a.group_start[end].x - start[u];
    }
    sum += len[u];
  }
  int inclusive = sum;
  for (int o = 1; o < 32; o <<= 1) {
    int v = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o)
      inclusive += v;
  }
  int at = inclusive - sum;
#pragma unroll
  for (int u = 0; u < PER_LANE; u++) {
    int j = lane * PER_LANE + u;
    if (j < n) {
      src.start[j] = start[u];
      src.prefix[j] = at;
    }
    at += len[u];
  }
  if (lane == 31)
    src.prefix[n] = inclusive;
}

// Each coil's largest |re| or |im| over the entries of a subproblem, as
// float bits (non-negative floats order as their bits), into peak[c]
// (zeroed by the caller).
__device__ void coil_peaks(const spread_args &a, const bin_sources &src, int count, int c0, int nc,
                           unsigned *peak) {
  unsigned m[MAX_COILS_PER_BLOCK];
#pragma unroll
  for (int c = 0; c < MAX_COILS_PER_BLOCK; c++)
    m[c] = 0;
  for (int i = threadIdx.x; i < count; i += THREADS) {
    const float2 *v = a.in + size_t(c0) * a.npoints + a.pos[src.sample(i)].w;
#pragma unroll
    for (int c = 0; c < MAX_COILS_PER_BLOCK; c++)
      if (c < nc) {
        float2 u = v[size_t(c) * a.npoints];
        m[c] = max(m[c], __float_as_uint(fmaxf(fabsf(u.x), fabsf(u.y))));
      }
  }
#pragma unroll
  for (int c = 0; c < MAX_COILS_PER_BLOCK; c++)
    if (c < nc) { // the same for the whole block
      unsigned w = m[c];
      for (int o = 16; o > 0; o >>= 1)
        w = max(w, __shfl_xor_sync(0xffffffffu, w, o));
      if ((threadIdx.x & 31) == 0 && w != 0)
        atomicMax(&peak[c], w);
    }
}

template <int RANK, bool WIDE>
__global__ void __launch_bounds__(THREADS) spread_kernel(spread_args a) {
  extern __shared__ float4 shared4[];
  __shared__ unsigned peak[MAX_COILS_PER_BLOCK];
  __shared__ float scale[MAX_COILS_PER_BLOCK], unscale[MAX_COILS_PER_BLOCK];
  __shared__ int source_start[MR_NUFFT_MAX_SOURCES], source_prefix[MR_NUFFT_MAX_SOURCES + 1];
  const int4 sub = a.subs[blockIdx.x];
  const int c0 = blockIdx.y * a.coils_per_block;
  const int nc = min(a.coils_per_block, a.nvec - c0);
  const int cb = a.coils_per_block, tid = threadIdx.x, warp = tid >> 5;
  int b0[3], ext[3];
  bin_box(a.g, sub.x, b0, ext);

  // [coil][plane][cell]: real, imaginary (, their remainders)
  int *acc = reinterpret_cast<int *>(shared4);
  int4 *spos = reinterpret_cast<int4 *>(acc + PLANES<WIDE> * cb * a.tile_cells); // cells % 4 == 0
  float4 *soff = reinterpret_cast<float4 *>(spos + BATCH);
  float2 *sval = reinterpret_cast<float2 *>(soff + BATCH);
  float *ker = reinterpret_cast<float *>(sval + BATCH * cb) + warp * 3 * MR_NUFFT_MAX_WIDTH;

  for (int i = tid; i < PLANES<WIDE> * cb * a.tile_cells; i += THREADS)
    acc[i] = 0;
  if (tid < MAX_COILS_PER_BLOCK)
    peak[tid] = 0;
  bin_sources src{source_start, source_prefix, a.groups.sources, 0, 1};
  const int bin_first = a.group_start[sub.x * a.groups.per_bin].y;
  const int count = piece_of(sub, bin_first,
                             a.group_start[(sub.x + 1) * a.groups.per_bin].y - bin_first,
                             a.sub_entries, src);
  if (warp == 0)
    load_sources(a, sub.x, src);
  __syncthreads();
  coil_peaks(a, src, count, c0, nc, peak);
  // A cell takes at most one contribution per entry, each at most the
  // coil's peak (the kernel is at most 1).
  const float entries = float(max(count, 1));
  const float bound = fminf(CONTRIBUTION_BOUND, SUM_BOUND / entries);
  // and a remainder at most 1/2 of the wide scale, rounded
  const float wide = fmaxf(REMAINDER_SUM_BOUND / entries - 1.0f, 1.0f);
  __syncthreads();
  if (tid < nc) {
    float m = __uint_as_float(peak[tid]);
    scale[tid] = m > 0.0f ? bound / m : 0.0f;
    unscale[tid] = m / bound;
  }
  for (int first = 0; first < count; first += BATCH) {
    const int nb = min(BATCH, count - first);
    __syncthreads(); // the tile is zeroed, the last round's samples are used
    if (tid < nb) {
      int p = src.sample(first + tid);
      spos[tid] = a.pos[p];
      soff[tid] = a.offset[p];
    }
    __syncthreads();
    for (int i = tid; i < nb * nc; i += THREADS) {
      int e = i % nb, c = i / nb;
      float2 v = a.in[size_t(c0 + c) * a.npoints + spos[e].w];
      sval[e * cb + c] = make_float2(v.x * scale[c], v.y * scale[c]);
    }
    __syncthreads();
    for (int e = warp; e < nb; e += WARPS)
      spread_one<RANK, WIDE>(a, b0, ext, spos[e], soff[e], sval + e * cb, nc, ker, acc, wide);
  }
  __syncthreads();

  const bool split = sub.w != 0;
  const float inv_wide = 1.0f / wide;
  for (int row = warp; row < ext[1] * ext[2]; row += WARPS) {
    int y = row % ext[1], z = row / ext[1];
    size_t base = (size_t(b0[2] + z) * a.g.nf[1] + b0[1] + y) * a.g.nf[0] + b0[0];
    int tbase = (z * a.pitch1 + y) * a.pitch0;
    for (int x = threadIdx.x & 31; x < ext[0]; x += 32)
      for (int c = 0; c < nc; c++) {
        float2 *dst = a.grid + size_t(c0 + c) * a.grid_size + base + x;
        const int *q = acc + c * PLANES<WIDE> * a.tile_cells + tbase + x;
        float vr = float(q[0]), vi = float(q[a.tile_cells]);
        if (WIDE) {
          float2 rem = unpack_remainders(q[2 * a.tile_cells]);
          vr += rem.x * inv_wide;
          vi += rem.y * inv_wide;
        }
        vr *= unscale[c];
        vi *= unscale[c];
        if (split) {
          atomicAdd(&dst->x, vr);
          atomicAdd(&dst->y, vi);
        } else {
          *dst = make_float2(vr, vi);
        }
      }
  }
}

// The cells of crowded bins, zeroed for their pieces to add into.
__global__ void zero_split_bins(geom_args g, const int4 *subs, float2 *grid, size_t grid_size,
                                int nvec) {
  const int4 sub = subs[blockIdx.x];
  if (sub.w == 0)
    return;
  int b0[3], ext[3];
  bin_box(g, sub.x, b0, ext);
  int cells = ext[0] * ext[1] * ext[2];
  for (int i = threadIdx.x; i < cells * nvec; i += blockDim.x) {
    int c = i / cells, r = i % cells;
    int x = r % ext[0], y = r / ext[0] % ext[1], z = r / ext[0] / ext[1];
    grid[size_t(c) * grid_size + (size_t(b0[2] + z) * g.nf[1] + b0[1] + y) * g.nf[0] + b0[0] + x] =
        make_float2(0.0f, 0.0f);
  }
}

struct interp_args {
  geom_args g;
  const int4 *pos;
  const float4 *offset;
  const float2 *grid;
  size_t grid_size;
  float2 *out; // [nvec][npoints]
  int npoints, nvec;
};

// One thread per sorted sample: the whole footprint, wrapped at the edges.
// The x and y taps are unrolled (kernel values and indices in registers);
// z is a loop, its tap computed as it goes, which keeps the code and the
// register count small.
template <int RANK, int W>
__global__ void interp_kernel(interp_args a) {
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < a.npoints; p += gridDim.x * blockDim.x) {
    const int4 s = a.pos[p];
    const float4 off = a.offset[p];
    float kx[W], ky[W];
    int ix[W], iy[W];
#pragma unroll
    for (int j = 0; j < W; j++) {
      kx[j] = mr_nufft_kernel(off.x - float(j), a.g.inv_half_width, a.g.beta);
      ky[j] = mr_nufft_kernel(off.y - float(j), a.g.inv_half_width, a.g.beta);
      ix[j] = s.x + j < a.g.nf[0] ? s.x + j : s.x + j - a.g.nf[0];
      iy[j] = s.y + j < a.g.nf[1] ? s.y + j : s.y + j - a.g.nf[1];
    }
    for (int c = 0; c < a.nvec; c++) {
      const float2 *g = a.grid + size_t(c) * a.grid_size;
      float sr = 0.0f, si = 0.0f;
#pragma unroll 1
      for (int z = 0; z < (RANK == 3 ? W : 1); z++) {
        float kz = 1.0f;
        int iz = 0;
        if (RANK == 3) {
          kz = mr_nufft_kernel(off.z - float(z), a.g.inv_half_width, a.g.beta);
          iz = s.z + z < a.g.nf[2] ? s.z + z : s.z + z - a.g.nf[2];
        }
#pragma unroll
        for (int y = 0; y < W; y++) {
          const float2 *row = g + (size_t(iz) * a.g.nf[1] + iy[y]) * a.g.nf[0];
          float rr = 0.0f, ri = 0.0f;
#pragma unroll
          for (int x = 0; x < W; x++) {
            float2 v = __ldg(row + ix[x]);
            rr += kx[x] * v.x;
            ri += kx[x] * v.y;
          }
          float kyz = ky[y] * kz;
          sr += kyz * rr;
          si += kyz * ri;
        }
      }
      a.out[size_t(c) * a.npoints + s.w] = make_float2(sr, si);
    }
  }
}

// Image rows from the grid, deapodized: block (x chunk, y, z + nz * vec).
__global__ void crop_kernel(geom_args g, const float2 *grid, size_t grid_size, const float *deapod,
                            float2 *out) {
  int y = blockIdx.y, z = blockIdx.z % g.n[2], c = blockIdx.z / g.n[2];
  int gy = mr_nufft_grid_index(y, g.n[1], g.nf[1], g.origin[1]);
  int gz = mr_nufft_grid_index(z, g.n[2], g.nf[2], g.origin[2]);
  const float *dx = deapod, *dy = dx + g.n[0], *dz = dy + g.n[1];
  const float2 *src = grid + size_t(c) * grid_size + (size_t(gz) * g.nf[1] + gy) * g.nf[0];
  float2 *dst = out + ((size_t(c) * g.n[2] + z) * g.n[1] + y) * g.n[0];
  float f = dy[y] * dz[z];
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < g.n[0]; x += gridDim.x * blockDim.x) {
    float2 v = src[mr_nufft_grid_index(x, g.n[0], g.nf[0], g.origin[0])];
    float fx = f * dx[x];
    dst[x] = make_float2(fx * v.x, fx * v.y);
  }
}

// Grid rows: the deapodized image where it has pixels, zeros in the margin.
__global__ void pad_kernel(geom_args g, const float2 *in, const float *deapod, float2 *grid,
                           size_t grid_size) {
  int gy = blockIdx.y, gz = blockIdx.z % g.nf[2], c = blockIdx.z / g.nf[2];
  int y = mr_nufft_image_index(gy, g.n[1], g.nf[1], g.origin[1]);
  int z = mr_nufft_image_index(gz, g.n[2], g.nf[2], g.origin[2]);
  const float *dx = deapod, *dy = dx + g.n[0], *dz = dy + g.n[1];
  float2 *dst = grid + size_t(c) * grid_size + (size_t(gz) * g.nf[1] + gy) * g.nf[0];
  bool rows = y >= 0 && z >= 0;
  const float2 *src =
      rows ? in + ((size_t(c) * g.n[2] + z) * g.n[1] + y) * g.n[0] : nullptr;
  float f = rows ? dy[y] * dz[z] : 0.0f;
  for (int gx = blockIdx.x * blockDim.x + threadIdx.x; gx < g.nf[0];
       gx += gridDim.x * blockDim.x) {
    int x = rows ? mr_nufft_image_index(gx, g.n[0], g.nf[0], g.origin[0]) : -1;
    float2 v = make_float2(0.0f, 0.0f);
    if (x >= 0) {
      float2 u = src[x];
      float fx = f * dx[x];
      v = make_float2(fx * u.x, fx * u.y);
    }
    dst[gx] = v;
  }
}

__global__ void fill_ones(float2 *w, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    w[i] = make_float2(1.0f, 0.0f);
}

// Pipe-Menon's step: w <- w / |C w|.
__global__ void divide_by_magnitude(float2 *w, const float2 *cw, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float m = hypotf(cw[i].x, cw[i].y);
    if (m > 0.0f)
      w[i] = make_float2(w[i].x / m, w[i].y / m);
  }
}

size_t grid_cells(const mr_nufft_geom &g) { return size_t(g.nf[0]) * g.nf[1] * g.nf[2]; }

int launch_spread(const mr_nufft_plan *p, mr_cuda_ctx *c, const float2 *in, int nvec, mr_err *err) {
  const nufft_cuda *s = state(p);
  const mr_nufft_points &pts = p->points;
  spread_args a;
  a.g = geom_of(p->geom);
  a.pos = s->pos;
  a.offset = s->offset;
  a.group_start = s->group_start;
  a.groups = s->groups;
  a.sub_entries = s->sub_entries;
  a.subs = s->subs;
  a.in = in;
  a.npoints = int(pts.npoints);
  a.nvec = nvec;
  a.grid = s->grid;
  a.grid_size = grid_cells(p->geom);
  a.coils_per_block = s->coils_per_block;
  a.pitch0 = s->pitch[0];
  a.pitch1 = s->pitch[1];
  a.tile_cells = s->tile_cells;
  if (pts.nsubs > pts.nbins) { // some bins are split
    zero_split_bins<<<unsigned(pts.nsubs), THREADS, 0, c->compute>>>(a.g, s->subs, s->grid,
                                                                      a.grid_size, nvec);
    MR_LAUNCHED(zero_split_bins);
  }
  dim3 blocks(unsigned(pts.nsubs), unsigned((nvec + a.coils_per_block - 1) / a.coils_per_block));
  auto kernel = p->geom.rank == 2 ? (s->wide ? spread_kernel<2, true> : spread_kernel<2, false>)
                                  : (s->wide ? spread_kernel<3, true> : spread_kernel<3, false>);
  kernel<<<blocks, THREADS, s->smem, c->compute>>>(a);
  MR_LAUNCHED(spread_kernel);
  return 0;
}

template <int RANK, int W>
void interp_launch(mr_cuda_ctx *c, const interp_args &a) {
  constexpr unsigned block = 128;
  interp_kernel<RANK, W><<<mr_grid_for(c, size_t(a.npoints), block), block, 0, c->compute>>>(a);
}

template <int RANK, int W>
void interp_dispatch(int w, mr_cuda_ctx *c, const interp_args &a) {
  if constexpr (W <= MR_NUFFT_MAX_WIDTH) {
    if (w == W)
      interp_launch<RANK, W>(c, a);
    else
      interp_dispatch<RANK, W + 1>(w, c, a);
  }
}

int launch_interp(const mr_nufft_plan *p, mr_cuda_ctx *c, float2 *out, int nvec, mr_err *err) {
  const nufft_cuda *s = state(p);
  if (p->points.npoints == 0)
    return 0;
  interp_args a;
  a.g = geom_of(p->geom);
  a.pos = s->pos;
  a.offset = s->offset;
  a.grid = s->grid;
  a.grid_size = grid_cells(p->geom);
  a.out = out;
  a.npoints = int(p->points.npoints);
  a.nvec = nvec;
  if (p->geom.rank == 2)
    interp_dispatch<2, 2>(p->geom.width, c, a);
  else
    interp_dispatch<3, 2>(p->geom.width, c, a);
  MR_LAUNCHED(interp_kernel);
  return 0;
}

int launch_fft(const mr_nufft_plan *p, mr_cuda_ctx *c, int direction, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  long long n[3] = {g.nf[g.rank - 1], g.nf[g.rank - 2], g.rank == 3 ? g.nf[0] : 1};
  cufftHandle h;
  int rc = mr_cuda_fft_plan(c, g.rank, n, (long long)p->batch, &h, err);
  if (rc < 0)
    return rc;
  cufftComplex *grid = reinterpret_cast<cufftComplex *>(state(p)->grid);
  MR_CUFFT(cufftExecC2C(h, grid, grid, direction));
  return 0;
}

// The three stages of a transform, with an event recorded before each and
// after the last when marks is given (for mr_nufft_cuda_stage_times).
int execute_on_worker(mr_nufft_plan *p, mr_nufft_direction dir, const float2 *in, float2 *out,
                      mr_err *err, cudaEvent_t *marks = nullptr) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  const mr_nufft_geom &g = p->geom;
  nufft_cuda *s = state(p);
  geom_args ga = geom_of(g);
  int nvec = int(p->batch);
  int rc;
  auto mark = [&](int i) { return marks != nullptr ? cudaEventRecord(marks[i], c->compute) : cudaSuccess; };
  MR_CU(mark(0));
  if (dir == MR_NUFFT_ADJOINT) {
    if ((rc = launch_spread(p, c, in, nvec, err)) < 0)
      return rc;
    MR_CU(mark(1));
    if ((rc = launch_fft(p, c, CUFFT_INVERSE, err)) < 0)
      return rc;
    MR_CU(mark(2));
    dim3 blocks(unsigned((g.n[0] + ROW_THREADS - 1) / ROW_THREADS), unsigned(g.n[1]),
                unsigned(g.n[2] * nvec));
    crop_kernel<<<blocks, ROW_THREADS, 0, c->compute>>>(ga, s->grid, grid_cells(g), s->deapod,
                                                        out);
    MR_LAUNCHED(crop_kernel);
    MR_CU(mark(3));
    return 0;
  }
  dim3 blocks(unsigned((g.nf[0] + ROW_THREADS - 1) / ROW_THREADS), unsigned(g.nf[1]),
              unsigned(g.nf[2] * nvec));
  pad_kernel<<<blocks, ROW_THREADS, 0, c->compute>>>(ga, in, s->deapod, s->grid, grid_cells(g));
  MR_LAUNCHED(pad_kernel);
  MR_CU(mark(1));
  if ((rc = launch_fft(p, c, CUFFT_FORWARD, err)) < 0)
    return rc;
  MR_CU(mark(2));
  if ((rc = launch_interp(p, c, out, nvec, err)) < 0)
    return rc;
  MR_CU(mark(3));
  return 0;
}

// Device copies of host arrays for the _host variant and Pipe-Menon, freed
// on scope exit (stream-ordered, after the work that uses them).
struct scratch {
  mr_cuda_ctx *c;
  void *p[2] = {nullptr, nullptr};
  explicit scratch(mr_cuda_ctx *ctx) : c(ctx) {}
  ~scratch() {
    for (void *q : p)
      mr_cuda_free(c, q);
  }
};

} // namespace

void mr_nufft_cuda_free_points(mr_cuda_ctx *c, mr_nufft_cuda *s) {
  mr_cuda_free(c, s->pos);
  mr_cuda_free(c, s->offset);
  mr_cuda_free(c, s->group_start);
  mr_cuda_free(c, s->subs);
  mr_cuda_free(c, s->scratch);
  s->pos = nullptr;
  s->offset = nullptr;
  s->group_start = nullptr;
  s->subs = nullptr;
  s->scratch = nullptr;
  s->cap_points = 0;
  s->counts_zeroed = false;
}

int mr_nufft_cuda_create(mr_nufft_plan *p, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  // Indices stay within int; launches put z and the vector in gridDim.z.
  if (grid_cells(g) * p->batch >= (size_t(1) << 31) || size_t(g.nf[2]) * p->batch > 65535)
    return mr_err_set(err, MR_EINVAL,
                      "nufft: a grid of %zu cells x %zu vectors is too large for one "
                      "plan; use a smaller batch",
                      grid_cells(g), p->batch);
  nufft_cuda *s = new (std::nothrow) nufft_cuda;
  if (s == nullptr)
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory");
  // Tile rows: in 2D a pitch of w (mod 32) puts the w x w footprint's cells
  // in distinct banks; in 3D an odd pitch staggers the rows.
  s->pitch[0] = g.rank == 2 ? g.bin[0] + ((g.width - g.bin[0]) % 32 + 32) % 32 : g.bin[0] + 1;
  s->pitch[1] = g.bin[1];
  s->tile_cells = (s->pitch[0] * s->pitch[1] * g.bin[2] + 3) / 4 * 4;
  s->wide = p->opts.tol < WIDE_BELOW_TOL;
  size_t per_coil = size_t(s->tile_cells) * (s->wide ? PLANES<true> : PLANES<false>) * sizeof(int);
  size_t fit = TILE_BUDGET / per_coil;
  size_t cb = fit < p->batch ? fit : p->batch;
  s->coils_per_block = int(cb < 1 ? 1 : cb > MAX_COILS_PER_BLOCK ? MAX_COILS_PER_BLOCK : cb);
  s->smem = per_coil * s->coils_per_block +
            BATCH * (sizeof(int4) + sizeof(float4) + s->coils_per_block * sizeof(float2)) +
            WARPS * 3 * MR_NUFFT_MAX_WIDTH * sizeof(float);
  if (s->smem > MAX_SMEM) { // cannot happen with the bins nufft.c makes
    size_t smem = s->smem;
    delete s;
    return mr_err_set(err, MR_EINVAL, "nufft: a spreading tile of %zu bytes", smem);
  }
  p->impl = s;
  int rc = mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    for (auto kernel : {spread_kernel<2, false>, spread_kernel<2, true>, spread_kernel<3, false>,
                        spread_kernel<3, true>})
      MR_CU(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(MAX_SMEM)));
    size_t dbytes = (size_t(g.n[0]) + g.n[1] + g.n[2]) * sizeof(float);
    int r = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->grid),
                          grid_cells(g) * p->batch * sizeof(float2), err);
    if (r == 0)
      r = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->deapod), dbytes, err);
    if (r == 0)
      r = mr_cuda_upload(p->dev, s->deapod, p->deapod, dbytes, err);
    if (r == 0)
      r = mr_nufft_cuda_prepare_points(p, c, err);
    return r;
  });
  if (rc < 0)
    mr_nufft_cuda_destroy(p);
  return rc;
}

int mr_nufft_cuda_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                          mr_cfloat *out, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return execute_on_worker(p, dir, reinterpret_cast<const float2 *>(in),
                             reinterpret_cast<float2 *>(out), err);
  });
}

int mr_nufft_cuda_execute_host(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                               mr_cfloat *out, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  size_t samples = p->points.npoints * p->batch * sizeof(float2);
  size_t image = size_t(g.n[0]) * g.n[1] * g.n[2] * p->batch * sizeof(float2);
  size_t in_bytes = dir == MR_NUFFT_ADJOINT ? samples : image;
  size_t out_bytes = dir == MR_NUFFT_ADJOINT ? image : samples;
  return mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    scratch d(c);
    int rc = mr_cuda_alloc(c, &d.p[0], in_bytes, err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], out_bytes, err);
    if (rc == 0 && in_bytes > 0)
      rc = mr_cuda_upload(p->dev, d.p[0], in, in_bytes, err);
    if (rc == 0)
      rc = execute_on_worker(p, dir, static_cast<const float2 *>(d.p[0]),
                             static_cast<float2 *>(d.p[1]), err);
    if (rc == 0 && out_bytes > 0)
      rc = mr_cuda_download(p->dev, out, d.p[1], out_bytes, err);
    if (rc < 0)
      mr_cuda_ctx_sync(c, err); // no copy may still touch the scratch once freed
    return rc;
  });
}

int mr_nufft_cuda_pipe_menon(mr_nufft_plan *p, int iterations, float *weights, mr_err *err) {
  size_t n = p->points.npoints;
  if (n == 0)
    return 0;
  float2 *host = static_cast<float2 *>(malloc(n * sizeof(float2)));
  if (host == nullptr)
    return mr_err_set(err, MR_ENOMEM, "density: out of memory for %zu weights", n);
  int rc = mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    scratch d(c);
    int r = mr_cuda_alloc(c, &d.p[0], n * sizeof(float2), err);
    if (r == 0)
      r = mr_cuda_alloc(c, &d.p[1], n * sizeof(float2), err);
    if (r < 0)
      return r;
    float2 *w = static_cast<float2 *>(d.p[0]), *cw = static_cast<float2 *>(d.p[1]);
    unsigned blocks = mr_grid_for(c, n, 256);
    fill_ones<<<blocks, 256, 0, c->compute>>>(w, int(n));
    MR_LAUNCHED(fill_ones);
    for (int it = 0; it < iterations && r == 0; it++) {
      r = launch_spread(p, c, w, 1, err);
      if (r == 0)
        r = launch_interp(p, c, cw, 1, err);
      if (r == 0) {
        divide_by_magnitude<<<blocks, 256, 0, c->compute>>>(w, cw, int(n));
        MR_LAUNCHED(divide_by_magnitude);
      }
    }
    if (r == 0)
      r = mr_cuda_download(p->dev, host, w, n * sizeof(float2), err);
    if (r < 0)
      mr_cuda_ctx_sync(c, err);
    return r;
  });
  for (size_t j = 0; rc == 0 && j < n; j++)
    weights[j] = host[j].x;
  free(host);
  return rc;
}

int mr_nufft_cuda_stage_times(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                              mr_cfloat *out, float ms[3], mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return mr_nufft_cuda_time_stages(ms, err, [&](cudaEvent_t *marks) {
      return execute_on_worker(p, dir, reinterpret_cast<const float2 *>(in),
                               reinterpret_cast<float2 *>(out), err, marks);
    });
  });
}

void mr_nufft_cuda_destroy(mr_nufft_plan *p) {
  nufft_cuda *s = state(p);
  if (s == nullptr)
    return;
  mr_on_worker(p->dev, nullptr, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    mr_nufft_cuda_free_points(c, s);
    mr_cuda_free(c, s->grid);
    mr_cuda_free(c, s->deapod);
    return 0;
  });
  delete s;
  p->impl = nullptr;
}
