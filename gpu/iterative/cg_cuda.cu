// Conjugate gradient on a GPU (cg_impl.h): the recursion of cg.c with
// alpha, beta, the residual and every test on them computed by one-block
// kernels from reductions left on the device, so an iteration is the
// operator's launches and five of ours, with no wait for the host, for
// every system of a batch at once. A system that stops (tolerance met,
// breakdown at rounding level, or an error) sets its `done` and the later
// launches leave it alone; the host reads the states back at the end, and
// every POLL iterations to skip launches once all have stopped. With
// mr_cg_opts.replay the iteration is one CUDA graph launch from the second
// on (captured there; core's graph.h): the operator's launches and FFT
// executions are what a lane spends its host time on when many sessions
// share the GPUs.
#include <cmath>
#include <cstdlib>

#include "cg_impl.h"
#include "cuda_internal.cuh"
#include "graph.h"

namespace {

constexpr unsigned BLOCK = 256;
constexpr unsigned PARTS = 256; // blocks of a reduction; one block adds their sums
constexpr int POLL = 16;

enum { FAIL_NONE, FAIL_PAP, FAIL_RR };

struct state {
  double bb, rr, residual, best, fail_value;
  float alpha, beta;
  int iterations, done, fail, fail_iteration, improved, revert;
  double fail_residual;
};

// The sum of v over one block of BLOCK threads, in thread 0.
__device__ double block_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  __shared__ double warp_sums[BLOCK / 32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warp_sums[warp] = v;
  __syncthreads();
  double s = 0;
  if (threadIdx.x == 0)
    for (unsigned w = 0; w < BLOCK / 32; w++)
      s += warp_sums[w];
  return s;
}

// Every kernel below serves all systems: blockIdx.y (or blockIdx.x for the
// one-block steps) is the system, vectors are [system][n].

// partial[system][block] = sum |x|^2 (y null) or sum Re(conj(x) y), in double.
__global__ void partial_sums(size_t n, const float2 *x, const float2 *y, double *partial) {
  size_t at = blockIdx.y * n;
  double s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[at + i], w = y != nullptr ? y[at + i] : v;
    s += double(v.x) * w.x + double(v.y) * w.y;
  }
  s = block_sum(s);
  if (threadIdx.x == 0)
    partial[blockIdx.y * PARTS + blockIdx.x] = s;
}

// The system's total of its PARTS partial sums, in thread 0.
__device__ double total(const double *partial) {
  return block_sum(partial[blockIdx.x * PARTS + threadIdx.x]);
}

// r = b - ax (ax null: r = b, x = 0); p = r.
__global__ void residual_start(size_t n, const float2 *b, const float2 *ax, float2 *x, float2 *r,
                               float2 *p) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t k = blockIdx.y * n + i;
    float2 v = b[k];
    if (ax != nullptr) {
      v.x -= ax[k].x;
      v.y -= ax[k].y;
    } else {
      x[k] = make_float2(0, 0);
    }
    r[k] = v;
    p[k] = v;
  }
}

__global__ void start(state *states, const double *part_bb, const double *part_rr,
                      double tolerance, int keep_best) {
  double bb = total(part_bb), rr = total(part_rr);
  if (threadIdx.x != 0)
    return;
  state *s = states + blockIdx.x;
  *s = state{};
  s->bb = bb;
  s->rr = rr;
  s->residual = bb > 0 ? sqrt(rr / bb) : 0;
  s->best = INFINITY;
  if (keep_best && bb > 0 && s->residual < s->best)
    s->best = s->residual;
  s->done = !(bb > 0) || !(s->residual > tolerance);
}

// A step broke down: stop at rounding level, else fail.
__device__ void breakdown(state *s, int what, double value) {
  s->done = 1;
  if (s->residual <= MR_CG_ROUNDING_RESIDUAL)
    return;
  s->fail = what;
  s->fail_value = value;
  s->fail_iteration = s->iterations + 1;
  s->fail_residual = s->residual;
}

__global__ void step_alpha(state *states, const double *part_pap) {
  double sum = total(part_pap);
  if (threadIdx.x != 0)
    return;
  state *s = states + blockIdx.x;
  s->improved = 0;
  s->revert = 0;
  if (s->done)
    return;
  float pap = float(sum); // as mr_vec_dot rounds it
  float alpha = float(s->rr / pap);
  s->alpha = alpha;
  if (!(pap > 0) || !isfinite(alpha))
    breakdown(s, FAIL_PAP, pap);
}

// x += alpha p, r -= alpha ap, and the partial sums of |r|^2.
__global__ void update(size_t n, const state *states, const float2 *p, const float2 *ap,
                       float2 *x, float2 *r, double *part_rr) {
  const state *s = states + blockIdx.y;
  if (s->done)
    return;
  float alpha = s->alpha;
  double sum = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t k = blockIdx.y * n + i;
    float2 v = x[k], w = r[k], pi = p[k], api = ap[k];
    v.x += alpha * pi.x;
    v.y += alpha * pi.y;
    w.x -= alpha * api.x;
    w.y -= alpha * api.y;
    x[k] = v;
    r[k] = w;
    sum += double(w.x) * w.x + double(w.y) * w.y;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    part_rr[blockIdx.y * PARTS + blockIdx.x] = sum;
}

__global__ void step_beta(state *states, const double *part_rr, double tolerance,
                          int keep_best) {
  double rr_next = total(part_rr);
  state *s = states + blockIdx.x;
  if (threadIdx.x != 0 || s->done)
    return;
  if (!isfinite(rr_next)) { // back to the last finite iterate
    breakdown(s, FAIL_RR, rr_next);
    s->revert = !s->fail;
    return;
  }
  s->beta = float(rr_next / s->rr);
  s->rr = rr_next;
  s->iterations++;
  s->residual = sqrt(rr_next / s->bb);
  s->improved = keep_best && s->residual < s->best;
  if (s->improved)
    s->best = s->residual;
  if (!(s->residual > tolerance))
    s->done = 1;
}

// p = beta p + r; x_best = x after an improvement; x -= alpha p to revert.
__global__ void step_end(size_t n, const state *states, const float2 *r, float2 *p, float2 *x,
                         float2 *x_best) {
  const state *s = states + blockIdx.y;
  int revert = s->revert, improved = s->improved, more = !s->done;
  float alpha = s->alpha, beta = s->beta;
  if (!revert && !improved && !more)
    return;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t k = blockIdx.y * n + i;
    float2 pi = p[k];
    if (revert) {
      x[k].x -= alpha * pi.x;
      x[k].y -= alpha * pi.y;
    }
    if (improved)
      x_best[k] = x[k];
    if (more) {
      float2 ri = r[k];
      p[k] = make_float2(beta * pi.x + ri.x, beta * pi.y + ri.y);
    }
  }
}

struct workspace {
  float2 *r, *p, *ap, *x_best;
  state *s;
  double *part_a, *part_b;
  state *host; // the states read back
};

// The states into w.host; *all_done when every system has stopped.
int read_states(mr_cuda_ctx *c, size_t count, const workspace &w, bool *all_done, mr_err *err) {
  MR_CU(cudaMemcpyAsync(w.host, w.s, count * sizeof(state), cudaMemcpyDeviceToHost,
                        c->compute));
  MR_CU(cudaStreamSynchronize(c->compute));
  *all_done = true;
  for (size_t i = 0; i < count; i++)
    *all_done = *all_done && w.host[i].done;
  return 0;
}

// One iteration of every system: A p, alpha, x and r, beta, p.
int iteration(mr_cuda_ctx *c, mr_cg_job *j, const workspace &w, mr_err *err) {
  size_t n = j->n, count = j->count;
  dim3 grid(mr_grid_for(c, n, BLOCK), unsigned(count)), parts(PARTS, unsigned(count));
  unsigned systems = unsigned(count);
  int rc = j->apply(j->op, count, reinterpret_cast<mr_cfloat *>(w.p),
                    reinterpret_cast<mr_cfloat *>(w.ap), err);
  if (rc < 0)
    return rc;
  partial_sums<<<parts, BLOCK, 0, c->compute>>>(n, w.p, w.ap, w.part_a);
  step_alpha<<<systems, BLOCK, 0, c->compute>>>(w.s, w.part_a);
  update<<<parts, BLOCK, 0, c->compute>>>(n, w.s, w.p, w.ap, reinterpret_cast<float2 *>(j->x),
                                          w.r, w.part_b);
  step_beta<<<systems, BLOCK, 0, c->compute>>>(w.s, w.part_b, j->o.tolerance,
                                               j->o.tolerance == 0);
  step_end<<<grid, BLOCK, 0, c->compute>>>(n, w.s, w.r, w.p, reinterpret_cast<float2 *>(j->x),
                                           w.x_best);
  MR_LAUNCHED(cg_iteration);
  return 0;
}

int run(mr_device *dev, mr_cg_job *j, const workspace &w, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  size_t n = j->n, count = j->count;
  dim3 grid(mr_grid_for(c, n, BLOCK), unsigned(count)), parts(PARTS, unsigned(count));
  unsigned systems = unsigned(count);
  int keep_best = j->o.tolerance == 0;
  double tol = j->o.tolerance;
  auto *b = reinterpret_cast<const float2 *>(j->b);
  auto *x = reinterpret_cast<float2 *>(j->x);
  auto *ap = reinterpret_cast<mr_cfloat *>(w.ap);
  int rc = 0;
  if (j->o.warm_start && (rc = j->apply(j->op, count, j->x, ap, err)) < 0)
    return rc;
  residual_start<<<grid, BLOCK, 0, c->compute>>>(n, b, j->o.warm_start ? w.ap : nullptr, x, w.r,
                                                  w.p);
  MR_LAUNCHED(residual_start);
  partial_sums<<<parts, BLOCK, 0, c->compute>>>(n, b, nullptr, w.part_a);
  partial_sums<<<parts, BLOCK, 0, c->compute>>>(n, w.r, nullptr, w.part_b);
  start<<<systems, BLOCK, 0, c->compute>>>(w.s, w.part_a, w.part_b, tol, keep_best);
  MR_LAUNCHED(start);
  if (keep_best) // a system that never improves (b = 0) keeps x
    MR_CU(cudaMemcpyAsync(w.x_best, x, count * n * sizeof(float2), cudaMemcpyDeviceToDevice,
                          c->compute));
  bool all_done = false;
  mr_graph *graph = nullptr;
  for (int it = 0; rc == 0 && it < j->o.max_iterations; it++) {
    // The host runs at most POLL iterations ahead of the device (the read
    // below waits), so a cancel ends the solve within about POLL of them.
    if (mr_cancel_requested(j->o.cancel)) {
      rc = mr_err_set(err, MR_ECANCELED, "cg: cancelled at iteration %d", it + 1);
      break;
    }
    if (it > 0 && it % POLL == 0) {
      if ((rc = read_states(c, count, w, &all_done, err)) < 0 || all_done)
        break;
    }
    if (graph != nullptr) {
      rc = mr_graph_launch(dev, graph, err);
      continue;
    }
    // The first iteration runs as it is (the operator's first use makes its
    // FFT plans and work areas); the second is captured and replayed after.
    // A capture that fails leaves this and every later iteration queued.
    if (j->o.replay && it == 1) {
      rc = mr_graph_begin(dev, err);
      if (rc == 0)
        rc = iteration(c, j, w, err);
      int ended = mr_graph_end(dev, rc == 0, &graph, err);
      if (rc == 0 && ended == 0 && graph != nullptr) {
        rc = mr_graph_launch(dev, graph, err);
        continue;
      }
      mr_graph_destroy(graph); // nothing of the iteration ran
      graph = nullptr;
    }
    rc = iteration(c, j, w, err);
  }
  mr_graph_destroy(graph);
  if (rc < 0)
    return rc;
  if ((rc = read_states(c, count, w, &all_done, err)) < 0)
    return rc;
  for (size_t i = 0; i < count; i++) {
    const state &s = w.host[i];
    if (s.fail != FAIL_NONE)
      return mr_cg_breakdown_fail(s.fail == FAIL_PAP ? "p^H A p" : "|r|^2", s.fail_value,
                                  s.fail_iteration, s.fail_residual, err);
    double residual = keep_best && s.bb > 0 ? s.best : s.residual;
    if (s.iterations > j->report.iterations)
      j->report.iterations = s.iterations;
    if (i == 0 || residual > j->report.residual)
      j->report.residual = residual;
  }
  if (keep_best)
    MR_CU(cudaMemcpyAsync(x, w.x_best, count * n * sizeof(float2), cudaMemcpyDeviceToDevice,
                          c->compute));
  return 0;
}

} // namespace

int mr_cg_cuda_solve(mr_device *dev, mr_cg_job *j, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t vec = j->count * j->n * sizeof(float2), align = 256;
    size_t vec_bytes = (vec + align - 1) / align * align;
    size_t bytes = 4 * vec_bytes + 2 * j->count * PARTS * sizeof(double) +
                   j->count * sizeof(state);
    char *base = nullptr;
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&base), bytes, err);
    if (rc < 0)
      return rc;
    workspace w;
    w.r = reinterpret_cast<float2 *>(base);
    w.p = reinterpret_cast<float2 *>(base + vec_bytes);
    w.ap = reinterpret_cast<float2 *>(base + 2 * vec_bytes);
    w.x_best = reinterpret_cast<float2 *>(base + 3 * vec_bytes);
    w.part_a = reinterpret_cast<double *>(base + 4 * vec_bytes);
    w.part_b = w.part_a + j->count * PARTS;
    w.s = reinterpret_cast<state *>(w.part_b + j->count * PARTS);
    w.host = static_cast<state *>(malloc(j->count * sizeof(state)));
    if (w.host == nullptr) {
      mr_cuda_free(c, base);
      return mr_err_set(err, MR_ENOMEM, "cg: out of memory");
    }
    rc = run(dev, j, w, err);
    free(w.host);
    mr_cuda_free(c, base);
    return rc;
  });
}
