#include <pthread.h>
#include <stdlib.h>

#include "budget.h"
#include "error.h"
#include "host_impl.h"

/* A cache line, and enough for every SIMD width FFTW uses. */
#define ALIGNMENT 64

/* Host memory counts against the server's memory budget (budget.h). The
 * blocks are few and long-lived (host.h), so their sizes, needed to give
 * them back at mr_host_free(), are kept in a short list. */
typedef struct block {
  void *p;
  size_t bytes;
} block;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static block *blocks;
static size_t nblocks, blocks_cap;

static int remember(void *p, size_t bytes) {
  pthread_mutex_lock(&blocks_lock);
  int rc = 0;
  if (nblocks == blocks_cap) {
    size_t cap = blocks_cap > 0 ? 2 * blocks_cap : 16;
    block *b = realloc(blocks, cap * sizeof *b);
    if (b == NULL)
      rc = MR_ENOMEM;
    else
      blocks = b, blocks_cap = cap;
  }
  if (rc == 0)
    blocks[nblocks++] = (block){p, bytes};
  pthread_mutex_unlock(&blocks_lock);
  return rc;
}

/* Forgets p and returns its size. */
static size_t forget(void *p) {
  size_t bytes = 0;
  pthread_mutex_lock(&blocks_lock);
  for (size_t i = 0; i < nblocks; i++) {
    if (blocks[i].p == p) {
      bytes = blocks[i].bytes;
      blocks[i] = blocks[--nblocks];
      break;
    }
  }
  pthread_mutex_unlock(&blocks_lock);
  return bytes;
}

static int allocate(mr_device *dev, size_t bytes, void **out, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_host_cuda_alloc(dev, bytes, out, err);
#else
  (void)dev;
#endif
  size_t rounded = (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
  *out = aligned_alloc(ALIGNMENT, rounded > 0 ? rounded : ALIGNMENT);
  if (*out == NULL)
    return mr_err_set(err, MR_ENOMEM, "host memory: cannot allocate %zu bytes", bytes);
  return 0;
}

static void release(mr_device *dev, void *p) {
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

int mr_host_alloc(mr_device *dev, size_t bytes, void **out, mr_err *err) {
  mr_err e = {0};
  if (mr_budget_take(bytes, "host memory for a compute device", &e) < 0)
    return mr_err_set(err, e.code, "%s", e.msg);
  void *p = NULL;
  int rc = allocate(dev, bytes, &p, err);
  if (rc == 0 && remember(p, bytes) < 0) {
    release(dev, p);
    rc = mr_err_set(err, MR_ENOMEM, "host memory: out of memory");
  }
  if (rc < 0) {
    mr_budget_give(bytes);
    return rc;
  }
  *out = p;
  return 0;
}

void mr_host_free(mr_device *dev, void *p) {
  if (p == NULL)
    return;
  size_t bytes = forget(p);
  /* Given back first: a pinned block the cache keeps is spare memory then,
   * which must fit beside what the sessions hold without it. */
  mr_budget_give(bytes);
  release(dev, p);
}
