// A GPU plan's sample positions, placed and binned on its device: the
// arrays nufft_points.c builds on the host (same placement, same bins, same
// entry lists and subproblems), made by two kernels around one CUB scan,
// with one small download at the end and no round trip on the way. The
// call is mostly fixed costs (launches, the download's wait), so each step
// that needs no pass of its own rides on a neighbour's.
//
//   1. place (from pinned memory as the positions arrive, piece by piece):
//      one thread per sample places it (mr_nufft_place, in double as on the
//      host), finds its home bin (that of its footprint's first grid point)
//      and the bins its footprint touches, and takes a slot in each by an
//      atomic count per bin, aggregated per warp (a warp's samples often
//      share their bins); it keeps the slots. A position that is not finite
//      raises a flag.
//   2. one exclusive scan over the bins' {samples, entries, subproblems,
//      flag} gives where each bin's samples, entries and subproblems start
//      (the last element: the totals and the flag); a bin's subproblem
//      count (one per mr_nufft_sub_entries() entries) is made from its
//      entry count as the scan reads it.
//   3. finish, one thread per sample and per bin: each sample, placed
//      again, is written to its home bin's slot, and its sorted index into
//      each touched bin's slot; each bin writes its subproblems and clears
//      its count, so the next trajectory's counting starts from zeros
//      without a memset of its own (the scratch remembers that it is clean).
// Within a bin the samples and entries come in the order the atomics gave
// (cuFINUFFT's binsort does the same), not the host's order by original
// index; the spreading sums the same terms in another order (equal to
// rounding), and every sample keeps its original index for the data. The
// entry lists are allocated for the most a sample can touch (from the
// geometry: usually 2 bins per dimension), so nothing waits for the count.
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

// A slot in counter[key] for this lane (key < 0: none), one atomic per
// distinct key in the warp. Every lane of the warp calls it.
__device__ int warp_slot(int *counter, int key) {
  const int lane = threadIdx.x & 31;
  unsigned same = __match_any_sync(FULL, key);
  int leader = __ffs(same) - 1, base = 0;
  if (lane == leader && key >= 0)
    base = atomicAdd(counter, __popc(same));
  base = __shfl_sync(FULL, base, leader);
  return base + __popc(same & ((1u << lane) - 1));
}

// counts[b]: {samples at home, entries, subproblems, 0}; counts[0].w is the
// flag. slots[i]: sample i's slot in its home bin; entry_slots[j][i]: in its
// j-th touched bin. Every lane of a warp runs the same
// iterations (the loop bound is per warp) for the warp-wide calls.
__global__ void place_kernel(mr_nufft_geom g, const float *k, int first, int end, int n,
                             int4 *counts, int *slots, int *entry_slots) {
  const int stride = gridDim.x * blockDim.x, lane = threadIdx.x & 31;
  for (int base = first + blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < end;
       base += stride) {
    int i = base + lane, s[3], h = -1, t[3][3], nt[3], count = 0;
    float a[3];
    if (i < end) {
      if (!place(g, k, i, s, a, &h))
        counts[0].w = 1;
      count = touched_bins(g, s, t, nt);
    }
    int slot = warp_slot(h >= 0 ? &counts[h].x : nullptr, h);
    if (i < end)
      slots[i] = slot;
    for (int j = 0; __any_sync(FULL, j < count); j++) {
      int b = j < count ? touched_at(g, t, nt, j) : -1;
      int e = warp_slot(b >= 0 ? &counts[b].y : nullptr, b);
      if (j < count)
        entry_slots[size_t(j) * n + i] = e;
    }
  }
}

// A bin's counts as the scan reads them, with its subproblems made from
// its entries (the element past the bins gets some too: the exclusive scan
// never adds it into a start).
struct with_subs {
  int max_entries;
  __host__ __device__ int4 operator()(int4 v) const {
    v.z = v.y > max_entries ? (v.y + max_entries - 1) / max_entries : 1;
    return v;
  }
};

struct sum4 {
  __device__ int4 operator()(const int4 &a, const int4 &b) const {
    return make_int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
};

// Threads [0, n): the samples' scatter; [0, nbins]: the bins' subproblems
// (b < nbins) and the clearing of their counts.
__global__ void finish_kernel(mr_nufft_geom g, const float *k, int n, int nbins, int max_entries,
                              const int *slots, const int *entry_slots, const int4 *starts,
                              int4 *counts, int4 *pos, float4 *offset, int *entries, int4 *subs) {
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
    if (i <= nbins)
      counts[i] = make_int4(0, 0, 0, 0);
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

struct scratch {
  int4 *counts, *starts; // [nbins + 1]; counts first, where a call finds
                         // the counts the last one cleared
  float *k;     // the positions, when they come from the host
  int *slots;   // [n]
  int *entry_slots; // [most touched][n]
  void *cub;
  size_t cub_bytes;
  void lay(carve &c, size_t n, size_t nbins, int most, bool copy_k, int rank) {
    counts = c.take<int4>(nbins + 1);
    starts = c.take<int4>(nbins + 1);
    k = copy_k ? c.take<float>(n * size_t(rank)) : nullptr;
    slots = c.take<int>(n);
    entry_slots = c.take<int>(n * size_t(most));
    cub = c.take<char>(cub_bytes);
  }
};

// Step 1, on the positions as they land: from pinned host memory piece by
// piece, each piece placed once its copy is done; from pageable host memory
// in one staged upload, then one launch (staged in pieces of 512 KB, the
// slots' handovers cost more than the overlap saved: the upload of 284,592
// 3D points took 0.6-1.2 ms that way on the H100, about 0.3 ms in one);
// from the device, in one launch.
int upload_and_place(const mr_nufft_plan *p, mr_cuda_ctx *c, const mr_nufft_geom &g, size_t n,
                     const float *k, bool k_on_host, const scratch &f, mr_err *err) {
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
    place_kernel<<<mr_grid_for(c, count, BLOCK), BLOCK, 0, c->compute>>>(
        g, kd, int(first), int(first + count), int(n), f.counts, f.slots, f.entry_slots);
    MR_LAUNCHED(place_kernel);
  }
  return rc;
}

// Steps 1 to 5; totals: {samples, entries, subproblems, a position was not
// finite}.
int bin_points(const mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t n, const float *k,
               bool k_on_host, const scratch &f, int4 *totals, mr_err *err) {
  const mr_nufft_geom &g = p->geom;
  const size_t nbins = p->points.nbins;
  if (s->counts_zeroed < nbins + 1)
    MR_CU(cudaMemsetAsync(f.counts, 0, (nbins + 1) * sizeof(int4), c->compute));
  s->counts_zeroed = 0; // until the finish kernel has cleared them again
  int rc = upload_and_place(p, c, g, n, k, k_on_host, f, err);
  if (rc < 0)
    return rc;
  const int pieces = int(mr_nufft_sub_entries(&g, n));
  size_t bytes = f.cub_bytes;
  MR_CU(cub::DeviceScan::ExclusiveScan(
      f.cub, bytes, thrust::make_transform_iterator(f.counts, with_subs{pieces}), f.starts,
      sum4(), make_int4(0, 0, 0, 0), int(nbins + 1), c->compute));
  finish_kernel<<<mr_grid_for(c, n > nbins + 1 ? n : nbins + 1, BLOCK), BLOCK, 0, c->compute>>>(
      g, k_on_host ? f.k : k, int(n), int(nbins), pieces, f.slots, f.entry_slots, f.starts,
      f.counts, s->pos, s->offset, s->entries, s->subs);
  MR_LAUNCHED(finish_kernel);
  // The totals straight into the worker's pinned download slot, on the
  // compute stream: no hop to the download stream for 16 bytes (the slots
  // are free between calls: every download finishes before it returns).
  MR_CU(cudaMemcpyAsync(c->down_slot[0], f.starts + nbins, sizeof *totals,
                        cudaMemcpyDeviceToHost, c->compute));
  MR_CU(cudaStreamSynchronize(c->compute));
  memcpy(totals, c->down_slot[0], sizeof *totals);
  s->counts_zeroed = nbins + 1;
  return 0;
}

// Makes *p hold at least `want` elements of T (stream-ordered; the old
// contents are not kept), growing *cap.
template <class T> int keep(mr_cuda_ctx *c, T **p, size_t *cap, size_t want, mr_err *err) {
  if (*p != nullptr && *cap >= want)
    return 0;
  mr_cuda_free(c, *p);
  *p = nullptr;
  *cap = 0;
  int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(p), (want > 0 ? want : 1) * sizeof(T), err);
  if (rc == 0)
    *cap = want;
  return rc;
}

int set_points_on_worker(mr_nufft_plan *p, size_t n, const float *k, bool k_on_host, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  mr_nufft_points &pts = p->points;
  const mr_nufft_geom &g = p->geom;
  pts.nbins = size_t(g.nbins[0]) * g.nbins[1] * g.nbins[2];
  const int most = most_touched(g);
  const size_t most_entries = n * size_t(most);
  scratch f;
  f.cub_bytes = 0;
  MR_CU(cub::DeviceScan::ExclusiveScan(nullptr, f.cub_bytes, (int4 *)nullptr, (int4 *)nullptr,
                                       sum4(), make_int4(0, 0, 0, 0), int(pts.nbins + 1)));
  carve lay;
  f.lay(lay, n, pts.nbins, most, k_on_host, g.rank);
  size_t had = s->cap_scratch;
  int rc = keep(c, &s->scratch, &s->cap_scratch, lay.used, err);
  if (s->cap_scratch != had) // new memory (even where the pool hands back the old address)
    s->counts_zeroed = 0;
  size_t cap_pos = s->cap_pos;
  if (rc == 0)
    rc = keep(c, &s->pos, &s->cap_pos, n, err);
  if (rc == 0) // pos and offset always have the same capacity
    rc = keep(c, &s->offset, &cap_pos, n, err);
  if (rc == 0)
    rc = keep(c, &s->entries, &s->cap_entries, most_entries, err);
  if (rc == 0) // at most one piece per bin, and one more per full piece of entries
    rc = keep(c, &s->subs, &s->cap_subs, pts.nbins + most_entries / mr_nufft_sub_entries(&g, n),
              err);
  if (rc < 0) {
    mr_nufft_cuda_free_points(c, s);
    return rc;
  }
  lay.base = s->scratch;
  lay.used = 0;
  f.lay(lay, n, pts.nbins, most, k_on_host, g.rank);
  int4 totals = make_int4(0, 0, 0, 0);
  if (rc == 0)
    rc = bin_points(p, c, s, n, k, k_on_host, f, &totals, err);
  if (rc == 0 && totals.w != 0)
    rc = mr_err_set(err, MR_EINVAL, "nufft: a sample position is not finite");
  if (rc == 0) {
    pts.npoints = n;
    pts.nentries = size_t(totals.y);
    pts.nsubs = size_t(totals.z);
  }
  if (rc < 0) {
    mr_cuda_ctx_sync(c, err); // nothing queued may still use what is freed
    mr_nufft_cuda_free_points(c, s);
  }
  return rc;
}

} // namespace

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
