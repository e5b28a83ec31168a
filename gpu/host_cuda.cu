// Pinned host memory, allocated on the device's worker (where its CUDA
// context is current) and portable to every GPU of the process.
#include "cuda_internal.cuh"
#include "host_impl.h"

int mr_host_cuda_alloc(mr_device *dev, size_t bytes, void **out) {
  return mr_on_worker(dev, [&] {
    cudaError_t e = cudaHostAlloc(out, bytes > 0 ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      *out = nullptr;
      mr_cuda_fail(e, "cudaHostAlloc", __FILE__, __LINE__);
      // Host memory, not device memory, ran out.
      return mr_fail(MR_ENOMEM, "cannot pin %zu bytes of host memory: %s", bytes,
                     cudaGetErrorName(e));
    }
    return 0;
  });
}

void mr_host_cuda_free(mr_device *dev, void *p) {
  mr_on_worker(dev, [&] {
    cudaFreeHost(p);
    return 0;
  });
}
