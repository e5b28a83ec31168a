/* Copies into memory the CPU will not read again soon (k-space lines
 * gathered in pinned memory for the copy engine): with streaming stores
 * where the CPU has them, so the destination's cache lines are neither
 * read first nor kept, which nearly halves the memory traffic of a large
 * gather. Streaming stores are weakly ordered: call
 * mr_copy_uncached_fence() before another thread or a device reads what
 * was copied. */
#ifndef MR_GADGETS_COPY_UNCACHED_H
#define MR_GADGETS_COPY_UNCACHED_H

#include <stddef.h>

void mr_copy_uncached(void *dst, const void *src, size_t bytes);
void mr_copy_uncached_fence(void);

#endif
