// The row scaling of epi.h on a GPU: one thread per element, rows fastest.
#include "cuda_internal.cuh"
#include "epi_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

__global__ void scale_rows(int rows, size_t total, int ld, const float2 *factors, float2 *x) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t row = i % size_t(rows), col = i / size_t(rows);
    float2 f = factors[row], *v = &x[col * size_t(ld) + row];
    float2 w = *v;
    *v = make_float2(f.x * w.x - f.y * w.y, f.x * w.y + f.y * w.x);
  }
}

} // namespace

int mr_epi_cuda_scale_rows(mr_device *dev, int rows, int cols, int ld, const mr_cfloat *factors,
                           mr_cfloat *x, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = size_t(rows) * size_t(cols);
    scale_rows<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        rows, total, ld, reinterpret_cast<const float2 *>(factors),
        reinterpret_cast<float2 *>(x));
    MR_LAUNCHED(scale_rows);
    return 0;
  });
}
