/* Internal: a solve's arguments and result (cg.c), and the GPU's loop,
 * which keeps the step lengths on the device (cg_cuda.cu). */
#ifndef MR_GPU_CG_IMPL_H
#define MR_GPU_CG_IMPL_H

#include "cg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Below this relative residual a float solve has nothing left to gain: a
 * step that breaks down there (p^H A p non-positive or non-finite, a step
 * length or residual that overflows) is rounding noise - A's rounding-level
 * eigenvalues, or p underflowing - not an indefinite A, and the solve ends
 * with the iterate it has. */
#define MR_CG_ROUNDING_RESIDUAL 1e-5

/* count systems of n values (mr_cg_solve: one, through an adapter). */
typedef struct mr_cg_job {
  size_t n, count;
  mr_cg_batch_operator apply;
  void *op;
  const mr_cfloat *b;
  mr_cfloat *x;
  mr_cg_opts o;
  mr_cg_report report;
} mr_cg_job;

/* MR_ENUMERIC with the line that says which step broke down (what =
 * value) at which iteration, from which residual. */
int mr_cg_breakdown_fail(const char *what, double value, int iteration, double residual,
                         mr_err *err);

/* The whole solve of every system on a GPU, inside a task on its worker:
 * the same recursion as the CPU's, with alpha and beta computed and tested
 * on the device, so the loop queues without waiting for a reduction; the
 * state is read back once at the end (and every 16 iterations, to stop
 * early). */
int mr_cg_cuda_solve(mr_device *dev, mr_cg_job *j, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
