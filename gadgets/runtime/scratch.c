#include "scratch.h"

#include "budget.h"
#include "error.h"
#include "host.h"

int mr_scratch_grow(mr_scratch *s, size_t bytes, const char *what, mr_err *err) {
  return mr_scratch_grow_pinned(s, NULL, bytes, what, err);
}

int mr_scratch_grow_pinned(mr_scratch *s, mr_device *dev, size_t bytes, const char *what,
                           mr_err *err) {
  mr_device *pin = dev != NULL && mr_device_is_gpu(dev) ? dev : NULL;
  if (bytes <= s->bytes && s->p != NULL && s->pinned == pin)
    return 0;
  if (bytes == 0)
    bytes = 1;
  void *p = NULL;
  if (pin == NULL) {
    p = mr_budget_alloc(bytes, what, err);
    if (p == NULL)
      return mr_err_code(err, MR_ENOMEM);
  } else { /* mr_host_alloc counts it against the budget */
    mr_err why = {0};
    int rc = mr_host_alloc(pin, bytes, &p, &why);
    if (rc < 0)
      return mr_err_set(err, rc, "no pinned host memory for %s: %s", what,
                        mr_err_text(&why, rc));
  }
  mr_scratch_free(s);
  s->p = p;
  s->bytes = bytes;
  s->pinned = pin;
  return 0;
}

void mr_scratch_free(mr_scratch *s) {
  if (s->pinned != NULL) {
    mr_host_free(s->pinned, s->p);
  } else {
    mr_budget_free(s->p, s->bytes);
  }
  s->p = NULL;
  s->bytes = 0;
  s->pinned = NULL;
}
