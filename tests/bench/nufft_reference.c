#include "nufft_reference.h"

#include <cuComplex.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define WARMUP 2

/* The library's C interface (its public header cufinufft.h), declared here
 * so that nothing of it is needed to build. Its options struct is opaque
 * to us but for its first two members, which every release keeps: double
 * upsampfac, then int gpu_method; the buffer is larger than any release's
 * struct. */
typedef void *ref_plan;
typedef struct ref_api {
  void (*default_opts)(void *opts);
  int (*makeplan)(int type, int dim, const int64_t *n_modes, int iflag, int ntr, float eps,
                  ref_plan *plan, void *opts);
  int (*setpts)(ref_plan plan, int64_t m, float *x, float *y, float *z, int n, float *s,
                float *t, float *u);
  int (*execute)(ref_plan plan, cuFloatComplex *c, cuFloatComplex *fk);
  int (*destroy)(ref_plan plan);
} ref_api;

typedef union ref_opts {
  struct {
    double upsampfac;
    int gpu_method;
  } head;
  char bytes[1024];
} ref_opts;

static const ref_api *load(void) {
  static ref_api api;
  static int tried, ok;
  if (tried)
    return ok ? &api : NULL;
  tried = 1;
  const char *path = getenv("MR_BENCH_CUFINUFFT");
  void *lib = dlopen(path != NULL ? path : "libcufinufft.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "mr-bench: no reference NUFFT library (%s)\n", dlerror());
    return NULL;
  }
  *(void **)&api.default_opts = dlsym(lib, "cufinufft_default_opts");
  *(void **)&api.makeplan = dlsym(lib, "cufinufftf_makeplan");
  *(void **)&api.setpts = dlsym(lib, "cufinufftf_setpts");
  *(void **)&api.execute = dlsym(lib, "cufinufftf_execute");
  *(void **)&api.destroy = dlsym(lib, "cufinufftf_destroy");
  ok = api.default_opts && api.makeplan && api.setpts && api.execute && api.destroy;
  if (!ok)
    fprintf(stderr, "mr-bench: the reference NUFFT library lacks its C interface\n");
  return ok ? &api : NULL;
}

int nufft_reference_available(void) { return load() != NULL; }

/* Device buffers of one case. */
typedef struct ref_data {
  float *xyz[3];
  cuFloatComplex *c, *fk;
} ref_data;

/* One method: plan, set_points timed, execute timed; 0 or -1. */
static int run_method(const ref_api *api, int method, int type, int rank, const size_t *dims,
                      size_t batch, size_t n, const ref_data *d, double tol, int reps,
                      double *set_ms, double *exec_ms, double *upsampling) {
  ref_opts o;
  api->default_opts(&o);
  o.head.gpu_method = method;
  int64_t modes[3] = {(int64_t)dims[0], rank > 1 ? (int64_t)dims[1] : 1,
                      rank > 2 ? (int64_t)dims[2] : 1};
  ref_plan plan = NULL;
  if (api->makeplan(type, rank, modes, type == 1 ? 1 : -1, (int)batch, (float)tol, &plan, &o) != 0)
    return -1;
  *upsampling = o.head.upsampfac;
  double *ms = malloc((size_t)reps * sizeof *ms);
  cudaEvent_t a = NULL, b = NULL;
  int rc = ms != NULL && cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess
               ? 0
               : -1;
  for (int i = 0; rc == 0 && i < WARMUP + reps; i++) {
    cudaDeviceSynchronize();
    double t0 = bench_now_ms();
    rc = api->setpts(plan, (int64_t)n, d->xyz[0], d->xyz[1], rank > 2 ? d->xyz[2] : NULL, 0, NULL,
                     NULL, NULL);
    if (cudaDeviceSynchronize() != cudaSuccess)
      rc = -1;
    if (i >= WARMUP)
      ms[i - WARMUP] = bench_now_ms() - t0;
  }
  if (rc == 0)
    *set_ms = bench_median(ms, reps);
  for (int i = 0; rc == 0 && i < WARMUP + reps; i++) {
    float f;
    cudaEventRecord(a, 0);
    rc = api->execute(plan, d->c, d->fk);
    cudaEventRecord(b, 0);
    if (rc == 0 && (cudaEventSynchronize(b) != cudaSuccess ||
                    cudaEventElapsedTime(&f, a, b) != cudaSuccess))
      rc = -1;
    if (rc == 0 && i >= WARMUP)
      ms[i - WARMUP] = f;
  }
  if (rc == 0)
    *exec_ms = bench_median(ms, reps);
  if (a != NULL)
    cudaEventDestroy(a);
  if (b != NULL)
    cudaEventDestroy(b);
  free(ms);
  api->destroy(plan);
  return rc != 0 ? -1 : 0;
}

int nufft_reference_run(int ordinal, int type, int rank, const size_t *dims, size_t batch,
                        size_t n, const float *k, const mr_cfloat *in, mr_cfloat *out, double tol,
                        int reps, nufft_reference_result *r) {
  r->method = -1;
  r->execute_ms = r->set_points_ms = r->set_points_best_ms = r->upsampling = NAN;
  for (int m = 0; m < 3; m++)
    r->execute_ms_by_method[m] = NAN;
  const ref_api *api = load();
  if (api == NULL || cudaSetDevice(ordinal) != cudaSuccess)
    return -1;
  size_t pixels = dims[0] * (rank > 1 ? dims[1] : 1) * (rank > 2 ? dims[2] : 1);
  size_t nc = n * batch, nfk = pixels * batch;
  ref_data d = {{NULL, NULL, NULL}, NULL, NULL};
  float *host = malloc(n * sizeof *host);
  int rc = host != NULL ? 0 : -1;
  /* Its positions are angles in [-pi, pi): 2 pi k, one array per axis. */
  for (int a = 0; rc == 0 && a < rank; a++) {
    for (size_t j = 0; j < n; j++)
      host[j] = (float)(2 * M_PI * k[j * (size_t)rank + a]);
    if (cudaMalloc((void **)&d.xyz[a], n * sizeof *host) != cudaSuccess ||
        cudaMemcpy(d.xyz[a], host, n * sizeof *host, cudaMemcpyHostToDevice) != cudaSuccess)
      rc = -1;
  }
  free(host);
  if (rc == 0 && (cudaMalloc((void **)&d.c, nc * sizeof *d.c) != cudaSuccess ||
                  cudaMalloc((void **)&d.fk, nfk * sizeof *d.fk) != cudaSuccess))
    rc = -1;
  if (rc == 0)
    rc = cudaMemcpy(type == 1 ? (void *)d.c : (void *)d.fk, in,
                    (type == 1 ? nc : nfk) * sizeof(mr_cfloat), cudaMemcpyHostToDevice) ==
                 cudaSuccess
             ? 0
             : -1;
  for (int method = 1; rc == 0 && method <= 3; method++) {
    double set_ms, exec_ms, up;
    if (run_method(api, method, type, rank, dims, batch, n, &d, tol, reps, &set_ms, &exec_ms,
                   &up) < 0) {
      cudaGetLastError();
      continue;
    }
    r->execute_ms_by_method[method - 1] = exec_ms;
    if (!(set_ms >= r->set_points_best_ms))
      r->set_points_best_ms = set_ms;
    if (!(exec_ms >= r->execute_ms)) {
      r->method = method;
      r->execute_ms = exec_ms;
      r->set_points_ms = set_ms;
      r->upsampling = up;
      /* the output of the fastest method, for the comparison with ours */
      if (out != NULL &&
          cudaMemcpy(out, type == 1 ? (void *)d.fk : (void *)d.c,
                     (type == 1 ? nfk : nc) * sizeof(mr_cfloat), cudaMemcpyDeviceToHost) !=
              cudaSuccess)
        rc = -1;
    }
  }
  for (int a = 0; a < 3; a++)
    cudaFree(d.xyz[a]);
  cudaFree(d.c);
  cudaFree(d.fk);
  if (rc == 0 && r->method < 0) {
    fprintf(stderr, "mr-bench: no method of the reference NUFFT library ran\n");
    rc = -1;
  }
  return rc;
}
