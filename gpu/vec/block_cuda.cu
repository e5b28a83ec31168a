// Block copies on a GPU: one warp per row of the block (a contiguous run in
// x), so reads and writes are coalesced whatever the offsets.
#include "block_impl.h"
#include "cuda_internal.cuh"

namespace {

constexpr unsigned WARPS = 8;

struct geometry {
  size_t sd[3], sa[3], dd[3], da[3], ext[3];
};

__global__ void copy_rows(const float2 *src, float2 *dst, geometry g, size_t rows) {
  unsigned lane = threadIdx.x % 32;
  for (size_t row = blockIdx.x * size_t(WARPS) + threadIdx.x / 32; row < rows;
       row += size_t(gridDim.x) * WARPS) {
    size_t y = row % g.ext[1], z = row / g.ext[1] % g.ext[2], item = row / g.ext[1] / g.ext[2];
    const float2 *s =
        src + ((item * g.sd[2] + g.sa[2] + z) * g.sd[1] + g.sa[1] + y) * g.sd[0] + g.sa[0];
    float2 *d = dst + ((item * g.dd[2] + g.da[2] + z) * g.dd[1] + g.da[1] + y) * g.dd[0] + g.da[0];
    for (size_t x = lane; x < g.ext[0]; x += 32)
      d[x] = s[x];
  }
}

} // namespace

int mr_block_cuda_copy(mr_device *dev, const mr_block_args *b, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    geometry g;
    for (int i = 0; i < 3; i++) {
      g.sd[i] = b->src_dims[i];
      g.sa[i] = b->src_at[i];
      g.dd[i] = b->dst_dims[i];
      g.da[i] = b->dst_at[i];
      g.ext[i] = b->extent[i];
    }
    size_t rows = b->batch * b->extent[1] * b->extent[2];
    size_t blocks = (rows + WARPS - 1) / WARPS;
    unsigned cap = mr_grid_for(c, size_t(1) << 40, 32 * WARPS);
    copy_rows<<<unsigned(blocks < cap ? blocks : cap), 32 * WARPS, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(b->src), reinterpret_cast<float2 *>(b->dst), g, rows);
    MR_LAUNCHED(copy_rows);
    return 0;
  });
}
