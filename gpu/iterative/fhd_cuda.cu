// The direct sums on a GPU: the book's successive F^H D kernels (Kirk &
// Hwu 14.3) and two that go past them (fhd.h lists them all).
//
// Samples stream through in chunks (opts.chunk): each chunk's trajectory,
// weights and data go up, a preparation kernel turns them into what the
// chosen kernel reads (the loop fission of Fig. 14.6: Mu = w D apart from
// the sums), and the kernel adds that chunk's share into sums that stay on
// the GPU until every chunk has passed. Kernels that split a chunk's
// samples over several blocks (to fill the GPU on small images) add their
// partial sums atomically.
#include <cstdint>

#include "cuda_internal.cuh"
#include "fhd_impl.h"

namespace {

constexpr float TWO_PI = 6.283185307179586f;

// ---- what the kernels read ------------------------------------------------

// One sample for the recurrence: k in fixed point (fhd_impl.h), Mu = w d,
// the step exp(2 pi i kx) between neighbours along x, and 2 cos(2 pi kx).
struct rec_fixed {
  unsigned kx, ky, kz;
  float mu_re, mu_im, step_re, step_im, c2;
};
static_assert(sizeof(rec_fixed) == 32, "two 16-byte loads");

// A source of the tiled kernel: position and value (a sample, or a voxel
// for forward sums).
struct __align__(16) rec_float {
  float x, y, z, unused;
  float re, im, unused2, unused3;
};
static_assert(sizeof(rec_float) == 32, "two 16-byte loads");

// Constant memory holds one chunk of k-space for the constant-memory
// kernels: kx | ky | kz arrays (Fig. 14.13) or {x, y, z} structs (14.15).
constexpr int CONST_CHUNK = 4096;
__constant__ float const_k[3 * CONST_CHUNK];

// ---- phases ---------------------------------------------------------------

// a * b in revolutions reduced to [-0.5, 0.5], its rounding error added to
// err: the product's error is exact by fma, and subtracting the nearest
// integer is exact too.
__device__ __forceinline__ float reduced_product(float a, float b, float &err) {
  float p = __fmul_rn(a, b);
  err += fmaf(a, b, -p);
  return p - rintf(p);
}

// (a . b) mod 1 in [-0.5, 0.5], to a few float roundings of 1.
__device__ __forceinline__ float reduced_phase(float ax, float ay, float az, float bx, float by,
                                               float bz) {
  float err = 0;
  float t = reduced_product(ax, bx, err) + reduced_product(ay, by, err) +
            reduced_product(az, bz, err) + err;
  return t - rintf(t);
}

// A fixed-point phase as revolutions in [-0.5, 0.5): adding half a turn
// (the top bit) and putting the upper 23 bits under the exponent of 1.0
// gives 1 + (phase + 1/2) mod 1, with no integer-to-float conversion (a
// slow instruction).
__device__ __forceinline__ float fixed_to_rev(unsigned ph) {
  return __uint_as_float(0x3f800000u | ((ph ^ 0x80000000u) >> 9)) - 1.5f;
}

// ---- the book's kernels (Figs. 14.5 to 14.17) -------------------------------

// Fig. 14.5 after fission: a thread per sample, adding into every voxel.
__global__ void scatter(const float *kx, const float *ky, const float *kz, const float *rmu,
                        const float *imu, int nsamples, const float *x, const float *y,
                        const float *z, int nvox, float2 *out) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= nsamples)
    return;
  for (int n = 0; n < nvox; n++) {
    float arg = TWO_PI * (kx[m] * x[n] + ky[m] * y[n] + kz[m] * z[n]);
    float c = cosf(arg), s = sinf(arg);
    atomicAdd(&out[n].x, rmu[m] * c - imu[m] * s);
    atomicAdd(&out[n].y, imu[m] * c + rmu[m] * s);
  }
}

// Fig. 14.10 after interchange: a thread per voxel, its sum read and
// written in global memory at every sample.
__global__ void gather(const float *kx, const float *ky, const float *kz, const float *rmu,
                       const float *imu, int nsamples, const float *x, const float *y,
                       const float *z, int nvox, float2 *out) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nvox)
    return;
  for (int m = 0; m < nsamples; m++) {
    float arg = TWO_PI * (kx[m] * x[n] + ky[m] * y[n] + kz[m] * z[n]);
    float c = cosf(arg), s = sinf(arg);
    out[n].x += rmu[m] * c - imu[m] * s;
    out[n].y += imu[m] * c + rmu[m] * s;
  }
}

// Fig. 14.11: the voxel's position and sums in registers.
__global__ void registers(const float *kx, const float *ky, const float *kz, const float *rmu,
                          const float *imu, int nsamples, const float *x, const float *y,
                          const float *z, int nvox, float2 *out) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nvox)
    return;
  float xn = x[n], yn = y[n], zn = z[n];
  float2 sum = out[n];
  for (int m = 0; m < nsamples; m++) {
    float arg = TWO_PI * (kx[m] * xn + ky[m] * yn + kz[m] * zn);
    float c = cosf(arg), s = sinf(arg);
    sum.x += rmu[m] * c - imu[m] * s;
    sum.y += imu[m] * c + rmu[m] * s;
  }
  out[n] = sum;
}

// Fig. 14.13: this chunk's kx, ky, kz arrays in constant memory.
__global__ void constant_soa(const float *rmu, const float *imu, int nsamples, const float *x,
                             const float *y, const float *z, int nvox, float2 *out) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nvox)
    return;
  const float *kx = const_k, *ky = const_k + CONST_CHUNK, *kz = const_k + 2 * CONST_CHUNK;
  float xn = x[n], yn = y[n], zn = z[n];
  float2 sum = out[n];
  for (int m = 0; m < nsamples; m++) {
    float arg = TWO_PI * (kx[m] * xn + ky[m] * yn + kz[m] * zn);
    float c = cosf(arg), s = sinf(arg);
    sum.x += rmu[m] * c - imu[m] * s;
    sum.y += imu[m] * c + rmu[m] * s;
  }
  out[n] = sum;
}

// Figs. 14.15-14.16: the chunk as an array of {x, y, z} structs, one
// constant-cache line per sample instead of three; with HW, Fig. 14.17's
// hardware sin/cos on the phase reduced to one turn (__sinf is accurate
// only near [-pi, pi]).
template <bool HW>
__global__ void constant_aos(const float *rmu, const float *imu, int nsamples, const float *x,
                             const float *y, const float *z, int nvox, float2 *out) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= nvox)
    return;
  const float3 *k = reinterpret_cast<const float3 *>(const_k);
  float xn = x[n], yn = y[n], zn = z[n];
  float2 sum = out[n];
#pragma unroll 4
  for (int m = 0; m < nsamples; m++) {
    float c, s;
    if (HW) {
      float t = k[m].x * xn + k[m].y * yn + k[m].z * zn;
      __sincosf(TWO_PI * (t - rintf(t)), &s, &c);
    } else {
      float arg = TWO_PI * (k[m].x * xn + k[m].y * yn + k[m].z * zn);
      c = cosf(arg);
      s = sinf(arg);
    }
    sum.x += rmu[m] * c - imu[m] * s;
    sum.y += imu[m] * c + rmu[m] * s;
  }
  out[n] = sum;
}

// ---- past the book ----------------------------------------------------------

// Any targets: each thread sums T targets (blockDim apart, so loads and
// stores coalesce) over the sources, which pass through shared memory one
// block-sized tile at a time. Phases are reduced exactly (reduced_phase),
// so large images lose no accuracy to the hardware sin/cos. SIGN +1 for
// the adjoint (targets are voxels, sources samples), -1 forward.
// blockIdx.y picks this block's range of sources.
template <int SIGN, int T>
__global__ void tiled(const float4 *targets, int ntargets, const rec_float *src, int nsrc,
                      int per_group, float2 *out) {
  extern __shared__ rec_float tile_f[];
  int base = blockIdx.x * blockDim.x * T + threadIdx.x;
  float tx[T], ty[T], tz[T], re[T], im[T];
#pragma unroll
  for (int u = 0; u < T; u++) {
    int t = base + u * blockDim.x;
    float4 p = t < ntargets ? targets[t] : make_float4(0, 0, 0, 0);
    tx[u] = p.x;
    ty[u] = p.y;
    tz[u] = p.z;
    re[u] = im[u] = 0;
  }
  int first = blockIdx.y * per_group, last = min(nsrc, first + per_group);
  for (int at = first; at < last; at += blockDim.x) {
    int count = min(int(blockDim.x), last - at);
    __syncthreads(); // the previous tile is used up
    if (int(threadIdx.x) < count)
      tile_f[threadIdx.x] = src[at + threadIdx.x];
    __syncthreads();
    for (int i = 0; i < count; i++) {
      rec_float s = tile_f[i];
#pragma unroll
      for (int u = 0; u < T; u++) {
        float sn, cs;
        __sincosf(TWO_PI * reduced_phase(tx[u], ty[u], tz[u], s.x, s.y, s.z), &sn, &cs);
        sn *= SIGN;
        re[u] += s.re * cs - s.im * sn;
        im[u] += s.im * cs + s.re * sn;
      }
    }
  }
#pragma unroll
  for (int u = 0; u < T; u++) {
    int t = base + u * blockDim.x;
    if (t < ntargets) {
      atomicAdd(&out[t].x, re[u]);
      atomicAdd(&out[t].y, im[u]);
    }
  }
}

// A grid: each thread sums V neighbouring voxels along x. Per sample, one
// hardware sin/cos of the exact fixed-point phase gives
// u_0 = Mu exp(2 pi i k . x_0), one product u_1 = u_0 step, and then
// u_{j+1} = 2 cos(2 pi kx) u_j - u_{j-1}: two fused multiply-adds and two
// adds per voxel, so neither the special-function unit (2 of every V
// voxels' worth) nor the phase arithmetic limits it. The recurrence's
// rounding grows with j (about j^2 float roundings at worst), which V <= 32
// keeps far below the 2e-5 the tests allow.
template <int V>
__global__ void recurrence(const rec_fixed *src, int nsrc, int per_group, int nx, int ny, int nz,
                           int segs, long long nthreads, float2 *out) {
  extern __shared__ rec_fixed tile_k[];
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  bool active = tid < nthreads;
  int seg = int(tid % segs);
  long long row = tid / segs;
  unsigned x0 = unsigned(seg * V - nx / 2);
  unsigned y = unsigned(int(row % ny) - ny / 2);
  unsigned z = unsigned(int(row / ny) - nz / 2);
  float re[V], im[V];
#pragma unroll
  for (int j = 0; j < V; j++)
    re[j] = im[j] = 0;
  int first = blockIdx.y * per_group, last = min(nsrc, first + per_group);
  for (int at = first; at < last; at += blockDim.x) {
    int count = min(int(blockDim.x), last - at);
    __syncthreads();
    if (int(threadIdx.x) < count)
      tile_k[threadIdx.x] = src[at + threadIdx.x];
    __syncthreads();
    if (!active)
      continue;
    for (int i = 0; i < count; i++) {
      rec_fixed r = tile_k[i];
      float sn, cs;
      __sincosf(TWO_PI * fixed_to_rev(r.kx * x0 + r.ky * y + r.kz * z), &sn, &cs);
      float u0r = r.mu_re * cs - r.mu_im * sn, u0i = r.mu_re * sn + r.mu_im * cs;
      float u1r = u0r * r.step_re - u0i * r.step_im, u1i = u0r * r.step_im + u0i * r.step_re;
      re[0] += u0r;
      im[0] += u0i;
      re[1] += u1r;
      im[1] += u1i;
#pragma unroll
      for (int j = 2; j < V; j++) {
        float u2r = fmaf(r.c2, u1r, -u0r), u2i = fmaf(r.c2, u1i, -u0i);
        re[j] += u2r;
        im[j] += u2i;
        u0r = u1r;
        u0i = u1i;
        u1r = u2r;
        u1i = u2i;
      }
    }
  }
  if (!active)
    return;
  float2 *o = out + row * nx + seg * V;
#pragma unroll
  for (int j = 0; j < V; j++) {
    if (seg * V + j < nx) {
      atomicAdd(&o[j].x, re[j]);
      atomicAdd(&o[j].y, im[j]);
    }
  }
}

// ---- preparation (loop fission: Mu apart from the sums) -------------------

__device__ __forceinline__ float2 sample_mu(const float2 *d, const float *w, int m) {
  float2 v = d != nullptr ? d[m] : make_float2(1, 0);
  float wm = w != nullptr ? w[m] : 1.0f;
  return make_float2(wm * v.x, wm * v.y);
}

__device__ __forceinline__ float k_at(const float *k, int rank, int m, int d) {
  return d < rank ? k[size_t(m) * rank + d] : 0.0f;
}

// The book's layout: kx, ky, kz and rMu, iMu arrays, and {x, y, z} structs.
__global__ void prep_textbook(const float *k, int rank, const float *w, const float2 *d, int n,
                              float *kx, float *ky, float *kz, float *rmu, float *imu,
                              float3 *k3) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n)
    return;
  float2 mu = sample_mu(d, w, m);
  float3 p = make_float3(k_at(k, rank, m, 0), k_at(k, rank, m, 1), k_at(k, rank, m, 2));
  kx[m] = p.x;
  ky[m] = p.y;
  kz[m] = p.z;
  k3[m] = p;
  rmu[m] = mu.x;
  imu[m] = mu.y;
}

__device__ __forceinline__ unsigned to_fixed(float k) {
  double r = double(k) - floor(double(k));
  return unsigned((unsigned long long)llrint(r * MR_FHD_FIXED_ONE) & 0xffffffffull);
}

__global__ void prep_fixed(const float *k, int rank, const float *w, const float2 *d, int n,
                           rec_fixed *out) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n)
    return;
  float2 mu = sample_mu(d, w, m);
  float kx = k_at(k, rank, m, 0);
  float s, c;
  sincospif(2 * kx, &s, &c); // accurate: every voxel of a segment builds on it
  out[m] = {to_fixed(kx), to_fixed(k_at(k, rank, m, 1)), to_fixed(k_at(k, rank, m, 2)),
            mu.x, mu.y, c, s, 2 * c};
}

__global__ void prep_samples(const float *k, int rank, const float *w, const float2 *d, int n,
                             rec_float *out) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n)
    return;
  float2 mu = sample_mu(d, w, m);
  out[m] = {k_at(k, rank, m, 0), k_at(k, rank, m, 1), k_at(k, rank, m, 2), 0, mu.x, mu.y, 0, 0};
}

// Voxel positions: on the grid (points == nullptr) or given.
__device__ __forceinline__ float3 voxel_at(const float *points, int rank, long long n, int nx,
                                           int ny, int nz) {
  if (points != nullptr)
    return make_float3(points[n * rank], points[n * rank + 1],
                       rank > 2 ? points[n * rank + 2] : 0.0f);
  return make_float3(float(int(n % nx) - nx / 2), float(int(n / nx % ny) - ny / 2),
                     float(int(n / nx / ny) - nz / 2));
}

// Forward sums: voxels [first, first + n) of one image as sources.
__global__ void prep_voxels(const float *points, int rank, int nx, int ny, int nz,
                            long long first, int n, const float2 *img, rec_float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float3 p = voxel_at(points, rank, first + i, nx, ny, nz);
  float2 v = img[i];
  out[i] = {p.x, p.y, p.z, 0, v.x, v.y, 0, 0};
}

__global__ void voxel_soa(const float *points, int rank, int nx, int ny, int nz, int n, float *x,
                          float *y, float *z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float3 p = voxel_at(points, rank, i, nx, ny, nz);
  x[i] = p.x;
  y[i] = p.y;
  z[i] = p.z;
}

__global__ void voxel_float4(const float *points, int rank, int nx, int ny, int nz, int n,
                             float4 *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float3 p = voxel_at(points, rank, i, nx, ny, nz);
  out[i] = make_float4(p.x, p.y, p.z, 0);
}

__global__ void sample_float4(const float *k, int rank, int n, float4 *out) {
  int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n)
    return;
  out[m] = make_float4(k_at(k, rank, m, 0), k_at(k, rank, m, 1), k_at(k, rank, m, 2), 0);
}

// ---- host side --------------------------------------------------------------

constexpr unsigned PREP_BLOCK = 256;

unsigned blocks_for(size_t n, unsigned block) { return unsigned((n + block - 1) / block); }

// Device memory freed when the scope ends: stream-ordered on compute, after
// the copies still queued on the other streams too (after a failure, an
// upload into it may still be under way).
struct scratch {
  mr_cuda_ctx *c;
  void *p[8] = {};
  int n = 0;
  explicit scratch(mr_cuda_ctx *ctx) : c(ctx) {}
  ~scratch() {
    if (n == 0)
      return;
    if (mr_cuda_after(c, c->compute, c->upload, nullptr) < 0 ||
        mr_cuda_after(c, c->compute, c->download, nullptr) < 0)
      mr_cuda_ctx_sync(c, nullptr);
    for (int i = 0; i < n; i++)
      mr_cuda_free(c, p[i]);
  }
  template <class T> int alloc(T **out, size_t count, mr_err *err) {
    int rc = mr_cuda_alloc(c, &p[n], count * sizeof(T) + 16, err);
    *out = static_cast<T *>(p[n]);
    n += rc == 0;
    return rc;
  }
};

// What a plan keeps on its GPU between calls: voxel positions in the
// layouts the kernels read, made on first need.
struct fhd_cuda {
  float *soa;       // x | y | z (the book's kernels)
  float4 *voxels4;  // the tiled adjoint's targets
};

mr_fhd_kernel resolve(const mr_fhd_plan *p) {
  if (p->opts.kernel != MR_FHD_AUTO)
    return p->opts.kernel;
  return p->voxels != nullptr ? MR_FHD_TILED : MR_FHD_RECURRENCE;
}

// The recurrence's block as measured fastest on the H100 (mr-bench fhd
// tuning; within 2% of 256 and 512).
int default_block(mr_fhd_kernel k) {
  switch (k) {
  case MR_FHD_RECURRENCE:
    return 128;
  case MR_FHD_TILED:
    return 256;
  default:
    return 1024; // the book's FHD_THREADS_PER_BLOCK
  }
}

// The voxel positions a kernel reads, uploaded or generated once.
int ensure_voxels(mr_cuda_ctx *c, mr_fhd_plan *p, mr_fhd_kernel kernel, mr_err *err) {
  fhd_cuda *f = static_cast<fhd_cuda *>(p->impl);
  bool soa = kernel != MR_FHD_TILED && kernel != MR_FHD_RECURRENCE;
  bool four = kernel == MR_FHD_TILED;
  if ((!soa || f->soa != nullptr) && (!four || f->voxels4 != nullptr))
    return 0;
  int n = int(p->nvox), rank = p->opts.rank;
  int nx = int(p->opts.grid[0]), ny = int(p->opts.grid[1]), nz = int(p->opts.grid[2]);
  scratch s(c);
  float *points = nullptr;
  if (p->voxels != nullptr) {
    int rc = s.alloc(&points, p->nvox * rank, err);
    if (rc == 0)
      rc = mr_cuda_upload(p->dev, points, p->voxels, p->nvox * rank * sizeof(float), err);
    if (rc < 0)
      return rc;
  }
  if (soa && f->soa == nullptr) {
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&f->soa), 3 * p->nvox * sizeof(float), err);
    if (rc < 0)
      return rc;
    voxel_soa<<<blocks_for(n, PREP_BLOCK), PREP_BLOCK, 0, c->compute>>>(
        points, rank, nx, ny, nz, n, f->soa, f->soa + n, f->soa + 2 * size_t(n));
    MR_LAUNCHED(voxel_soa);
  }
  if (four && f->voxels4 == nullptr) {
    int rc =
        mr_cuda_alloc(c, reinterpret_cast<void **>(&f->voxels4), p->nvox * sizeof(float4), err);
    if (rc < 0)
      return rc;
    voxel_float4<<<blocks_for(n, PREP_BLOCK), PREP_BLOCK, 0, c->compute>>>(
        points, rank, nx, ny, nz, n, f->voxels4);
    MR_LAUNCHED(voxel_float4);
  }
  return 0;
}

// Blocks of a split-source launch: enough for about four waves of the
// kernel's resident blocks, each group keeping at least a tile of sources.
template <class K>
int split_groups(mr_cuda_ctx *c, K kernel, int block, size_t smem, size_t blocks, int nsrc,
                 int *per_group, mr_err *err) {
  int per_sm = 0;
  MR_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem));
  size_t slots = size_t(per_sm > 0 ? per_sm : 1) * c->props.multiProcessorCount;
  size_t want = (4 * slots + blocks - 1) / blocks;
  size_t most = (size_t(nsrc) + block - 1) / block;
  size_t groups = want < most ? want : most;
  if (groups < 1)
    groups = 1;
  if (groups > 65535)
    groups = 65535;
  size_t per = (size_t(nsrc) + groups - 1) / groups;
  per = (per + block - 1) / block * block; // whole tiles
  *per_group = int(per);
  return int((size_t(nsrc) + per - 1) / per);
}

template <int V>
int launch_recurrence_v(mr_cuda_ctx *c, const mr_fhd_plan *p, const rec_fixed *r, int n,
                        float2 *out, mr_err *err) {
  int nx = int(p->opts.grid[0]), ny = int(p->opts.grid[1]), nz = int(p->opts.grid[2]);
  int block = p->opts.block ? p->opts.block : default_block(MR_FHD_RECURRENCE);
  int segs = (nx + V - 1) / V;
  long long threads = (long long)segs * ny * nz;
  size_t blocks = size_t((threads + block - 1) / block);
  size_t smem = size_t(block) * sizeof(rec_fixed);
  int per_group;
  int groups = split_groups(c, recurrence<V>, block, smem, blocks, n, &per_group, err);
  if (groups < 0)
    return groups;
  dim3 grid{unsigned(blocks), unsigned(groups)};
  recurrence<V><<<grid, block, smem, c->compute>>>(r, n, per_group, nx, ny, nz, segs, threads,
                                                    out);
  MR_LAUNCHED(recurrence);
  return 0;
}

int launch_recurrence(mr_cuda_ctx *c, const mr_fhd_plan *p, const rec_fixed *r, int n, float2 *out,
                      mr_err *err) {
  switch (p->opts.voxels_per_thread) {
  case 4:
    return launch_recurrence_v<4>(c, p, r, n, out, err);
  case 8:
    return launch_recurrence_v<8>(c, p, r, n, out, err);
  case 16:
    return launch_recurrence_v<16>(c, p, r, n, out, err);
  default:
    return launch_recurrence_v<32>(c, p, r, n, out, err);
  }
}

constexpr int TILED_T = 4; // targets per thread

template <int SIGN>
int launch_tiled(mr_cuda_ctx *c, int block, const float4 *targets, int ntargets,
                 const rec_float *src, int nsrc, float2 *out, mr_err *err) {
  size_t blocks = (size_t(ntargets) + size_t(block) * TILED_T - 1) / (size_t(block) * TILED_T);
  size_t smem = size_t(block) * sizeof(rec_float);
  int per_group;
  int groups = split_groups(c, tiled<SIGN, TILED_T>, block, smem, blocks, nsrc, &per_group, err);
  if (groups < 0)
    return groups;
  dim3 grid{unsigned(blocks), unsigned(groups)};
  tiled<SIGN, TILED_T><<<grid, block, smem, c->compute>>>(targets, ntargets, src, nsrc,
                                                          per_group, out);
  MR_LAUNCHED(tiled);
  return 0;
}

// The book's arrays for one chunk of samples.
struct textbook_chunk {
  float *kx, *ky, *kz, *rmu, *imu;
  float3 *k3;
};

// The book's kernels over one chunk; the constant-memory ones walk it in
// CONST_CHUNK pieces, copying each into constant memory first (Fig. 14.12).
int launch_textbook(mr_cuda_ctx *c, const mr_fhd_plan *p, mr_fhd_kernel kernel,
                    const textbook_chunk &t, int n, float2 *out, mr_err *err) {
  const fhd_cuda *f = static_cast<const fhd_cuda *>(p->impl);
  int nvox = int(p->nvox);
  int block = p->opts.block ? p->opts.block : default_block(kernel);
  const float *x = f->soa, *y = f->soa + nvox, *z = f->soa + 2 * size_t(nvox);
  unsigned vblocks = blocks_for(size_t(nvox), unsigned(block));
  switch (kernel) {
  case MR_FHD_SCATTER:
    scatter<<<blocks_for(size_t(n), unsigned(block)), block, 0, c->compute>>>(
        t.kx, t.ky, t.kz, t.rmu, t.imu, n, x, y, z, nvox, out);
    break;
  case MR_FHD_GATHER:
    gather<<<vblocks, block, 0, c->compute>>>(t.kx, t.ky, t.kz, t.rmu, t.imu, n, x, y, z, nvox,
                                              out);
    break;
  case MR_FHD_REGISTERS:
    registers<<<vblocks, block, 0, c->compute>>>(t.kx, t.ky, t.kz, t.rmu, t.imu, n, x, y, z,
                                                 nvox, out);
    break;
  default:
    for (int at = 0; at < n; at += CONST_CHUNK) {
      int count = n - at < CONST_CHUNK ? n - at : CONST_CHUNK;
      size_t bytes = size_t(count) * sizeof(float);
      if (kernel == MR_FHD_CONSTANT) {
        MR_CU(cudaMemcpyToSymbolAsync(const_k, t.kx + at, bytes, 0, cudaMemcpyDeviceToDevice,
                                      c->compute));
        MR_CU(cudaMemcpyToSymbolAsync(const_k, t.ky + at, bytes, CONST_CHUNK * sizeof(float),
                                      cudaMemcpyDeviceToDevice, c->compute));
        MR_CU(cudaMemcpyToSymbolAsync(const_k, t.kz + at, bytes,
                                      2 * CONST_CHUNK * sizeof(float), cudaMemcpyDeviceToDevice,
                                      c->compute));
        constant_soa<<<vblocks, block, 0, c->compute>>>(t.rmu + at, t.imu + at, count, x, y, z,
                                                        nvox, out);
      } else {
        MR_CU(cudaMemcpyToSymbolAsync(const_k, t.k3 + at, 3 * bytes, 0,
                                      cudaMemcpyDeviceToDevice, c->compute));
        if (kernel == MR_FHD_HWTRIG)
          constant_aos<true><<<vblocks, block, 0, c->compute>>>(t.rmu + at, t.imu + at, count,
                                                                x, y, z, nvox, out);
        else
          constant_aos<false><<<vblocks, block, 0, c->compute>>>(t.rmu + at, t.imu + at, count,
                                                                 x, y, z, nvox, out);
      }
      MR_LAUNCHED(constant);
    }
    return 0;
  }
  MR_LAUNCHED(textbook);
  return 0;
}

int check_sizes(const mr_fhd_plan *p, mr_err *err) {
  // Kernels index voxels and samples with int.
  if (p->nvox > size_t(INT32_MAX) || p->m > size_t(INT32_MAX) ||
      p->opts.chunk > size_t(INT32_MAX))
    return mr_err_set(err, MR_EINVAL, "fhd: %zu voxels, %zu samples: over 2^31 on a GPU", p->nvox,
                      p->m);
  return 0;
}

int adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
            mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  mr_fhd_kernel kernel = resolve(p);
  int rc = check_sizes(p, err);
  if (rc == 0)
    rc = ensure_voxels(c, p, kernel, err);
  if (rc < 0)
    return rc;
  const fhd_cuda *f = static_cast<const fhd_cuda *>(p->impl);
  size_t nvox = p->nvox, batch = data != nullptr ? p->opts.batch : 1, rank = size_t(p->opts.rank);
  size_t chunk = p->m < p->opts.chunk ? p->m : p->opts.chunk;
  scratch s(c);
  float2 *sums;
  float *k, *w = nullptr;
  float2 *d = nullptr;
  rec_fixed *fixed = nullptr;
  rec_float *samples = nullptr;
  textbook_chunk t{};
  if ((rc = s.alloc(&sums, batch * nvox, err)) < 0 || (rc = s.alloc(&k, chunk * rank, err)) < 0 ||
      (weights != nullptr && (rc = s.alloc(&w, chunk, err)) < 0) ||
      (data != nullptr && (rc = s.alloc(&d, chunk, err)) < 0))
    return rc;
  if (kernel == MR_FHD_RECURRENCE) {
    rc = s.alloc(&fixed, chunk, err);
  } else if (kernel == MR_FHD_TILED) {
    rc = s.alloc(&samples, chunk, err);
  } else {
    float *a;
    rc = s.alloc(&a, 5 * chunk, err);
    if (rc == 0)
      rc = s.alloc(&t.k3, chunk, err);
    if (rc == 0)
      t = {a, a + chunk, a + 2 * chunk, a + 3 * chunk, a + 4 * chunk, t.k3};
  }
  if (rc < 0)
    return rc;
  MR_CU(cudaMemsetAsync(sums, 0, batch * nvox * sizeof(float2), c->compute));
  for (size_t at = 0; at < p->m; at += chunk) {
    int n = int(p->m - at < chunk ? p->m - at : chunk);
    rc = mr_cuda_upload(p->dev, k, p->k + at * rank, size_t(n) * rank * sizeof(float), err);
    if (rc == 0 && w != nullptr)
      rc = mr_cuda_upload(p->dev, w, weights + at, size_t(n) * sizeof(float), err);
    for (size_t b = 0; rc == 0 && b < batch; b++) {
      float2 *o = sums + b * nvox;
      if (d != nullptr)
        rc = mr_cuda_upload(p->dev, d, data + b * p->m + at, size_t(n) * sizeof(float2), err);
      if (rc < 0)
        break;
      unsigned pb = blocks_for(size_t(n), PREP_BLOCK);
      if (kernel == MR_FHD_RECURRENCE) {
        prep_fixed<<<pb, PREP_BLOCK, 0, c->compute>>>(k, int(rank), w, d, n, fixed);
        MR_LAUNCHED(prep_fixed);
        rc = launch_recurrence(c, p, fixed, n, o, err);
      } else if (kernel == MR_FHD_TILED) {
        prep_samples<<<pb, PREP_BLOCK, 0, c->compute>>>(k, int(rank), w, d, n, samples);
        MR_LAUNCHED(prep_samples);
        int block = p->opts.block ? p->opts.block : default_block(kernel);
        rc = launch_tiled<+1>(c, block, f->voxels4, int(nvox), samples, n, o, err);
      } else {
        prep_textbook<<<pb, PREP_BLOCK, 0, c->compute>>>(k, int(rank), w, d, n, t.kx, t.ky,
                                                          t.kz, t.rmu, t.imu, t.k3);
        MR_LAUNCHED(prep_textbook);
        rc = launch_textbook(c, p, kernel, t, n, o, err);
      }
    }
    if (rc < 0)
      return rc;
  }
  return mr_cuda_download(p->dev, out, sums, batch * nvox * sizeof(float2), err);
}

// Forward sums: every sample a target, the voxels streaming past as
// sources in chunks, one image at a time.
int forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(p->dev);
  int rc = check_sizes(p, err);
  if (rc < 0)
    return rc;
  size_t nvox = p->nvox, m = p->m, rank = size_t(p->opts.rank);
  size_t chunk = nvox < p->opts.chunk ? nvox : p->opts.chunk;
  int nx = int(p->opts.grid[0]), ny = int(p->opts.grid[1]), nz = int(p->opts.grid[2]);
  scratch s(c);
  float *k, *points = nullptr;
  float4 *targets;
  float2 *sums, *img;
  rec_float *src;
  if ((rc = s.alloc(&k, m * rank, err)) < 0 || (rc = s.alloc(&targets, m, err)) < 0 ||
      (rc = s.alloc(&sums, p->opts.batch * m, err)) < 0 || (rc = s.alloc(&img, chunk, err)) < 0 ||
      (rc = s.alloc(&src, chunk, err)) < 0)
    return rc;
  if ((rc = mr_cuda_upload(p->dev, k, p->k, m * rank * sizeof(float), err)) < 0)
    return rc;
  if (p->voxels != nullptr &&
      ((rc = s.alloc(&points, nvox * rank, err)) < 0 ||
       (rc = mr_cuda_upload(p->dev, points, p->voxels, nvox * rank * sizeof(float), err)) < 0))
    return rc;
  sample_float4<<<blocks_for(m, PREP_BLOCK), PREP_BLOCK, 0, c->compute>>>(k, int(rank), int(m),
                                                                          targets);
  MR_LAUNCHED(sample_float4);
  MR_CU(cudaMemsetAsync(sums, 0, p->opts.batch * m * sizeof(float2), c->compute));
  int block = p->opts.block ? p->opts.block : default_block(MR_FHD_TILED);
  for (size_t b = 0; b < p->opts.batch; b++) {
    for (size_t at = 0; at < nvox; at += chunk) {
      int n = int(nvox - at < chunk ? nvox - at : chunk);
      rc = mr_cuda_upload(p->dev, img, image + b * nvox + at, size_t(n) * sizeof(float2), err);
      if (rc < 0)
        return rc;
      prep_voxels<<<blocks_for(size_t(n), PREP_BLOCK), PREP_BLOCK, 0, c->compute>>>(
          points, int(rank), nx, ny, nz, (long long)at, n, img, src);
      MR_LAUNCHED(prep_voxels);
      if ((rc = launch_tiled<-1>(c, block, targets, int(m), src, n, sums + b * m, err)) < 0)
        return rc;
    }
  }
  return mr_cuda_download(p->dev, out, sums, p->opts.batch * m * sizeof(float2), err);
}

void free_voxels(mr_fhd_plan *p) {
  fhd_cuda *f = static_cast<fhd_cuda *>(p->impl);
  mr_on_worker(p->dev, nullptr, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    mr_cuda_free(c, f->soa);
    mr_cuda_free(c, f->voxels4);
    return 0;
  });
  f->soa = nullptr;
  f->voxels4 = nullptr;
}

} // namespace

int mr_fhd_cuda_create(mr_fhd_plan *p, mr_err *err) {
  p->impl = calloc(1, sizeof(fhd_cuda));
  return p->impl != nullptr ? 0 : mr_err_set(err, MR_ENOMEM, "fhd: out of memory");
}

void mr_fhd_cuda_forget(mr_fhd_plan *p) { free_voxels(p); }

int mr_fhd_cuda_adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                        mr_err *err) {
  if (p->m == 0) { // nothing to sum: zeros, without a trip to the GPU
    size_t batch = data != nullptr ? p->opts.batch : 1;
    memset(out, 0, batch * p->nvox * sizeof *out);
    return 0;
  }
  return mr_on_worker(p->dev, err, [&] { return adjoint(p, data, weights, out, err); });
}

int mr_fhd_cuda_forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err) {
  if (p->m == 0)
    return 0;
  return mr_on_worker(p->dev, err, [&] { return forward(p, image, out, err); });
}

void mr_fhd_cuda_destroy(mr_fhd_plan *p) {
  if (p->impl == nullptr)
    return;
  free_voxels(p);
  free(p->impl);
  p->impl = nullptr;
}
