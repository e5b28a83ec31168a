// ESPIRiT's device steps on a GPU (espirit_impl.h): the box copy, the
// calibration matrices (a thread per element), the lag sums (a thread per
// coil pair and lag), G's direct DFT (along u a thread per output, along v
// a block per image row and group of coil pairs), and the per-pixel
// eigenvectors: a warp per run of pixels, G's rows in the lanes' registers.
#include "cuda_internal.cuh"
#include "espirit_impl.h"

namespace {

__global__ void extract(const float2 *src, size_t s0, size_t s1, size_t s2, size_t s3, size_t o0,
                        size_t o1, size_t o2, size_t n0, size_t n1, size_t n2, size_t total,
                        float2 *out) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t x = i % n0, y = i / n0 % n1, z = i / n0 / n1 % n2, c = i / n0 / n1 / n2;
    out[i] = src[c * s3 + (o0 + x) * s0 + (o1 + y) * s1 + (o2 + z) * s2];
  }
}

// One thread per element of the calibration matrices (espirit_impl.h).
__global__ void calmat(const float2 *cal, size_t cu, size_t cv, int ku, int kv, size_t nc,
                       size_t total, float2 *a) {
  size_t ru = cu - ku + 1, rv = cv - kv + 1, m = ru * rv, N = size_t(ku) * kv * nc;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t q = i % m, col = i / m % N, s = i / m / N;
    size_t qu = q % ru, qv = q / ru, pu = col % ku, pv = col / ku % kv, c = col / ku / kv;
    float2 x = cal[((s * nc + c) * cv + qv + pv) * cu + qu + pu];
    a[i] = make_float2(x.x, -x.y);
  }
}

// One thread per (pair, lag).
__global__ void lags(const float2 *p, int ku, int kv, int nc, float scale, float2 *lag) {
  int nlu = 2 * ku - 1, nlv = 2 * kv - 1, pairs = nc * (nc + 1) / 2;
  size_t N = size_t(ku) * kv * nc;
  int total = pairs * nlu * nlv;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    int du = t % nlu - (ku - 1), dv = t / nlu % nlv - (kv - 1), pair = t / nlu / nlv;
    int i = 0, left = pair;
    while (left >= nc - i) { // the pair's row i and column j >= i
      left -= nc - i;
      i++;
    }
    int j = i + left;
    float2 sum = make_float2(0, 0);
    for (int pv = dv > 0 ? dv : 0; pv < kv && pv - dv < kv; pv++)
      for (int pu = du > 0 ? du : 0; pu < ku && pu - du < ku; pu++) {
        size_t r = (size_t(i) * kv + pv) * ku + pu;
        size_t c = (size_t(j) * kv + (pv - dv)) * ku + (pu - du);
        float2 x = p[r + c * N];
        sum.x += x.x;
        sum.y += x.y;
      }
    lag[t] = make_float2(sum.x * scale, sum.y * scale);
  }
}

__device__ inline float2 twiddle(long d, size_t x, size_t n) {
  float2 t;
  sincospif(2.0f * float(mr_espirit_turn(d, x, n)) / float(n), &t.y, &t.x);
  return t;
}

// The sums along u: a thread per (pair, dv, u).
__global__ void image_rows(const float2 *lag, int ku, int kv, size_t nu, size_t total,
                           float2 *row) {
  int nlu = 2 * ku - 1;
  for (size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x; t < total;
       t += size_t(gridDim.x) * blockDim.x) {
    size_t u = t % nu, line = t / nu; // line: pair nlv + dv
    const float2 *l = lag + line * nlu;
    float2 sum = make_float2(0, 0);
    for (int du = 0; du < nlu; du++) {
      float2 w = twiddle(du - (ku - 1), u, nu), x = l[du];
      sum.x += x.x * w.x - x.y * w.y;
      sum.y += x.x * w.y + x.y * w.x;
    }
    row[t] = sum;
  }
}

constexpr int IMAGE_PAIRS = 16; // coil pairs a block of image_cols

// The sums along v: a block per (v, IMAGE_PAIRS pairs), its threads along u;
// the twiddles of its v in shared memory.
__global__ void image_cols(const float2 *row, int kv, size_t nu, size_t nv, int pairs,
                           float2 *grid) {
  __shared__ float2 tw[31]; // 2 kv - 1 <= 31 (kernel <= 16)
  int nlv = 2 * kv - 1;
  size_t v = blockIdx.x;
  if (int(threadIdx.x) < nlv)
    tw[threadIdx.x] = twiddle(int(threadIdx.x) - (kv - 1), v, nv);
  __syncthreads();
  int p0 = blockIdx.y * IMAGE_PAIRS, p1 = p0 + IMAGE_PAIRS < pairs ? p0 + IMAGE_PAIRS : pairs;
  for (size_t u = threadIdx.x; u < nu; u += blockDim.x)
    for (int pair = p0; pair < p1; pair++) {
      const float2 *r = row + size_t(pair) * nlv * nu + u;
      float2 sum = make_float2(0, 0);
      for (int dv = 0; dv < nlv; dv++) {
        float2 x = r[size_t(dv) * nu], w = tw[dv];
        sum.x += x.x * w.x - x.y * w.y;
        sum.y += x.x * w.y + x.y * w.x;
      }
      grid[(size_t(pair) * nv + v) * nu + u] = sum;
    }
}

__device__ inline float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ inline float2 warp_sum2(float2 x) {
  for (int o = 16; o > 0; o >>= 1) {
    x.x += __shfl_xor_sync(0xffffffffu, x.x, o);
    x.y += __shfl_xor_sync(0xffffffffu, x.y, o);
  }
  return x;
}

constexpr int EIGEN_WARPS = 2; // a block's warps

// Element (i, j) of a pixel's G from the packed upper triangle of a run
// [pair][run] (gs at the pixel).
__device__ inline float2 g_at(const float2 *gs, int run, int nc, int i, int j) {
  if (i <= j)
    return gs[(i * (2 * nc + 1 - i) / 2 + (j - i)) * run];
  float2 x = gs[(j * (2 * nc + 1 - j) / 2 + (i - j)) * run];
  return make_float2(x.x, -x.y);
}

// Scales the lanes' entries v (R each, rows lane + 32 r) to unit norm; the
// norm before (0: left as is).
template <int R> __device__ inline float normalise(float2 (&v)[R]) {
  float part = 0;
#pragma unroll
  for (int r = 0; r < R; r++)
    part += v[r].x * v[r].x + v[r].y * v[r].y;
  float norm = sqrtf(warp_sum(part));
  if (norm > 0)
#pragma unroll
    for (int r = 0; r < R; r++)
      v[r] = make_float2(v[r].x / norm, v[r].y / norm);
  return norm;
}

// A warp per run of consecutive pixels (espirit_impl.h): the run's G
// (packed, [pair][run]) loaded into shared memory at once (coalesced),
// then per pixel each lane holds rows lane + 32 r of G in registers and
// reads v, broadcast, from shared memory. R: rows a lane (nc <= 32 R).
// Per warp in shared memory: v [32 R], then G [pairs][run].
template <int R>
__global__ void eigen(const float2 *grid, int nc, size_t nu, size_t npix, int run,
                      size_t warp_floats, const float2 *rot, float crop, float2 *maps,
                      const float2 *prior, size_t ustride, size_t vstride, size_t cstride) {
  extern __shared__ float2 shared[];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, pairs = nc * (nc + 1) / 2;
  float2 *vs = shared + warp * warp_floats, *gs = vs + 32 * R;
  size_t runs = (npix + size_t(run) - 1) / size_t(run);
  for (size_t q = size_t(blockIdx.x) * EIGEN_WARPS + warp; q < runs;
       q += size_t(gridDim.x) * EIGEN_WARPS) {
    size_t px0 = q * size_t(run);
    int len = npix - px0 < size_t(run) ? int(npix - px0) : run;
    __syncwarp(); // the previous run's reads of gs are done
    for (int e = lane; e < pairs * run; e += 32) {
      int p = e / run, k = e % run;
      gs[e] = k < len ? grid[size_t(p) * npix + px0 + size_t(k)] : make_float2(0, 0);
    }
    __syncwarp();
    float2 v[R];
    bool have = false; // v is the previous pixel's eigenvector (unit)
    for (int k = 0; k < len; k++) {
      size_t px = px0 + size_t(k), at = px % nu * ustride + px / nu * vstride;
      const float2 *gk = gs + k;
      float2 g[R][32 * R];
      float trace = 0;
#pragma unroll
      for (int r = 0; r < R; r++) {
        int i = lane + 32 * r;
#pragma unroll
        for (int j = 0; j < 32 * R; j++)
          g[r][j] = i < nc && j < nc ? g_at(gk, run, nc, i, j) : make_float2(0, 0);
        if (i < nc)
          trace += gk[(i * (2 * nc + 1 - i) / 2) * run].x;
      }
      trace = warp_sum(trace);
      if (!have && prior != nullptr) {
#pragma unroll
        for (int r = 0; r < R; r++) {
          int i = lane + 32 * r;
          v[r] = i < nc ? prior[size_t(i) * cstride + at] : make_float2(0, 0);
        }
        have = normalise<R>(v) > 0;
      }
      if (!have) { // G's column of the largest diagonal element (first on ties)
        float best = -1e30f;
        int start = 0;
#pragma unroll
        for (int r = 0; r < R; r++) {
          int i = lane + 32 * r;
          float d = i < nc ? gk[(i * (2 * nc + 1 - i) / 2) * run].x : -1e30f;
          if (d > best) {
            best = d;
            start = i;
          }
        }
        for (int o = 16; o > 0; o >>= 1) {
          float ob = __shfl_xor_sync(0xffffffffu, best, o);
          int os = __shfl_xor_sync(0xffffffffu, start, o);
          if (ob > best || (ob == best && os < start)) {
            best = ob;
            start = os;
          }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
          int i = lane + 32 * r;
          v[r] = i < nc ? g_at(gk, run, nc, i, start) : make_float2(0, 0);
        }
        have = normalise<R>(v) > 0;
      }
      float lambda = 0;
      for (int it = 0; have && trace >= crop && it < MR_ESPIRIT_POWER; it++) {
#pragma unroll
        for (int r = 0; r < R; r++)
          vs[lane + 32 * r] = v[r];
        __syncwarp();
        float2 w[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
          float2 a = make_float2(0, 0), b = make_float2(0, 0); // even and odd j
#pragma unroll
          for (int j = 0; j < 32 * R; j += 2) {
            float4 x = reinterpret_cast<const float4 *>(vs)[j / 2];
            float2 t = cmul(g[r][j], make_float2(x.x, x.y));
            float2 t1 = cmul(g[r][j + 1], make_float2(x.z, x.w));
            a.x += t.x;
            a.y += t.y;
            b.x += t1.x;
            b.y += t1.y;
          }
          w[r] = make_float2(a.x + b.x, a.y + b.y);
        }
        __syncwarp(); // vs is rewritten next step
        float part = 0;
#pragma unroll
        for (int r = 0; r < R; r++)
          part += v[r].x * w[r].x + v[r].y * w[r].y; // Re(conj(v) w)
        lambda = warp_sum(part);
        float2 parts = make_float2(0, 0); // |w - lambda v|^2, |w|^2
#pragma unroll
        for (int r = 0; r < R; r++) {
          float rx = w[r].x - lambda * v[r].x, ry = w[r].y - lambda * v[r].y;
          parts.x += rx * rx + ry * ry;
          parts.y += w[r].x * w[r].x + w[r].y * w[r].y;
        }
        parts = warp_sum2(parts);
        float nw = sqrtf(parts.y);
        if (!(nw > 0)) {
          lambda = 0;
          break;
        }
#pragma unroll
        for (int r = 0; r < R; r++)
          v[r] = make_float2(w[r].x / nw, w[r].y / nw);
        if (parts.x <= MR_ESPIRIT_RESIDUAL * MR_ESPIRIT_RESIDUAL)
          break;
      }
      float zr = 0, zi = 0;
#pragma unroll
      for (int r = 0; r < R; r++) { // z = rot^H v
        int i = lane + 32 * r;
        if (i < nc) {
          zr += rot[i].x * v[r].x + rot[i].y * v[r].y;
          zi += rot[i].x * v[r].y - rot[i].y * v[r].x;
        }
      }
      zr = warp_sum(zr);
      zi = warp_sum(zi);
      float az = sqrtf(zr * zr + zi * zi);
      float2 turn = az > 0 ? make_float2(zr / az, -zi / az) : make_float2(1, 0);
      bool keep = lambda >= crop;
#pragma unroll
      for (int r = 0; r < R; r++) {
        int i = lane + 32 * r;
        if (i < nc)
          maps[size_t(i) * cstride + at] = keep ? cmul(v[r], turn) : make_float2(0, 0);
      }
    }
  }
}

template <int R>
int launch_eigen(mr_cuda_ctx *c, const mr_cfloat *grid, const mr_espirit_geom *g,
                 const mr_cfloat *rot, float crop, const mr_espirit_out *out, mr_err *err) {
  size_t npix = g->nu * g->nv, pairs = g->nc * (g->nc + 1) / 2, run = mr_espirit_run(g->nc);
  size_t warp_floats = (32 * R + pairs * run + 1) / 2 * 2; // even: vs stays 16-byte aligned
  size_t runs = (npix + run - 1) / run;
  size_t blocks = (runs + EIGEN_WARPS - 1) / EIGEN_WARPS;
  unsigned grid_blocks = unsigned(blocks < 65535u * 16 ? blocks : 65535u * 16);
  eigen<R><<<grid_blocks, 32 * EIGEN_WARPS, EIGEN_WARPS * warp_floats * sizeof(float2),
             c->compute>>>(reinterpret_cast<const float2 *>(grid), int(g->nc), g->nu, npix,
                           int(run), warp_floats, reinterpret_cast<const float2 *>(rot), crop,
                           reinterpret_cast<float2 *>(out->maps),
                           reinterpret_cast<const float2 *>(out->prior), out->ustride,
                           out->vstride, out->cstride);
  MR_LAUNCHED(eigen);
  return 0;
}

} // namespace

int mr_espirit_cuda_extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                            const size_t origin[3], const size_t size[3], size_t ncoils,
                            mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = ncoils * size[0] * size[1] * size[2];
    if (total == 0)
      return 0;
    extract<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src), stride[0], stride[1], stride[2], stride[3],
        origin[0], origin[1], origin[2], size[0], size[1], size[2], total,
        reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(extract);
    return 0;
  });
}

int mr_espirit_cuda_calmat(mr_device *dev, const mr_cfloat *cal, size_t cu, size_t cv,
                           const mr_espirit_geom *g, size_t count, mr_cfloat *a, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = count * (cu - size_t(g->ku) + 1) * (cv - size_t(g->kv) + 1) *
                   size_t(g->ku) * size_t(g->kv) * g->nc;
    if (total == 0)
      return 0;
    calmat<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(cal), cu, cv, g->ku, g->kv, g->nc, total,
        reinterpret_cast<float2 *>(a));
    MR_LAUNCHED(calmat);
    return 0;
  });
}

int mr_espirit_cuda_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g, float scale,
                         mr_cfloat *lag, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t pairs = g->nc * (g->nc + 1) / 2;
    size_t total = pairs * size_t(2 * g->ku - 1) * size_t(2 * g->kv - 1);
    lags<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(p), g->ku, g->kv, int(g->nc), scale,
        reinterpret_cast<float2 *>(lag));
    MR_LAUNCHED(lags);
    return 0;
  });
}

int mr_espirit_cuda_image(mr_device *dev, const mr_cfloat *lag, const mr_espirit_geom *g,
                          mr_cfloat *row, mr_cfloat *grid, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    int pairs = int(g->nc * (g->nc + 1) / 2);
    size_t total = size_t(pairs) * size_t(2 * g->kv - 1) * g->nu;
    image_rows<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(lag), g->ku, g->kv, g->nu, total,
        reinterpret_cast<float2 *>(row));
    MR_LAUNCHED(image_rows);
    unsigned threads = g->nu < 256 ? unsigned((g->nu + 31) / 32 * 32) : 256u;
    threads = threads < 32 ? 32 : threads;
    dim3 blocks(unsigned(g->nv), unsigned((pairs + IMAGE_PAIRS - 1) / IMAGE_PAIRS));
    image_cols<<<blocks, threads, 0, c->compute>>>(reinterpret_cast<const float2 *>(row), g->kv,
                                                   g->nu, g->nv, pairs,
                                                   reinterpret_cast<float2 *>(grid));
    MR_LAUNCHED(image_cols);
    return 0;
  });
}

int mr_espirit_cuda_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                          const mr_cfloat *rot, float crop, const mr_espirit_out *out,
                          mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    // more than 32 coils: G's two rows a lane spill to local memory (slow,
    // still right; compress to 32 first)
    return g->nc <= 32 ? launch_eigen<1>(c, grid, g, rot, crop, out, err)
                       : launch_eigen<2>(c, grid, g, rot, crop, out, err);
  });
}
