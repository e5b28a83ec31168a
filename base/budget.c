#include "budget.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic uint64_t limit_bytes;
static _Atomic uint64_t used_bytes;
static _Atomic uint64_t spare_bytes;
/* The caches' reclaim functions, filled in order and never removed. */
static void (*_Atomic reclaimers[MR_BUDGET_RECLAIMERS])(void);

void mr_budget_set(uint64_t bytes) { atomic_store(&limit_bytes, bytes); }
uint64_t mr_budget_limit(void) { return atomic_load(&limit_bytes); }
uint64_t mr_budget_used(void) { return atomic_load(&used_bytes); }

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int mr_budget_take(uint64_t bytes, const char *what, mr_err *err) {
  uint64_t limit = atomic_load(&limit_bytes);
  uint64_t used;
  for (int reclaimed = 0;; reclaimed = 1) {
    used = atomic_fetch_add(&used_bytes, bytes);
    uint64_t spare = atomic_load(&spare_bytes);
    if (limit == 0 || used + spare + bytes <= limit)
      return 0;
    atomic_fetch_sub(&used_bytes, bytes);
    if (reclaimed || spare == 0)
      break;
    for (int i = 0; i < MR_BUDGET_RECLAIMERS; i++) {
      void (*reclaim)(void) = atomic_load(&reclaimers[i]);
      if (reclaim != NULL)
        reclaim();
    }
  }
  return mr_err_set(err, MR_ELIMIT,
                    "memory budget: %s needs %.1f MiB; the server's budget (--memory-budget) is "
                    "%.1f MiB, of which %.1f MiB are in use",
                    what, mib(bytes), mib(limit), mib(used));
}

void mr_budget_give(uint64_t bytes) { atomic_fetch_sub(&used_bytes, bytes); }

int mr_budget_keep_spare(uint64_t bytes) {
  uint64_t limit = atomic_load(&limit_bytes);
  uint64_t spare = atomic_fetch_add(&spare_bytes, bytes);
  if (limit == 0 || atomic_load(&used_bytes) + spare + bytes <= limit)
    return 0;
  atomic_fetch_sub(&spare_bytes, bytes);
  return MR_ELIMIT;
}

void mr_budget_drop_spare(uint64_t bytes) { atomic_fetch_sub(&spare_bytes, bytes); }
uint64_t mr_budget_spare(void) { return atomic_load(&spare_bytes); }
void mr_budget_add_reclaim(void (*reclaim)(void)) {
  for (int i = 0; i < MR_BUDGET_RECLAIMERS; i++) {
    void (*none)(void) = NULL;
    if (atomic_compare_exchange_strong(&reclaimers[i], &none, reclaim) || none == reclaim)
      return;
  }
  abort(); /* more caches than MR_BUDGET_RECLAIMERS: a build-time mistake */
}

void *mr_budget_alloc(size_t bytes, const char *what, mr_err *err) {
  if (mr_budget_take(bytes, what, err) < 0)
    return NULL;
  void *p = malloc(bytes > 0 ? bytes : 1);
  if (p == NULL) {
    mr_budget_give(bytes);
    mr_err_set(err, MR_ENOMEM, "out of memory for %s (%zu bytes)", what, bytes);
  }
  return p;
}

void mr_budget_free(void *p, size_t bytes) {
  if (p == NULL)
    return;
  free(p);
  mr_budget_give(bytes);
}
