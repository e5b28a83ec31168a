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

__global__ void pass(const float2 *src, float2 *dst, size_t nx, size_t ny, size_t lx, size_t ly,
                     size_t lz, int axis, int inverse, taps_arg f) {
  size_t total = lx * ly * lz;
  size_t stride[3] = {1, nx, nx * ny}, len[3] = {lx, ly, lz};
  size_t n = len[axis], half = n / 2, s = stride[axis];
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t x = i % lx, y = i / lx % ly, z = i / lx / ly;
    size_t pos[3] = {x, y, z};
    size_t m = pos[axis];
    size_t base = x * stride[0] + y * stride[1] + z * stride[2] - m * s;
    float2 acc = make_float2(0, 0);
    if (!inverse) {
      size_t j = m < half ? m : m - half;
      bool low = m < half;
      for (int k = 0; k < f.taps; k++) {
        float c = low ? f.h[k] : ((k & 1) ? -1.0f : 1.0f) * f.h[f.taps - 1 - k];
        float2 v = src[base + ((2 * j + k) % n) * s];
        acc.x += c * v.x;
        acc.y += c * v.y;
      }
    } else {
      for (int k = 0; k < f.taps; k++) {
        size_t d = (m + n * f.taps - k) % n;
        if (d & 1)
          continue;
        float g = ((k & 1) ? -1.0f : 1.0f) * f.h[f.taps - 1 - k];
        float2 lo = src[base + (d / 2) * s], hi = src[base + (half + d / 2) * s];
        acc.x += f.h[k] * lo.x + g * hi.x;
        acc.y += f.h[k] * lo.y + g * hi.y;
      }
    }
    dst[base + m * s] = acc;
  }
}

__global__ void copy(const float2 *src, float2 *dst, size_t nx, size_t ny, size_t nz, size_t lx,
                     size_t ly, size_t lz, size_t sx, size_t sy, size_t sz) {
  size_t total = lx * ly * lz;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t x = i % lx, y = i / lx % ly, z = i / lx / ly;
    size_t tx = (x + sx) % nx, ty = (y + sy) % ny, tz = (z + sz) % nz;
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
    size_t total = len[0] * len[1] * len[2];
    pass<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src), reinterpret_cast<float2 *>(dst), dims[0], dims[1],
        len[0], len[1], len[2], axis, inverse, t);
    MR_LAUNCHED(pass);
    return 0;
  });
}

int mr_wavelet_cuda_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                         const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = len[0] * len[1] * len[2];
    copy<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src), reinterpret_cast<float2 *>(dst), dims[0], dims[1],
        dims[2], len[0], len[1], len[2], shift[0] % dims[0], shift[1] % dims[1],
        shift[2] % dims[2]);
    MR_LAUNCHED(copy);
    return 0;
  });
}
