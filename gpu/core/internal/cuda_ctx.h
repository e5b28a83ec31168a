/* Internal: the CUDA side of a GPU device, as the C files see it. Defined
 * in cuda_ctx.cu; built only with CUDA (MR_HAVE_CUDA). Every function but
 * mr_cuda_count and mr_cuda_mem_free runs on the device's worker thread. */
#ifndef MR_GPU_CUDA_CTX_H
#define MR_GPU_CUDA_CTX_H

#include <stddef.h>

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_cuda_ctx;

/* Number of CUDA devices; 0 with a reason in why when there is no usable
 * driver or device (never an error: the pool then runs on the CPU). */
int mr_cuda_count(char *why, size_t whylen);

/* On a lane's worker of dev: makes dev current on this thread and creates
 * the lane's streams, library handles, memory pool settings and staging
 * buffers; its streams' priority by the lane's rank: rank 0 at the
 * device's highest, each next rank one step lower down to the lowest (the
 * real-time lanes are the first ones, device.h). */
int mr_cuda_ctx_create(mr_device *dev, int rank, struct mr_cuda_ctx **out, mr_err *err);
void mr_cuda_ctx_destroy(struct mr_cuda_ctx *ctx);

/* Waits for all work queued on the device; returns the first error. */
int mr_cuda_ctx_sync(struct mr_cuda_ctx *ctx, mr_err *err);

/* 1 when ctx's cuFFT plan cache holds a plan of this shape (n slowest
 * first, as cuFFT takes it), else 0: for tests of the lanes' caches. */
int mr_cuda_fft_plan_cached(const struct mr_cuda_ctx *ctx, int rank, const long long n[3],
                            long long batch);

/* Fills the CUDA fields of info (not load). */
int mr_cuda_ctx_info(struct mr_cuda_ctx *ctx, mr_device_info *info, mr_err *err);

/* Free memory of a device now (cudaMemGetInfo). Unlike the functions
 * above it may run on any thread: it makes the device current there and
 * does not wait for queued work. */
int mr_cuda_mem_free(int ordinal, size_t *free_bytes, mr_err *err);

/* mr_device_time() for a GPU, on its worker. */
int mr_cuda_ctx_time(struct mr_cuda_ctx *ctx, mr_device *dev, mr_device_task task, void *arg,
                     int warmup, int reps, double *ms, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
