/* Conjugate gradient for A x = b with A Hermitian positive (semi-)definite,
 * given as a function that applies it: the "find rho" step of Kirk & Hwu
 * Fig. 14.3, with A the normal operator of toeplitz.h. Vectors live on the
 * device the solve runs on (host memory for the CPU); dot products are
 * summed in double (vec.h). */
#ifndef MR_GPU_CG_H
#define MR_GPU_CG_H

#include <stddef.h>

#include "cancel.h"
#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = A x, n values each on the solve's device; returns 0 or MR_E*. */
typedef int (*mr_cg_operator)(void *op, const mr_cfloat *x, mr_cfloat *y, mr_err *err);

typedef struct mr_cg_opts {
  int max_iterations;  /* >= 1 */
  double tolerance;    /* stop once ||b - A x|| <= tolerance ||b||; 0: run
                          every iteration (or until the residual reaches
                          rounding level and the recursion breaks down)
                          and answer with the iterate of smallest residual */
  int warm_start;      /* 0: start from x = 0 (x is overwritten); 1: from
                          the x given, at the cost of one more apply */
  const mr_cancel *cancel; /* asked before every iteration (NULL: never):
                              the solve ends with MR_ECANCELED, x undefined */
  int replay;          /* 1: the operator only queues device work on the
                          solve's stream (no wait for the host, no copy to
                          or from it, no multi-device step), into the same
                          buffers at every call; on a GPU the second
                          iteration is then captured as a CUDA graph and
                          replayed for the later ones (one graph launch a
                          step instead of the operator's launches and FFT
                          executions). A capture that fails leaves every
                          iteration queued as it is. 0: always so */
} mr_cg_opts;

typedef struct mr_cg_report {
  int iterations;      /* applies of A inside the loop */
  double residual;     /* ||b - A x|| / ||b|| as the recursion tracks it,
                          of the x returned */
} mr_cg_report;

/* Solves A x = b on dev (every call of apply runs inside one device task,
 * so a GPU solve queues its whole loop without a hand-off per operation).
 * b == 0 gives x = 0. x is the iterate with the smallest residual. When
 * p^H A p comes out non-positive or non-finite once that residual is at
 * float rounding level (1e-5), the solve ends there with that iterate: an
 * operator that is positive in exact arithmetic gets there on clean data
 * when asked to run every iteration. Before that, MR_ENUMERIC: A is not
 * positive. Borrows b, x and op; report may be NULL. */
int mr_cg_solve(mr_device *dev, size_t n, mr_cg_operator apply, void *op, const mr_cfloat *b,
                mr_cfloat *x, const mr_cg_opts *opts, mr_cg_report *report, mr_err *err);

/* y_i = A x_i for `count` vectors x, y [count][n] on the solve's device. */
typedef int (*mr_cg_batch_operator)(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                                    mr_err *err);

/* Solves `count` independent systems A x_i = b_i (b, x [count][n]) as
 * mr_cg_solve solves one, each with its own step lengths and its own stop:
 * the CPU one after another (apply with count 1), a GPU in one loop that
 * applies A to every vector at once. report (may be NULL): the most
 * iterations and the largest residual of any system; an error is the
 * first failing system's. Borrows b, x and op. */
int mr_cg_solve_batch(mr_device *dev, size_t n, size_t count, mr_cg_batch_operator apply, void *op,
                      const mr_cfloat *b, mr_cfloat *x, const mr_cg_opts *opts,
                      mr_cg_report *report, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
