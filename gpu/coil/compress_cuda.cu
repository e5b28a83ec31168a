// GCC's per-readout-position product on a GPU (compress_impl.h): a thread
// per output sample, neighbouring threads on neighbouring x.
#include "compress_impl.h"
#include "cuda_internal.cuh"

namespace {

__global__ void per_x(const float2 *m, size_t nc, size_t nv, size_t nl, size_t nro,
                      const float2 *in, float2 *out) {
  size_t total = nv * nl * nro;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t x = i % nro, l = i / nro % nl, v = i / nro / nl;
    const float2 *mx = m + x * nc * nc + v * nc;
    float2 sum = make_float2(0, 0);
    for (size_t c = 0; c < nc; c++) {
      float2 a = mx[c], b = in[(c * nl + l) * nro + x];
      sum.x += a.x * b.x - a.y * b.y;
      sum.y += a.x * b.y + a.y * b.x;
    }
    out[i] = sum;
  }
}

} // namespace

int mr_compress_cuda_per_x(mr_device *dev, const mr_cfloat *m, size_t ncoils, size_t nvirtual,
                           size_t nlines, size_t nro, const mr_cfloat *in, mr_cfloat *out,
                           mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = nvirtual * nlines * nro;
    per_x<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(m), ncoils, nvirtual, nlines, nro,
        reinterpret_cast<const float2 *>(in), reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(per_x);
    return 0;
  });
}
