// ESPIRiT's device steps on a GPU (espirit_impl.h): the box copy, the
// calibration matrices (a thread per element), the lag
// sums (a thread per coil pair and lag), and the per-pixel eigenvectors: a
// warp per pixel, G held transposed in shared memory (conflict-free reads
// of a column), each lane owning rows lane, lane + 32.
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

// One thread per (pair, lag); the grid was zeroed before.
__global__ void lags(const float2 *p, int ku, int kv, int nc, size_t nu, size_t nv, float scale,
                     float2 *grid) {
  int nlu = 2 * ku - 1, nlv = 2 * kv - 1, pairs = nc * (nc + 1) / 2;
  size_t N = size_t(ku) * kv * nc, npix = nu * nv;
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
    size_t u = size_t(long(nu / 2) + du), v = size_t(long(nv / 2) + dv);
    grid[size_t(pair) * npix + v * nu + u] = make_float2(sum.x * scale, sum.y * scale);
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

// Per warp: gt [nc][nc] (gt[j * nc + i] = G_ij), v [nc], w [nc].
__global__ void eigen(const float2 *grid, int nc, size_t nu, size_t npix, const float2 *rot,
                      float crop, float2 *maps, size_t ustride, size_t vstride, size_t cstride) {
  extern __shared__ float2 shared[];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  size_t per = size_t(nc) * nc + 2 * size_t(nc);
  float2 *gt = shared + warp * per, *v = gt + nc * nc, *w = v + nc;
  for (size_t px = size_t(blockIdx.x) * warps + warp; px < npix; px += size_t(gridDim.x) * warps) {
    for (int e = lane; e < nc * nc; e += 32) {
      int i = e % nc, j = e / nc;
      float2 x = i <= j ? grid[(size_t(i) * (2 * nc + 1 - i) / 2 + (j - i)) * npix + px]
                        : grid[(size_t(j) * (2 * nc + 1 - j) / 2 + (i - j)) * npix + px];
      gt[j * nc + i] = i <= j ? x : make_float2(x.x, -x.y);
    }
    __syncwarp();
    // the start: G's column of the largest diagonal element (first on ties)
    float best = -1e30f;
    int start = 0;
    for (int i = lane; i < nc; i += 32) {
      float d = gt[i * nc + i].x;
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
    for (int i = lane; i < nc; i += 32)
      v[i] = gt[start * nc + i];
    __syncwarp();
    float lambda = 0;
    for (int it = 0; it <= MR_ESPIRIT_POWER; it++) {
      float part = 0;
      for (int i = lane; i < nc; i += 32)
        part += v[i].x * v[i].x + v[i].y * v[i].y;
      float norm = sqrtf(warp_sum(part));
      if (!(norm > 0)) {
        lambda = 0;
        break;
      }
      for (int i = lane; i < nc; i += 32)
        v[i] = make_float2(v[i].x / norm, v[i].y / norm);
      __syncwarp();
      for (int i = lane; i < nc; i += 32) {
        float2 sum = make_float2(0, 0);
        for (int j = 0; j < nc; j++) {
          float2 t = cmul(gt[j * nc + i], v[j]);
          sum.x += t.x;
          sum.y += t.y;
        }
        w[i] = sum;
      }
      __syncwarp();
      if (it == MR_ESPIRIT_POWER) {
        part = 0;
        for (int i = lane; i < nc; i += 32)
          part += v[i].x * w[i].x + v[i].y * w[i].y; // Re(conj(v) w)
        lambda = warp_sum(part);
        break;
      }
      for (int i = lane; i < nc; i += 32)
        v[i] = w[i];
      __syncwarp();
    }
    float zr = 0, zi = 0;
    for (int i = lane; i < nc; i += 32) { // z = rot^H v
      zr += rot[i].x * v[i].x + rot[i].y * v[i].y;
      zi += rot[i].x * v[i].y - rot[i].y * v[i].x;
    }
    zr = warp_sum(zr);
    zi = warp_sum(zi);
    float az = sqrtf(zr * zr + zi * zi);
    float2 turn = az > 0 ? make_float2(zr / az, -zi / az) : make_float2(1, 0);
    bool keep = lambda >= crop;
    size_t u = px % nu, vv = px / nu;
    for (int i = lane; i < nc; i += 32)
      maps[i * cstride + u * ustride + vv * vstride] =
          keep ? cmul(v[i], turn) : make_float2(0, 0);
    __syncwarp();
  }
}

} // namespace

int mr_espirit_cuda_extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                            const size_t origin[3], const size_t size[3], size_t ncoils,
                            mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
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
                           const mr_espirit_geom *g, size_t count, mr_cfloat *a) {
  return mr_on_worker(dev, [&] {
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

int mr_espirit_cuda_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g,
                         float scale, mr_cfloat *grid) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t pairs = g->nc * (g->nc + 1) / 2, npix = g->nu * g->nv;
    MR_CU(cudaMemsetAsync(grid, 0, pairs * npix * sizeof(float2), c->compute));
    size_t total = pairs * size_t(2 * g->ku - 1) * size_t(2 * g->kv - 1);
    lags<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(p), g->ku, g->kv, int(g->nc), g->nu, g->nv, scale,
        reinterpret_cast<float2 *>(grid));
    MR_LAUNCHED(lags);
    return 0;
  });
}

int mr_espirit_cuda_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                          const mr_cfloat *rot, float crop, const mr_espirit_out *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t npix = g->nu * g->nv;
    size_t per = (g->nc * g->nc + 2 * g->nc) * sizeof(float2);
    // within the default 48 KiB of shared memory: 4 warps at 32 coils, 1 at 64
    int warps = int((48u << 10) / per);
    warps = warps < 1 ? 1 : warps > 8 ? 8 : warps;
    size_t blocks = (npix + size_t(warps) - 1) / size_t(warps);
    unsigned grid_blocks = unsigned(blocks < 65535u * 16 ? blocks : 65535u * 16);
    eigen<<<grid_blocks, 32 * warps, size_t(warps) * per, c->compute>>>(
        reinterpret_cast<const float2 *>(grid), int(g->nc), g->nu, npix,
        reinterpret_cast<const float2 *>(rot), crop, reinterpret_cast<float2 *>(out->maps),
        out->ustride, out->vstride, out->cstride);
    MR_LAUNCHED(eigen);
    return 0;
  });
}
