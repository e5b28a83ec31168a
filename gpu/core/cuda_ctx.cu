// A GPU's state on its worker thread: discovery, creation, status
// conversion, synchronisation, timing, memory, staging and the cuFFT plan
// cache.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "cuda_internal.cuh"

// ---- status conversion ----------------------------------------------------

int mr_cuda_fail(cudaError_t e, const char *call, const char *file, int line, mr_err *err) {
  cudaGetLastError(); // clear a non-sticky error so later checks see their own
  int code = e == cudaErrorMemoryAllocation ? MR_EDEVMEM : MR_EDEVICE;
  return mr_err_set(err, code, "%s: %s (%s:%d)", call, cudaGetErrorName(e), file, line);
}

int mr_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line, mr_err *err) {
  int code = s == CUBLAS_STATUS_ALLOC_FAILED ? MR_EDEVMEM : MR_EDEVICE;
  return mr_err_set(err, code, "%s: %s (%s:%d)", call, cublasGetStatusName(s), file, line);
}

static const char *cufft_name(cufftResult r) {
  switch (r) {
  case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
  case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
  case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
  case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
  case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
  case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
  case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
  case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
  default: return "cuFFT error";
  }
}

int mr_cufft_fail(cufftResult r, const char *call, const char *file, int line, mr_err *err) {
  int code = r == CUFFT_ALLOC_FAILED ? MR_EDEVMEM : MR_EDEVICE;
  return mr_err_set(err, code, "%s: %s %d (%s:%d)", call, cufft_name(r), int(r), file, line);
}

static const char *cusolver_name(cusolverStatus_t s) {
  switch (s) {
  case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
  case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
  case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
  case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
  case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
  case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
  default: return "cuSOLVER error";
  }
}

int mr_cusolver_fail(cusolverStatus_t s, const char *call, const char *file, int line,
                     mr_err *err) {
  int code = s == CUSOLVER_STATUS_ALLOC_FAILED ? MR_EDEVMEM : MR_EDEVICE;
  return mr_err_set(err, code, "%s: %s %d (%s:%d)", call, cusolver_name(s), int(s), file, line);
}

// ---- discovery and lifetime -----------------------------------------------

int mr_cuda_count(char *why, size_t whylen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    // No driver (libcuda absent), no device, or a driver too old: the pool
    // then runs on the CPU. The runtime says "driver version is
    // insufficient" when there is no driver at all; the kernel module's
    // /proc entry tells that apart from a driver that is too old.
    if (e == cudaErrorInsufficientDriver && access("/proc/driver/nvidia/version", F_OK) != 0)
      snprintf(why, whylen, "no NVIDIA driver found");
    else if (e == cudaErrorNoDevice)
      snprintf(why, whylen, "no CUDA device found");
    else
      snprintf(why, whylen, "%s", cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0)
    snprintf(why, whylen, "no CUDA device found");
  return n;
}

static int create(mr_cuda_ctx *c, int rank, mr_err *err) {
  MR_CU(cudaSetDevice(c->ordinal));
  MR_CU(cudaGetDeviceProperties(&c->props, c->ordinal));
  // Graded by rank, the real-time lanes (device.h: always the first ones)
  // above the others: their kernels' blocks are scheduled before waiting
  // ones of the later lanes. Numerically lower is higher.
  int least = 0, greatest = 0;
  MR_CU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  int priority = greatest + rank < least ? greatest + rank : least;
  MR_CU(cudaStreamCreateWithPriority(&c->compute, cudaStreamNonBlocking, priority));
  MR_CU(cudaStreamCreateWithPriority(&c->upload, cudaStreamNonBlocking, priority));
  MR_CU(cudaStreamCreateWithPriority(&c->download, cudaStreamNonBlocking, priority));
  MR_CU(cudaEventCreateWithFlags(&c->order, cudaEventDisableTiming));
  for (int k = 0; k < 2; k++) {
    MR_CU(cudaEventCreateWithFlags(&c->up_free[k], cudaEventDisableTiming));
    MR_CU(cudaEventCreateWithFlags(&c->down_ready[k], cudaEventDisableTiming));
    // Upload slots are only written by the host and read by the copy
    // engine: write-combined memory suits that; download slots are read by
    // the host and stay cached.
    MR_CU(cudaHostAlloc(&c->up_slot[k], MR_STAGE_SLOT, cudaHostAllocWriteCombined));
    MR_CU(cudaHostAlloc(&c->down_slot[k], MR_STAGE_SLOT, cudaHostAllocDefault));
  }
  MR_CUBLAS(cublasCreate(&c->blas));
  MR_CUBLAS(cublasSetStream(c->blas, c->compute));
  MR_CUSOLVER(cusolverDnCreate(&c->solver));
  MR_CUSOLVER(cusolverDnSetStream(c->solver, c->compute));
  // Keep freed memory in the pool rather than returning it to the driver at
  // every synchronisation (buffers come and go per slice), but only up to a
  // quarter of the device: after a peak the rest goes back, so the
  // libraries' own cudaMalloc calls still find memory.
  cudaMemPool_t pool;
  MR_CU(cudaDeviceGetDefaultMemPool(&pool, c->ordinal));
  uint64_t keep = c->props.totalGlobalMem / 4;
  MR_CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return 0;
}

int mr_cuda_ctx_create(mr_device *dev, int rank, mr_cuda_ctx **out, mr_err *err) {
  mr_cuda_ctx *c = static_cast<mr_cuda_ctx *>(calloc(1, sizeof *c));
  if (c == nullptr)
    return mr_err_set(err, MR_ENOMEM, "gpu %d: out of memory", mr_device_ordinal(dev));
  c->dev = dev;
  c->ordinal = mr_device_ordinal(dev);
  int rc = create(c, rank, err);
  if (rc < 0) {
    mr_cuda_ctx_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

void mr_cuda_ctx_destroy(mr_cuda_ctx *c) {
  if (c == nullptr)
    return;
  cudaDeviceSynchronize();
  for (int i = 0; i < c->nfft; i++)
    cufftDestroy(c->fft[i].handle);
  if (c->fft_work != nullptr)
    cudaFree(c->fft_work);
  if (c->solver != nullptr)
    cusolverDnDestroy(c->solver);
  if (c->blas != nullptr)
    cublasDestroy(c->blas);
  for (int k = 0; k < 2; k++) {
    if (c->up_slot[k] != nullptr)
      cudaFreeHost(c->up_slot[k]);
    if (c->down_slot[k] != nullptr)
      cudaFreeHost(c->down_slot[k]);
    if (c->up_free[k] != nullptr)
      cudaEventDestroy(c->up_free[k]);
    if (c->down_ready[k] != nullptr)
      cudaEventDestroy(c->down_ready[k]);
  }
  if (c->order != nullptr)
    cudaEventDestroy(c->order);
  cudaStream_t streams[] = {c->compute, c->upload, c->download};
  for (cudaStream_t s : streams)
    if (s != nullptr)
      cudaStreamDestroy(s);
  cudaGetLastError();
  free(c);
}

int mr_cuda_ctx_sync(mr_cuda_ctx *c, mr_err *err) {
  MR_CU(cudaStreamSynchronize(c->compute));
  MR_CU(cudaStreamSynchronize(c->upload));
  MR_CU(cudaStreamSynchronize(c->download));
  return 0;
}

int mr_cuda_ctx_info(mr_cuda_ctx *c, mr_device_info *info, mr_err *err) {
  size_t free_bytes, total;
  MR_CU(cudaMemGetInfo(&free_bytes, &total));
  info->ordinal = c->ordinal;
  snprintf(info->name, sizeof info->name, "%.127s", c->props.name);
  info->mem_total = total;
  info->mem_free = free_bytes;
  info->cc_major = c->props.major;
  info->cc_minor = c->props.minor;
  info->units = c->props.multiProcessorCount;
  return 0;
}

int mr_cuda_mem_free(int ordinal, size_t *free_bytes, mr_err *err) {
  size_t total;
  MR_CU(cudaSetDevice(ordinal));
  MR_CU(cudaMemGetInfo(free_bytes, &total));
  return 0;
}

static int time_runs(mr_cuda_ctx *c, mr_device *dev, mr_device_task task, void *arg, int warmup,
                     int reps, double *ms, cudaEvent_t start, cudaEvent_t stop, mr_err *err) {
  for (int i = 0; i < warmup + reps; i++) {
    MR_CU(cudaEventRecord(start, c->compute));
    int rc = task(dev, arg, err);
    if (rc < 0)
      return rc;
    MR_CU(cudaEventRecord(stop, c->compute));
    MR_CU(cudaEventSynchronize(stop));
    float elapsed;
    MR_CU(cudaEventElapsedTime(&elapsed, start, stop));
    if (i >= warmup)
      ms[i - warmup] = elapsed;
  }
  return mr_cuda_ctx_sync(c, err);
}

int mr_cuda_ctx_time(mr_cuda_ctx *c, mr_device *dev, mr_device_task task, void *arg, int warmup,
                     int reps, double *ms, mr_err *err) {
  cudaEvent_t start, stop;
  MR_CU(cudaEventCreate(&start));
  cudaError_t e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    return mr_cuda_fail(e, "cudaEventCreate", __FILE__, __LINE__, err);
  }
  int rc = time_runs(c, dev, task, arg, warmup, reps, ms, start, stop, err);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return rc;
}

// ---- memory and staging ---------------------------------------------------

int mr_cuda_alloc(mr_cuda_ctx *c, void **p, size_t bytes, mr_err *err) {
  *p = nullptr;
  if (bytes == 0)
    return 0;
  cudaError_t e = cudaMallocAsync(p, bytes, c->compute);
  if (e != cudaSuccess) {
    *p = nullptr;
    // the code alone (and the error cleared): the line says more than the call
    int rc = mr_cuda_fail(e, "cudaMallocAsync", __FILE__, __LINE__, nullptr);
    return mr_err_set(err, rc, "cannot allocate %zu bytes on GPU %d: %s", bytes, c->ordinal,
                      cudaGetErrorName(e));
  }
  return 0;
}

void mr_cuda_free(mr_cuda_ctx *c, void *p) {
  if (p != nullptr)
    cudaFreeAsync(p, c->compute);
}

int mr_cuda_after(mr_cuda_ctx *c, cudaStream_t to, cudaStream_t from, mr_err *err) {
  MR_CU(cudaEventRecord(c->order, from));
  MR_CU(cudaStreamWaitEvent(to, c->order, 0));
  return 0;
}

struct host_copy_job {
  char *dst;
  const char *src;
};

static void host_copy_range(void *arg, size_t begin, size_t end) {
  const host_copy_job *j = static_cast<const host_copy_job *>(arg);
  memcpy(j->dst + begin, j->src + begin, end - begin);
}

// memcpy between pageable and pinned memory, on the pool's CPU threads when
// large: one thread alone copies slower than the PCIe link moves.
static void host_copy(mr_device *dev, void *dst, const void *src, size_t bytes) {
  host_copy_job j = {static_cast<char *>(dst), static_cast<const char *>(src)};
  mr_cpu_parallel_for(mr_device_threads(dev), bytes, size_t(256) << 10, host_copy_range, &j);
}

bool mr_cuda_is_pinned(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

int mr_cuda_upload_piece(mr_device *dev, void *dst, const void *src, size_t bytes, bool pinned,
                         mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  if (pinned) {
    MR_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->upload));
    return 0;
  }
  int k = int(c->up_next++ & 1);
  MR_CU(cudaEventSynchronize(c->up_free[k])); // its previous copy is done
  host_copy(dev, c->up_slot[k], src, bytes);
  MR_CU(cudaMemcpyAsync(dst, c->up_slot[k], bytes, cudaMemcpyHostToDevice, c->upload));
  MR_CU(cudaEventRecord(c->up_free[k], c->upload));
  return 0;
}

int mr_cuda_upload(mr_device *dev, void *dst, const void *src, size_t bytes, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  bool pinned = mr_cuda_is_pinned(src);
  size_t piece = pinned ? bytes : MR_STAGE_SLOT;
  int rc = mr_cuda_after(c, c->upload, c->compute, err);
  for (size_t at = 0; rc == 0 && at < bytes; at += piece) {
    size_t n = bytes - at < piece ? bytes - at : piece;
    rc = mr_cuda_upload_piece(dev, static_cast<char *>(dst) + at,
                              static_cast<const char *>(src) + at, n, pinned, err);
  }
  if (rc == 0)
    rc = mr_cuda_after(c, c->compute, c->upload, err);
  // A staged src was copied to a slot already; a pinned one is read by the
  // copy engine, so wait for it before the caller may change it.
  if (rc == 0 && pinned)
    MR_CU(cudaStreamSynchronize(c->upload));
  return rc;
}

int mr_cuda_download_issue(mr_cuda_ctx *c, int slot, void *dst, const void *src, size_t bytes,
                           bool pinned, mr_err *err) {
  MR_CU(cudaMemcpyAsync(pinned ? dst : c->down_slot[slot], src, bytes,
                        cudaMemcpyDeviceToHost, c->download));
  MR_CU(cudaEventRecord(c->down_ready[slot], c->download));
  return 0;
}

int mr_cuda_download_finish(mr_device *dev, int slot, void *dst, size_t bytes, bool pinned,
                            mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  MR_CU(cudaEventSynchronize(c->down_ready[slot]));
  if (!pinned)
    host_copy(dev, dst, c->down_slot[slot], bytes);
  return 0;
}

// Double-buffered when staged: piece i is copied off its slot while piece
// i+1 crosses the bus into the other.
int mr_cuda_download(mr_device *dev, void *dst, const void *src, size_t bytes, mr_err *err) {
  mr_cuda_ctx *c = mr_device_cuda(dev);
  bool pinned = mr_cuda_is_pinned(dst);
  size_t piece = pinned ? bytes : MR_STAGE_SLOT;
  int rc = mr_cuda_after(c, c->download, c->compute, err);
  size_t pieces = (bytes + piece - 1) / piece;
  for (size_t i = 0; rc == 0 && i <= pieces; i++) {
    if (i < pieces) {
      size_t at = i * piece, n = bytes - at < piece ? bytes - at : piece;
      rc = mr_cuda_download_issue(c, int(i & 1), static_cast<char *>(dst) + at,
                                  static_cast<const char *>(src) + at, n, pinned, err);
    }
    if (rc == 0 && i > 0) {
      size_t at = (i - 1) * piece, n = bytes - at < piece ? bytes - at : piece;
      rc = mr_cuda_download_finish(dev, int((i - 1) & 1), static_cast<char *>(dst) + at, n, pinned,
                                   err);
    }
  }
  return rc;
}

// ---- cuFFT plan cache -----------------------------------------------------

static int make_fft(mr_cuda_ctx *c, mr_fft_cached *e, mr_err *err) {
  MR_CUFFT(cufftCreate(&e->handle));
  long long dist = e->n[0] * e->n[1] * e->n[2];
  cufftResult r = cufftSetAutoAllocation(e->handle, 0);
  if (r == CUFFT_SUCCESS)
    r = cufftMakePlanMany64(e->handle, e->rank, e->n, nullptr, 1, dist, nullptr, 1,
                            dist, CUFFT_C2C, e->batch, &e->work);
  if (r == CUFFT_SUCCESS)
    r = cufftSetStream(e->handle, c->compute);
  if (r != CUFFT_SUCCESS) {
    cufftDestroy(e->handle);
    return mr_cufft_fail(r, "cufftMakePlanMany64", __FILE__, __LINE__, err);
  }
  return 0;
}

static mr_fft_cached *find_fft(const mr_cuda_ctx *c, int rank, const long long n[3],
                               long long batch) {
  for (int i = 0; i < c->nfft; i++) {
    const mr_fft_cached *e = &c->fft[i];
    if (e->rank == rank && e->batch == batch && e->n[0] == n[0] && e->n[1] == n[1] &&
        e->n[2] == n[2])
      return const_cast<mr_fft_cached *>(e);
  }
  return nullptr;
}

int mr_cuda_fft_plan_cached(const mr_cuda_ctx *c, int rank, const long long n[3],
                            long long batch) {
  return find_fft(c, rank, n, batch) != nullptr;
}

// The plan of this shape in c's cache, made on a miss (*made then set).
static int cached_fft(mr_cuda_ctx *c, int rank, const long long n[3], long long batch,
                      mr_fft_cached **out, bool *made, mr_err *err) {
  if ((*out = find_fft(c, rank, n, batch)) != nullptr)
    return 0;
  if (c->nfft == MR_FFT_CACHE) { // evict the least recently used
    int lru = 0;
    for (int i = 1; i < c->nfft; i++)
      if (c->fft[i].used < c->fft[lru].used)
        lru = i;
    cufftDestroy(c->fft[lru].handle);
    c->fft[lru] = c->fft[--c->nfft];
  }
  mr_fft_cached e = {rank, {n[0], n[1], n[2]}, batch, 0, 0, 0};
  int rc = make_fft(c, &e, err);
  if (rc < 0)
    return rc;
  c->fft[c->nfft] = e;
  *out = &c->fft[c->nfft++];
  *made = true;
  return 0;
}

struct fft_shape {
  mr_device *dev;
  int rank;
  long long n[3], batch;
};

// Posted to another lane's worker: the plan made there ahead of its first
// use. A failure leaves that cache as it was; the lane's own first use then
// makes the plan and reports.
static int prefetch_fft(void *arg, mr_err *err) {
  (void)err;
  const fft_shape *s = static_cast<const fft_shape *>(arg);
  mr_fft_cached *e;
  bool made = false;
  mr_err ignored = {};
  (void)cached_fft(mr_device_cuda(s->dev), s->rank, s->n, s->batch, &e, &made, &ignored);
  return 0;
}

// Making a cuFFT plan holds a lock of the driver that every lane's calls
// wait for: a 3D grid's plan took 19 ms on the H100, and a real-time
// lane's event record waited 17.85 ms beside it (docs/benchmarks.md, "Real
// time beside heavy work"). So a plan one lane makes, the device's other
// lanes make at once too: the stall comes once per shape, with the first
// session that needs it, and not again when a later session's step lands on
// another lane (a thread's lane is its turn, device.c).
static void share_fft(const mr_cuda_ctx *c, int rank, const long long n[3], long long batch) {
  fft_shape s = {c->dev, rank, {n[0], n[1], n[2]}, batch};
  mr_device_post_other_lanes(c->dev, prefetch_fft, &s, sizeof s);
}

int mr_cuda_fft_plan(mr_cuda_ctx *c, int rank, const long long n[3], long long batch,
                     cufftHandle *out, mr_err *err) {
  mr_fft_cached *hit = nullptr;
  bool made = false;
  int rc = cached_fft(c, rank, n, batch, &hit, &made, err);
  if (rc < 0)
    return rc;
  if (made)
    share_fft(c, rank, n, batch);
  hit->used = ++c->fft_clock;
  if (hit->work > c->fft_work_size) {
    // Stream-ordered: transforms already queued keep the old area until done.
    mr_cuda_free(c, c->fft_work);
    c->fft_work_size = 0;
    rc = mr_cuda_alloc(c, &c->fft_work, hit->work, err);
    if (rc < 0)
      return rc;
    c->fft_work_size = hit->work;
  }
  MR_CUFFT(cufftSetWorkArea(hit->handle, c->fft_work));
  *out = hit->handle;
  return 0;
}
