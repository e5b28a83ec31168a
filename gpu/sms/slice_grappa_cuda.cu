// Slice-GRAPPA on a GPU: im2col and the CAIPI phase ramp as grid-stride
// kernels (the separation's products are cuBLAS through blas.h), and the
// calibration's normal equations in double precision: the im2col matrices
// widened, cuBLAS ZHERK and ZGEMM, each class's equations gathered from
// them by a kernel and solved by cuSOLVER Zpotrf/Zpotrs, all on the compute
// stream with one wait, for the factorisations' flags.
#include <cstdlib>

#include "cuda_internal.cuh"
#include "slice_grappa_impl.h"

namespace {

// One thread per element of the source matrix, rows fastest (coalesced
// writes; the reads of one column are a shifted box of one coil).
__global__ void im2col_kernel(mr_sg_window w, const float2 *k, float2 *out, size_t total) {
  size_t bx = size_t(w.x1 - w.x0), rows = bx * size_t(w.y1 - w.y0);
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t s = e / rows, p = e % rows;
    int x = w.x0 + int(p % bx), y = w.y0 + int(p / bx);
    size_t wi = size_t(w.i1 - w.i0), wj = size_t(w.j1 - w.j0);
    int i = w.i0 + int(s % wi), j = w.j0 + int(s / wi % wj), c = int(s / (wi * wj));
    int xs = x + i - w.kx / 2, ys = y + (j - w.ky / 2) * w.ystep;
    float2 v = make_float2(0.f, 0.f);
    if (xs >= 0 && xs < w.nx && ys >= 0 && ys < w.ny)
      v = k[(size_t(c) * w.ny + ys) * w.nx + xs];
    out[e] = v;
  }
}

__global__ void caipi_kernel(int nc, int nx, int ny, int caipi, int first, int direction,
                             float2 *k, size_t total) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t r = e / size_t(nx);
    int y = int(r % size_t(ny));
    int slice = first + int(r / (size_t(ny) * nc));
    long turns = (long(y - ny / 2) * slice) % caipi;
    double t = -direction * 2.0 * 3.14159265358979323846 * double(turns) / caipi;
    float c = float(cos(t)), s = float(sin(t));
    float2 v = k[e];
    k[e] = make_float2(v.x * c - v.y * s, v.x * s + v.y * c);
  }
}

__global__ void widen_kernel(const float2 *from, double2 *to, size_t total) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    float2 v = from[e];
    to[e] = make_double2(v.x, v.y);
  }
}

__global__ void narrow_kernel(const double2 *from, float2 *to, size_t total) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    double2 v = from[e];
    to[e] = make_float2(float(v.x), float(v.y));
  }
}

// Row r of a class's equations is tap (i0 + r % wi, j0 + r / wi % wj) of
// coil r / (wi wj): its index among the full kernel's taps.
__device__ size_t full_tap(int kx, int ky, mr_sg_class c, size_t r) {
  size_t wi = size_t(c.i1 - c.i0), wj = size_t(c.j1 - c.j0);
  size_t i = size_t(c.i0) + r % wi, j = size_t(c.j0) + r / wi % wj, coil = r / (wi * wj);
  return (coil * size_t(ky) + j) * size_t(kx) + i;
}

// One thread per value of gq (nq x nq, from g's lower triangle, lambda on
// the diagonal) and then of rq (nq x ntgt).
__global__ void class_kernel(int kx, int ky, int n, int ntgt, mr_sg_class c, const double2 *g,
                             const double2 *rhs, double lambda, double2 *gq, double2 *rq) {
  size_t nq = size_t(c.n), square = nq * nq, total = square + nq * size_t(ntgt);
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    if (e < square) {
      size_t row = e % nq, col = e / nq;
      size_t fr = full_tap(kx, ky, c, row), fc = full_tap(kx, ky, c, col);
      double2 v = fr >= fc ? g[fc * n + fr] : g[fr * n + fc];
      if (fr < fc)
        v.y = -v.y;
      if (row == col)
        v.x += lambda;
      gq[e] = v;
    } else {
      size_t k = (e - square) / nq, row = (e - square) % nq;
      rq[e - square] = rhs[k * size_t(n) + full_tap(kx, ky, c, row)];
    }
  }
}

int widen(mr_cuda_ctx *c, size_t total, const mr_cfloat *from, mr_cdouble *to, mr_err *err) {
  widen_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
      reinterpret_cast<const float2 *>(from), reinterpret_cast<double2 *>(to), total);
  MR_LAUNCHED(widen_kernel);
  return 0;
}

int class_equations(mr_cuda_ctx *c, const mr_sg_system *s, int q, const mr_cdouble *g,
                    const mr_cdouble *rhs, double lambda, mr_cdouble *gq, mr_cdouble *rq,
                    mr_err *err) {
  size_t nq = size_t(s->cls[q].n), total = nq * nq + nq * size_t(s->ntgt);
  class_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
      s->kx, s->ky, s->n, s->ntgt, s->cls[q], reinterpret_cast<const double2 *>(g),
      reinterpret_cast<const double2 *>(rhs), lambda, reinterpret_cast<double2 *>(gq),
      reinterpret_cast<double2 *>(rq));
  MR_LAUNCHED(class_kernel);
  return 0;
}

struct solve_scratch {
  mr_cuda_ctx *c;
  void *work = nullptr;
  int *info = nullptr;
  explicit solve_scratch(mr_cuda_ctx *ctx) : c(ctx) {}
  ~solve_scratch() {
    mr_cuda_free(c, work);
    mr_cuda_free(c, info);
  }
};

} // namespace

int mr_sg_cuda_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                      mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = size_t(w->x1 - w->x0) * size_t(w->y1 - w->y0) * size_t(w->i1 - w->i0) *
                   size_t(w->j1 - w->j0) * w->nc;
    im2col_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        *w, reinterpret_cast<const float2 *>(kspace), reinterpret_cast<float2 *>(out), total);
    MR_LAUNCHED(im2col_kernel);
    return 0;
  });
}

int mr_sg_cuda_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                     int direction, mr_cfloat *kspace, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = size_t(count) * nc * ny * nx;
    caipi_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        nc, nx, ny, caipi, first, direction, reinterpret_cast<float2 *>(kspace), total);
    MR_LAUNCHED(caipi_kernel);
    return 0;
  });
}

int mr_sg_cuda_gram(mr_device *dev, const mr_sg_window *w, const mr_cfloat *a, int accumulate,
                    mr_cdouble *wide, mr_cdouble *g, mr_cdouble *own, int ldo, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    int wi = w->i1 - w->i0, taps = wi * (w->j1 - w->j0);
    int rows = (w->x1 - w->x0) * (w->y1 - w->y0), n = taps * w->nc;
    int rc = widen(c, size_t(rows) * n, a, wide, err);
    if (rc < 0)
      return rc;
    const double one = 1, beta = accumulate ? 1 : 0;
    const cuDoubleComplex z1 = make_cuDoubleComplex(1, 0), z0 = make_cuDoubleComplex(0, 0);
    const cuDoubleComplex *aw = reinterpret_cast<const cuDoubleComplex *>(wide);
    MR_CUBLAS(cublasZherk(c->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, rows, &one, aw, rows,
                          &beta, reinterpret_cast<cuDoubleComplex *>(g), n));
    if (own != nullptr) { // the centre tap's columns, taps columns apart
      size_t centre = size_t(w->ky / 2 - w->j0) * wi + size_t(w->kx / 2 - w->i0);
      MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_C, CUBLAS_OP_N, n, w->nc, rows, &z1, aw, rows,
                            aw + centre * rows, taps * rows, &z0,
                            reinterpret_cast<cuDoubleComplex *>(own), ldo));
    }
    return 0;
  });
}

int mr_sg_cuda_cross(mr_device *dev, int rows, int n, const mr_cdouble *wide, int nb,
                     const mr_cfloat *b, mr_cdouble *bwide, mr_cdouble *rhs, int ldr,
                     mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    int rc = widen(c, size_t(rows) * nb, b, bwide, err);
    if (rc < 0)
      return rc;
    const cuDoubleComplex one = make_cuDoubleComplex(1, 0), zero = make_cuDoubleComplex(0, 0);
    MR_CUBLAS(cublasZgemm(c->blas, CUBLAS_OP_C, CUBLAS_OP_N, n, nb, rows, &one,
                          reinterpret_cast<const cuDoubleComplex *>(wide), rows,
                          reinterpret_cast<const cuDoubleComplex *>(bwide), rows, &zero,
                          reinterpret_cast<cuDoubleComplex *>(rhs), ldr));
    return 0;
  });
}

int mr_sg_cuda_class(mr_device *dev, const mr_sg_system *s, int q, const mr_cdouble *g,
                     const mr_cdouble *rhs, double lambda, mr_cdouble *gq, mr_cdouble *rq,
                     mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    return class_equations(mr_device_cuda(dev), s, q, g, rhs, lambda, gq, rq, err);
  });
}

// The classes one after the other in the one scratch area (the stream
// orders them); potrs runs after a failed factorisation too (its result is
// then garbage, and the flag says so): the host waits once, for the flags.
int mr_sg_cuda_solve(mr_device *dev, const mr_sg_system *s, const mr_cdouble *g,
                     const mr_cdouble *rhs, double lambda, mr_cdouble *scratch, int slots,
                     mr_cfloat *weights, int *failed, mr_err *err) {
  (void)slots;
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t n = size_t(s->n), ntgt = size_t(s->ntgt);
    cuDoubleComplex *gq = reinterpret_cast<cuDoubleComplex *>(scratch), *rq = gq + n * n;
    int lwork = 0;
    for (int q = 0; q < s->nclass; q++) {
      int need = 0;
      MR_CUSOLVER(cusolverDnZpotrf_bufferSize(c->solver, CUBLAS_FILL_MODE_LOWER, s->cls[q].n, gq,
                                              s->cls[q].n, &need));
      lwork = need > lwork ? need : lwork;
    }
    // info[q]: class q's potrf; info[nclass + q]: its potrs.
    size_t flags = 2 * size_t(s->nclass);
    solve_scratch t(c);
    int rc = mr_cuda_alloc(c, &t.work, size_t(lwork) * sizeof(cuDoubleComplex), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&t.info), flags * sizeof(int), err);
    if (rc < 0)
      return rc;
    cuDoubleComplex *work = static_cast<cuDoubleComplex *>(t.work);
    for (int q = 0; q < s->nclass; q++) {
      const mr_sg_class *k = &s->cls[q];
      rc = class_equations(c, s, q, g, rhs, lambda, reinterpret_cast<mr_cdouble *>(gq),
                           reinterpret_cast<mr_cdouble *>(rq), err);
      if (rc < 0)
        return rc;
      MR_CUSOLVER(cusolverDnZpotrf(c->solver, CUBLAS_FILL_MODE_LOWER, k->n, gq, k->n, work, lwork,
                                   t.info + q));
      MR_CUSOLVER(cusolverDnZpotrs(c->solver, CUBLAS_FILL_MODE_LOWER, k->n, int(ntgt), gq, k->n,
                                   rq, k->n, t.info + s->nclass + q));
      size_t values = size_t(k->n) * ntgt;
      narrow_kernel<<<mr_grid_for(c, values, 256), 256, 0, c->compute>>>(
          reinterpret_cast<const double2 *>(rq), reinterpret_cast<float2 *>(weights + k->offset),
          values);
      MR_LAUNCHED(narrow_kernel);
    }
    int *info = static_cast<int *>(malloc(flags * sizeof(int)));
    if (info == nullptr)
      return mr_err_set(err, MR_ENOMEM, "slice-GRAPPA: out of memory");
    cudaError_t e = cudaMemcpyAsync(info, t.info, flags * sizeof(int), cudaMemcpyDeviceToHost,
                                    c->compute);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(c->compute);
    for (int q = 0; e == cudaSuccess && q < s->nclass; q++) {
      failed[q] = info[q] > 0;
      if (rc == 0 && (info[q] < 0 || info[s->nclass + q] < 0))
        rc = mr_err_set(err, MR_EINVAL, "slice-GRAPPA: cuSOLVER class %d: info %d / %d", q,
                        info[q], info[s->nclass + q]);
    }
    free(info);
    if (e != cudaSuccess)
      return mr_cuda_fail(e, "cudaMemcpyAsync(info)", __FILE__, __LINE__, err);
    return rc;
  });
}
