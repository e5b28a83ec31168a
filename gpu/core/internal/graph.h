/* Internal (the iterative solvers: sparse.c's FISTA, cg_cuda.cu's CG): one
 * iteration on a GPU captured once as a CUDA graph and replayed for the
 * others, so that the host queues one graph a step instead of tens of
 * launches and FFT executions (small kernels on a 256 x 256 slice are bound
 * by their launches, and a lane's host time per launch is what many
 * sessions on several GPUs wait for). What changes from one iteration to
 * the next is written into the replayed graph's nodes by the solver's own
 * setters (FISTA: mr_wavelet_cuda_set_shifts, mr_prox_cuda_set_beta; CG
 * keeps its scalars on the device and sets nothing); everything else
 * (pointers, constants) is the same all through a solve. A graph lives for
 * one solve: the FFT plans' shared work area may move between tasks.
 *
 * Nodes are cudaGraphNode_t, carried as void *. Every call runs inside
 * the solve's device task, on the compute stream. */
#ifndef MR_GPU_GRAPH_H
#define MR_GPU_GRAPH_H

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_graph mr_graph;

/* Starts capturing the compute stream (this thread's work only). */
int mr_graph_begin(mr_device *dev, mr_err *err);
/* *node = the node captured last. */
int mr_graph_mark(mr_device *dev, void **node, mr_err *err);
/* Ends the capture; with keep, instantiates it into *out (NULL after a
 * failure, the stream usable again either way). */
int mr_graph_end(mr_device *dev, int keep, mr_graph **out, mr_err *err);
/* *next = the one node that follows node. */
int mr_graph_next(void *node, void **next, mr_err *err);
/* The instantiated graph, for the node setters. */
void *mr_graph_exec(mr_graph *g);
/* Queues one replay on the compute stream. */
int mr_graph_launch(mr_device *dev, mr_graph *g, mr_err *err);
void mr_graph_destroy(mr_graph *g);

#ifdef __cplusplus
}
#endif

#endif
