// A GPU plan's sample positions, placed and binned on its device: the
// arrays nufft_points.c builds on the host (same placement, same bins, same
// entry lists and subproblems), made by two kernels around one CUB scan,
// with nothing allocated and no round trip on the way, and the three
// totals written by the last kernel straight into pinned host memory. The
// call is mostly fixed costs (launches, the wait at its end), so each step
// that needs no pass of its own rides on a neighbour's. cuFINUFFT's
// GM-sort does the same three steps for its one bin per sample (count with
// an atomic that gives each sample its place in its bin, scan, scatter);
// here a sample also has an entry in every bin its footprint reaches (the
// output-driven spreading's lists), and the subproblems come from the same
// scan.
//
//   1. place (from pinned memory as the positions arrive, piece by piece):
//      one thread per sample places it (mr_nufft_place, in double as on the
//      host) and takes a slot in each bin its footprint touches, by one
//      64-bit atomic add per bin aggregated per warp (a warp's samples
//      often share their bins): entries in the low half, samples in the
//      high half, which only the first touched bin (the home bin, that of
//      the footprint's first grid point) adds to, so one add gives a
//      sample both of its slots there. Where the bins are few (2D grids),
//      a block counts in shared memory first and takes one range per bin
//      from the global counts. It keeps the slots. A position that is not
//      finite raises a flag in the element past the bins.
//   2. one exclusive scan over the bins' {samples, entries, subproblems}
//      gives where each bin's samples, entries and subproblems start (the
//      element past the bins: the totals); a bin's subproblem count (one
//      per mr_nufft_sub_entries() entries) is made from its entry count as
//      the scan reads it.
//   3. finish, one thread per sample and per bin: each sample, placed
//      again, is written to its home bin's slot, and its sorted index into
//      each touched bin's slot; each bin writes its subproblems and clears
//      its count, so the next trajectory's counting starts from zeros
//      without a memset of its own (the plan remembers that they are);
//      the thread past the bins writes the totals and the flag to the host.
// Within a bin the samples and entries come in the order the atomics gave
// (cuFINUFFT's binsort does the same), not the host's order by original
// index; the spreading sums the same terms in another order (equal to
// rounding), and every sample keeps its original index for the data. All
// memory (the arrays and this scratch) is made for the plan's max_points
// at its creation (nufft_cuda.cu), entry lists for the most a sample can
// touch (from the geometry: usually 2 bins per dimension), so nothing
// waits for a count.
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>

#include <cstdlib>
#include <cstring>

#include "nufft_cuda.cuh"

namespace {

constexpr unsigned BLOCK = 256;
constexpr unsigned FULL = 0xffffffffu;
// Positions from pinned memory are uploaded in pieces of this size: the
// bus transfer of one piece overlaps the placing of the one before.
constexpr size_t PIECE_BYTES = size_t(512) << 10;

// Most bins one footprint touches (a partial last bin narrower than the
// kernel can make it 3 along a dimension).
int most_touched(const mr_nufft_geom &g) {
  int most = 1;
  for (int d = 0; d < g.rank; d++) {
    int m = 1, t[3];
    for (int s = 0; s < g.nf[d]; s++) {
      int c = mr_nufft_touched(s, g.width, g.nf[d], g.bin[d], t);
      m = c > m ? c : m;
    }
    most *= m;
  }
  return most;
}

// Sample i's footprint start per dimension, offsets, home bin; false when
// a position is not finite (placed at 0 then).
__device__ bool place(const mr_nufft_geom &g, const float *k, int i, int s[3], float a[3],
                      int *home) {
  bool finite = true;
  int h = 0, stride = 1;
#pragma unroll
  for (int d = 0; d < 3; d++) {
    s[d] = 0;
    a[d] = 0.0f;
    if (d < g.rank) {
      double kd = k[size_t(i) * g.rank + d];
      if (!isfinite(kd)) {
        finite = false;
        kd = 0;
      }
      mr_nufft_place(kd, g.nf[d], g.width, g.origin[d], &s[d], &a[d]);
    }
    h += s[d] / g.bin[d] * stride;
    stride *= g.nbins[d];
  }
  *home = h;
  return finite;
}

// The bins a footprint starting at s touches, per dimension (as
// nufft_points.c's for_touched); returns how many in all.
__device__ int touched_bins(const mr_nufft_geom &g, const int s[3], int t[3][3], int nt[3]) {
#pragma unroll
  for (int d = 0; d < 3; d++)
    nt[d] = mr_nufft_touched(s[d], d < g.rank ? g.width : 1, g.nf[d], g.bin[d], t[d]);
  return nt[0] * nt[1] * nt[2];
}

// The j-th of them (0 .. count-1), x fastest: the host's order.
__device__ int touched_at(const mr_nufft_geom &g, const int t[3][3], const int nt[3], int j) {
  int x = j % nt[0], y = j / nt[0] % nt[1], z = j / (nt[0] * nt[1]);
  return (t[2][z] * g.nbins[1] + t[1][y]) * g.nbins[0] + t[0][x];
}

// A bin's count: entries in the low half, samples at home in the high.
constexpr unsigned long long HOME = 1ull << 32;

// counter[key] + this lane's share before it, after one add of `one` per
// lane of the warp with the same key (key < 0: none; `one` is the same
// across the warp). Every lane of the warp calls it.
template <class T> __device__ T warp_slot(T *counter, int key, T one) {
  const int lane = threadIdx.x & 31;
  unsigned same = __match_any_sync(FULL, key);
  int leader = __ffs(same) - 1;
  T base = 0;
  if (lane == leader && key >= 0)
    base = atomicAdd(&counter[key], one * unsigned(__popc(same)));
  base = __shfl_sync(FULL, base, leader);
  return base + one * unsigned(__popc(same & ((1u << lane) - 1)));
}

// The bins sample i touches (none when i >= end), into t and nt; returns
// how many. A position that is not finite sets *flag.
__device__ int touched_by(const mr_nufft_geom &g, const float *k, int i, int end,
                          unsigned long long *flag, int t[3][3], int nt[3]) {
  if (i >= end)
    return 0;
  int s[3], h;
  float a[3];
  if (!place(g, k, i, s, a, &h))
    *flag = 1;
  return touched_bins(g, s, t, nt);
}

// counts[b] (b < nbins): entries and samples at home (HOME); counts[nbins]:
// the flag. slots[i]: sample i's slot in its home bin; entry_slots[j][i]:
// in its j-th touched bin. Every lane of a warp runs the same iterations
// (the loop bound is per warp) for the warp-wide calls; the first touched
// bin is the home bin (touched_at's order), whose add counts the sample
// too.
__global__ void place_kernel(mr_nufft_geom g, const float *k, int first, int end, int n,
                             int nbins, unsigned long long *counts, int *slots,
                             int *entry_slots) {
  const int stride = gridDim.x * blockDim.x, lane = threadIdx.x & 31;
  for (int base = first + blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < end;
       base += stride) {
    int i = base + lane, t[3][3], nt[3];
    int count = touched_by(g, k, i, end, &counts[nbins], t, nt);
    for (int j = 0; __any_sync(FULL, j < count); j++) {
      int b = j < count ? touched_at(g, t, nt, j) : -1;
      unsigned long long slot = warp_slot(counts, b, j == 0 ? HOME | 1 : 1ull);
      if (j < count)
        entry_slots[size_t(j) * n + i] = int(unsigned(slot));
      if (j == 0 && i < end)
        slots[i] = int(slot >> 32);
    }
  }
}

// Up to this many bins, a block counts in shared memory first: few bins
// are crowded counters. On the H100, set_points of 131,072 uniformly random
// 2D points (100-256 bins) took 0.044-0.057 ms so, against 0.069-0.080
// with every slot taken from the global counts (such warps share no bins:
// 1.2 atomics a sample on 16-32 cache lines); with the 3D grids'
// 1,000-4,096 bins it took longer (0.088-0.132 ms against 0.071-0.106),
// each block then reserving a range in nearly every bin.
constexpr int SHARED_BINS = 512;
constexpr unsigned SHARED_BLOCK = 1024;

// As place_kernel for nbins <= SHARED_BINS, one sample a thread: the block
// counts its samples' slots in shared memory (16-bit halves: entries low,
// samples at home high; a block's 1024 samples take at most 1024 slots of a
// bin), then takes one range per bin it touched from the global counts,
// and adds its start to each slot it handed out.
__global__ void __launch_bounds__(SHARED_BLOCK)
    place_shared_kernel(mr_nufft_geom g, const float *k, int first, int end, int n, int nbins,
                        unsigned long long *counts, int *slots, int *entry_slots) {
  extern __shared__ unsigned block_counts[]; // [nbins], then home starts [nbins]
  unsigned *home_start = block_counts + nbins;
  for (int b = threadIdx.x; b < nbins; b += blockDim.x)
    block_counts[b] = 0;
  __syncthreads();
  int i = first + blockIdx.x * blockDim.x + threadIdx.x, t[3][3], nt[3];
  int count = touched_by(g, k, i, end, &counts[nbins], t, nt);
  for (int j = 0; __any_sync(FULL, j < count); j++) {
    int b = j < count ? touched_at(g, t, nt, j) : -1;
    unsigned slot = warp_slot(block_counts, b, j == 0 ? 0x10001u : 1u);
    if (j < count)
      entry_slots[size_t(j) * n + i] = int(slot);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) {
    unsigned v = block_counts[b];
    if (v != 0) {
      unsigned long long at = atomicAdd(&counts[b],
                                        (unsigned long long)(v >> 16) << 32 | (v & 0xffffu));
      block_counts[b] = unsigned(at);
      home_start[b] = unsigned(at >> 32);
    }
  }
  __syncthreads();
  for (int j = 0; j < count; j++) {
    int b = touched_at(g, t, nt, j);
    unsigned slot = unsigned(entry_slots[size_t(j) * n + i]);
    entry_slots[size_t(j) * n + i] = int(block_counts[b] + (slot & 0xffffu));
    if (j == 0)
      slots[i] = int(home_start[b] + (slot >> 16));
  }
}

// A bin's count as the scan reads it, {samples, entries, subproblems, 0},
// the subproblems made from the entries (the element past the bins gets
// some too: the exclusive scan never adds it into a start).
struct bin_counts {
  int max_entries;
  __host__ __device__ int4 operator()(unsigned long long v) const {
    int samples = int(v >> 32), entries = int(unsigned(v));
    int subs = entries > max_entries ? (entries + max_entries - 1) / max_entries : 1;
    return make_int4(samples, entries, subs, 0);
  }
};

struct sum4 {
  __device__ int4 operator()(const int4 &a, const int4 &b) const {
    return make_int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
};

// Threads [0, n): the samples' scatter; [0, nbins]: the bins' subproblems
// (b < nbins), the clearing of their counts, and (b = nbins) the totals and
// the flag into *totals, host memory.
__global__ void finish_kernel(mr_nufft_geom g, const float *k, int n, int nbins, int max_entries,
                              const int *slots, const int *entry_slots, const int4 *starts,
                              unsigned long long *counts, int4 *pos, float4 *offset, int *entries,
                              int4 *subs, int4 *totals) {
  const int most = n > nbins + 1 ? n : nbins + 1;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < most; i += gridDim.x * blockDim.x) {
    if (i < n) {
      int s[3], h, t[3][3], nt[3];
      float a[3];
      place(g, k, i, s, a, &h);
      int p = starts[h].x + slots[i];
      pos[p] = make_int4(s[0], s[1], s[2], i);
      offset[p] = make_float4(a[0], a[1], a[2], 0.0f);
      int count = touched_bins(g, s, t, nt);
      for (int j = 0; j < count; j++)
        entries[starts[touched_at(g, t, nt, j)].y + entry_slots[size_t(j) * n + i]] = p;
    }
    if (i == nbins) {
      int4 total = starts[nbins];
      total.w = counts[nbins] != 0;
      *totals = total;
    }
    if (i <= nbins)
      counts[i] = 0;
    if (i < nbins) {
      int first = starts[i].y, end = starts[i + 1].y, at = starts[i].z;
      int split = end - first > max_entries;
      do {
        int piece = min(end - first, max_entries);
        subs[at++] = make_int4(i, first, first + piece, split);
        first += piece;
      } while (first < end);
    }
  }
}

// The scan: the bins' counts as bin_counts reads them, into starts.
int scan_bins(mr_cuda_ctx *c, void *temp, size_t *bytes, const unsigned long long *counts,
              int4 *starts, size_t nbins, int max_entries, mr_err *err) {
  MR_CU(cub::DeviceScan::ExclusiveScan(
      temp, *bytes, thrust::make_transform_iterator(counts, bin_counts{max_entries}), starts,
      sum4(), make_int4(0, 0, 0, 0), int(nbins + 1), c != nullptr ? c->compute : nullptr));
  return 0;
}

size_t bins_of(const mr_nufft_geom &g) { return size_t(g.nbins[0]) * g.nbins[1] * g.nbins[2]; }

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

// The binning's scratch for up to cap points.
struct scratch {
  unsigned long long *counts; // [nbins + 1]
  int4 *starts;               // [nbins + 1]
  float *k;                   // [cap][rank]: the positions, when they come from the host
  int *slots;                 // [cap]
  int *entry_slots;           // [most touched][n]
  void *scan;                 // the scan's temporary storage
  void lay(carve &c, const mr_nufft_geom &g, const mr_nufft_cuda *s, size_t cap) {
    counts = c.take<unsigned long long>(bins_of(g) + 1);
    starts = c.take<int4>(bins_of(g) + 1);
    k = c.take<float>(cap * size_t(g.rank));
    slots = c.take<int>(cap);
    entry_slots = c.take<int>(cap * size_t(s->most_touched));
    scan = c.take<char>(s->scan_bytes);
  }
};

// Subproblems of at most n points: one per bin, and one more per full piece
// of entries (mr_nufft_sub_entries grows with n no faster than n, so the
// bound for cap points holds for fewer).
size_t most_subs(const mr_nufft_geom &g, size_t n, int most) {
  return bins_of(g) + n * size_t(most) / mr_nufft_sub_entries(&g, n);
}

// Step 1's kernel over samples [first, first + count) of n.
int launch_place(mr_cuda_ctx *c, const mr_nufft_geom &g, const float *k, size_t first,
                 size_t count, size_t n, const scratch &f, mr_err *err) {
  const size_t nbins = bins_of(g);
  const int begin = int(first), end = int(first + count);
  if (nbins <= size_t(SHARED_BINS)) {
    unsigned blocks = unsigned(count > 0 ? (count + SHARED_BLOCK - 1) / SHARED_BLOCK : 1);
    place_shared_kernel<<<blocks, SHARED_BLOCK, 2 * nbins * sizeof(unsigned), c->compute>>>(
        g, k, begin, end, int(n), int(nbins), f.counts, f.slots, f.entry_slots);
    MR_LAUNCHED(place_shared_kernel);
  } else {
    place_kernel<<<mr_grid_for(c, count, BLOCK), BLOCK, 0, c->compute>>>(
        g, k, begin, end, int(n), int(nbins), f.counts, f.slots, f.entry_slots);
    MR_LAUNCHED(place_kernel);
  }
  return 0;
}

// Step 1, on the positions as they land: from pinned host memory piece by
// piece, each piece placed once its copy is done; from pageable host memory
// in one staged upload, then one launch (staged in pieces of 512 KB, the
// slots' handovers cost more than the overlap saved: the upload of 284,592
// 3D points took 0.6-1.2 ms that way on the H100, about 0.3 ms in one);
// from the device, in one launch.
int upload_and_place(const mr_nufft_plan *p, mr_cuda_ctx *c, size_t n, const float *k,
                     bool k_on_host, const scratch &f, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  const float *kd = k_on_host ? f.k : k;
  bool pinned = k_on_host && mr_cuda_is_pinned(k);
  size_t piece = pinned ? PIECE_BYTES / (sizeof(float) * size_t(g.rank)) : n;
  int rc = 0;
  if (k_on_host && !pinned && n > 0)
    rc = mr_cuda_upload(p->dev, f.k, k, n * size_t(g.rank) * sizeof(float), err);
  else if (pinned)
    rc = mr_cuda_after(c, c->upload, c->compute, err);
  for (size_t first = 0; rc == 0 && first < n; first += piece) {
    size_t count = n - first < piece ? n - first : piece;
    if (pinned) {
      size_t at = first * size_t(g.rank);
      rc = mr_cuda_upload_piece(p->dev, f.k + at, k + at, count * g.rank * sizeof(float), pinned,
                                err);
      if (rc == 0)
        rc = mr_cuda_after(c, c->compute, c->upload, err);
      if (rc < 0)
        return rc;
    }
    if ((rc = launch_place(c, g, kd, first, count, n, f, err)) < 0)
      return rc;
  }
  return rc;
}

// Steps 1 to 3 for n <= s->cap_points points; totals: {samples, entries,
// subproblems, a position was not finite}.
int bin_points(const mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t n,
               const float *k, bool k_on_host, int4 *totals, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  const size_t nbins = bins_of(g);
  carve lay;
  lay.base = s->scratch;
  scratch f;
  f.lay(lay, g, s, s->cap_points);
  if (!s->counts_zeroed)
    MR_CU(cudaMemsetAsync(f.counts, 0, (nbins + 1) * sizeof *f.counts, c->compute));
  s->counts_zeroed = false; // until the finish kernel has cleared them again
  int rc = upload_and_place(p, c, n, k, k_on_host, f, err);
  if (rc < 0)
    return rc;
  const int pieces = int(mr_nufft_sub_entries(&g, n));
  size_t bytes = s->scan_bytes;
  if ((rc = scan_bins(c, f.scan, &bytes, f.counts, f.starts, nbins, pieces, err)) < 0)
    return rc;
  // The totals straight into the worker's pinned download slot (device
  // memory's address space holds it: unified addressing), free between
  // calls: every download finishes before its call returns.
  int4 *landing = static_cast<int4 *>(c->down_slot[0]);
  finish_kernel<<<mr_grid_for(c, n > nbins + 1 ? n : nbins + 1, BLOCK), BLOCK, 0, c->compute>>>(
      g, k_on_host ? f.k : k, int(n), int(nbins), pieces, f.slots, f.entry_slots, f.starts,
      f.counts, s->pos, s->offset, s->entries, s->subs, landing);
  MR_LAUNCHED(finish_kernel);
  MR_CU(cudaStreamSynchronize(c->compute));
  *totals = *landing;
  s->counts_zeroed = true;
  return 0;
}

// The arrays and scratch for cap points (stream-ordered), replacing any.
int reserve(mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t cap, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  mr_nufft_cuda_free_points(c, s);
  carve lay;
  scratch f;
  f.lay(lay, g, s, cap);
  size_t one = cap > 0 ? cap : 1;
  struct {
    void **at;
    size_t bytes;
  } arrays[] = {
      {reinterpret_cast<void **>(&s->scratch), lay.used},
      {reinterpret_cast<void **>(&s->pos), one * sizeof(int4)},
      {reinterpret_cast<void **>(&s->offset), one * sizeof(float4)},
      {reinterpret_cast<void **>(&s->entries), one * size_t(s->most_touched) * sizeof(int)},
      {reinterpret_cast<void **>(&s->subs), most_subs(g, cap, s->most_touched) * sizeof(int4)},
  };
  for (auto &a : arrays) {
    int rc = mr_cuda_alloc(c, a.at, a.bytes, err);
    if (rc < 0) {
      mr_nufft_cuda_free_points(c, s);
      return rc;
    }
  }
  s->cap_points = cap;
  return 0;
}

int set_points_on_worker(mr_nufft_plan *p, size_t n, const float *k, bool k_on_host, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  mr_nufft_points &pts = p->points;
  pts.nbins = bins_of(p->geom);
  int rc = 0;
  if (n > s->cap_points || s->scratch == nullptr) // only without max_points
    rc = reserve(p, c, s, n, err);
  int4 totals = make_int4(0, 0, 0, 0);
  if (rc == 0)
    rc = bin_points(p, c, s, n, k, k_on_host, &totals, err);
  if (rc < 0) { // a device failure: nothing queued may still use what is freed
    mr_cuda_ctx_sync(c, err);
    mr_nufft_cuda_free_points(c, s);
    return rc;
  }
  if (totals.w != 0) // the memory stays, its counts cleared
    return mr_err_set(err, MR_EINVAL, "nufft: a sample position is not finite");
  pts.npoints = n;
  pts.nentries = size_t(totals.y);
  pts.nsubs = size_t(totals.z);
  return 0;
}

} // namespace

int mr_nufft_cuda_prepare_points(mr_nufft_plan *p, mr_cuda_ctx *c, mr_err *err) {
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  size_t bytes = 0;
  int rc = scan_bins(nullptr, nullptr, &bytes, nullptr, nullptr, bins_of(p->geom), 1, err);
  s->scan_bytes = bytes;
  s->most_touched = most_touched(p->geom);
  if (rc == 0)
    rc = reserve(p, c, s, p->opts.max_points, err);
  // CUDA loads a kernel at its first launch: an empty binning loads the
  // scan's and finish_kernel (and clears the counts), an empty launch the
  // placing kernel this plan's bins take, which an empty binning does not
  // launch.
  if (rc == 0) {
    carve lay;
    lay.base = s->scratch;
    scratch f;
    f.lay(lay, p->geom, s, s->cap_points);
    rc = launch_place(c, p->geom, nullptr, 0, 0, 0, f, err);
  }
  int4 totals;
  if (rc == 0)
    rc = bin_points(p, c, s, 0, nullptr, false, &totals, err);
  return rc;
}

int mr_nufft_cuda_set_points(mr_nufft_plan *p, size_t n, const float *k, int k_on_host,
                             mr_err *err) {
  return mr_on_worker(p->dev, err,
                      [&] { return set_points_on_worker(p, n, k, k_on_host != 0, err); });
}

int mr_nufft_cuda_points_download(mr_nufft_plan *p, mr_nufft_points *out, mr_err *err) {
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
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory for %zu points", pts.npoints);
  }
  int rc = mr_on_worker(p->dev, err, [&] {
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
      int r = a.bytes > 0 ? mr_cuda_download(p->dev, a.dst, a.src, a.bytes, err) : 0;
      if (r < 0)
        return r;
    }
    return 0;
  });
  if (rc < 0)
    mr_nufft_points_free(out);
  return rc;
}
