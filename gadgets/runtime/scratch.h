/* A host array a gadget keeps from buffer to buffer and grows when a
 * buffer needs more, so that a stream of same-sized buffers (real-time
 * frames) allocates nothing per buffer. Kept arrays count against the
 * server's memory budget (budget.h) for as long as they are kept. */
#ifndef MR_GADGETS_SCRATCH_H
#define MR_GADGETS_SCRATCH_H

#include <stddef.h>

#include "device.h"
#include "error.h"

typedef struct mr_scratch {
  void *p;
  size_t bytes;
  mr_device *pinned; /* p is pinned host memory for this GPU (host.h), or NULL */
} mr_scratch;

/* Makes s->p hold at least bytes; the contents are lost when it grows.
 * 0, or MR_ENOMEM / the budget's error with a line naming `what` in err
 * (may be NULL); s is unchanged then. */
int mr_scratch_grow(mr_scratch *s, size_t bytes, const char *what, mr_err *err);

/* The same in host memory pinned for dev when it is a GPU (an array that
 * goes up to it every buffer: the copy engine reads it directly), else as
 * mr_scratch_grow. */
int mr_scratch_grow_pinned(mr_scratch *s, mr_device *dev, size_t bytes, const char *what,
                           mr_err *err);

/* Frees the array (a zeroed scratch is fine) and zeroes s. */
void mr_scratch_free(mr_scratch *s);

#endif
