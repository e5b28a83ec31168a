// Internal, CUDA C++ only: a GPU's state as its worker holds it, the
// conversion of every CUDA library status into MR_E* codes, and helpers the
// *_cuda.cu files share (running on the worker, launching, staging).
#ifndef MR_GPU_CUDA_INTERNAL_CUH
#define MR_GPU_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cusolverDn.h>

#include <type_traits>

#include "cuda_ctx.h"
#include "device_impl.h"
#include "error.h"

// Bytes of one pinned staging slot; two for each direction.
constexpr size_t MR_STAGE_SLOT = size_t(4) << 20;
// cuFFT plans kept per device.
constexpr int MR_FFT_CACHE = 16;

struct mr_fft_cached {
  int rank;
  long long n[3];   // cuFFT order: slowest first
  long long batch;
  cufftHandle handle;
  size_t work;      // bytes of work area it needs
  unsigned long long used; // last use, for eviction
};

struct mr_cuda_ctx {
  mr_device *dev;
  int ordinal;
  cudaDeviceProp props;
  // compute: every operation; upload/download: staged copies, which then
  // overlap with compute. Ordered among themselves with events.
  cudaStream_t compute, upload, download;
  cublasHandle_t blas;
  cusolverDnHandle_t solver;
  void *up_slot[2], *down_slot[2];     // pinned
  cudaEvent_t up_free[2], down_ready[2];
  unsigned up_next;
  cudaEvent_t order;                   // a cross-stream dependency
  mr_fft_cached fft[MR_FFT_CACHE];
  int nfft;
  unsigned long long fft_clock;
  void *fft_work;                      // one work area shared by all plans:
  size_t fft_work_size;                // only one runs at a time, on compute
};

// Status conversion: out of memory becomes MR_EDEVMEM, anything else
// MR_EDEVICE; the line written into err names the call, the status and the
// place. The MR_CU* macros below return from the enclosing function with
// the converted code and write into that function's `mr_err *err`.
int mr_cuda_fail(cudaError_t e, const char *call, const char *file, int line, mr_err *err);
int mr_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line, mr_err *err);
int mr_cufft_fail(cufftResult r, const char *call, const char *file, int line, mr_err *err);
int mr_cusolver_fail(cusolverStatus_t s, const char *call, const char *file, int line, mr_err *err);

#define MR_CU(call)                                                                                \
  do {                                                                                             \
    cudaError_t mr_e_ = (call);                                                                    \
    if (mr_e_ != cudaSuccess)                                                                      \
      return mr_cuda_fail(mr_e_, #call, __FILE__, __LINE__, err);                                  \
  } while (0)
#define MR_CUBLAS(call)                                                                            \
  do {                                                                                             \
    cublasStatus_t mr_s_ = (call);                                                                 \
    if (mr_s_ != CUBLAS_STATUS_SUCCESS)                                                            \
      return mr_cublas_fail(mr_s_, #call, __FILE__, __LINE__, err);                                \
  } while (0)
#define MR_CUFFT(call)                                                                             \
  do {                                                                                             \
    cufftResult mr_r_ = (call);                                                                    \
    if (mr_r_ != CUFFT_SUCCESS)                                                                    \
      return mr_cufft_fail(mr_r_, #call, __FILE__, __LINE__, err);                                 \
  } while (0)
#define MR_CUSOLVER(call)                                                                          \
  do {                                                                                             \
    cusolverStatus_t mr_s_ = (call);                                                               \
    if (mr_s_ != CUSOLVER_STATUS_SUCCESS)                                                          \
      return mr_cusolver_fail(mr_s_, #call, __FILE__, __LINE__, err);                              \
  } while (0)
// After a kernel launch: a bad configuration shows up here, a fault in the
// kernel at the next synchronisation.
#define MR_LAUNCHED(name) MR_CU(cudaGetLastError())

// Runs f() as a task on dev's worker (directly when already there): the
// body of every public CUDA operation. f returns 0 or an MR_E* code.
// f captures the caller's err (the pointer the task is given is the same).
template <class F> int mr_on_worker(mr_device *dev, mr_err *err, F &&f) {
  using Fn = typename std::remove_reference<F>::type;
  struct thunk {
    static int call(mr_device *, void *p, mr_err *) { return (*static_cast<Fn *>(p))(); }
  };
  return mr_device_run(dev, &thunk::call, (void *)&f, err);
}

// Blocks for a grid-stride loop over n items: enough to fill the device,
// no more (the loop covers the rest).
inline unsigned mr_grid_for(const mr_cuda_ctx *c, size_t n, unsigned block) {
  size_t want = (n + block - 1) / block;
  size_t cap = size_t(c->props.multiProcessorCount) * 16;
  return unsigned(want < cap ? (want > 0 ? want : 1) : cap);
}

// Stream-ordered device memory from the worker's pool, on compute.
int mr_cuda_alloc(mr_cuda_ctx *c, void **p, size_t bytes, mr_err *err);
void mr_cuda_free(mr_cuda_ctx *c, void *p);

// 1 when p is page-locked host memory (mr_host_alloc): copies to and from
// it go straight to the copy engine, skipping the staging slots.
bool mr_cuda_is_pinned(const void *p);

// Copies host src to device dst on the upload stream (through the pinned
// slots unless src is pinned itself), after the compute work queued so far
// and before the compute work queued next. Returns once src may be reused.
int mr_cuda_upload(mr_device *dev, void *dst, const void *src, size_t bytes, mr_err *err);

// Copies device src to host dst on the download stream (through the slots
// unless dst is pinned), after the compute work queued so far; returns once
// dst is filled.
int mr_cuda_download(mr_device *dev, void *dst, const void *src, size_t bytes, mr_err *err);

// The pieces the two calls above are made of, for pipelines that interleave
// them with compute (fft_cuda.cu). A staged piece is at most MR_STAGE_SLOT
// bytes; a pinned one any size. A download piece is issued into slot 0 or 1
// and finished (waited for, and copied out unless pinned) later.
int mr_cuda_upload_piece(mr_device *dev, void *dst, const void *src, size_t bytes, bool pinned,
                         mr_err *err);
int mr_cuda_download_issue(mr_cuda_ctx *c, int slot, void *dst, const void *src, size_t bytes,
                           bool pinned, mr_err *err);
int mr_cuda_download_finish(mr_device *dev, int slot, void *dst, size_t bytes, bool pinned,
                            mr_err *err);

// Makes `to` wait for the work queued so far on `from`.
int mr_cuda_after(mr_cuda_ctx *c, cudaStream_t to, cudaStream_t from, mr_err *err);

// The cuFFT plan for this shape from the cache (made on a miss), with the
// shared work area attached and the compute stream set.
int mr_cuda_fft_plan(mr_cuda_ctx *c, int rank, const long long n[3], long long batch,
                     cufftHandle *out, mr_err *err);

#endif
