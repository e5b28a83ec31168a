// A solver's iteration as a CUDA graph (graph.h).
#include <cstdlib>

#include "cuda_internal.cuh"
#include "graph.h"

struct mr_graph {
  cudaGraph_t graph;    // kept: the setters name its nodes
  cudaGraphExec_t exec;
};

int mr_graph_begin(mr_device *dev, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    MR_CU(cudaStreamBeginCapture(mr_device_cuda(dev)->compute,
                                 cudaStreamCaptureModeThreadLocal));
    return 0;
  });
}

int mr_graph_mark(mr_device *dev, void **node, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t *deps = nullptr;
    size_t count = 0;
    MR_CU(cudaStreamGetCaptureInfo(mr_device_cuda(dev)->compute, &status, nullptr, nullptr,
                                   &deps, nullptr, &count));
    if (status != cudaStreamCaptureStatusActive || count != 1)
      return mr_err_set(err, MR_EDEVICE, "graph: %zu nodes at the end of the capture", count);
    *node = deps[0];
    return 0;
  });
}

int mr_graph_end(mr_device *dev, int keep, mr_graph **out, mr_err *err) {
  *out = nullptr;
  return mr_on_worker(dev, err, [&] {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(mr_device_cuda(dev)->compute, &graph);
    if (e != cudaSuccess || !keep) {
      if (graph != nullptr)
        cudaGraphDestroy(graph);
      (void)cudaGetLastError(); // a failed capture leaves no sticky error
      return e == cudaSuccess ? 0
                              : mr_cuda_fail(e, "cudaStreamEndCapture", __FILE__, __LINE__, err);
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    mr_graph *g = e == cudaSuccess ? static_cast<mr_graph *>(malloc(sizeof *g))
                                         : nullptr;
    if (g == nullptr) {
      if (exec != nullptr)
        cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      return e != cudaSuccess ? mr_cuda_fail(e, "cudaGraphInstantiate", __FILE__, __LINE__, err)
                              : mr_err_set(err, MR_ENOMEM, "graph: out of memory");
    }
    g->graph = graph;
    g->exec = exec;
    *out = g;
    return 0;
  });
}

int mr_graph_next(void *node, void **next, mr_err *err) {
  cudaGraphNode_t after[2];
  size_t count = 2;
  MR_CU(cudaGraphNodeGetDependentNodes(static_cast<cudaGraphNode_t>(node), after, nullptr,
                                       &count));
  if (count != 1)
    return mr_err_set(err, MR_EDEVICE, "graph: %zu nodes after one", count);
  *next = after[0];
  return 0;
}

void *mr_graph_exec(mr_graph *g) { return g->exec; }

int mr_graph_launch(mr_device *dev, mr_graph *g, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    MR_CU(cudaGraphLaunch(g->exec, mr_device_cuda(dev)->compute));
    return 0;
  });
}

void mr_graph_destroy(mr_graph *g) {
  if (g == nullptr)
    return;
  cudaGraphExecDestroy(g->exec);
  cudaGraphDestroy(g->graph);
  free(g);
}
