#include <string.h>

#include "block_impl.h"
#include "device_impl.h"

/* Rows per thread hand-out. */
#define GRAIN 64

/* One item per row (item, z, y) of the extent: a contiguous run in x. */
static void copy_rows(void *arg, size_t begin, size_t end) {
  const mr_block_args *b = arg;
  size_t ey = b->extent[1], ez = b->extent[2];
  const size_t *sd = b->src_dims, *dd = b->dst_dims;
  for (size_t row = begin; row < end; row++) {
    size_t y = row % ey, z = row / ey % ez, item = row / (ey * ez);
    size_t s = ((item * sd[2] + b->src_at[2] + z) * sd[1] + b->src_at[1] + y) * sd[0] +
               b->src_at[0];
    size_t d = ((item * dd[2] + b->dst_at[2] + z) * dd[1] + b->dst_at[1] + y) * dd[0] +
               b->dst_at[0];
    memcpy(b->dst + d, b->src + s, b->extent[0] * sizeof *b->dst);
  }
}

int mr_block_cpu_copy(mr_device *dev, const mr_block_args *b) {
  mr_cpu_parallel_for(mr_device_threads(dev), b->batch * b->extent[1] * b->extent[2],
                      GRAIN, copy_rows, (void *)b);
  return 0;
}
