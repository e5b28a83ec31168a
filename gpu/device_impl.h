/* Internal: what a device is made of. C and C++ see the same accessors; the
 * struct itself is for the C files that build and dispatch on devices. */
#ifndef MR_GPU_DEVICE_IMPL_H
#define MR_GPU_DEVICE_IMPL_H

#include "cpu_threads.h"
#include "device.h"
#include "pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_cuda_ctx;

/* The GPU's CUDA state (NULL for the CPU); used on its worker only. */
struct mr_cuda_ctx *mr_device_cuda(const mr_device *dev);

/* The pool's CPU threads (any device may use them for host-side loops). */
mr_cpu_threads *mr_device_threads(const mr_device *dev);

#ifdef __cplusplus
}

#else
#include <stdatomic.h>

#include "worker.h"

struct mr_device {
  mr_pool *pool;
  int ordinal;                /* CUDA device number; -1 for the CPU */
  atomic_int load;            /* sessions placed; changed under the pool lock */
  mr_worker *worker;          /* GPU only */
  struct mr_cuda_ctx *cuda;   /* GPU only; created on the worker */
  mr_cpu_threads *threads;    /* the pool's, shared */
};

/* Fills the pool-independent fields of a CPU device's info. */
void mr_device_cpu_info(mr_device *dev, mr_device_info *info);
#endif

#endif
