/* A host array a gadget keeps from buffer to buffer and grows when a
 * buffer needs more, so that a stream of same-sized buffers (real-time
 * frames) allocates nothing per buffer. Kept arrays count against the
 * server's memory budget (budget.h) for as long as they are kept. */
#ifndef MR_GADGETS_SCRATCH_H
#define MR_GADGETS_SCRATCH_H

#include <stddef.h>

#include "error.h"

typedef struct mr_scratch {
  void *p;
  size_t bytes;
} mr_scratch;

/* Makes s->p hold at least bytes; the contents are lost when it grows.
 * 0, or MR_ENOMEM / the budget's error with a line naming `what` in err
 * (may be NULL); s is unchanged then. */
int mr_scratch_grow(mr_scratch *s, size_t bytes, const char *what, mr_err *err);

/* Frees the array (a zeroed scratch is fine) and zeroes s. */
void mr_scratch_free(mr_scratch *s);

#endif
