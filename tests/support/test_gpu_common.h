/* Shared by the tests of gpu/: one program per module runs either its CPU
 * group (against double-precision references) or, given --cuda, its CUDA
 * group (against the CPU backend), skipping with exit 77 when no GPU is
 * usable. */
#ifndef MR_TEST_GPU_COMMON_H
#define MR_TEST_GPU_COMMON_H

#include <complex.h>
#include <stddef.h>

#include "buf.h"
#include "cfloat.h"
#include "device.h"
#include "pool.h"
#include "test_err.h"

/* Creates the pool for the group argv asks for: "none" for the CPU group,
 * "all" for --cuda (exits 77 with a message when it finds no GPU). Returns
 * 1 for the CUDA group, 0 for the CPU group. */
int gpu_test_init(int argc, char **argv);
void gpu_test_fini(void);

mr_pool *gpu_test_pool(void);
mr_device *gpu_test_cpu(void);
/* The first GPU (CUDA group only). */
mr_device *gpu_test_gpu(void);

/* The CPU device of a fresh pool of `threads` CPU threads (a test of a
 * split that must not depend on the thread count), and its end. */
mr_device *gpu_test_cpu_pool(int threads, mr_pool **pool);
void gpu_test_cpu_pool_end(mr_pool *pool, mr_device *cpu);

/* Uniform random complex samples in [-1, 1]^2, reproducible per seed. */
void gpu_test_random(mr_cfloat *x, size_t n, unsigned seed);

/* A device buffer holding a copy of host[0..bytes); fails the test on error. */
mr_buf *gpu_test_upload(mr_device *dev, const void *host, size_t bytes);
/* Copies a buffer back into a fresh malloc'd host array the caller frees. */
void *gpu_test_download(const mr_buf *buf);

/* Asserts rc == 0, printing the call's line when not (call passes TERR). */
#define GPU_OK(call)                                                                               \
  do {                                                                                             \
    int gpu_ok_rc_ = (call);                                                                       \
    if (gpu_ok_rc_ != 0)                                                                           \
      fail_msg("%s = %d: %s", #call, gpu_ok_rc_, mr_test_last_error());                            \
  } while (0)

#endif
