/* Internal: the GPU side of host.h. */
#ifndef MR_GPU_HOST_IMPL_H
#define MR_GPU_HOST_IMPL_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

int mr_host_cuda_alloc(mr_device *dev, size_t bytes, void **out, mr_err *err);
void mr_host_cuda_free(mr_device *dev, void *p);
/* The pinned blocks kept for reuse (and their bytes, when asked): tests. */
int mr_host_cuda_kept(size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
