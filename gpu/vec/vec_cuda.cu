// Elementwise operations and reductions on a GPU. Reductions accumulate in
// double per thread and block, and the host adds the per-block sums, like
// the CPU backend, so both give the same answer to double rounding.
#include <cstdlib>

#include "cuda_internal.cuh"
#include "vec_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

__global__ void elementwise(mr_vec_kind kind, size_t n, float2 a, const float2 *x,
                            const float2 *y, float2 *out, float *fout) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    switch (kind) {
    case MR_VEC_SCALE: {
      float2 v = out[i];
      out[i] = make_float2(a.x * v.x - a.y * v.y, a.x * v.y + a.y * v.x);
      break;
    }
    case MR_VEC_AXPY: {
      float2 v = x[i], w = out[i];
      out[i] = make_float2(w.x + a.x * v.x - a.y * v.y, w.y + a.x * v.y + a.y * v.x);
      break;
    }
    case MR_VEC_MUL: {
      float2 v = x[i], w = y[i];
      out[i] = make_float2(v.x * w.x - v.y * w.y, v.x * w.y + v.y * w.x);
      break;
    }
    case MR_VEC_CONJ_MUL: {
      float2 v = x[i], w = y[i];
      out[i] = make_float2(v.x * w.x + v.y * w.y, v.x * w.y - v.y * w.x);
      break;
    }
    case MR_VEC_ABS: {
      float2 v = x[i];
      fout[i] = hypotf(v.x, v.y);
      break;
    }
    default:
      break;
    }
  }
}

// One double2 per block: sum |x|^2 (y == nullptr) or sum conj(x) y.
__global__ void reduce(size_t n, const float2 *x, const float2 *y, double2 *partial) {
  double re = 0, im = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i];
    if (y == nullptr) {
      re += double(v.x) * v.x + double(v.y) * v.y;
    } else {
      float2 w = y[i];
      re += double(v.x) * w.x + double(v.y) * w.y;
      im += double(v.x) * w.y - double(v.y) * w.x;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    re += __shfl_down_sync(0xffffffffu, re, offset);
    im += __shfl_down_sync(0xffffffffu, im, offset);
  }
  __shared__ double2 warp_sums[BLOCK / 32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warp_sums[warp] = make_double2(re, im);
  __syncthreads();
  if (threadIdx.x == 0) {
    double2 s = make_double2(0, 0);
    for (unsigned w = 0; w < BLOCK / 32; w++) {
      s.x += warp_sums[w].x;
      s.y += warp_sums[w].y;
    }
    partial[blockIdx.x] = s;
  }
}

int run_reduction(mr_cuda_ctx *c, const mr_vec_args *v, mr_err *err) {
  unsigned blocks = mr_grid_for(c, v->n, BLOCK);
  double2 *partial;
  int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&partial), blocks * sizeof(double2), err);
  if (rc < 0)
    return rc;
  reduce<<<blocks, BLOCK, 0, c->compute>>>(
      v->n, reinterpret_cast<const float2 *>(v->x),
      v->kind == MR_VEC_DOT ? reinterpret_cast<const float2 *>(v->y) : nullptr, partial);
  cudaError_t e = cudaGetLastError();
  double2 *host = static_cast<double2 *>(malloc(blocks * sizeof(double2)));
  if (host == nullptr) {
    mr_cuda_free(c, partial);
    return mr_err_set(err, MR_ENOMEM, "vec: out of memory");
  }
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(host, partial, blocks * sizeof(double2), cudaMemcpyDeviceToHost,
                        c->compute);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(c->compute);
  mr_cuda_free(c, partial);
  double re = 0, im = 0;
  for (unsigned b = 0; e == cudaSuccess && b < blocks; b++) {
    re += host[b].x;
    im += host[b].y;
  }
  free(host);
  if (e != cudaSuccess)
    return mr_cuda_fail(e, "vec reduction", __FILE__, __LINE__, err);
  if (v->kind == MR_VEC_SUMSQ) {
    *v->sum = re;
  } else {
    v->dot->re = float(re);
    v->dot->im = float(im);
  }
  return 0;
}

} // namespace

namespace {

__global__ void crop(const float2 *in, size_t nx, size_t ny, size_t nz, size_t ax, size_t ay,
                     size_t az, float2 *out, size_t mx, size_t my, size_t mz, size_t total) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t x = i % mx, row = i / mx, y = row % my, z = row / my % mz, b = row / my / mz;
    out[i] = in[((b * nz + z + az) * ny + y + ay) * nx + x + ax];
  }
}

} // namespace

int mr_vec_cuda_crop(mr_device *dev, size_t batch, const mr_cfloat *in, const size_t in_dims[3],
                     const size_t at[3], mr_cfloat *out, const size_t out_dims[3], mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = batch * out_dims[0] * out_dims[1] * out_dims[2];
    crop<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(in), in_dims[0], in_dims[1], in_dims[2], at[0], at[1],
        at[2], reinterpret_cast<float2 *>(out), out_dims[0], out_dims[1], out_dims[2], total);
    MR_LAUNCHED(crop);
    return 0;
  });
}

int mr_vec_cuda_run(mr_device *dev, const mr_vec_args *v, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    switch (v->kind) {
    case MR_VEC_COPY:
      if (v->out != v->x)
        MR_CU(cudaMemcpyAsync(v->out, v->x, v->n * sizeof(float2), cudaMemcpyDeviceToDevice,
                              c->compute));
      return 0;
    case MR_VEC_ZERO:
      MR_CU(cudaMemsetAsync(v->out, 0, v->n * sizeof(float2), c->compute));
      return 0;
    case MR_VEC_SUMSQ:
    case MR_VEC_DOT:
      return run_reduction(c, v, err);
    default:
      break;
    }
    float2 a = make_float2(v->alpha.re, v->alpha.im);
    elementwise<<<mr_grid_for(c, v->n, BLOCK), BLOCK, 0, c->compute>>>(
        v->kind, v->n, a, reinterpret_cast<const float2 *>(v->x),
        reinterpret_cast<const float2 *>(v->y), reinterpret_cast<float2 *>(v->out), v->fout);
    MR_LAUNCHED(elementwise);
    return 0;
  });
}
