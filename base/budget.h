/* The server-wide memory budget for the big allocations a client's data
 * decides the size of: k-space buffers, image arrays, the gadgets' full-size
 * scratch (mr_budget_alloc), the compute backend's host buffers (gpu/core/buf.c
 * on the CPU, gpu/core/host.c). Each is counted before it is allocated, so the
 * sessions together never hold more than the budget in these: a header that
 * announces a 16k x 16k x 512-coil matrix gets a clear error instead of an
 * out-of-memory kill that would take every other scan with it. */
#ifndef MR_BASE_BUDGET_H
#define MR_BASE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the budget in bytes (0: unlimited, the default). Call at start-up. */
void mr_budget_set(uint64_t bytes);
uint64_t mr_budget_limit(void);
/* What the sessions hold now (spare memory not included). */
uint64_t mr_budget_used(void);

/* Reserves bytes, or fails with MR_ELIMIT and a line in err (which may be
 * NULL) naming what was asked for, the budget and what is in use. When it
 * does not fit while spare memory is held, the reclaim function frees that
 * first and the reservation is tried again. */
int mr_budget_take(uint64_t bytes, const char *what, mr_err *err);

/* Spare memory: what a cache keeps after its users freed it (the k-space
 * block cache, the pinned host blocks of gpu/core/host_cuda.cu). It counts against the budget like the sessions' memory, but
 * gives way to it: kept only while it fits beside what is in use, and freed
 * (through the reclaim function) when a reservation would not fit.
 * mr_budget_keep_spare returns 0 when `bytes` may be kept, MR_ELIMIT when
 * the block must be freed instead; mr_budget_drop_spare returns them. */
int mr_budget_keep_spare(uint64_t bytes);
void mr_budget_drop_spare(uint64_t bytes);
uint64_t mr_budget_spare(void);
/* Registers a function that frees all of one cache's spare memory (calling
 * mr_budget_drop_spare), called on whatever thread a reservation does not
 * fit; each cache registers its own (once is enough: registering the same
 * function again does nothing), at most MR_BUDGET_RECLAIMERS in all. */
#define MR_BUDGET_RECLAIMERS 4
void mr_budget_add_reclaim(void (*reclaim)(void));
/* Returns bytes taken earlier. */
void mr_budget_give(uint64_t bytes);

/* malloc(bytes) counted against the budget; NULL with a line in err (may
 * be NULL) when over the budget (MR_ELIMIT) or out of memory (MR_ENOMEM).
 * The caller takes the memory and frees it with mr_budget_free(p, bytes). */
void *mr_budget_alloc(size_t bytes, const char *what, mr_err *err);
/* Frees p from mr_budget_alloc(bytes, ...) and returns its bytes; NULL is
 * ignored. */
void mr_budget_free(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
