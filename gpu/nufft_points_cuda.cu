// A GPU plan's sample positions, placed and binned on its device: the very
// arrays nufft_points.c builds on the host (same placement, same stable
// order, same entry lists and subproblems), made by kernels and CUB.
//
//   1. place: one thread per sample: footprint start and offset
//      (mr_nufft_place, in double as on the host), home bin, and a count of
//      entries per touched bin (global atomics, aggregated per warp: the
//      samples of a warp often share their bins). A position that is not
//      finite raises a flag.
//   2. a stable radix sort of (home bin, sample index) on the bin's bits
//      gives the host's counting-sort order; a gather writes the sorted
//      positions and each sorted sample's number of touched bins.
//   3. exclusive scans: per-sample entry offsets, bin starts, and the
//      subproblems per bin (a bin of more than MR_NUFFT_MAX_SUB_ENTRIES
//      entries is cut into pieces).
//   4. one small download: the entry and subproblem totals and the flag
//      (the host needs the totals to size the lists and the launches).
//   5. each sorted sample writes a (bin, sample) pair per touched bin, in
//      the host's touching order; a stable radix sort by bin makes the
//      entry lists (within a bin in sorted-sample order, as on the host);
//      one thread per bin writes its subproblems.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <cstdlib>
#include <cstring>

#include "nufft_cuda.cuh"

namespace {

constexpr unsigned BLOCK = 256;
constexpr unsigned FULL = 0xffffffffu;

struct bin_args {
  int rank, w;
  int nf[3], origin[3], bin[3], nbins[3];
};

bin_args bin_args_of(const mr_nufft_geom &g) {
  bin_args a;
  a.rank = g.rank;
  a.w = g.width;
  for (int d = 0; d < 3; d++) {
    a.nf[d] = g.nf[d];
    a.origin[d] = g.origin[d];
    a.bin[d] = g.bin[d];
    a.nbins[d] = g.nbins[d];
  }
  return a;
}

// The bins a footprint starting at s touches, per dimension (as
// nufft_points.c's for_touched); returns how many in all.
__device__ int touched_bins(const bin_args &g, int4 s, int t[3][3], int nt[3]) {
  int start[3] = {s.x, s.y, s.z};
#pragma unroll
  for (int d = 0; d < 3; d++)
    nt[d] = mr_nufft_touched(start[d], d < g.rank ? g.w : 1, g.nf[d], g.bin[d], t[d]);
  return nt[0] * nt[1] * nt[2];
}

// The i-th bin (0 .. count-1) of a footprint's touched bins, x fastest: the
// order in which the host lists them.
__device__ int touched_at(const bin_args &g, const int t[3][3], const int nt[3], int i) {
  int x = i % nt[0], y = i / nt[0] % nt[1], z = i / (nt[0] * nt[1]);
  return (t[2][z] * g.nbins[1] + t[1][y]) * g.nbins[0] + t[0][x];
}

// Step 1. Every lane of a warp runs the same iterations (the loop bound is
// per warp), so the warp-wide match can aggregate the bin counts.
__global__ void place_kernel(bin_args g, const float *k, int n, int4 *pos, float4 *offset,
                             unsigned *home, unsigned *index, int *bin_entries, int *bad) {
  const int stride = gridDim.x * blockDim.x, lane = threadIdx.x & 31;
  for (int base = blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < n; base += stride) {
    int i = base + lane;
    bool active = i < n;
    int s[3] = {0, 0, 0};
    float a[3] = {0.0f, 0.0f, 0.0f};
    int h = 0, count = 0, t[3][3], nt[3];
    if (active) {
      int hs = 1;
      for (int d = 0; d < 3; d++) {
        if (d < g.rank) {
          double kd = k[size_t(i) * g.rank + d];
          if (!isfinite(kd)) {
            *bad = 1;
            kd = 0;
          }
          mr_nufft_place(kd, g.nf[d], g.w, g.origin[d], &s[d], &a[d]);
        }
        h += s[d] / g.bin[d] * hs;
        hs *= g.nbins[d];
      }
      pos[i] = make_int4(s[0], s[1], s[2], i);
      offset[i] = make_float4(a[0], a[1], a[2], 0.0f);
      home[i] = unsigned(h);
      index[i] = unsigned(i);
      count = touched_bins(g, make_int4(s[0], s[1], s[2], 0), t, nt);
    }
    for (int j = 0; __any_sync(FULL, j < count); j++) {
      int b = j < count ? touched_at(g, t, nt, j) : -1;
      unsigned same = __match_any_sync(FULL, b);
      if (b >= 0 && lane == __ffs(same) - 1)
        atomicAdd(&bin_entries[b], __popc(same));
    }
  }
}

// Step 2: sorted positions (their .w, the original index, travels along)
// and each sorted sample's count of touched bins.
__global__ void gather_kernel(bin_args g, int n, const unsigned *perm, const int4 *pos_in,
                              const float4 *offset_in, int4 *pos, float4 *offset, int *touches) {
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
    unsigned i = perm[p];
    int4 s = pos_in[i];
    pos[p] = s;
    offset[p] = offset_in[i];
    int t[3][3], nt[3];
    touches[p] = touched_bins(g, s, t, nt);
  }
}

// Step 3: subproblems per bin; the count array has one more element, 0,
// for the exclusive scan to end on the total.
__global__ void count_subs_kernel(const int *bin_start, int nbins, int max_entries,
                                  int *sub_count) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= nbins; b += gridDim.x * blockDim.x) {
    int e = b < nbins ? bin_start[b + 1] - bin_start[b] : 0;
    sub_count[b] = b < nbins ? (e > max_entries ? (e + max_entries - 1) / max_entries : 1) : 0;
  }
}

// Step 4's payload: {entries, subproblems, bad}, gathered for one copy.
__global__ void totals_kernel(const int *bin_start, const int *sub_start, int nbins,
                              const int *bad, int *out) {
  out[0] = bin_start[nbins];
  out[1] = sub_start[nbins];
  out[2] = *bad;
}

// Step 5: the (bin, sample) pairs, sample p's at first[p].
__global__ void pairs_kernel(bin_args g, int n, const int4 *pos, const int *first,
                             unsigned *bins, int *samples) {
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
    int t[3][3], nt[3];
    int count = touched_bins(g, pos[p], t, nt), at = first[p];
    for (int j = 0; j < count; j++) {
      bins[at + j] = unsigned(touched_at(g, t, nt, j));
      samples[at + j] = p;
    }
  }
}

__global__ void subs_kernel(const int *bin_start, const int *sub_start, int nbins,
                            int max_entries, int4 *subs) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < nbins; b += gridDim.x * blockDim.x) {
    int first = bin_start[b], end = bin_start[b + 1], at = sub_start[b];
    int split = end - first > max_entries;
    do {
      int piece = min(end - first, max_entries);
      subs[at++] = make_int4(b, first, first + piece, split);
      first += piece;
    } while (first < end);
  }
}

// Bits that hold every bin index (at least 1, for CUB).
int key_bits(size_t nbins) {
  int bits = 1;
  while ((size_t(1) << bits) < nbins)
    bits++;
  return bits;
}

// Scratch carved out of one allocation: a layout pass with base null sizes
// it, a second with the real base hands out the pieces.
struct carve {
  char *base = nullptr;
  size_t used = 0;
  template <class T> T *take(size_t count) {
    size_t at = (used + 255) / 256 * 256;
    used = at + (count > 0 ? count : 1) * sizeof(T);
    return base != nullptr ? reinterpret_cast<T *>(base + at) : nullptr;
  }
};

// Step 1-3's scratch.
struct first_half {
  float *k;
  int4 *pos;
  float4 *offset;
  unsigned *home, *home_sorted, *index, *perm;
  int *touches, *first, *bin_entries, *bin_start, *sub_count, *sub_start, *flags, *totals;
  void *cub;
  size_t cub_bytes;
  void lay(carve &c, size_t n, size_t nbins, bool copy_k, int rank) {
    k = copy_k ? c.take<float>(n * size_t(rank)) : nullptr;
    pos = c.take<int4>(n);
    offset = c.take<float4>(n);
    home = c.take<unsigned>(n);
    home_sorted = c.take<unsigned>(n);
    index = c.take<unsigned>(n);
    perm = c.take<unsigned>(n);
    touches = c.take<int>(n);
    first = c.take<int>(n);
    bin_entries = c.take<int>(nbins + 1);
    bin_start = c.take<int>(nbins + 1);
    sub_count = c.take<int>(nbins + 1);
    sub_start = c.take<int>(nbins + 1);
    flags = c.take<int>(1);
    totals = c.take<int>(4);
    cub = c.take<char>(cub_bytes);
  }
};

// The CUB work area all of steps 1-3 share (they run one after another).
size_t first_half_cub_bytes(size_t n, size_t nbins) {
  size_t most = 0, b = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, b, (unsigned *)nullptr, (unsigned *)nullptr,
                                  (unsigned *)nullptr, (unsigned *)nullptr, int(n));
  most = b > most ? b : most;
  cub::DeviceScan::ExclusiveSum(nullptr, b, (int *)nullptr, (int *)nullptr, int(n));
  most = b > most ? b : most;
  cub::DeviceScan::ExclusiveSum(nullptr, b, (int *)nullptr, (int *)nullptr, int(nbins + 1));
  return b > most ? b : most;
}

#define MR_CUB(call) MR_CU(call)

// Steps 1 to 4. totals: {entries, subproblems, a position was not finite}.
int bin_points(const mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t n, const float *k,
               bool k_on_host, first_half &f, int totals[3]) {
  const bin_args g = bin_args_of(p->geom);
  const size_t nbins = p->points.nbins;
  const int bits = key_bits(nbins);
  const unsigned blocks = mr_grid_for(c, n, BLOCK), bin_blocks = mr_grid_for(c, nbins + 1, BLOCK);
  const float *kd = k;
  if (k_on_host && n > 0) {
    int rc = mr_cuda_upload(p->dev, f.k, k, n * size_t(g.rank) * sizeof(float));
    if (rc < 0)
      return rc;
    kd = f.k;
  }
  MR_CU(cudaMemsetAsync(f.bin_entries, 0, (nbins + 1) * sizeof(int), c->compute));
  MR_CU(cudaMemsetAsync(f.flags, 0, sizeof(int), c->compute));
  if (n > 0) {
    place_kernel<<<blocks, BLOCK, 0, c->compute>>>(g, kd, int(n), f.pos, f.offset, f.home, f.index,
                                                   f.bin_entries, f.flags);
    MR_LAUNCHED(place_kernel);
    size_t bytes = f.cub_bytes;
    MR_CUB(cub::DeviceRadixSort::SortPairs(f.cub, bytes, f.home, f.home_sorted, f.index, f.perm,
                                           int(n), 0, bits, c->compute));
    gather_kernel<<<blocks, BLOCK, 0, c->compute>>>(g, int(n), f.perm, f.pos, f.offset, s->pos,
                                                    s->offset, f.touches);
    MR_LAUNCHED(gather_kernel);
    bytes = f.cub_bytes;
    MR_CUB(cub::DeviceScan::ExclusiveSum(f.cub, bytes, f.touches, f.first, int(n), c->compute));
  }
  size_t bytes = f.cub_bytes;
  MR_CUB(cub::DeviceScan::ExclusiveSum(f.cub, bytes, f.bin_entries, f.bin_start, int(nbins + 1),
                                       c->compute));
  count_subs_kernel<<<bin_blocks, BLOCK, 0, c->compute>>>(f.bin_start, int(nbins),
                                                          MR_NUFFT_MAX_SUB_ENTRIES, f.sub_count);
  MR_LAUNCHED(count_subs_kernel);
  bytes = f.cub_bytes;
  MR_CUB(cub::DeviceScan::ExclusiveSum(f.cub, bytes, f.sub_count, f.sub_start, int(nbins + 1),
                                       c->compute));
  totals_kernel<<<1, 1, 0, c->compute>>>(f.bin_start, f.sub_start, int(nbins), f.flags, f.totals);
  MR_LAUNCHED(totals_kernel);
  return mr_cuda_download(p->dev, totals, f.totals, 3 * sizeof(int));
}

// Step 5: the entry lists and the subproblems into s.
int list_entries(const mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t n,
                 const first_half &f) {
  const bin_args g = bin_args_of(p->geom);
  const size_t nbins = p->points.nbins, nentries = p->points.nentries;
  size_t cub_bytes = 0;
  MR_CUB(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (unsigned *)nullptr,
                                         (unsigned *)nullptr, (int *)nullptr, (int *)nullptr,
                                         int(nentries)));
  carve lay;
  for (int pass = 0; pass < 2; pass++) {
    unsigned *bins = lay.take<unsigned>(nentries), *bins_sorted = lay.take<unsigned>(nentries);
    int *samples = lay.take<int>(nentries);
    void *cub = lay.take<char>(cub_bytes);
    if (pass == 0) {
      int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&lay.base), lay.used);
      if (rc < 0)
        return rc;
      lay.used = 0;
      continue;
    }
    if (n > 0) {
      pairs_kernel<<<mr_grid_for(c, n, BLOCK), BLOCK, 0, c->compute>>>(g, int(n), s->pos, f.first,
                                                                       bins, samples);
      MR_LAUNCHED(pairs_kernel);
      cudaError_t e = cub::DeviceRadixSort::SortPairs(cub, cub_bytes, bins, bins_sorted, samples,
                                                      s->entries, int(nentries), 0,
                                                      key_bits(nbins), c->compute);
      if (e != cudaSuccess) {
        mr_cuda_free(c, lay.base);
        return mr_cuda_fail(e, "cub::DeviceRadixSort::SortPairs", __FILE__, __LINE__);
      }
    }
  }
  mr_cuda_free(c, lay.base);
  subs_kernel<<<mr_grid_for(c, nbins, BLOCK), BLOCK, 0, c->compute>>>(
      f.bin_start, f.sub_start, int(nbins), MR_NUFFT_MAX_SUB_ENTRIES, s->subs);
  MR_LAUNCHED(subs_kernel);
  return 0;
}

int set_points_on_worker(mr_nufft_plan *p, size_t n, const float *k, bool k_on_host) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  mr_nufft_points &pts = p->points;
  mr_nufft_cuda_free_points(c, s);
  const mr_nufft_geom &g = p->geom;
  pts.nbins = size_t(g.nbins[0]) * g.nbins[1] * g.nbins[2];
  first_half f;
  f.cub_bytes = first_half_cub_bytes(n, pts.nbins);
  carve lay;
  f.lay(lay, n, pts.nbins, k_on_host, g.rank);
  int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&lay.base), lay.used);
  if (rc < 0)
    return rc;
  lay.used = 0;
  f.lay(lay, n, pts.nbins, k_on_host, g.rank);
  rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->pos), n * sizeof(int4));
  if (rc == 0)
    rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->offset), n * sizeof(float4));
  int totals[3] = {0, 0, 0};
  if (rc == 0)
    rc = bin_points(p, c, s, n, k, k_on_host, f, totals);
  if (rc == 0 && totals[2] != 0)
    rc = mr_fail(MR_EINVAL, "nufft: a sample position is not finite");
  if (rc == 0) {
    pts.npoints = n;
    pts.nentries = size_t(totals[0]);
    pts.nsubs = size_t(totals[1]);
    rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->entries), pts.nentries * sizeof(int));
  }
  if (rc == 0)
    rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s->subs), pts.nsubs * sizeof(int4));
  if (rc == 0)
    rc = list_entries(p, c, s, n, f);
  mr_cuda_free(c, lay.base);
  if (rc < 0) {
    mr_cuda_ctx_sync(c); // nothing queued may still use what is freed
    mr_nufft_cuda_free_points(c, s);
  }
  return rc;
}

} // namespace

int mr_nufft_cuda_set_points(mr_nufft_plan *p, size_t n, const float *k, int k_on_host) {
  return mr_on_worker(p->dev, [&] { return set_points_on_worker(p, n, k, k_on_host != 0); });
}

int mr_nufft_cuda_points_download(mr_nufft_plan *p, mr_nufft_points *out) {
  const mr_nufft_points &pts = p->points;
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  memset(out, 0, sizeof *out);
  out->npoints = pts.npoints;
  out->nbins = pts.nbins;
  out->nentries = pts.nentries;
  out->nsubs = pts.nsubs;
  out->pos = static_cast<int32_t(*)[4]>(malloc((pts.npoints + 1) * sizeof *out->pos));
  out->offset = static_cast<float(*)[4]>(malloc((pts.npoints + 1) * sizeof *out->offset));
  out->entries = static_cast<int32_t *>(malloc((pts.nentries + 1) * sizeof *out->entries));
  out->subs = static_cast<int32_t(*)[4]>(malloc((pts.nsubs + 1) * sizeof *out->subs));
  if (out->pos == nullptr || out->offset == nullptr || out->entries == nullptr ||
      out->subs == nullptr) {
    mr_nufft_points_free(out);
    return mr_fail(MR_ENOMEM, "nufft: out of memory for %zu points", pts.npoints);
  }
  int rc = mr_on_worker(p->dev, [&] {
    struct {
      void *dst;
      const void *src;
      size_t bytes;
    } arrays[] = {
        {out->pos, s->pos, pts.npoints * sizeof(int4)},
        {out->offset, s->offset, pts.npoints * sizeof(float4)},
        {out->entries, s->entries, pts.nentries * sizeof(int)},
        {out->subs, s->subs, pts.nsubs * sizeof(int4)},
    };
    for (auto &a : arrays) {
      int r = a.bytes > 0 ? mr_cuda_download(p->dev, a.dst, a.src, a.bytes) : 0;
      if (r < 0)
        return r;
    }
    return 0;
  });
  if (rc < 0)
    mr_nufft_points_free(out);
  return rc;
}
