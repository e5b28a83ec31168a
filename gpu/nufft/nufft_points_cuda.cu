// A GPU plan's sample positions, placed and binned on its device in the
// group layout of nufft_cuda.cuh: the positions sorted by group, the
// group starts, and the subproblems nufft_points.c makes on the host (same
// placement, same bins and pieces; a bin's entries are its sources'
// samples rather than a list). Two kernels around one CUB scan, nothing
// allocated and no round trip on the way, the three totals written by the
// last kernel straight into pinned host memory. The call is mostly fixed
// costs (launches, the wait at its end), so each step that needs no pass
// of its own rides on a neighbour's. It is cuFINUFFT's GM-sort (count with
// an atomic that gives each sample its place in its bin, scan, scatter)
// with groups for bins, so that one slot per sample also lists every bin's
// entries (an earlier layout took a slot in every bin a footprint touched,
// 2 to 3.2 in 3D, and wrote each entry: 3D set_points took 1.4-2.2 times
// cuFINUFFT's).
//
//   1. place (from pinned memory as the positions arrive, piece by piece):
//      one thread per sample places it (mr_nufft_place, in double as on the
//      host) and takes a slot in its group by one 32-bit atomic add,
//      aggregated per warp (a warp's samples often share their group).
//      Where the groups are few (2D grids), a block counts in shared memory
//      first and takes one range per group from the global counts. It
//      keeps the slots. A position that is not finite raises a flag in the
//      element past the groups.
//   2. one exclusive scan over the groups' {samples, entries,
//      subproblems} gives where each group's samples and each bin's entries
//      and subproblems start (the element past the groups: the totals); a
//      bin's entries (its sources' counts) and its subproblem count (one
//      per mr_nufft_sub_entries() entries) are made as the scan reads its
//      last group.
//   3. finish, one thread per sample and per group: each sample, placed
//      again, is written to its group's slot; each bin writes its
//      subproblems; each group clears its count, so the next trajectory's
//      counting starts from zeros without a memset of its own (the plan
//      remembers that they are); the thread past the groups writes the
//      totals and the flag to the host.
// Within a group the samples come in the order the atomics gave
// (cuFINUFFT's binsort does the same), not the host's order by original
// index; the spreading sums the same terms in another order (equal to
// rounding), and every sample keeps its original index for the data. All
// memory (the arrays and this scratch) is made for the plan's max_points
// at its creation (nufft_cuda.cu), so nothing waits for a count.
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
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

// Sample i's footprint start per dimension, offsets, group; false when a
// position is not finite (placed at 0 then).
__device__ bool place(const mr_nufft_geom &g, const mr_nufft_groups &q, const float *k, int i,
                      int s[3], float a[3], int *group) {
  bool finite = true;
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
  }
  *group = mr_nufft_group(&g, &q, s);
  return finite;
}

// counter[key] + this lane's share before it, after one add of 1 per lane
// of the warp with the same key (key < 0: none). Every lane of the warp
// calls it.
__device__ unsigned warp_slot(unsigned *counter, int key) {
  const int lane = threadIdx.x & 31;
  unsigned same = __match_any_sync(FULL, key);
  int leader = __ffs(same) - 1;
  unsigned base = 0;
  if (lane == leader && key >= 0)
    base = atomicAdd(&counter[key], unsigned(__popc(same)));
  base = __shfl_sync(FULL, base, leader);
  return base + unsigned(__popc(same & ((1u << lane) - 1)));
}

// Sample i's group (-1 when i >= end). A position that is not finite sets
// *flag.
__device__ int group_of(const mr_nufft_geom &g, const mr_nufft_groups &q, const float *k, int i,
                        int end, unsigned *flag) {
  if (i >= end)
    return -1;
  int s[3], group;
  float a[3];
  if (!place(g, q, k, i, s, a, &group))
    *flag = 1;
  return group;
}

// counts[group] (group < ngroups): samples; counts[ngroups]: the flag.
// slots[i]: sample i's slot in its group. Every lane of a warp runs the
// same iterations (the loop bound is per warp) for the warp-wide calls.
__global__ void place_kernel(mr_nufft_geom g, mr_nufft_groups q, const float *k, int first,
                             int end, int ngroups, unsigned *counts, int *slots) {
  const int stride = gridDim.x * blockDim.x, lane = threadIdx.x & 31;
  for (int base = first + blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < end;
       base += stride) {
    int i = base + lane;
    unsigned slot = warp_slot(counts, group_of(g, q, k, i, end, &counts[ngroups]));
    if (i < end)
      slots[i] = int(slot);
  }
}

// Up to this many groups, a block counts in shared memory first: few
// groups are crowded counters. On the H100, set_points of 131,072 uniformly
// random 2D points (100-256 bins) took 0.044-0.057 ms so, against
// 0.069-0.080 with every slot taken from the global counts (a layout of a
// slot per touched bin, then); the 3D grids' 8,000-22,000 groups take
// theirs from the global counts (with 1,000-4,096 bins, counting in shared
// memory first took longer: each block reserved a range in nearly every
// bin).
constexpr int SHARED_GROUPS = 1024;
constexpr unsigned SHARED_BLOCK = 1024;

// As place_kernel for ngroups <= SHARED_GROUPS, one sample a thread: the
// block counts its samples' slots in shared memory, then takes one range
// per group it touched from the global counts, and adds its start to each
// slot it handed out.
__global__ void __launch_bounds__(SHARED_BLOCK)
    place_shared_kernel(mr_nufft_geom g, mr_nufft_groups q, const float *k, int first, int end,
                        int ngroups, unsigned *counts, int *slots) {
  extern __shared__ unsigned block_counts[]; // [ngroups]
  for (int b = threadIdx.x; b < ngroups; b += blockDim.x)
    block_counts[b] = 0;
  __syncthreads();
  int i = first + blockIdx.x * blockDim.x + threadIdx.x;
  int group = group_of(g, q, k, i, end, &counts[ngroups]);
  unsigned slot = warp_slot(block_counts, group);
  __syncthreads();
  for (int b = threadIdx.x; b < ngroups; b += blockDim.x) {
    unsigned v = block_counts[b];
    if (v != 0)
      block_counts[b] = atomicAdd(&counts[b], v);
  }
  __syncthreads();
  if (group >= 0)
    slots[i] = int(block_counts[group] + slot);
}

// A group's counts as the scan reads them, {samples, entries, subproblems,
// 0}: a bin's last group also carries the bin's entries (its sources'
// samples: for each neighbour home, its groups of digits >= the
// neighbour's offset, as mr_nufft_source lists them) and its subproblems,
// made from them. The element past the groups reads as zeros.
struct group_counts {
  const unsigned *counts;
  mr_nufft_groups q;
  int ngroups, max_entries;
  __host__ __device__ int4 operator()(int group) const {
    if (group >= ngroups)
      return make_int4(0, 0, 0, 0);
    int samples = int(counts[group]);
    if (group % q.per_bin != q.per_bin - 1)
      return make_int4(samples, 0, 0, 0);
    const int bin = group / q.per_bin, n0 = q.nbins[0], n1 = q.nbins[1], n2 = q.nbins[2];
    const int r0 = q.reach[0], r1 = q.reach[1], r2 = q.reach[2];
    const int c0 = bin % n0, c1 = bin / n0 % n1, c2 = bin / (n0 * n1);
    int entries = 0;
    for (int d2 = 0; d2 < r2; d2++)
      for (int d1 = 0; d1 < r1; d1++)
        for (int d0 = 0; d0 < r0; d0++) {
          int h0 = c0 - d0 < 0 ? c0 - d0 + n0 : c0 - d0;
          int h1 = c1 - d1 < 0 ? c1 - d1 + n1 : c1 - d1;
          int h2 = c2 - d2 < 0 ? c2 - d2 + n2 : c2 - d2;
          const unsigned *home = counts + ((h2 * n1 + h1) * n0 + h0) * q.per_bin;
          for (int t2 = d2; t2 < r2; t2++)
            for (int t1 = d1; t1 < r1; t1++)
              for (int t0 = d0; t0 < r0; t0++)
                entries += int(home[(t2 * r1 + t1) * r0 + t0]);
        }
    int subs = entries > max_entries ? (entries + max_entries - 1) / max_entries : 1;
    return make_int4(samples, entries, subs, 0);
  }
};

struct sum4 {
  __device__ int4 operator()(const int4 &a, const int4 &b) const {
    return make_int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
};

// Threads [0, n): the samples' scatter; [0, ngroups]: the clearing of the
// groups' counts, the bins' subproblems (threads of a bin's first group),
// and (the thread past the groups) the totals and the flag into *totals,
// host memory.
__global__ void finish_kernel(mr_nufft_geom g, mr_nufft_groups q, const float *k, int n,
                              int ngroups, int max_entries, const int *slots, const int4 *starts,
                              unsigned *counts, int4 *pos, float4 *offset, int4 *subs,
                              int4 *totals) {
  const int most = n > ngroups + 1 ? n : ngroups + 1;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < most; i += gridDim.x * blockDim.x) {
    if (i < n) {
      int s[3], group;
      float a[3];
      place(g, q, k, i, s, a, &group);
      int p = starts[group].x + slots[i];
      pos[p] = make_int4(s[0], s[1], s[2], i);
      offset[p] = make_float4(a[0], a[1], a[2], 0.0f);
    }
    if (i == ngroups) {
      int4 total = starts[ngroups];
      total.w = counts[ngroups] != 0;
      *totals = total;
    }
    if (i <= ngroups)
      counts[i] = 0;
    if (i < ngroups && i % q.per_bin == 0) {
      int bin = i / q.per_bin, first = starts[i].y, end = starts[i + q.per_bin].y;
      int at = starts[i].z, split = end - first > max_entries;
      do {
        int piece = min(end - first, max_entries);
        subs[at++] = make_int4(bin, first, first + piece, split);
        first += piece;
      } while (first < end);
    }
  }
}

size_t group_count(const mr_nufft_groups &q) {
  return size_t(q.nbins[0]) * q.nbins[1] * q.nbins[2] * q.per_bin;
}

// The scan: the groups' counts as group_counts reads them, into starts.
int scan_groups(mr_cuda_ctx *c, void *temp, size_t *bytes, const unsigned *counts, int4 *starts,
                const mr_nufft_groups &q, int max_entries, mr_err *err) {
  const int ngroups = int(group_count(q));
  auto in = thrust::make_transform_iterator(thrust::counting_iterator<int>(0),
                                            group_counts{counts, q, ngroups, max_entries});
  MR_CU(cub::DeviceScan::ExclusiveScan(temp, *bytes, in, starts, sum4(), make_int4(0, 0, 0, 0),
                                       ngroups + 1, c != nullptr ? c->compute : nullptr));
  return 0;
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

// The binning's scratch for up to cap points.
struct scratch {
  unsigned *counts; // [groups + 1]
  float *k;         // [cap][rank]: the positions, when they come from the host
  int *slots;       // [cap]
  void *scan;       // the scan's temporary storage
  void lay(carve &c, const mr_nufft_geom &g, const mr_nufft_cuda *s, size_t cap) {
    counts = c.take<unsigned>(group_count(s->groups) + 1);
    k = c.take<float>(cap * size_t(g.rank));
    slots = c.take<int>(cap);
    scan = c.take<char>(s->scan_bytes);
  }
};

// Most bins one footprint touches.
int most_touched(const mr_nufft_groups &q) { return q.reach[0] * q.reach[1] * q.reach[2]; }

// Subproblems of at most n points: one per bin, and one more per full piece
// of entries (mr_nufft_sub_entries grows with n no faster than n, so the
// bound for cap points holds for fewer).
size_t most_subs(const mr_nufft_geom &g, const mr_nufft_groups &q, size_t n) {
  return size_t(g.nbins[0]) * g.nbins[1] * g.nbins[2] +
         n * size_t(most_touched(q)) / mr_nufft_sub_entries(&g, n);
}

// Step 1's kernel over samples [first, first + count).
int launch_place(mr_cuda_ctx *c, const mr_nufft_geom &g, const mr_nufft_groups &q, const float *k,
                 size_t first, size_t count, const scratch &f, mr_err *err) {
  const size_t ngroups = group_count(q);
  const int begin = int(first), end = int(first + count);
  if (ngroups <= size_t(SHARED_GROUPS)) {
    unsigned blocks = unsigned(count > 0 ? (count + SHARED_BLOCK - 1) / SHARED_BLOCK : 1);
    place_shared_kernel<<<blocks, SHARED_BLOCK, ngroups * sizeof(unsigned), c->compute>>>(
        g, q, k, begin, end, int(ngroups), f.counts, f.slots);
    MR_LAUNCHED(place_shared_kernel);
  } else {
    place_kernel<<<mr_grid_for(c, count, BLOCK), BLOCK, 0, c->compute>>>(
        g, q, k, begin, end, int(ngroups), f.counts, f.slots);
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
int upload_and_place(const mr_nufft_plan *p, mr_cuda_ctx *c, const mr_nufft_cuda *s, size_t n,
                     const float *k, bool k_on_host, const scratch &f, mr_err *err) {
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
    if ((rc = launch_place(c, g, s->groups, kd, first, count, f, err)) < 0)
      return rc;
  }
  return rc;
}

// Steps 1 to 3 for n <= s->cap_points points; totals: {samples, entries,
// subproblems, a position was not finite}. With marks, an event recorded
// before step 1 and after each step (mr_nufft_cuda_set_points_stage_times).
int bin_points(const mr_nufft_plan *p, mr_cuda_ctx *c, mr_nufft_cuda *s, size_t n,
               const float *k, bool k_on_host, int4 *totals, mr_err *err,
               cudaEvent_t *marks = nullptr) {
  auto mark = [&](int i) {
    return marks != nullptr ? cudaEventRecord(marks[i], c->compute) : cudaSuccess;
  };
  const mr_nufft_geom &g = p->geom;
  const size_t ngroups = group_count(s->groups);
  carve lay;
  lay.base = s->scratch;
  scratch f;
  f.lay(lay, g, s, s->cap_points);
  if (!s->counts_zeroed)
    MR_CU(cudaMemsetAsync(f.counts, 0, (ngroups + 1) * sizeof *f.counts, c->compute));
  s->counts_zeroed = false; // until the finish kernel has cleared them again
  MR_CU(mark(0));
  int rc = upload_and_place(p, c, s, n, k, k_on_host, f, err);
  if (rc < 0)
    return rc;
  MR_CU(mark(1));
  const int pieces = int(mr_nufft_sub_entries(&g, n));
  size_t bytes = s->scan_bytes;
  if ((rc = scan_groups(c, f.scan, &bytes, f.counts, s->group_start, s->groups, pieces, err)) < 0)
    return rc;
  MR_CU(mark(2));
  // The totals straight into the worker's pinned download slot (device
  // memory's address space holds it: unified addressing), free between
  // calls: every download finishes before its call returns.
  int4 *landing = static_cast<int4 *>(c->down_slot[0]);
  finish_kernel<<<mr_grid_for(c, n > ngroups + 1 ? n : ngroups + 1, BLOCK), BLOCK, 0,
                  c->compute>>>(g, s->groups, k_on_host ? f.k : k, int(n), int(ngroups), pieces,
                                f.slots, s->group_start, f.counts, s->pos, s->offset, s->subs,
                                landing);
  MR_LAUNCHED(finish_kernel);
  MR_CU(mark(3));
  MR_CU(cudaStreamSynchronize(c->compute));
  *totals = *landing;
  s->counts_zeroed = true;
  s->sub_entries = pieces;
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
      {reinterpret_cast<void **>(&s->group_start), (group_count(s->groups) + 1) * sizeof(int4)},
      {reinterpret_cast<void **>(&s->subs), most_subs(g, s->groups, cap) * sizeof(int4)},
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

int set_points_on_worker(mr_nufft_plan *p, size_t n, const float *k, bool k_on_host, mr_err *err,
                         cudaEvent_t *marks = nullptr) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  mr_nufft_points &pts = p->points;
  pts.nbins = size_t(p->geom.nbins[0]) * p->geom.nbins[1] * p->geom.nbins[2];
  int rc = 0;
  if (n > s->cap_points || s->scratch == nullptr) // only without max_points
    rc = reserve(p, c, s, n, err);
  int4 totals = make_int4(0, 0, 0, 0);
  if (rc == 0)
    rc = bin_points(p, c, s, n, k, k_on_host, &totals, err, marks);
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

// Bin b's entries as the host lists them: its sources' samples (sorted
// indices), into entries (NULL: only counted); returns how many.
size_t list_entries(const mr_nufft_groups &q, const int4 *starts, int b, int32_t *entries) {
  size_t at = 0;
  for (int j = 0; j < q.sources; j++) {
    int first, end;
    mr_nufft_source(&q, b, j, &first, &end);
    for (int e = starts[first].x; e < starts[end].x; e++, at++)
      if (entries != nullptr)
        entries[at] = e;
  }
  return at;
}

} // namespace

int mr_nufft_cuda_prepare_points(mr_nufft_plan *p, mr_cuda_ctx *c, mr_err *err) {
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  s->groups = mr_nufft_groups_of(&p->geom);
  size_t bytes = 0;
  int rc = scan_groups(nullptr, nullptr, &bytes, nullptr, nullptr, s->groups, 1, err);
  s->scan_bytes = bytes;
  if (rc == 0)
    rc = reserve(p, c, s, p->opts.max_points, err);
  // CUDA loads a kernel at its first launch: an empty binning loads the
  // scan's and finish_kernel (and clears the counts), an empty launch the
  // placing kernel this plan's groups take, which an empty binning does
  // not launch.
  if (rc == 0) {
    carve lay;
    lay.base = s->scratch;
    scratch f;
    f.lay(lay, p->geom, s, s->cap_points);
    rc = launch_place(c, p->geom, s->groups, nullptr, 0, 0, f, err);
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

int mr_nufft_cuda_set_points_stage_times(mr_nufft_plan *p, size_t n, const float *k, float ms[3],
                                         mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return mr_nufft_cuda_time_stages(
        ms, err, [&](cudaEvent_t *marks) { return set_points_on_worker(p, n, k, false, err, marks); });
  });
}

int mr_nufft_cuda_points_download(mr_nufft_plan *p, mr_nufft_points *out, mr_err *err) {
  const mr_nufft_points &pts = p->points;
  mr_nufft_cuda *s = mr_nufft_cuda_state(p);
  const size_t ngroups = group_count(s->groups);
  memset(out, 0, sizeof *out);
  out->npoints = pts.npoints;
  out->nbins = pts.nbins;
  out->nentries = pts.nentries;
  out->nsubs = pts.nsubs;
  out->pos = static_cast<int32_t(*)[4]>(malloc((pts.npoints + 1) * sizeof *out->pos));
  out->offset = static_cast<float(*)[4]>(malloc((pts.npoints + 1) * sizeof *out->offset));
  out->entries = static_cast<int32_t *>(malloc((pts.nentries + 1) * sizeof *out->entries));
  out->subs = static_cast<int32_t(*)[4]>(malloc((pts.nsubs + 1) * sizeof *out->subs));
  int4 *starts = static_cast<int4 *>(malloc((ngroups + 1) * sizeof *starts));
  if (out->pos == nullptr || out->offset == nullptr || out->entries == nullptr ||
      out->subs == nullptr || starts == nullptr) {
    free(starts);
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
        {starts, s->group_start, (ngroups + 1) * sizeof(int4)},
        {out->subs, s->subs, pts.nsubs * sizeof(int4)},
    };
    for (auto &a : arrays) {
      int r = a.bytes > 0 ? mr_cuda_download(p->dev, a.dst, a.src, a.bytes, err) : 0;
      if (r < 0)
        return r;
    }
    return 0;
  });
  // The entries, bin by bin in the order of their subproblems' counts.
  const int per_bin = s->groups.per_bin;
  for (size_t b = 0; rc == 0 && b < pts.nbins; b++) {
    size_t first = size_t(starts[b * per_bin].y), end = size_t(starts[(b + 1) * per_bin].y);
    size_t listed = list_entries(s->groups, starts, int(b), nullptr);
    if (end > pts.nentries || first > end || listed != end - first)
      rc = mr_err_set(err, MR_EDEVICE, "nufft: bin %zu lists %zu entries, counted %zu", b, listed,
                      end - first);
    else
      list_entries(s->groups, starts, int(b), out->entries + first);
  }
  free(starts);
  if (rc < 0)
    mr_nufft_points_free(out);
  return rc;
}
