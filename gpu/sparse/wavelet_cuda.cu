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

taps_arg taps_of(const mr_wavelet_taps *f) {
  taps_arg t;
  for (int k = 0; k < MR_WAVELET_MAX_TAPS; k++)
    t.h[k] = f->h[k];
  t.taps = f->taps;
  return t;
}

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

// Complex soft thresholding (prox.h's mr_prox_soft, one sample).
__device__ inline float2 shrink(float2 v, float t) {
  float a = sqrtf(v.x * v.x + v.y * v.y), f = a > t ? 1.0f - t / a : 0.0f;
  return make_float2(v.x * f, v.y * f);
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
                      taps_arg f, float thresh) {
  __shared__ float2 a[MR_WAVELET_SMALL], t[MR_WAVELET_SMALL];
  float g[TAPS];
  high_pass<TAPS>(f.h, g);
  const unsigned *l0 = sl.len[0], *coarse = sl.len[sl.levels];
  unsigned st[3] = {1, l0[0], l0[0] * l0[1]}, total = l0[0] * l0[1] * l0[2];
  for (unsigned i = threadIdx.x; i < total; i += blockDim.x) {
    unsigned x = i % l0[0], y = i / l0[0] % l0[1], z = i / l0[0] / l0[1];
    float2 v = c[(z * ny + y) * nx + x];
    bool kept = x < coarse[0] && y < coarse[1] && z < coarse[2];
    a[i] = inverse && !kept ? shrink(v, thresh) : v;
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
           const taps_arg &t, mr_err *err) {
  unsigned total = r.len[0] * r.len[1] * r.len[2] / 2;
  pass<TAPS><<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(src, dst, r, axis, inverse,
                                                                      t);
  MR_LAUNCHED(pass);
  return 0;
}

// A cyclic shift (wavelet.h), the last argument of every kernel that
// applies one, so that FISTA's graph can set it (mr_wavelet_cuda_set_shifts).
struct shift3 {
  unsigned s[3];
};

__global__ void copy(const float2 *src, float2 *dst, unsigned nx, unsigned ny, unsigned nz,
                     unsigned lx, unsigned ly, unsigned lz, shift3 sh) {
  unsigned total = lx * ly * lz, sx = sh.s[0], sy = sh.s[1], sz = sh.s[2];
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    unsigned x = i % lx, y = i / lx % ly, z = i / lx / ly;
    unsigned tx = x + sx < nx ? x + sx : x + sx - nx, ty = y + sy < ny ? y + sy : y + sy - ny,
             tz = z + sz < nz ? z + sz : z + sz - nz;
    dst[(tz * ny + ty) * nx + tx] = src[(z * ny + y) * nx + x];
  }
}


// A 2D level in one launch (wavelet_impl.h): tiles of TILE x TILE output
// pairs, the input tile with its halo in shared memory, the pass along x
// into a second shared tile, the pass along y from there.
constexpr int TILE = 8;

// A 2D level's geometry: the full array's row length and height (its
// strides, and the shift's period at level 0) and half the region.
struct plane {
  unsigned nx, ny, hx, hy;
};

__device__ inline unsigned wrap(unsigned v, unsigned n) { return v >= n ? v - n : v; }

// The index of region sample (y, x) in an array seen shifted: sample j of
// the shifted image is sample (j - shift) mod n of the array.
__device__ inline unsigned at(const plane &p, unsigned y, unsigned x, int shifted, shift3 s) {
  if (shifted) {
    y = wrap(y + p.ny - s.s[1], p.ny);
    x = wrap(x + p.nx - s.s[0], p.nx);
  }
  return y * p.nx + x;
}

template <int TAPS>
__global__ void analyse2d(const float2 *in, float2 *c, float2 *lo, plane p, taps_arg f,
                          int shifted, shift3 s) {
  constexpr int IN = 2 * TILE + TAPS - 2;
  __shared__ float2 tile[IN][IN], mid[IN][2 * TILE];
  float g[TAPS];
  high_pass<TAPS>(f.h, g);
  unsigned nx = 2 * p.hx, ny = 2 * p.hy, jx0 = blockIdx.x * TILE, jy0 = blockIdx.y * TILE;
  for (int i = threadIdx.x; i < IN * IN; i += blockDim.x) {
    int r = i / IN, q = i % IN;
    tile[r][q] = in[at(p, (2 * jy0 + r) % ny, (2 * jx0 + q) % nx, shifted, s)];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < IN * TILE; i += blockDim.x) {
    int r = i / TILE, j = i % TILE;
    float2 a = make_float2(0, 0), b = make_float2(0, 0);
#pragma unroll
    for (int k = 0; k < TAPS; k++) {
      float2 v = tile[r][2 * j + k];
      a.x += f.h[k] * v.x;
      a.y += f.h[k] * v.y;
      b.x += g[k] * v.x;
      b.y += g[k] * v.y;
    }
    mid[r][j] = a;
    mid[r][TILE + j] = b;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < TILE * 2 * TILE; i += blockDim.x) {
    int j = i / (2 * TILE), q = i % (2 * TILE);
    unsigned jy = jy0 + j, jx = jx0 + q % TILE;
    if (jy >= p.hy || jx >= p.hx)
      continue;
    float2 a = make_float2(0, 0), b = make_float2(0, 0);
#pragma unroll
    for (int k = 0; k < TAPS; k++) {
      float2 v = mid[2 * j + k][q];
      a.x += f.h[k] * v.x;
      a.y += f.h[k] * v.y;
      b.x += g[k] * v.x;
      b.y += g[k] * v.y;
    }
    unsigned x = q < TILE ? jx : p.hx + jx;
    if (q < TILE)
      lo[jy * p.nx + x] = a; // the low band, for the next level
    else
      c[jy * p.nx + x] = a;
    c[(p.hy + jy) * p.nx + x] = b;
  }
}

// With prev (not null) the output x is not written: FISTA's momentum
// takes it instead, z = x + beta (x - prev), prev = x (prox.h).
template <int TAPS>
__global__ void synthesise2d(const float2 *lo, const float2 *c, float2 *out, plane p, taps_arg f,
                             float thresh, float beta, float2 *prev, float2 *z, int shifted,
                             shift3 s) {
  constexpr int E = TAPS / 2 - 1, CN = TILE + E;
  __shared__ float2 coef[2][2][CN][CN], mid[2][2 * TILE][CN];
  float g[TAPS];
  high_pass<TAPS>(f.h, g);
  unsigned jx0 = blockIdx.x * TILE, jy0 = blockIdx.y * TILE;
  for (int i = threadIdx.x; i < 4 * CN * CN; i += blockDim.x) {
    int band = i / (CN * CN), r = i / CN % CN, q = i % CN, by = band >> 1, bx = band & 1;
    unsigned y = (jy0 + p.hy - E + r) % p.hy, x = (jx0 + p.hx - E + q) % p.hx;
    coef[by][bx][r][q] = band == 0 ? lo[y * p.nx + x]
                                   : shrink(c[(y + by * p.hy) * p.nx + x + bx * p.hx], thresh);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * 2 * TILE * CN; i += blockDim.x) {
    int bx = i / (2 * TILE * CN), rr = i / CN % (2 * TILE), q = i % CN, j = rr / 2, par = rr & 1;
    float2 acc = make_float2(0, 0);
#pragma unroll
    for (int t = 0; t < TAPS / 2; t++) {
      float2 a = coef[0][bx][j + E - t][q], b = coef[1][bx][j + E - t][q];
      acc.x += f.h[2 * t + par] * a.x + g[2 * t + par] * b.x;
      acc.y += f.h[2 * t + par] * a.y + g[2 * t + par] * b.y;
    }
    mid[bx][rr][q] = acc;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * TILE * 2 * TILE; i += blockDim.x) {
    int rr = i / (2 * TILE), ss = i % (2 * TILE), j = ss / 2, par = ss & 1;
    if (jy0 + rr / 2 >= p.hy || jx0 + j >= p.hx)
      continue;
    float2 acc = make_float2(0, 0);
#pragma unroll
    for (int t = 0; t < TAPS / 2; t++) {
      float2 a = mid[0][rr][j + E - t], b = mid[1][rr][j + E - t];
      acc.x += f.h[2 * t + par] * a.x + g[2 * t + par] * b.x;
      acc.y += f.h[2 * t + par] * a.y + g[2 * t + par] * b.y;
    }
    unsigned o = at(p, 2 * jy0 + rr, 2 * jx0 + ss, shifted, s);
    if (prev == nullptr) {
      out[o] = acc;
    } else {
      float2 q = prev[o];
      z[o] = make_float2(acc.x + beta * (acc.x - q.x), acc.y + beta * (acc.y - q.y));
      prev[o] = acc;
    }
  }
}

template <int TAPS>
int launch2d(mr_cuda_ctx *c, int inverse, const plane &p, const taps_arg &t, float thresh,
             const mr_wavelet_momentum *m, int shifted, shift3 s, const float2 *lo_in, float2 *coef,
             float2 *lo_out, mr_err *err) {
  dim3 grid((p.hx + TILE - 1) / TILE, (p.hy + TILE - 1) / TILE);
  float beta = m != nullptr ? m->beta : 0.0f;
  auto prev = m != nullptr ? reinterpret_cast<float2 *>(m->prev) : nullptr;
  auto z = m != nullptr ? reinterpret_cast<float2 *>(m->z) : nullptr;
  if (inverse)
    synthesise2d<TAPS><<<grid, 256, 0, c->compute>>>(lo_in, coef, lo_out, p, t, thresh, beta, prev,
                                                     z, shifted, s);
  else
    analyse2d<TAPS><<<grid, 256, 0, c->compute>>>(lo_in, coef, lo_out, p, t, shifted, s);
  MR_LAUNCHED(level2d);
  return 0;
}

} // namespace

int mr_wavelet_cuda_level2d(mr_device *dev, const size_t dims[3], const size_t len[3], int inverse,
                            const mr_wavelet_taps *f, const size_t *shift, float thresh,
                            const mr_wavelet_momentum *m, const mr_cfloat *lo_in, mr_cfloat *c,
                            mr_cfloat *lo_out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *ctx = mr_device_cuda(dev);
    taps_arg t = taps_of(f);
    plane p = {unsigned(dims[0]), unsigned(dims[1]), unsigned(len[0] / 2), unsigned(len[1] / 2)};
    shift3 s = {{0, 0, 0}};
    if (shift != nullptr)
      for (int d = 0; d < 3; d++)
        s.s[d] = unsigned(shift[d] % dims[d]);
    auto in = reinterpret_cast<const float2 *>(lo_in);
    auto co = reinterpret_cast<float2 *>(c);
    auto out = reinterpret_cast<float2 *>(lo_out);
    int shifted = shift != nullptr;
    return f->taps == 4 ? launch2d<4>(ctx, inverse, p, t, thresh, m, shifted, s, in, co, out, err)
                        : launch2d<8>(ctx, inverse, p, t, thresh, m, shifted, s, in, co, out, err);
  });
}

namespace {
} // namespace

int mr_wavelet_cuda_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                         int inverse, const mr_wavelet_taps *f, const mr_cfloat *src,
                         mr_cfloat *dst, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    taps_arg t = taps_of(f);
    region r = {{unsigned(len[0]), unsigned(len[1]), unsigned(len[2])},
                {1, unsigned(dims[0]), unsigned(dims[0] * dims[1])}};
    auto in = reinterpret_cast<const float2 *>(src);
    auto out = reinterpret_cast<float2 *>(dst);
    return f->taps == 4 ? launch<4>(c, axis, in, out, r, inverse, t, err)
                        : launch<8>(c, axis, in, out, r, inverse, t, err);
  });
}

int mr_wavelet_cuda_small(mr_device *dev, const size_t dims[3], const size_t len[][3], int levels,
                          int inverse, const mr_wavelet_taps *f, float thresh, mr_cfloat *c,
                          mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *ctx = mr_device_cuda(dev);
    taps_arg t = taps_of(f);
    small_levels sl;
    sl.levels = levels;
    for (int l = 0; l <= levels; l++)
      for (int d = 0; d < 3; d++)
        sl.len[l][d] = unsigned(len[l][d]);
    auto x = reinterpret_cast<float2 *>(c);
    if (f->taps == 4)
      small<4><<<1, 512, 0, ctx->compute>>>(x, unsigned(dims[0]), unsigned(dims[1]), sl, inverse, t,
                                            thresh);
    else
      small<8><<<1, 512, 0, ctx->compute>>>(x, unsigned(dims[0]), unsigned(dims[1]), sl, inverse, t,
                                            thresh);
    MR_LAUNCHED(small);
    return 0;
  });
}

int mr_wavelet_cuda_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                         const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = len[0] * len[1] * len[2];
    copy<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src), reinterpret_cast<float2 *>(dst), unsigned(dims[0]),
        unsigned(dims[1]), unsigned(dims[2]), unsigned(len[0]), unsigned(len[1]), unsigned(len[2]),
        shift3{{unsigned(shift[0] % dims[0]), unsigned(shift[1] % dims[1]),
                unsigned(shift[2] % dims[2])}});
    MR_LAUNCHED(copy);
    return 0;
  });
}

namespace {

// Sets the shift (the last argument) of a captured node that applies one:
// the copy (value copy_value, the copy's own sense of the shift) or a 2D
// level at level 0 (value, the shift of the image the transform sees),
// and a synthesis's beta (its momentum's; unused without one). Both at
// once: a node's parameters are read from the captured graph, so a second
// call would undo the first.
int set_node(cudaGraphExec_t exec, cudaGraphNode_t node, shift3 value, shift3 copy_value,
             float beta, mr_err *err) {
  cudaKernelNodeParams p;
  MR_CU(cudaGraphKernelNodeGetParams(node, &p));
  int count = 0, beta_at = -1;
  if (p.func == reinterpret_cast<void *>(copy)) {
    count = 9;
    value = copy_value;
  } else if (p.func == reinterpret_cast<void *>(analyse2d<4>) ||
             p.func == reinterpret_cast<void *>(analyse2d<8>)) {
    count = 7;
  } else if (p.func == reinterpret_cast<void *>(synthesise2d<4>) ||
             p.func == reinterpret_cast<void *>(synthesise2d<8>)) {
    count = 11;
    beta_at = 6;
  } else {
    return mr_err_set(err, MR_EDEVICE, "wavelet: the graph node to shift applies no shift");
  }
  void *args[11];
  for (int i = 0; i < count - 1; i++)
    args[i] = p.kernelParams[i];
  if (beta_at >= 0)
    args[beta_at] = &beta;
  args[count - 1] = &value;
  p.kernelParams = args;
  p.extra = nullptr;
  MR_CU(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  return 0;
}

} // namespace

int mr_wavelet_cuda_set_shifts(void *exec, void *forward, void *back, const size_t dims[3],
                               const size_t shift[3], float beta, mr_err *err) {
  shift3 f, b;
  for (int d = 0; d < 3; d++) {
    size_t s = shift[d] % dims[d];
    f.s[d] = unsigned(s);
    b.s[d] = unsigned((dims[d] - s) % dims[d]); // as mr_wavelet_adjoint's copy shifts back
  }
  auto e = static_cast<cudaGraphExec_t>(exec);
  int rc = set_node(e, static_cast<cudaGraphNode_t>(forward), f, f, 0, err);
  return rc == 0 ? set_node(e, static_cast<cudaGraphNode_t>(back), f, b, beta, err) : rc;
}
