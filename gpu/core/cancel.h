/* A request to end a long operation early: an iterative solve asks it once
 * per iteration and, when it says so, stops there with MR_ECANCELED (its
 * output is then undefined). The server's sessions set one when their
 * client leaves or the drain deadline passes (gadgets/runtime/gadget.h,
 * mr_gadget_cancel), so neither waits for a solve's last iteration. Plain
 * C types (a function and its context, no atomics in the interface), so
 * CUDA host code reads it as well as C. */
#ifndef MR_GPU_CANCEL_H
#define MR_GPU_CANCEL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_cancel {
  /* Non-zero once the operation should stop. Called from whatever thread
   * runs the operation (a GPU's worker), so it must be cheap and
   * thread-safe (an atomic load). */
  int (*requested)(void *ctx);
  void *ctx;
} mr_cancel;

/* Whether c (may be NULL: never) asks to stop now. */
static inline int mr_cancel_requested(const mr_cancel *c) {
  return c != 0 && c->requested != 0 && c->requested(c->ctx) != 0;
}

#ifdef __cplusplus
}
#endif

#endif
