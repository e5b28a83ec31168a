/* Internal: a checked block copy, as both backends take it. */
#ifndef MR_GPU_BLOCK_IMPL_H
#define MR_GPU_BLOCK_IMPL_H

#include "block.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_block_args {
  size_t batch;
  const mr_cfloat *src;
  size_t src_dims[3], src_at[3];
  mr_cfloat *dst;
  size_t dst_dims[3], dst_at[3];
  size_t extent[3];
} mr_block_args;

int mr_block_cpu_copy(mr_device *dev, const mr_block_args *b);
int mr_block_cuda_copy(mr_device *dev, const mr_block_args *b, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
