#include "scratch.h"

#include "budget.h"
#include "error.h"

int mr_scratch_grow(mr_scratch *s, size_t bytes, const char *what, mr_err *err) {
  if (bytes <= s->bytes && s->p != NULL)
    return 0;
  void *p = mr_budget_alloc(bytes > 0 ? bytes : 1, what, err);
  if (p == NULL)
    return err != NULL && err->code < 0 ? err->code : MR_ENOMEM;
  mr_budget_free(s->p, s->bytes);
  s->p = p;
  s->bytes = bytes > 0 ? bytes : 1;
  return 0;
}

void mr_scratch_free(mr_scratch *s) {
  mr_budget_free(s->p, s->bytes);
  s->p = NULL;
  s->bytes = 0;
}
