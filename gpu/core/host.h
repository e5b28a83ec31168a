/* Host memory for arrays a GPU reads or fills often.
 *
 * On a GPU device this is page-locked (pinned) memory, usable with every GPU
 * of the process: uploads from it and downloads into it, the _host calls of
 * fft.h and coil.h included, go straight to the copy engine instead of
 * through a staging copy, several times faster than pageable memory. On the
 * CPU device it is plain 64-byte-aligned memory. Pinned memory is a scarce
 * system resource, and pinning is slow (and stalls every GPU lane): freed
 * pinned blocks are kept in a process-wide cache (at most 512 blocks,
 * 8 GiB) and handed out again to requests they fit, so buffers of one shape
 * may come and go per slice; kept blocks are the memory budget's spare
 * memory (budget.h), freed when a reservation needs their room. */
#ifndef MR_GPU_HOST_H
#define MR_GPU_HOST_H

#include <stddef.h>

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates `bytes` of host memory suited to dev; the caller takes *out
 * and frees it with mr_host_free() on the same device. MR_ENOMEM when the
 * system cannot provide it. */
int mr_host_alloc(mr_device *dev, size_t bytes, void **out, mr_err *err);

/* Frees memory from mr_host_alloc(dev, ...). NULL is ignored. */
void mr_host_free(mr_device *dev, void *p);

#ifdef __cplusplus
}
#endif

#endif
