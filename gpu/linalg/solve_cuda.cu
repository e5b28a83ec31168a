// The regularised HPD solve on a GPU: lambda onto the diagonal, then
// cuSOLVER potrf and potrs per batch item, with one look at the info flags.
#include <cstdlib>

#include "cuda_internal.cuh"
#include "solve_impl.h"

namespace {

__global__ void add_diagonal(float2 *a, int n, int ld, size_t stride, float lambda) {
  float2 *item = a + blockIdx.y * stride;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    item[size_t(i) * ld + i].x += lambda;
}

struct scratch {
  mr_cuda_ctx *c;
  void *work = nullptr;
  int *info = nullptr;
  explicit scratch(mr_cuda_ctx *ctx) : c(ctx) {}
  ~scratch() {
    mr_cuda_free(c, work);
    mr_cuda_free(c, info);
  }
};

} // namespace

int mr_solve_cuda_hpd(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, int batch, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    int n = a.rows;
    if (n == 0 || b.cols == 0)
      return 0;
    cuComplex *A = reinterpret_cast<cuComplex *>(a.data);
    cuComplex *B = reinterpret_cast<cuComplex *>(b.data);
    int lwork = 0;
    MR_CUSOLVER(cusolverDnCpotrf_bufferSize(c->solver, CUBLAS_FILL_MODE_LOWER, n, A, a.ld,
                                            &lwork));
    // info[i]: potrf of item i; info[batch + i]: its potrs.
    scratch s(c);
    int rc = mr_cuda_alloc(c, &s.work, size_t(lwork) * sizeof(cuComplex), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s.info), 2 * size_t(batch) * sizeof(int),
                         err);
    if (rc < 0)
      return rc;
    if (lambda != 0) {
      add_diagonal<<<dim3(unsigned((n + 255) / 256), unsigned(batch)), 256, 0, c->compute>>>(
          reinterpret_cast<float2 *>(a.data), n, a.ld, a.stride, lambda);
      MR_LAUNCHED(add_diagonal);
    }
    cuComplex *work = static_cast<cuComplex *>(s.work);
    // potrs runs even after a failed factorisation (its b is then garbage
    // and the flags say so): the host waits once, for all the flags.
    for (int i = 0; i < batch; i++) {
      MR_CUSOLVER(cusolverDnCpotrf(c->solver, CUBLAS_FILL_MODE_LOWER, n, A + i * a.stride,
                                   a.ld, work, lwork, s.info + i));
      MR_CUSOLVER(cusolverDnCpotrs(c->solver, CUBLAS_FILL_MODE_LOWER, n, b.cols,
                                   A + i * a.stride, a.ld, B + i * b.stride, b.ld,
                                   s.info + batch + i));
    }
    int *info = static_cast<int *>(malloc(2 * size_t(batch) * sizeof(int)));
    if (info == nullptr)
      return mr_err_set(err, MR_ENOMEM, "solve: out of memory");
    cudaError_t e = cudaMemcpyAsync(info, s.info, 2 * size_t(batch) * sizeof(int),
                                    cudaMemcpyDeviceToHost, c->compute);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(c->compute);
    if (e == cudaSuccess && rc == 0)
      rc = mr_solve_cholesky_flags(info, batch, "solve", err);
    free(info);
    if (e != cudaSuccess)
      return mr_cuda_fail(e, "cudaMemcpyAsync(info)", __FILE__, __LINE__, err);
    return rc;
  });
}

// Eigen-decomposition per batch item with cusolverDnCheevd; the info flags
// are read once at the end.
int mr_solve_cuda_eigh(mr_device *dev, mr_cmat a, float *w, int batch, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    int n = a.rows;
    if (n == 0)
      return 0;
    cuComplex *A = reinterpret_cast<cuComplex *>(a.data);
    int lwork = 0;
    MR_CUSOLVER(cusolverDnCheevd_bufferSize(c->solver, CUSOLVER_EIG_MODE_VECTOR,
                                            CUBLAS_FILL_MODE_LOWER, n, A, a.ld, w, &lwork));
    scratch s(c);
    int rc = mr_cuda_alloc(c, &s.work, size_t(lwork) * sizeof(cuComplex), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&s.info), size_t(batch) * sizeof(int), err);
    if (rc < 0)
      return rc;
    cuComplex *work = static_cast<cuComplex *>(s.work);
    for (int i = 0; i < batch; i++)
      MR_CUSOLVER(cusolverDnCheevd(c->solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                   A + i * a.stride, a.ld, w + size_t(i) * size_t(n), work,
                                   lwork, s.info + i));
    int *info = static_cast<int *>(malloc(size_t(batch) * sizeof(int)));
    if (info == nullptr)
      return mr_err_set(err, MR_ENOMEM, "eigh: out of memory");
    cudaError_t e = cudaMemcpyAsync(info, s.info, size_t(batch) * sizeof(int),
                                    cudaMemcpyDeviceToHost, c->compute);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(c->compute);
    for (int i = 0; e == cudaSuccess && rc == 0 && i < batch; i++)
      if (info[i] != 0)
        rc = mr_err_set(err, info[i] > 0 ? MR_ENUMERIC : MR_EINVAL,
                        "eigh: cuSOLVER item %d: info %d", i, info[i]);
    free(info);
    if (e != cudaSuccess)
      return mr_cuda_fail(e, "cudaMemcpyAsync(info)", __FILE__, __LINE__, err);
    return rc;
  });
}
