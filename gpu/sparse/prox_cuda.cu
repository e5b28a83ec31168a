// Proximal steps on a GPU: grid-stride loops, one sample per thread.
#include <cstring>

#include "cuda_internal.cuh"
#include "prox_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

__global__ void soft(float2 *x, unsigned nx, unsigned ny, size_t total, unsigned kx, unsigned ky,
                     unsigned kz, float t) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned px = unsigned(i % nx);
    size_t row = i / nx;
    unsigned py = unsigned(row % ny), pz = unsigned(row / ny);
    if (px < kx && py < ky && pz < kz)
      continue;
    float2 v = x[i];
    float a = sqrtf(v.x * v.x + v.y * v.y);
    float f = a > t ? 1.0f - t / a : 0.0f;
    x[i] = make_float2(v.x * f, v.y * f);
  }
}

__global__ void momentum(size_t n, float beta, const float2 *x, float2 *prev, float2 *z) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i], p = prev[i];
    z[i] = make_float2(v.x + beta * (v.x - p.x), v.y + beta * (v.y - p.y));
    prev[i] = v;
  }
}

// out[0]: the peak's bits (non-negative floats order like them); out[1]:
// non-zero when a sample is not finite.
__global__ void peak(size_t n, const float2 *x, unsigned *out) {
  float best = 0;
  unsigned bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i];
    if (!isfinite(v.x) || !isfinite(v.y))
      bad = 1;
    else
      best = fmaxf(best, sqrtf(v.x * v.x + v.y * v.y));
  }
  for (int o = 16; o > 0; o /= 2) {
    best = fmaxf(best, __shfl_down_sync(0xffffffffu, best, o));
    bad |= __shfl_down_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&out[0], __float_as_uint(best));
    if (bad)
      atomicOr(&out[1], 1u);
  }
}

struct digits_arg {
  unsigned prefix[MR_PROX_MAX_RANKS];
  int count, shift;
};

// One radix pass (prox_impl.h): a block's histograms in shared memory,
// added into the global ones.
__global__ void digits(size_t n, const float2 *x, digits_arg a, unsigned *counts) {
  __shared__ unsigned h[MR_PROX_MAX_RANKS * 256];
  for (int b = threadIdx.x; b < a.count * 256; b += blockDim.x)
    h[b] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i];
    unsigned key = __float_as_uint(sqrtf(v.x * v.x + v.y * v.y));
    for (int r = 0; r < a.count; r++)
      if (a.shift == 24 || (key >> (a.shift + 8)) == (a.prefix[r] >> (a.shift + 8)))
        atomicAdd(&h[r * 256 + ((key >> a.shift) & 255)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < a.count * 256; b += blockDim.x)
    if (h[b] != 0)
      atomicAdd(&counts[b], h[b]);
}

} // namespace

int mr_prox_cuda_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t,
                      mr_cfloat *x, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = dims[0] * dims[1] * dims[2];
    soft<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<float2 *>(x), unsigned(dims[0]), unsigned(dims[1]), total,
        unsigned(keep[0]), unsigned(keep[1]), unsigned(keep[2]), t);
    MR_LAUNCHED(soft);
    return 0;
  });
}

int mr_prox_cuda_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x, mr_cfloat *prev,
                          mr_cfloat *z, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    momentum<<<mr_grid_for(c, n, BLOCK), BLOCK, 0, c->compute>>>(
        n, beta, reinterpret_cast<const float2 *>(x), reinterpret_cast<float2 *>(prev),
        reinterpret_cast<float2 *>(z));
    MR_LAUNCHED(momentum);
    return 0;
  });
}

int mr_prox_cuda_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *result, int *finite,
                      mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    unsigned *d = nullptr, h[2] = {0, 0};
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&d), sizeof h, err);
    if (rc < 0)
      return rc;
    cudaError_t e = cudaMemsetAsync(d, 0, sizeof h, c->compute);
    if (e == cudaSuccess) {
      peak<<<mr_grid_for(c, n, BLOCK), BLOCK, 0, c->compute>>>(
          n, reinterpret_cast<const float2 *>(x), d);
      e = cudaGetLastError();
    }
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, c->compute);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(c->compute);
    mr_cuda_free(c, d);
    if (e != cudaSuccess)
      return mr_cuda_fail(e, "prox peak", __FILE__, __LINE__, err);
    std::memcpy(result, &h[0], sizeof *result);
    *finite = h[1] == 0;
    return 0;
  });
}

int mr_prox_cuda_digits(mr_device *dev, size_t n, const mr_cfloat *x, int count,
                        const unsigned *prefix, int shift, unsigned *counts, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t bytes = size_t(count) * 256 * sizeof(unsigned);
    unsigned *d = nullptr;
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&d), bytes, err);
    if (rc < 0)
      return rc;
    digits_arg a;
    for (int r = 0; r < MR_PROX_MAX_RANKS; r++)
      a.prefix[r] = r < count ? prefix[r] : 0;
    a.count = count;
    a.shift = shift;
    cudaError_t e = cudaMemsetAsync(d, 0, bytes, c->compute);
    if (e == cudaSuccess) {
      digits<<<mr_grid_for(c, n, BLOCK), BLOCK, 0, c->compute>>>(
          n, reinterpret_cast<const float2 *>(x), a, d);
      e = cudaGetLastError();
    }
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(counts, d, bytes, cudaMemcpyDeviceToHost, c->compute);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(c->compute);
    mr_cuda_free(c, d);
    return e == cudaSuccess ? 0 : mr_cuda_fail(e, "prox digits", __FILE__, __LINE__, err);
  });
}

int mr_prox_cuda_set_beta(void *exec, void *node, float beta, mr_err *err) {
  auto n = static_cast<cudaGraphNode_t>(node);
  cudaKernelNodeParams p;
  MR_CU(cudaGraphKernelNodeGetParams(n, &p));
  if (p.func != reinterpret_cast<void *>(momentum))
    return mr_err_set(err, MR_EDEVICE, "prox: the graph node for beta is not the momentum kernel");
  void *args[5] = {p.kernelParams[0], &beta, p.kernelParams[2], p.kernelParams[3],
                   p.kernelParams[4]};
  p.kernelParams = args;
  p.extra = nullptr;
  MR_CU(cudaGraphExecKernelNodeSetParams(static_cast<cudaGraphExec_t>(exec), n, &p));
  return 0;
}
