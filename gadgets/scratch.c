#include "scratch.h"

#include <stdlib.h>

#include "error.h"

int mr_scratch_grow(mr_scratch *s, size_t bytes) {
  if (bytes <= s->bytes && s->p != NULL)
    return 0;
  void *p = malloc(bytes > 0 ? bytes : 1);
  if (p == NULL)
    return MR_ENOMEM;
  free(s->p);
  s->p = p;
  s->bytes = bytes;
  return 0;
}

void mr_scratch_free(mr_scratch *s) {
  free(s->p);
  s->p = NULL;
  s->bytes = 0;
}
