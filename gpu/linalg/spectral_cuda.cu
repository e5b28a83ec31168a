// spectral.c's steps on a GPU (spectral_impl.h): cuBLAS ZGEMM, Cholesky
// solves (cuSOLVER per item, or batched Zpotrf and ZTRSMs), and grid-stride
// kernels for the element-wise steps (the batch item in blockIdx.y) and the
// per-item sums (a block per item).
#include <cstdlib>

#include "cuda_internal.cuh"
#include "solve_impl.h"
#include "spectral_impl.h"

namespace {

const cublasOperation_t trans[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};

__global__ void widen_k(const float2 *src, int rows, int cols, int ld, size_t stride,
                        double2 *out) {
  size_t total = size_t(rows) * cols;
  const float2 *item = src + blockIdx.y * stride;
  double2 *o = out + blockIdx.y * total;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    float2 v = item[(e / rows) * ld + e % rows];
    o[e] = make_double2(v.x, v.y);
  }
}

__global__ void narrow_k(const double2 *src, int n, float2 *dst, int ld, size_t stride) {
  size_t total = size_t(n) * n;
  const double2 *s = src + blockIdx.y * total;
  float2 *item = dst + blockIdx.y * stride;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    double2 v = s[e];
    item[(e / n) * ld + e % n] = make_float2(float(v.x), float(v.y));
  }
}

// coef: p[batch], q[batch], r[batch].
__global__ void combine_k(int n, const double *coef, int batch, const double2 *x,
                          const double2 *y, double2 *out) {
  int b = blockIdx.y;
  double p = coef[b], q = coef[batch + b], r = coef[2 * batch + b];
  size_t total = size_t(n) * n;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t at = b * total + e;
    double2 a = x[at];
    double2 v = make_double2(p * a.x, p * a.y);
    if (y != nullptr) {
      double2 c = y[at];
      v.x += q * c.x;
      v.y += q * c.y;
    }
    if (e % n == e / n)
      v.x += r;
    out[at] = v;
  }
}

constexpr int SUM_THREADS = 256;

__global__ void dot_k(int n, const double2 *x, const double2 *y, double *d) {
  __shared__ double part[SUM_THREADS];
  size_t total = size_t(n) * n;
  const double2 *xb = x + blockIdx.x * total;
  double sum = 0;
  if (y == nullptr) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
      sum += xb[size_t(i) * n + i].x;
  } else {
    const double2 *yb = y + blockIdx.x * total;
    for (size_t e = threadIdx.x; e < total; e += blockDim.x)
      sum += xb[e].x * yb[e].x + xb[e].y * yb[e].y;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    d[blockIdx.x] = part[0];
}

// Blocks per item of a (blocks, batch) grid that fills the device.
dim3 grid_of(const mr_cuda_ctx *c, size_t per_item, int batch) {
  unsigned blocks = mr_grid_for(c, per_item * size_t(batch), 256);
  return dim3((blocks + unsigned(batch) - 1) / unsigned(batch), unsigned(batch));
}

int widen(mr_device *dev, mr_cmat src, int batch, mr_cdouble *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    if (src.rows == 0 || src.cols == 0)
      return 0;
    widen_k<<<grid_of(c, size_t(src.rows) * src.cols, batch), 256, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(src.data), src.rows, src.cols, src.ld, src.stride,
        reinterpret_cast<double2 *>(out));
    MR_LAUNCHED(widen_k);
    return 0;
  });
}

int narrow(mr_device *dev, const mr_cdouble *src, int n, int batch, mr_cmat dst, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    narrow_k<<<grid_of(c, size_t(n) * n, batch), 256, 0, c->compute>>>(
        reinterpret_cast<const double2 *>(src), n, reinterpret_cast<float2 *>(dst.data),
        dst.ld, dst.stride);
    MR_LAUNCHED(narrow_k);
    return 0;
  });
}

int gemm(mr_device *dev, mr_blas_op op_a, mr_blas_op op_b, int m, int n, int k, double alpha,
         const mr_cdouble *a, const mr_cdouble *b, double beta, mr_cdouble *cm, int batch,
         mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    const cuDoubleComplex al = make_cuDoubleComplex(alpha, 0), be = make_cuDoubleComplex(beta, 0);
    int lda = op_a == MR_BLAS_N ? m : k, ldb = op_b == MR_BLAS_N ? k : n;
    MR_CUBLAS(cublasZgemmStridedBatched(
        c->blas, trans[op_a], trans[op_b], m, n, k, &al,
        reinterpret_cast<const cuDoubleComplex *>(a), lda, (long long)m * k,
        reinterpret_cast<const cuDoubleComplex *>(b), ldb, (long long)k * n, &be,
        reinterpret_cast<cuDoubleComplex *>(cm), m, (long long)m * n, batch));
    return 0;
  });
}

int combine(mr_device *dev, int n, int batch, const double *p, const mr_cdouble *x, const double *q,
            const mr_cdouble *y, const double *r, mr_cdouble *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t bytes = 3 * size_t(batch) * sizeof(double);
    double *host = static_cast<double *>(malloc(bytes));
    if (host == nullptr)
      return mr_err_set(err, MR_ENOMEM, "spectral: out of memory");
    for (int b = 0; b < batch; b++) {
      host[b] = p[b];
      host[batch + b] = q != nullptr ? q[b] : 0.0;
      host[2 * batch + b] = r[b];
    }
    void *coef = nullptr;
    int rc = mr_cuda_alloc(c, &coef, bytes, err);
    if (rc == 0)
      rc = mr_cuda_upload(dev, coef, host, bytes, err);
    free(host);
    if (rc == 0) {
      combine_k<<<grid_of(c, size_t(n) * n, batch), 256, 0, c->compute>>>(
          n, static_cast<const double *>(coef), batch, reinterpret_cast<const double2 *>(x),
          reinterpret_cast<const double2 *>(y), reinterpret_cast<double2 *>(out));
      cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess)
        rc = mr_cuda_fail(e, "combine_k", __FILE__, __LINE__, err);
    }
    mr_cuda_free(c, coef);
    return rc;
  });
}

int dot(mr_device *dev, int n, int batch, const mr_cdouble *x, const mr_cdouble *y, double *d,
        mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    void *dd = nullptr;
    int rc = mr_cuda_alloc(c, &dd, size_t(batch) * sizeof(double), err);
    if (rc < 0)
      return rc;
    dot_k<<<unsigned(batch), SUM_THREADS, 0, c->compute>>>(
        n, reinterpret_cast<const double2 *>(x), reinterpret_cast<const double2 *>(y),
        static_cast<double *>(dd));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      rc = mr_cuda_fail(e, "dot_k", __FILE__, __LINE__, err);
    if (rc == 0)
      rc = mr_cuda_download(dev, d, dd, size_t(batch) * sizeof(double), err);
    mr_cuda_free(c, dd);
    return rc;
  });
}

// The whole batch at once: Zpotrf batched, then the two triangular solves
// (L y = b, L^H x = y) as batched ZTRSMs; the host waits once, for the
// flags. (cuSOLVER's potrsBatched takes one right-hand side only.)
int posv_batched(mr_device *dev, int n, int batch, mr_cdouble *a, mr_cdouble *b, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t nn = size_t(n) * n, nb = size_t(batch);
    // device: the items' pointers (a's, then b's), then 2 batch flags (the
    // second half, potrs's in solve.h's reading, stays 0)
    size_t ptr_bytes = 2 * nb * sizeof(cuDoubleComplex *), bytes = ptr_bytes + 2 * nb * sizeof(int);
    cuDoubleComplex **host = static_cast<cuDoubleComplex **>(malloc(ptr_bytes));
    int *info = static_cast<int *>(malloc(2 * nb * sizeof(int)));
    void *block = nullptr;
    int rc = host == nullptr || info == nullptr
                 ? mr_err_set(err, MR_ENOMEM, "spectral: out of memory")
                 : mr_cuda_alloc(c, &block, bytes, err);
    for (size_t i = 0; rc == 0 && i < nb; i++) {
      host[i] = reinterpret_cast<cuDoubleComplex *>(a) + i * nn;
      host[nb + i] = reinterpret_cast<cuDoubleComplex *>(b) + i * nn;
    }
    cuDoubleComplex **ptrs = static_cast<cuDoubleComplex **>(block);
    int *flags =
        rc == 0 ? reinterpret_cast<int *>(static_cast<char *>(block) + ptr_bytes) : nullptr;
    if (rc == 0)
      rc = mr_cuda_upload(dev, ptrs, host, ptr_bytes, err);
    if (rc == 0) {
      cudaError_t e = cudaMemsetAsync(flags, 0, 2 * nb * sizeof(int), c->compute);
      if (e != cudaSuccess)
        rc = mr_cuda_fail(e, "cudaMemsetAsync", __FILE__, __LINE__, err);
    }
    if (rc == 0) {
      cusolverStatus_t s = cusolverDnZpotrfBatched(c->solver, CUBLAS_FILL_MODE_LOWER, n, ptrs, n,
                                                   flags, batch);
      if (s != CUSOLVER_STATUS_SUCCESS)
        rc = mr_cusolver_fail(s, "cusolverDnZpotrfBatched", __FILE__, __LINE__, err);
    }
    const cuDoubleComplex one = make_cuDoubleComplex(1, 0);
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
      cublasStatus_t s = cublasZtrsmBatched(
          c->blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, pass == 0 ? CUBLAS_OP_N : CUBLAS_OP_C,
          CUBLAS_DIAG_NON_UNIT, n, n, &one, ptrs, n, ptrs + nb, n, batch);
      if (s != CUBLAS_STATUS_SUCCESS)
        rc = mr_cublas_fail(s, "cublasZtrsmBatched", __FILE__, __LINE__, err);
    }
    if (rc == 0)
      rc = mr_cuda_download(dev, info, flags, 2 * nb * sizeof(int), err);
    if (rc == 0)
      rc = mr_solve_cholesky_flags(info, batch, "spectral", err);
    free(host);
    free(info);
    mr_cuda_free(c, block);
    return rc;
  });
}

// Zpotrf and Zpotrs per item; the host waits once, for all the flags.
int posv_each(mr_device *dev, int n, int batch, mr_cdouble *a, mr_cdouble *b, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    cuDoubleComplex *A = reinterpret_cast<cuDoubleComplex *>(a);
    cuDoubleComplex *B = reinterpret_cast<cuDoubleComplex *>(b);
    size_t nn = size_t(n) * n;
    int lwork = 0;
    MR_CUSOLVER(cusolverDnZpotrf_bufferSize(c->solver, CUBLAS_FILL_MODE_LOWER, n, A, n, &lwork));
    void *work = nullptr, *dinfo = nullptr;
    int rc = mr_cuda_alloc(c, &work, size_t(lwork) * sizeof(cuDoubleComplex), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &dinfo, 2 * size_t(batch) * sizeof(int), err);
    int *flags = rc == 0 ? static_cast<int *>(dinfo) : nullptr;
    for (int i = 0; rc == 0 && i < batch; i++) {
      cusolverStatus_t s = cusolverDnZpotrf(c->solver, CUBLAS_FILL_MODE_LOWER, n, A + i * nn, n,
                                            static_cast<cuDoubleComplex *>(work), lwork, flags + i);
      if (s == CUSOLVER_STATUS_SUCCESS)
        s = cusolverDnZpotrs(c->solver, CUBLAS_FILL_MODE_LOWER, n, n, A + i * nn, n, B + i * nn,
                             n, flags + batch + i);
      if (s != CUSOLVER_STATUS_SUCCESS)
        rc = mr_cusolver_fail(s, "cusolverDnZpotrf/Zpotrs", __FILE__, __LINE__, err);
    }
    int *info = rc == 0 ? static_cast<int *>(malloc(2 * size_t(batch) * sizeof(int))) : nullptr;
    if (rc == 0 && info == nullptr)
      rc = mr_err_set(err, MR_ENOMEM, "spectral: out of memory");
    if (rc == 0)
      rc = mr_cuda_download(dev, info, flags, 2 * size_t(batch) * sizeof(int), err);
    if (rc == 0)
      rc = mr_solve_cholesky_flags(info, batch, "spectral", err);
    free(info);
    mr_cuda_free(c, work);
    mr_cuda_free(c, dinfo);
    return rc;
  });
}

// One item: potrf and potrs (cuBLAS's batched triangular solves are slower
// for one: ESPIRiT's 2D subspace step took 2.5 ms with them against 1.9 ms,
// H100); more: the batched calls (its 3D chunks of 14 slices: 162 against
// 277 ms for the per-item loop).
int posv(mr_device *dev, int n, int batch, mr_cdouble *a, mr_cdouble *b, mr_err *err) {
  return batch == 1 ? posv_each(dev, n, batch, a, b, err) : posv_batched(dev, n, batch, a, b, err);
}

} // namespace

extern "C" const mr_spectral_ops mr_spectral_cuda_ops = {widen,   narrow, gemm,   combine,
                                                          dot,     posv,   nullptr};
