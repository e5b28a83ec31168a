#include <string.h>

#include "block_impl.h"
#include "error.h"
#include "vec.h"

static int run(mr_device *dev, const mr_block_args *b, mr_err *err) {
  if (b->batch < 1)
    return mr_err_set(err, MR_EINVAL, "block: batch %zu", b->batch);
  for (int d = 0; d < 3; d++) {
    if (b->src_dims[d] < 1 || b->dst_dims[d] < 1)
      return mr_err_set(err, MR_EINVAL, "block: dimension %d of size 0", d);
    if (b->src_at[d] > b->src_dims[d] || b->extent[d] > b->src_dims[d] - b->src_at[d] ||
        b->dst_at[d] > b->dst_dims[d] || b->extent[d] > b->dst_dims[d] - b->dst_at[d])
      return mr_err_set(err, MR_EINVAL, "block: dimension %d: %zu at %zu of %zu into %zu at %zu", d,
                        b->extent[d], b->src_at[d], b->src_dims[d], b->dst_dims[d], b->dst_at[d]);
  }
  if (b->extent[0] == 0 || b->extent[1] == 0 || b->extent[2] == 0)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_block_cuda_copy(dev, b, err);
#endif
  return mr_block_cpu_copy(dev, b);
}

int mr_block_copy(mr_device *dev, size_t batch, const mr_cfloat *src, const size_t src_dims[3],
                  const size_t src_at[3], mr_cfloat *dst, const size_t dst_dims[3],
                  const size_t dst_at[3], const size_t extent[3], mr_err *err) {
  mr_block_args b = {.batch = batch, .src = src, .dst = dst};
  memcpy(b.src_dims, src_dims, sizeof b.src_dims);
  memcpy(b.src_at, src_at, sizeof b.src_at);
  memcpy(b.dst_dims, dst_dims, sizeof b.dst_dims);
  memcpy(b.dst_at, dst_at, sizeof b.dst_at);
  memcpy(b.extent, extent, sizeof b.extent);
  return run(dev, &b, err);
}

int mr_block_crop_center(mr_device *dev, size_t batch, const mr_cfloat *src,
                         const size_t src_dims[3], mr_cfloat *dst, const size_t dst_dims[3],
                         mr_err *err) {
  mr_block_args b = {.batch = batch, .src = src, .dst = dst};
  for (int d = 0; d < 3; d++) {
    if (dst_dims[d] > src_dims[d])
      return mr_err_set(err, MR_EINVAL, "block crop: dimension %d grows from %zu to %zu", d,
                        src_dims[d], dst_dims[d]);
    b.src_dims[d] = src_dims[d];
    b.dst_dims[d] = b.extent[d] = dst_dims[d];
    b.src_at[d] = src_dims[d] / 2 - dst_dims[d] / 2;
  }
  return run(dev, &b, err);
}

int mr_block_pad_center(mr_device *dev, size_t batch, const mr_cfloat *src,
                        const size_t src_dims[3], mr_cfloat *dst, const size_t dst_dims[3],
                        mr_err *err) {
  mr_block_args b = {.batch = batch, .src = src, .dst = dst};
  for (int d = 0; d < 3; d++) {
    if (dst_dims[d] < src_dims[d])
      return mr_err_set(err, MR_EINVAL, "block pad: dimension %d shrinks from %zu to %zu", d,
                        src_dims[d], dst_dims[d]);
    b.dst_dims[d] = dst_dims[d];
    b.src_dims[d] = b.extent[d] = src_dims[d];
    b.dst_at[d] = dst_dims[d] / 2 - src_dims[d] / 2;
  }
  int rc = mr_vec_zero(dev, batch * dst_dims[0] * dst_dims[1] * dst_dims[2], dst, err);
  return rc < 0 ? rc : run(dev, &b, err);
}
