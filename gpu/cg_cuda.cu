// Conjugate gradient on a GPU (cg_impl.h): the recursion of cg.c with
// alpha, beta, the residual and every test on them computed by one-block
// kernels from reductions left on the device, so an iteration is the
// operator's launches and five of ours, with no wait for the host. A solve
// that stops (tolerance met, breakdown at rounding level, or an error)
// sets `done` and the later launches do nothing; the host reads the state
// back at the end, and every POLL iterations to skip those launches.
#include <cmath>

#include "cg_impl.h"
#include "cuda_internal.cuh"

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

// partial[block] = sum |x|^2 (y null) or sum Re(conj(x) y), in double.
__global__ void partial_sums(size_t n, const float2 *x, const float2 *y, double *partial) {
  double s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i], w = y != nullptr ? y[i] : v;
    s += double(v.x) * w.x + double(v.y) * w.y;
  }
  s = block_sum(s);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

__device__ double total(const double *partial) { return block_sum(partial[threadIdx.x]); }

// r = b - ax (ax null: r = b, x = 0); p = r.
__global__ void residual_start(size_t n, const float2 *b, const float2 *ax, float2 *x, float2 *r,
                               float2 *p) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = b[i];
    if (ax != nullptr) {
      v.x -= ax[i].x;
      v.y -= ax[i].y;
    } else {
      x[i] = make_float2(0, 0);
    }
    r[i] = v;
    p[i] = v;
  }
}

__global__ void start(state *s, const double *part_bb, const double *part_rr, double tolerance,
                      int keep_best) {
  double bb = total(part_bb), rr = total(part_rr);
  if (threadIdx.x != 0)
    return;
  *s = state{};
  s->bb = bb;
  s->rr = rr;
  s->residual = bb > 0 ? sqrt(rr / bb) : 0;
  s->best = INFINITY;
  s->improved = keep_best && bb > 0 && s->residual < s->best;
  if (s->improved)
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

__global__ void step_alpha(state *s, const double *part_pap) {
  double sum = total(part_pap);
  if (threadIdx.x != 0)
    return;
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
__global__ void update(size_t n, const state *s, const float2 *p, const float2 *ap, float2 *x,
                       float2 *r, double *part_rr) {
  if (s->done)
    return;
  float alpha = s->alpha;
  double sum = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 v = x[i], w = r[i], pi = p[i], api = ap[i];
    v.x += alpha * pi.x;
    v.y += alpha * pi.y;
    w.x -= alpha * api.x;
    w.y -= alpha * api.y;
    x[i] = v;
    r[i] = w;
    sum += double(w.x) * w.x + double(w.y) * w.y;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    part_rr[blockIdx.x] = sum;
}

__global__ void step_beta(state *s, const double *part_rr, double tolerance, int keep_best) {
  double rr_next = total(part_rr);
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
__global__ void step_end(size_t n, const state *s, const float2 *r, float2 *p, float2 *x,
                         float2 *x_best) {
  int revert = s->revert, improved = s->improved, more = !s->done;
  float alpha = s->alpha, beta = s->beta;
  if (!revert && !improved && !more)
    return;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 pi = p[i];
    if (revert) {
      x[i].x -= alpha * pi.x;
      x[i].y -= alpha * pi.y;
    }
    if (improved)
      x_best[i] = x[i];
    if (more) {
      float2 ri = r[i];
      p[i] = make_float2(beta * pi.x + ri.x, beta * pi.y + ri.y);
    }
  }
}

// What the host needs of the state.
struct readback {
  int done, fail, fail_iteration, iterations;
  double residual, best, fail_value, fail_residual, bb;
};

__global__ void export_state(const state *s, readback *out) {
  *out = readback{s->done,     s->fail, s->fail_iteration, s->iterations,   s->residual,
                  s->best,     s->fail_value, s->fail_residual, s->bb};
}

struct workspace {
  float2 *r, *p, *ap, *x_best;
  state *s;
  double *part_a, *part_b;
  readback *back;
};

int read_state(mr_cuda_ctx *c, const workspace &w, readback *out) {
  export_state<<<1, 1, 0, c->compute>>>(w.s, w.back);
  MR_LAUNCHED(export_state);
  MR_CU(cudaMemcpyAsync(out, w.back, sizeof *out, cudaMemcpyDeviceToHost, c->compute));
  MR_CU(cudaStreamSynchronize(c->compute));
  return 0;
}

int run(mr_device *dev, mr_cg_job *j, const workspace &w) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  size_t n = j->n;
  unsigned grid = mr_grid_for(c, n, BLOCK);
  int keep_best = j->o.tolerance == 0;
  double tol = j->o.tolerance;
  auto *b = reinterpret_cast<const float2 *>(j->b);
  auto *x = reinterpret_cast<float2 *>(j->x);
  int rc = 0;
  if (j->o.warm_start && (rc = j->apply(j->op, j->x, reinterpret_cast<mr_cfloat *>(w.ap))) < 0)
    return rc;
  residual_start<<<grid, BLOCK, 0, c->compute>>>(n, b, j->o.warm_start ? w.ap : nullptr, x, w.r,
                                                  w.p);
  MR_LAUNCHED(residual_start);
  partial_sums<<<PARTS, BLOCK, 0, c->compute>>>(n, b, nullptr, w.part_a);
  partial_sums<<<PARTS, BLOCK, 0, c->compute>>>(n, w.r, nullptr, w.part_b);
  start<<<1, BLOCK, 0, c->compute>>>(w.s, w.part_a, w.part_b, tol, keep_best);
  MR_LAUNCHED(start);
  if (keep_best)
    MR_CU(cudaMemcpyAsync(w.x_best, x, n * sizeof(float2), cudaMemcpyDeviceToDevice, c->compute));
  readback back;
  for (int it = 0; it < j->o.max_iterations; it++) {
    if (it > 0 && it % POLL == 0) {
      if ((rc = read_state(c, w, &back)) < 0)
        return rc;
      if (back.done)
        break;
    }
    if ((rc = j->apply(j->op, reinterpret_cast<mr_cfloat *>(w.p),
                       reinterpret_cast<mr_cfloat *>(w.ap))) < 0)
      return rc;
    partial_sums<<<PARTS, BLOCK, 0, c->compute>>>(n, w.p, w.ap, w.part_a);
    step_alpha<<<1, BLOCK, 0, c->compute>>>(w.s, w.part_a);
    update<<<PARTS, BLOCK, 0, c->compute>>>(n, w.s, w.p, w.ap, x, w.r, w.part_b);
    step_beta<<<1, BLOCK, 0, c->compute>>>(w.s, w.part_b, tol, keep_best);
    step_end<<<grid, BLOCK, 0, c->compute>>>(n, w.s, w.r, w.p, x, w.x_best);
    MR_LAUNCHED(cg_iteration);
  }
  if ((rc = read_state(c, w, &back)) < 0)
    return rc;
  j->report.iterations = back.iterations;
  j->report.residual = back.residual;
  if (back.fail != FAIL_NONE)
    return mr_cg_breakdown_fail(back.fail == FAIL_PAP ? "p^H A p" : "|r|^2", back.fail_value,
                                back.fail_iteration, back.fail_residual);
  if (!keep_best || !(back.bb > 0))
    return 0;
  j->report.residual = back.best;
  MR_CU(cudaMemcpyAsync(x, w.x_best, n * sizeof(float2), cudaMemcpyDeviceToDevice, c->compute));
  return 0;
}

} // namespace

int mr_cg_cuda_solve(mr_device *dev, mr_cg_job *j) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t n = j->n, vec = n * sizeof(float2), align = 256;
    size_t vec_bytes = (vec + align - 1) / align * align;
    size_t bytes = 4 * vec_bytes + 2 * PARTS * sizeof(double) + sizeof(state) + sizeof(readback);
    char *base = nullptr;
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&base), bytes);
    if (rc < 0)
      return rc;
    workspace w;
    w.r = reinterpret_cast<float2 *>(base);
    w.p = reinterpret_cast<float2 *>(base + vec_bytes);
    w.ap = reinterpret_cast<float2 *>(base + 2 * vec_bytes);
    w.x_best = reinterpret_cast<float2 *>(base + 3 * vec_bytes);
    w.part_a = reinterpret_cast<double *>(base + 4 * vec_bytes);
    w.part_b = w.part_a + PARTS;
    w.s = reinterpret_cast<state *>(w.part_b + PARTS);
    w.back = reinterpret_cast<readback *>(w.s + 1);
    rc = run(dev, j, w);
    mr_cuda_free(c, base);
    return rc;
  });
}
