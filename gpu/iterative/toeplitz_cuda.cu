// The Toeplitz operator's fused passes on a GPU (toeplitz_impl.h): one
// launch each for every coil, where the CPU makes a vec.h call per coil.
// Products are formed as vec_cuda.cu forms them.
#include "cuda_internal.cuh"
#include "toeplitz_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

// The image (n) in the doubled grid (big) at `at`, as block.h centres it.
struct box {
  size_t n[3], big[3], at[3], nvox, nbig;
};

box box_of(const size_t n[3], const size_t big[3]) {
  box b;
  b.nvox = b.nbig = 1;
  for (int d = 0; d < 3; d++) {
    b.n[d] = n[d];
    b.big[d] = big[d];
    b.at[d] = big[d] / 2 - n[d] / 2;
    b.nvox *= n[d];
    b.nbig *= big[d];
  }
  return b;
}

__device__ inline float2 mul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__device__ inline float2 conj_mul(float2 a, float2 b) {
  return make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}

__global__ void expand(size_t count, const float2 *maps, const float2 *x, box g, float2 *work) {
  size_t total = count * g.nbig;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t c = i / g.nbig, j = i % g.nbig;
    // Unsigned: a grid index left of the box wraps past n.
    size_t ix = j % g.big[0] - g.at[0], iy = j / g.big[0] % g.big[1] - g.at[1],
           iz = j / g.big[0] / g.big[1] - g.at[2];
    float2 v = make_float2(0, 0);
    if (ix < g.n[0] && iy < g.n[1] && iz < g.n[2]) {
      size_t vox = (iz * g.n[1] + iy) * g.n[0] + ix;
      if (maps != nullptr)
        v = mul(maps[c * g.nvox + vox], x[vox]);
      else
        v = x[c * g.nvox + vox];
    }
    work[i] = v;
  }
}

__global__ void kernel_mul(size_t count, size_t nbig, const float2 *kernel, float2 *work) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count * nbig;
       i += size_t(gridDim.x) * blockDim.x)
    work[i] = mul(work[i], kernel[i % nbig]);
}

__global__ void checkerboard(box g, float scale, float2 *k) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < g.nbig;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t parity = i % g.big[0] + i / g.big[0] % g.big[1] + i / g.big[0] / g.big[1];
    float f = parity % 2 ? -scale : scale;
    k[i] = make_float2(f * k[i].x, f * k[i].y);
  }
}

// With maps: y = sum_c conj(S_c) crop(in_c) (+ lambda x), one image. Without:
// y_c = crop(in_c) (+ lambda x_c) for each of the count images.
__global__ void gather(size_t count, const float2 *maps, const float2 *in, box g,
                       const float2 *x, float lambda, float2 *y) {
  size_t images = maps != nullptr ? 1 : count;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < images * g.nvox;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t v = i % g.nvox, image = i / g.nvox;
    size_t ix = v % g.n[0], iy = v / g.n[0] % g.n[1], iz = v / g.n[0] / g.n[1];
    size_t src = ((iz + g.at[2]) * g.big[1] + iy + g.at[1]) * g.big[0] + ix + g.at[0];
    float2 s = in[image * g.nbig + src];
    if (maps != nullptr) {
      s = conj_mul(maps[v], s);
      for (size_t c = 1; c < count; c++) {
        float2 t = conj_mul(maps[c * g.nvox + v], in[c * g.nbig + src]);
        s.x += t.x;
        s.y += t.y;
      }
    }
    if (x != nullptr) {
      float2 w = x[i];
      s.x += lambda * w.x;
      s.y += lambda * w.y;
    }
    y[i] = s;
  }
}

} // namespace

int mr_toeplitz_cuda_expand(mr_device *dev, size_t count, const mr_cfloat *maps, const mr_cfloat *x,
                            const size_t n[3], const size_t big[3], mr_cfloat *work, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    box g = box_of(n, big);
    expand<<<mr_grid_for(c, count * g.nbig, BLOCK), BLOCK, 0, c->compute>>>(
        count, reinterpret_cast<const float2 *>(maps), reinterpret_cast<const float2 *>(x), g,
        reinterpret_cast<float2 *>(work));
    MR_LAUNCHED(expand);
    return 0;
  });
}

int mr_toeplitz_cuda_kernel_mul(mr_device *dev, size_t count, size_t nbig, const mr_cfloat *kernel,
                                mr_cfloat *work, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    kernel_mul<<<mr_grid_for(c, count * nbig, BLOCK), BLOCK, 0, c->compute>>>(
        count, nbig, reinterpret_cast<const float2 *>(kernel), reinterpret_cast<float2 *>(work));
    MR_LAUNCHED(kernel_mul);
    return 0;
  });
}

int mr_toeplitz_cuda_checkerboard(mr_device *dev, const size_t big[3], float scale, mr_cfloat *k,
                                  mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    box g = box_of(big, big);
    checkerboard<<<mr_grid_for(c, g.nbig, BLOCK), BLOCK, 0, c->compute>>>(
        g, scale, reinterpret_cast<float2 *>(k));
    MR_LAUNCHED(checkerboard);
    return 0;
  });
}

int mr_toeplitz_cuda_gather(mr_device *dev, size_t count, const mr_cfloat *maps,
                            const mr_cfloat *in, const size_t n[3], const size_t big[3],
                            const mr_cfloat *x, float lambda, mr_cfloat *y, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    box g = box_of(n, big);
    size_t images = maps != nullptr ? 1 : count;
    gather<<<mr_grid_for(c, images * g.nvox, BLOCK), BLOCK, 0, c->compute>>>(
        count, reinterpret_cast<const float2 *>(maps), reinterpret_cast<const float2 *>(in), g,
        reinterpret_cast<const float2 *>(x), lambda, reinterpret_cast<float2 *>(y));
    MR_LAUNCHED(gather);
    return 0;
  });
}
