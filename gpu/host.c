#include <stdlib.h>

#include "error.h"
#include "fail.h"
#include "host_impl.h"

/* A cache line, and enough for every SIMD width FFTW uses. */
#define ALIGNMENT 64

int mr_host_alloc(mr_device *dev, size_t bytes, void **out) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_host_cuda_alloc(dev, bytes, out);
#else
  (void)dev;
#endif
  size_t rounded = (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
  *out = aligned_alloc(ALIGNMENT, rounded > 0 ? rounded : ALIGNMENT);
  if (*out == NULL)
    return mr_fail(MR_ENOMEM, "host memory: cannot allocate %zu bytes", bytes);
  return 0;
}

void mr_host_free(mr_device *dev, void *p) {
  if (p == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev)) {
    mr_host_cuda_free(dev, p);
    return;
  }
#else
  (void)dev;
#endif
  free(p);
}
