/* A host array a gadget keeps from buffer to buffer and grows when a
 * buffer needs more, so that a stream of same-sized buffers (real-time
 * frames) allocates nothing per buffer. */
#ifndef MR_GADGETS_SCRATCH_H
#define MR_GADGETS_SCRATCH_H

#include <stddef.h>

typedef struct mr_scratch {
  void *p;
  size_t bytes;
} mr_scratch;

/* Makes s->p hold at least bytes; the contents are lost when it grows.
 * 0 or MR_ENOMEM (s unchanged then). */
int mr_scratch_grow(mr_scratch *s, size_t bytes);

/* Frees the array (a zeroed scratch is fine) and zeroes s. */
void mr_scratch_free(mr_scratch *s);

#endif
