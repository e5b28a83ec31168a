#include "raw_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>
#include <cusolverDn.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "raw_cufft_callback_fatbin.h"

#define WARMUP 3

#define CHECK(ok, what)                                                      \
  do {                                                                       \
    if (!(ok)) {                                                             \
      fprintf(stderr, "mr-bench raw: %s failed (%s:%d)\n", what, __FILE__, __LINE__); \
      goto fail;                                                             \
    }                                                                        \
  } while (0)
#define CU(call) CHECK((call) == cudaSuccess, #call)

/* A device copy of host[0..n); takes host (frees it). NULL on failure. */
static cuComplex *to_device(cuComplex *host, size_t n) {
  cuComplex *dev = NULL;
  if (host != NULL && (cudaMalloc((void **)&dev, n * sizeof *dev) != cudaSuccess ||
                       cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice) !=
                           cudaSuccess)) {
    cudaFree(dev);
    dev = NULL;
  }
  free(host);
  return dev;
}

static cuComplex random_sample(void) {
  return make_cuComplex(2.0f * rand() / RAND_MAX - 1, 2.0f * rand() / RAND_MAX - 1);
}

/* Random complex samples in [-1, 1]^2 on the device: timing zeros would
 * hide work a library skips. */
static cuComplex *random_device(size_t n, unsigned seed) {
  cuComplex *host = malloc(n * sizeof *host);
  srand(seed);
  for (size_t i = 0; host != NULL && i < n; i++)
    host[i] = random_sample();
  return to_device(host, n);
}

typedef int (*raw_op)(void *arg);

/* Median event time of op on stream s; -1 on failure. */
static double time_op(cudaStream_t s, raw_op op, void *arg, int reps) {
  cudaEvent_t a = NULL, b = NULL;
  double *ms = malloc((size_t)reps * sizeof *ms), result = -1;
  CHECK(ms != NULL, "malloc");
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  for (int i = 0; i < WARMUP + reps; i++) {
    CU(cudaEventRecord(a, s));
    CHECK(op(arg) == 0, "the timed call");
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    float t;
    CU(cudaEventElapsedTime(&t, a, b));
    if (i >= WARMUP)
      ms[i - WARMUP] = t;
  }
  result = bench_median(ms, reps);
fail:
  if (a != NULL)
    cudaEventDestroy(a);
  if (b != NULL)
    cudaEventDestroy(b);
  free(ms);
  return result;
}

typedef struct fft_arg {
  cufftHandle plan;
  cuComplex *data;
  int round_trips; /* 0: one inverse transform; else this many forward + inverse */
} fft_arg;

static int fft_op(void *p) {
  fft_arg *f = p;
  if (f->round_trips == 0)
    return cufftExecC2C(f->plan, f->data, f->data, CUFFT_INVERSE) == CUFFT_SUCCESS ? 0 : -1;
  for (int i = 0; i < f->round_trips; i++)
    if (cufftExecC2C(f->plan, f->data, f->data, CUFFT_FORWARD) != CUFFT_SUCCESS ||
        cufftExecC2C(f->plan, f->data, f->data, CUFFT_INVERSE) != CUFFT_SUCCESS)
      return -1;
  return 0;
}

/* which: 0 no callbacks, else 1 load, 2 store, 3 both. Per call of fft_op. */
static double raw_fft(int ordinal, int rank, const int *n, int batch, int which,
                      int round_trips, int reps) {
  double result = -1;
  fft_arg f = {.round_trips = round_trips};
  int planned = 0;
  size_t len = 1;
  for (int d = 0; d < rank; d++)
    len *= (size_t)n[d];
  CU(cudaSetDevice(ordinal));
  f.data = random_device(len * (size_t)batch, 1);
  CHECK(f.data != NULL, "random data");
  if (which == 0) {
    CHECK(cufftPlanMany(&f.plan, rank, (int *)n, NULL, 1, (int)len, NULL, 1, (int)len,
                        CUFFT_C2C, batch) == CUFFT_SUCCESS, "cufftPlanMany");
    planned = 1;
  } else {
    size_t work;
    CHECK(cufftCreate(&f.plan) == CUFFT_SUCCESS, "cufftCreate");
    planned = 1;
    if (which & 1)
      CHECK(cufftXtSetJITCallback(f.plan, "raw_load", raw_cufft_callback_fatbin,
                                  sizeof raw_cufft_callback_fatbin, CUFFT_CB_LD_COMPLEX,
                                  NULL) == CUFFT_SUCCESS, "cufftXtSetJITCallback (load)");
    if (which & 2)
      CHECK(cufftXtSetJITCallback(f.plan, "raw_store", raw_cufft_callback_fatbin,
                                  sizeof raw_cufft_callback_fatbin, CUFFT_CB_ST_COMPLEX,
                                  NULL) == CUFFT_SUCCESS, "cufftXtSetJITCallback (store)");
    CHECK(cufftMakePlanMany(f.plan, rank, (int *)n, NULL, 1, (int)len, NULL, 1, (int)len,
                            CUFFT_C2C, batch, &work) == CUFFT_SUCCESS,
          "cufftMakePlanMany with callbacks");
  }
  result = time_op(0, fft_op, &f, reps);
fail:
  if (planned)
    cufftDestroy(f.plan);
  cudaFree(f.data);
  return result;
}

double raw_cufft_ms(int ordinal, int rank, const int *n, int batch, int reps) {
  return raw_fft(ordinal, rank, n, batch, 0, 0, reps);
}

double raw_cufft_round_trip_ms(int ordinal, int rank, const int *n, int batch, int repeat,
                               int reps) {
  double ms = raw_fft(ordinal, rank, n, batch, 0, repeat, reps);
  return ms < 0 ? ms : ms / repeat;
}

double raw_cufft_callback_ms(int ordinal, int rank, const int *n, int batch, int which,
                             int reps) {
  return raw_fft(ordinal, rank, n, batch, which, 0, reps);
}

typedef struct blas_arg {
  cublasHandle_t h;
  int n, k, herk;
  cuComplex *a, *b, *c;
} blas_arg;

static int blas_op(void *p) {
  blas_arg *g = p;
  const float one = 1, zero = 0;
  const cuComplex cone = make_cuComplex(1, 0), czero = make_cuComplex(0, 0);
  cublasStatus_t s =
      g->herk ? cublasCherk(g->h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, g->n, g->k, &one,
                            g->a, g->k, &zero, g->c, g->n)
              : cublasCgemm(g->h, CUBLAS_OP_C, CUBLAS_OP_N, g->n, g->n, g->k, &cone, g->a,
                            g->k, g->b, g->k, &czero, g->c, g->n);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

static double raw_blas(int ordinal, int n, int k, int herk, int reps) {
  double result = -1;
  blas_arg g = {.n = n, .k = k, .herk = herk};
  CU(cudaSetDevice(ordinal));
  CHECK(cublasCreate(&g.h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  g.a = random_device((size_t)n * k, 2);
  g.b = random_device((size_t)n * k, 3);
  g.c = random_device((size_t)n * n, 4);
  CHECK(g.a != NULL && g.b != NULL && g.c != NULL, "random data");
  result = time_op(0, blas_op, &g, reps);
fail:
  if (g.h != NULL)
    cublasDestroy(g.h);
  cudaFree(g.a);
  cudaFree(g.b);
  cudaFree(g.c);
  return result;
}

double raw_cherk_ms(int ordinal, int n, int k, int reps) {
  return raw_blas(ordinal, n, k, 1, reps);
}

double raw_cgemm_ms(int ordinal, int n, int k, int reps) {
  return raw_blas(ordinal, n, k, 0, reps);
}

typedef struct solve_arg {
  cusolverDnHandle_t h;
  int n, nrhs, lwork;
  cuComplex *a0, *b0, *a, *b, *work;
  int *info;
} solve_arg;

static int solve_op(void *p) {
  solve_arg *s = p;
  size_t an = (size_t)s->n * s->n, bn = (size_t)s->n * s->nrhs;
  if (cudaMemcpyAsync(s->a, s->a0, an * sizeof *s->a, cudaMemcpyDeviceToDevice, 0) != cudaSuccess ||
      cudaMemcpyAsync(s->b, s->b0, bn * sizeof *s->b, cudaMemcpyDeviceToDevice, 0) != cudaSuccess)
    return -1;
  if (cusolverDnCpotrf(s->h, CUBLAS_FILL_MODE_LOWER, s->n, s->a, s->n, s->work, s->lwork,
                       s->info) != CUSOLVER_STATUS_SUCCESS)
    return -1;
  return cusolverDnCpotrs(s->h, CUBLAS_FILL_MODE_LOWER, s->n, s->nrhs, s->a, s->n, s->b,
                          s->n, s->info) == CUSOLVER_STATUS_SUCCESS ? 0 : -1;
}

/* A diagonally dominant Hermitian matrix with a positive diagonal: HPD. */
static cuComplex *hpd_device(int n) {
  cuComplex *host = malloc((size_t)n * n * sizeof *host);
  srand(5);
  for (int j = 0; host != NULL && j < n; j++)
    for (int i = j; i < n; i++) {
      cuComplex v = i == j ? make_cuComplex(3.0f * n, 0) : random_sample();
      host[(size_t)j * n + i] = v;
      host[(size_t)i * n + j] = make_cuComplex(v.x, -v.y);
    }
  return to_device(host, (size_t)n * n);
}

double raw_solve_ms(int ordinal, int n, int nrhs, int reps) {
  double result = -1;
  solve_arg s = {.n = n, .nrhs = nrhs};
  CU(cudaSetDevice(ordinal));
  CHECK(cusolverDnCreate(&s.h) == CUSOLVER_STATUS_SUCCESS, "cusolverDnCreate");
  s.a0 = hpd_device(n);
  s.b0 = random_device((size_t)n * nrhs, 6);
  s.a = random_device((size_t)n * n, 7);
  s.b = random_device((size_t)n * nrhs, 8);
  CHECK(s.a0 != NULL && s.b0 != NULL && s.a != NULL && s.b != NULL, "random data");
  CHECK(cusolverDnCpotrf_bufferSize(s.h, CUBLAS_FILL_MODE_LOWER, n, s.a, n, &s.lwork) ==
            CUSOLVER_STATUS_SUCCESS, "cusolverDnCpotrf_bufferSize");
  CU(cudaMalloc((void **)&s.work, (size_t)s.lwork * sizeof *s.work));
  CU(cudaMalloc((void **)&s.info, sizeof *s.info));
  result = time_op(0, solve_op, &s, reps);
fail:
  if (s.h != NULL)
    cusolverDnDestroy(s.h);
  cudaFree(s.a0);
  cudaFree(s.b0);
  cudaFree(s.a);
  cudaFree(s.b);
  cudaFree(s.work);
  cudaFree(s.info);
  return result;
}

double raw_copy_ms(int ordinal, size_t bytes, int pinned, int to_device, int reps) {
  double result = -1, *ms = malloc((size_t)reps * sizeof *ms);
  unsigned char *host = NULL;
  void *dev = NULL;
  CHECK(ms != NULL, "malloc");
  CU(cudaSetDevice(ordinal));
  if (pinned)
    CU(cudaMallocHost((void **)&host, bytes));
  else
    CHECK((host = malloc(bytes)) != NULL, "malloc");
  for (size_t i = 0; i < bytes; i++)
    host[i] = (unsigned char)(i * 7);
  CU(cudaMalloc(&dev, bytes));
  for (int i = 0; i < 1 + reps; i++) {
    double t0 = bench_now_ms();
    if (to_device)
      CU(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    else
      CU(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    if (i > 0)
      ms[i - 1] = bench_now_ms() - t0;
  }
  result = bench_median(ms, reps);
fail:
  if (pinned)
    cudaFreeHost(host);
  else
    free(host);
  cudaFree(dev);
  free(ms);
  return result;
}
