// Wavelet passes on a GPU: one thread per output sample of the region;
// neighbouring threads take neighbouring x, so a pass along y or z reads
// rows, and one along x reads a few cached lines.
#include "cuda_internal.cuh"
#include "wavelet_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

struct taps_arg {
  float h[MR_WAVELET_MAX_TAPS];
  int taps;
};

// The region's geometry: its lengths, and the strides of the full array.
struct region {
  unsigned len[3], stride[3];
};

// One pair of samples along an axis of length n (stride s) from base:
// analysis writes (low j, high j) from TAPS samples from 2j on; synthesis
// writes samples 2j and 2j + 1 from the TAPS / 2 low and high coefficients
// at j, j - 1, ... (periodic). g: the high-pass taps.
template <int TAPS>
__device__ inline void pair(const float2 *src, float2 *dst, unsigned base, unsigned j,
                            unsigned n, unsigned s, int inverse, const float *h, const float *g) {
  unsigned half = n / 2;
  if (!inverse) {
    float2 lo = make_float2(0, 0), hi = make_float2(0, 0);
#pragma unroll
    for (int k = 0; k < TAPS; k++) {
      unsigned at = 2 * j + k;
      float2 v = src[base + (at < n ? at : at - n) * s];
      lo.x += h[k] * v.x;
      lo.y += h[k] * v.y;
      hi.x += g[k] * v.x;
      hi.y += g[k] * v.y;
    }
    dst[base + j * s] = lo;
    dst[base + (half + j) * s] = hi;
    return;
  }
  float2 even = make_float2(0, 0), odd = make_float2(0, 0);
#pragma unroll
  for (int t = 0; t < TAPS / 2; t++) {
    unsigned at = j >= unsigned(t) ? j - t : j + half - t;
    float2 lo = src[base + at * s], hi = src[base + (half + at) * s];
    even.x += h[2 * t] * lo.x + g[2 * t] * hi.x;
    even.y += h[2 * t] * lo.y + g[2 * t] * hi.y;
    odd.x += h[2 * t + 1] * lo.x + g[2 * t + 1] * hi.x;
    odd.y += h[2 * t + 1] * lo.y + g[2 * t + 1] * hi.y;
  }
  dst[base + 2 * j * s] = even;
  dst[base + (2 * j + 1) * s] = odd;
}

template <int TAPS> __device__ inline void high_pass(const float *h, float *g) {
#pragma unroll
  for (int k = 0; k < TAPS; k++)
    g[k] = ((k & 1) ? -1.0f : 1.0f) * h[TAPS - 1 - k];
}

// Every pair of a region along `axis` (lengths len, strides stride), one
// per thread of a grid-stride loop over `first` + `step` multiples.
template <int TAPS>
__device__ inline void pass_region(const float2 *src, float2 *dst, const unsigned len[3],
                                   const unsigned stride[3], int axis, int inverse,
                                   const float *h, const float *g, unsigned first,
                                   unsigned step) {
  int b = axis == 0 ? 1 : 0, c = axis == 2 ? 1 : 2;
  unsigned half = len[axis] / 2, total = half * len[b] * len[c];
  for (unsigned i = first; i < total; i += step) {
    unsigned j = i % half, rest = i / half;
    unsigned base = (rest % len[b]) * stride[b] + (rest / len[b]) * stride[c];
    pair<TAPS>(src, dst, base, j, len[axis], stride[axis], inverse, h, g);
  }
}

// One pass over a region of global memory.
template <int TAPS>
__global__ void pass(const float2 *src, float2 *dst, region r, int axis, int inverse,
                     taps_arg f) {
  float g[TAPS];
  high_pass<TAPS>(f.h, g);
  pass_region<TAPS>(src, dst, r.len, r.stride, axis, inverse, f.h, g,
                    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// The small levels (wavelet_impl.h: MR_WAVELET_SMALL samples at most) in
// one block, in shared memory: the region of the first of them loaded,
// each level's passes between two shared arrays (ending in the first, as
// level() in wavelet.c does in global memory), the region written back.
struct small_levels {
  unsigned len[MR_WAVELET_MAX_SMALL_LEVELS + 1][3];
  int levels;
};

template <int TAPS>
__global__ void small(float2 *c, unsigned nx, unsigned ny, small_levels sl, int inverse,
                      taps_arg f) {
  __shared__ float2 a[MR_WAVELET_SMALL], t[MR_WAVELET_SMALL];
  float g[TAPS];
  high_pass<TAPS>(f.h, g);
  const unsigned *l0 = sl.len[0];
  unsigned st[3] = {1, l0[0], l0[0] * l0[1]}, total = l0[0] * l0[1] * l0[2];
  for (unsigned i = threadIdx.x; i < total; i += blockDim.x) {
    unsigned x = i % l0[0], y = i / l0[0] % l0[1], z = i / l0[0] / l0[1];
    a[i] = c[(z * ny + y) * nx + x];
  }
  __syncthreads();
  for (int k = 0; k < sl.levels; k++) {
    int l = inverse ? sl.levels - 1 - k : k;
    const unsigned *len = sl.len[l], *next = sl.len[l + 1];
    float2 *cur = a, *other = t;
    for (int i = 0; i < 3; i++) {
      int axis = inverse ? 2 - i : i;
      if (next[axis] == len[axis])
        continue;
      pass_region<TAPS>(cur, other, len, st, axis, inverse, f.h, g, threadIdx.x, blockDim.x);
      __syncthreads();
      float2 *swap = cur;
      cur = other;
      other = swap;
    }
    if (cur != a) {
      unsigned n = len[0] * len[1] * len[2];
      for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned x = i % len[0], y = i / len[0] % len[1], z = i / len[0] / len[1];
        unsigned at = x + st[1] * y + st[2] * z;
        a[at] = t[at];
      }
      __syncthreads();
    }
  }
  for (unsigned i = threadIdx.x; i < total; i += blockDim.x) {
    unsigned x = i % l0[0], y = i / l0[0] % l0[1], z = i / l0[0] / l0[1];
    c[(z * ny + y) * nx + x] = a[i];
  }
}

template <int TAPS>
int launch(mr_cuda_ctx *c, int axis, const float2 *src, float2 *dst, const region &r, int inverse,
           const taps_arg &t) {
  unsigned total = r.len[0] * r.len[1] * r.len[2] / 2;
  pass<TAPS><<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(src, dst, r, axis, inverse,
                                                                      t);
  MR_LAUNCHED(pass);
  return 0;
}

__global__ void copy(const float2 *src, float2 *dst, unsigned nx, unsigned ny, unsigned nz,
                     unsigned lx, unsigned ly, unsigned lz, unsigned sx, unsigned sy, unsigned sz) {
  unsigned total = lx * ly * lz;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    unsigned x = i % lx, y = i / lx % ly, z = i / lx / ly;
    unsigned tx = x + sx < nx ? x + sx : x + sx - nx, ty = y + sy < ny ? y + sy : y + sy - ny,
             tz = z + sz < nz ? z + sz : z + sz - nz;
    dst[(tz * ny + ty) * nx + tx] = src[(z * ny + y) * nx + x];
  }
}

} // namespace

int mr_wavelet_cuda_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                         int inverse, const mr_wavelet_taps *f, const mr_cfloat *src,
                         mr_cfloat *dst) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    taps_arg t;
    for (int k = 0; k < MR_WAVELET_MAX_TAPS; k++)
      t.h[k] = f->h[k];
    t.taps = f->taps;
    region r = {{unsigned(len[0]), unsigned(len[1]), unsigned(len[2])},
                {1, unsigned(dims[0]), unsigned(dims[0] * dims[1])}};
    auto in = reinterpret_cast<const float2 *>(src);
    auto out = reinterpret_cast<float2 *>(dst);
    return f->taps == 4 ? launch<4>(c, axis, in, out, r, inverse, t)
                        : launch<8>(c, axis, in, out, r, inverse, t);
  });
}

int mr_wavelet_cuda_small(mr_device *dev, const size_t dims[3], const size_t len[][3], int levels,
                          int inverse, const mr_wavelet_taps *f, mr_cfloat *c) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *ctx = mr_device_cuda(dev);
    taps_arg t;
    for (int k = 0; k < MR_WAVELET_MAX_TAPS; k++)
      t.h[k] = f->h[k];
    t.taps = f->taps;
    small_levels sl;
    sl.levels = levels;
    for (int l = 0; l <= levels; l++)
      for (int d = 0; d < 3; d++)
        sl.len[l][d] = unsigned(len[l][d]);
    auto x = reinterpret_cast<float2 *>(c);
    if (f->taps == 4)
      small<4><<<1, 512, 0, ctx->compute>>>(x, unsigned(dims[0]), unsigned(dims[1]), sl, inverse, t);
    else
      small<8><<<1, 512, 0, ctx->compute>>>(x, unsigned(dims[0]), unsigned(dims[1]), sl, inverse, t);
    MR_LAUNCHED(small);
    return 0;
  });
}

int mr_wavelet_cuda_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                         const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = len[0] * len[1] * len[2];
    copy<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src), reinterpret_cast<float2 *>(dst), unsigned(dims[0]),
        unsigned(dims[1]), unsigned(dims[2]), unsigned(len[0]), unsigned(len[1]), unsigned(len[2]),
        unsigned(shift[0] % dims[0]), unsigned(shift[1] % dims[1]), unsigned(shift[2] % dims[2]));
    MR_LAUNCHED(copy);
    return 0;
  });
}

namespace {

// One captured copy node with its last three arguments (the shift) set.
int set_copy_shift(cudaGraphExec_t exec, cudaGraphNode_t node, const unsigned s[3]) {
  cudaKernelNodeParams p;
  MR_CU(cudaGraphKernelNodeGetParams(node, &p));
  if (p.func != reinterpret_cast<void *>(copy))
    return mr_fail(MR_EDEVICE, "wavelet: the graph node to shift is not the copy kernel");
  void *args[11];
  for (int i = 0; i < 8; i++)
    args[i] = p.kernelParams[i];
  unsigned sx = s[0], sy = s[1], sz = s[2];
  args[8] = &sx;
  args[9] = &sy;
  args[10] = &sz;
  p.kernelParams = args;
  p.extra = nullptr;
  MR_CU(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  return 0;
}

} // namespace

int mr_wavelet_cuda_set_shifts(void *exec, void *forward, void *back, const size_t dims[3],
                               const size_t shift[3]) {
  unsigned f[3], b[3];
  for (int d = 0; d < 3; d++) {
    size_t s = shift[d] % dims[d];
    f[d] = unsigned(s);
    b[d] = unsigned((dims[d] - s) % dims[d]); // as mr_wavelet_adjoint shifts back
  }
  auto e = static_cast<cudaGraphExec_t>(exec);
  int rc = set_copy_shift(e, static_cast<cudaGraphNode_t>(forward), f);
  return rc == 0 ? set_copy_shift(e, static_cast<cudaGraphNode_t>(back), b) : rc;
}
