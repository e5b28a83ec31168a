/* mr-bench gpu: the operations of gpu/ at reconstruction sizes, on the GPU
 * and the CPU in the same run, with the raw CUDA library calls underneath
 * (the wrappers' overhead) and the reference times given in issue 3.
 * centered_over_raw: the centred FFT's time over cuFFT's uncentred one;
 * beside it cuFFT with identity LTO callbacks, the floor under a centering
 * folded into cuFFT's loads and stores, and the plain plan (plain_over_raw:
 * the wrapper around cuFFT alone). "toeplitz" (bench_toeplitz.c): one
 * apply of the Toeplitz operator, which folds the centering into its own
 * kernels, against the same steps with centred transforms and against the
 * floor of cuFFT plus the operator's elementwise passes.
 *
 * Rates are counted from the work an operation must do, not from what a
 * library does: FFT 5 N log2 N flops per array; HERK 4 n^2 k; GEMM 8 n^2 k;
 * Cholesky solve 4/3 n^3 + 8 n^2 nrhs. Bytes are the least an operation must
 * move through device memory: each input read once, each output written
 * once. Both are set against the H100's datasheet peaks. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cmat.h"
#include "coil.h"
#include "fft.h"
#include "host.h"
#include "solve.h"
#include "vec.h"
#include "bench.h"
#include "test_err.h"
#ifdef MR_HAVE_CUDA
#include "raw_cuda.h"
#endif


#define GPU_WARMUP 3
#define GPU_REPS 10
#define CPU_WARMUP 1
#define CPU_REPS 3
#define HOST_REPS 5

/* One measured operation: sizes, and its state on the device it runs on. */
typedef struct kase kase;
struct kase {
  const char *op;
  char shape[64];
  double gflop, mbyte;
  double issue_raw_ms; /* NaN: the issue gives none */
  const char *note;
  int (*prepare)(kase *k, mr_device *dev);
  mr_device_task task;
  int (*host_task)(kase *k, int pinned); /* NULL: no host-memory variant */
  double (*raw)(const kase *k, int ordinal); /* NULL: no raw reference */
  /* sizes */
  int rank;
  size_t dims[3], batch; /* FFT; coil: dims[0] pixels, batch coils */
  int plain;             /* FFT: a plain plan (mr_fft_opts.plain) */
  int n, k, nrhs;        /* linear algebra */
  /* state on the device being measured */
  mr_device *dev;
  mr_fft_plan *plan;
  mr_buf *buf[4];
  mr_cfloat *host[2];   /* pageable (malloc) */
  mr_cfloat *pinned[2]; /* from mr_host_alloc */
};

static void release(kase *k) {
  mr_fft_plan_destroy(k->plan);
  k->plan = NULL;
  for (int i = 0; i < 4; i++) {
    mr_buf_destroy(k->buf[i]);
    k->buf[i] = NULL;
  }
  for (int i = 0; i < 2; i++) {
    free(k->host[i]);
    mr_host_free(k->dev, k->pinned[i]);
    k->host[i] = k->pinned[i] = NULL;
  }
}

static mr_cfloat *data(const kase *k, int i) { return mr_buf_data(k->buf[i]); }

/* ---- FFT ---------------------------------------------------------------- */

static int fft_prepare(kase *k, mr_device *dev) {
  mr_fft_opts o = {.rank = k->rank, .dims = {k->dims[0], k->dims[1], k->dims[2]},
                   .batch = k->batch, .plain = k->plain};
  size_t n = k->dims[0] * k->dims[1] * k->dims[2] * k->batch;
  int rc = mr_fft_plan_create(dev, &o, &k->plan, TERR);
  if (rc == 0)
    rc = bench_random_buf(dev, n, 1, &k->buf[0]);
  for (int i = 0; rc == 0 && mr_device_is_gpu(dev) && !k->plain && i < 2; i++) {
    k->host[i] = malloc(n * sizeof(mr_cfloat));
    rc = k->host[i] == NULL
             ? MR_ENOMEM
             : mr_host_alloc(dev, n * sizeof(mr_cfloat), (void **)&k->pinned[i], TERR);
    if (rc == 0) {
      bench_random_fill(k->host[i], n, 2);
      memcpy(k->pinned[i], k->host[i], n * sizeof(mr_cfloat));
    }
  }
  return rc;
}

static int fft_task(mr_device *dev, void *p, mr_err *err) {
  (void)dev;
  kase *k = p;
  return mr_fft_execute(k->plan, MR_FFT_BACKWARD, data(k, 0), data(k, 0), err);
}

static int fft_host_task(kase *k, int pinned) {
  mr_cfloat **h = pinned ? k->pinned : k->host;
  return mr_fft_execute_host(k->plan, MR_FFT_BACKWARD, h[0], h[1], TERR);
}

#ifdef MR_HAVE_CUDA
static double fft_raw(const kase *k, int ordinal) {
  int n[3];
  for (int d = 0; d < k->rank; d++)
    n[d] = (int)k->dims[k->rank - 1 - d];
  return raw_cufft_ms(ordinal, k->rank, n, (int)k->batch, GPU_REPS);
}

static double fft_raw_callbacks(const kase *k, int ordinal, int which) {
  int n[3];
  for (int d = 0; d < k->rank; d++)
    n[d] = (int)k->dims[k->rank - 1 - d];
  return raw_cufft_callback_ms(ordinal, k->rank, n, (int)k->batch, which, GPU_REPS);
}
#endif

static kase fft_case(int rank, size_t nx, size_t ny, size_t nz, size_t batch, double issue_ms) {
  kase k = {.op = rank == 2 ? "fft2d" : "fft3d", .rank = rank, .dims = {nx, ny, nz},
            .batch = batch, .issue_raw_ms = issue_ms, .prepare = fft_prepare,
            .task = fft_task, .host_task = fft_host_task,
            .note = "centered backward transform in place; raw_ms: cuFFT alone, uncentered; "
                    "plain_ms: the plain plan (uncentred, unscaled: cuFFT through the "
                    "wrapper); raw_*_callback*_ms: the same cuFFT transform with identity LTO "
                    "callbacks (load, store, both; null: cuFFT could not plan it), what a "
                    "centering folded into cuFFT's callbacks would cost at the least; "
                    "gpu_host_ms: from and to pageable host memory, gpu_host_pinned_ms: "
                    "pinned (mr_host_alloc); both include PCIe both ways"};
#ifdef MR_HAVE_CUDA
  k.raw = fft_raw;
#endif
  size_t len = nx * ny * nz;
  snprintf(k.shape, sizeof k.shape, rank == 2 ? "%zux%zu x %zu" : "%zux%zux%zu x %zu",
           nx, ny, rank == 2 ? batch : nz, batch);
  k.gflop = 5.0 * len * log2((double)len) * batch / 1e9;
  k.mbyte = 2.0 * len * batch * sizeof(mr_cfloat) / 1e6;
  return k;
}

/* ---- HERK and GEMM -------------------------------------------------------- */

static int blas_prepare(kase *k, mr_device *dev) {
  size_t a = (size_t)k->k * k->n, c = (size_t)k->n * k->n;
  int rc = bench_random_buf(dev, a, 3, &k->buf[0]);
  if (rc == 0)
    rc = bench_random_buf(dev, a, 4, &k->buf[1]);
  if (rc == 0)
    rc = bench_random_buf(dev, c, 5, &k->buf[2]);
  return rc;
}

static int herk_task(mr_device *dev, void *p, mr_err *err) {
  kase *k = p;
  return mr_blas_herk(dev, MR_BLAS_C, 1.0f, mr_cmat_dense(data(k, 0), k->k, k->n), 0.0f,
                      mr_cmat_dense(data(k, 2), k->n, k->n), 1, err);
}

static int gemm_task(mr_device *dev, void *p, mr_err *err) {
  kase *k = p;
  return mr_blas_gemm(dev, MR_BLAS_C, MR_BLAS_N, 1.0f, mr_cmat_dense(data(k, 0), k->k, k->n),
                      mr_cmat_dense(data(k, 1), k->k, k->n), 0.0f,
                      mr_cmat_dense(data(k, 2), k->n, k->n), 1, err);
}

#ifdef MR_HAVE_CUDA
static double herk_raw(const kase *k, int ordinal) {
  return raw_cherk_ms(ordinal, k->n, k->k, GPU_REPS);
}
static double gemm_raw(const kase *k, int ordinal) {
  return raw_cgemm_ms(ordinal, k->n, k->k, GPU_REPS);
}
#endif

static kase blas_case(int herk, int n, int kk, double issue_ms) {
  kase k = {.op = herk ? "herk" : "gemm", .n = n, .k = kk, .issue_raw_ms = issue_ms,
            .prepare = blas_prepare, .task = herk ? herk_task : gemm_task,
            .note = herk ? "C = A^H A, A k x n, both triangles written; GPU: CGEMM up to "
                           "n 1024 (faster there), else CHERK plus a mirror pass; raw: CHERK; "
                           "the issue's reference is CHERK at k = 6096"
                         : "C = A^H B, A and B k x n"};
#ifdef MR_HAVE_CUDA
  k.raw = herk ? herk_raw : gemm_raw;
#endif
  snprintf(k.shape, sizeof k.shape, "n %d, k %d", n, kk);
  k.gflop = (herk ? 4.0 : 8.0) * n * (double)n * kk / 1e9;
  k.mbyte = ((herk ? 1.0 : 2.0) * kk * n + (double)n * n) * sizeof(mr_cfloat) / 1e6;
  return k;
}

/* ---- solve ---------------------------------------------------------------- */

/* buf[0], buf[1]: pristine A and B; buf[2], buf[3]: the copies solved. */
static int solve_prepare(kase *k, mr_device *dev) {
  size_t nn = (size_t)k->n * k->n, nb = (size_t)k->n * k->nrhs;
  mr_cfloat *a = malloc(nn * sizeof *a);
  if (a == NULL)
    return MR_ENOMEM;
  bench_random_fill(a, nn, 6);
  /* Hermitian, diagonally dominant with a positive diagonal: HPD */
  for (int j = 0; j < k->n; j++) {
    a[(size_t)j * k->n + j] = 3.0f * k->n;
    for (int i = j + 1; i < k->n; i++)
      a[(size_t)i * k->n + j] = conjf(a[(size_t)j * k->n + i]);
  }
  int rc = mr_buf_create(dev, nn * sizeof *a, &k->buf[0], TERR);
  if (rc == 0)
    rc = mr_buf_upload(k->buf[0], 0, a, nn * sizeof *a, TERR);
  free(a);
  if (rc == 0)
    rc = bench_random_buf(dev, nb, 7, &k->buf[1]);
  if (rc == 0)
    rc = mr_buf_create(dev, nn * sizeof(mr_cfloat), &k->buf[2], TERR);
  if (rc == 0)
    rc = mr_buf_create(dev, nb * sizeof(mr_cfloat), &k->buf[3], TERR);
  return rc;
}

static int solve_task(mr_device *dev, void *p, mr_err *err) {
  kase *k = p;
  size_t nn = (size_t)k->n * k->n, nb = (size_t)k->n * k->nrhs;
  int rc = mr_vec_copy(dev, nn, data(k, 0), data(k, 2), err);
  if (rc == 0)
    rc = mr_vec_copy(dev, nb, data(k, 1), data(k, 3), err);
  if (rc == 0)
    rc = mr_solve_hpd(dev, mr_cmat_dense(data(k, 2), k->n, k->n), 1e-2f,
                      mr_cmat_dense(data(k, 3), k->n, k->nrhs), 1, err);
  return rc;
}

#ifdef MR_HAVE_CUDA
static double solve_raw(const kase *k, int ordinal) {
  return raw_solve_ms(ordinal, k->n, k->nrhs, GPU_REPS);
}
#endif

static kase solve_case(int n, int nrhs) {
  kase k = {.op = "solve", .n = n, .nrhs = nrhs, .issue_raw_ms = NAN,
            .prepare = solve_prepare, .task = solve_task,
            .note = "(A + lambda I) X = B, potrf + potrs; each run first restores A and B "
                    "with two device copies (the raw reference does the same)"};
#ifdef MR_HAVE_CUDA
  k.raw = solve_raw;
#endif
  snprintf(k.shape, sizeof k.shape, "n %d, nrhs %d", n, nrhs);
  double dn = n;
  k.gflop = (4.0 / 3.0 * dn * dn * dn + 8.0 * dn * dn * nrhs) / 1e9;
  k.mbyte = 2.0 * (dn * dn + dn * nrhs) * sizeof(mr_cfloat) / 1e6;
  return k;
}

/* ---- coil combination ----------------------------------------------------- */

static int coil_prepare(kase *k, mr_device *dev) {
  int rc = bench_random_buf(dev, k->dims[0] * k->batch, 8, &k->buf[0]);
  if (rc == 0)
    rc = mr_buf_create(dev, k->dims[0] * sizeof(float), &k->buf[1], TERR);
  return rc;
}

static int rss_task(mr_device *dev, void *p, mr_err *err) {
  kase *k = p;
  return mr_coil_rss(dev, data(k, 0), k->batch, k->dims[0], mr_buf_data(k->buf[1]), err);
}

static kase rss_case(size_t pixels, size_t coils) {
  kase k = {.op = "coil_rss", .dims = {pixels, 1, 1}, .batch = coils, .issue_raw_ms = NAN,
            .prepare = coil_prepare, .task = rss_task,
            .note = "root sum of squares over coils; memory bound"};
  snprintf(k.shape, sizeof k.shape, "%zu pixels x %zu coils", pixels, coils);
  k.gflop = 4.0 * pixels * coils / 1e9; /* |x|^2 summed: 2 mul, 2 add a sample */
  k.mbyte = (pixels * coils * sizeof(mr_cfloat) + pixels * sizeof(float)) / 1e6;
  return k;
}

/* ---- running and reporting ------------------------------------------------ */

/* Wall-clock median of the host-memory variant, after one warm-up run. */
static int time_host(kase *k, int pinned, double *ms) {
  double t[HOST_REPS];
  int rc = 0;
  for (int i = 0; rc == 0 && i < 1 + HOST_REPS; i++) {
    double t0 = bench_now_ms();
    rc = k->host_task(k, pinned);
    if (i > 0)
      t[i - 1] = bench_now_ms() - t0;
  }
  if (rc == 0)
    *ms = bench_median(t, HOST_REPS);
  return rc;
}

static int measure(kase *k, mr_device *dev, double *ms, double host_ms[2]) {
  int gpu = mr_device_is_gpu(dev);
  int warmup = gpu ? GPU_WARMUP : CPU_WARMUP, reps = gpu ? GPU_REPS : CPU_REPS;
  double t[GPU_REPS];
  k->dev = dev;
  int rc = k->prepare(k, dev);
  if (rc == 0)
    rc = mr_device_time(dev, k->task, k, warmup, reps, t, TERR);
  if (rc == 0)
    *ms = bench_median(t, reps);
  for (int pinned = 0; rc == 0 && host_ms != NULL && k->host_task != NULL && pinned < 2;
       pinned++)
    rc = time_host(k, pinned, &host_ms[pinned]);
  if (rc < 0)
    fprintf(stderr, "mr-bench: %s %s on %s: %s (%s)\n", k->op, k->shape, gpu ? "GPU" : "CPU",
            mr_strerror(rc), mr_test_last_error());
  release(k);
  return rc;
}

/* One line per case on stderr, for a reader of the log's tail. */
static void summary_line(const kase *k, double gpu_ms, double raw_ms, double cpu_ms) {
  fprintf(stderr, "%-8s %-22s %9.4f %9.4f %9.4f %10.3f %8.1fx %6.1f%% %6.1f%%\n", k->op,
          k->shape, gpu_ms, raw_ms, k->issue_raw_ms, cpu_ms, cpu_ms / gpu_ms,
          100.0 * k->gflop / gpu_ms * 1e3 / BENCH_PEAK_FP32_GFLOPS,
          100.0 * k->mbyte / gpu_ms / BENCH_PEAK_HBM_GBPS);
}

/* ms: gpu, raw, cpu, host pageable, host pinned */
static int run_case(const bench_ctx *ctx, kase *k, mr_device *gpu, mr_device *cpu,
                    double ms[5]) {
  double gpu_ms = NAN, host_ms[2] = {NAN, NAN}, raw_ms = NAN, cpu_ms = NAN;
  double callback_ms[3] = {NAN, NAN, NAN}; /* FFT: raw with load, store, both callbacks */
  double plain_ms = NAN;                     /* FFT: the plain plan */
  fprintf(stderr, "mr-bench: %s %s\n", k->op, k->shape);
  int rc = 0;
  if (gpu != NULL) {
    rc = measure(k, gpu, &gpu_ms, host_ms);
    if (rc == 0 && k->prepare == fft_prepare) {
      k->plain = 1;
      rc = measure(k, gpu, &plain_ms, NULL);
      k->plain = 0;
    }
#ifdef MR_HAVE_CUDA
    if (rc == 0 && k->raw != NULL && (raw_ms = k->raw(k, mr_device_ordinal(gpu))) < 0)
      raw_ms = NAN;
    for (int c = 0; rc == 0 && k->prepare == fft_prepare && c < 3; c++)
      if ((callback_ms[c] = fft_raw_callbacks(k, mr_device_ordinal(gpu), c + 1)) < 0)
        callback_ms[c] = NAN;
#endif
  }
  if (rc == 0)
    rc = measure(k, cpu, &cpu_ms, NULL);
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_str(j, "op", k->op);
  json_str(j, "shape", k->shape);
  json_num(j, "gpu_ms", gpu_ms);
  bench_limits(j, "gpu_", k->gflop, k->mbyte, gpu_ms, BENCH_FP32);
  json_num(j, "raw_ms", raw_ms);
  json_num(j, "wrapper_overhead_pct", 100.0 * (gpu_ms - raw_ms) / raw_ms);
  json_num(j, "issue_raw_ms", k->issue_raw_ms);
  if (k->prepare == fft_prepare) {
    static const char *const keys[3] = {"raw_load_callback_ms", "raw_store_callback_ms",
                                        "raw_both_callbacks_ms"};
    json_num(j, "centered_over_raw", gpu_ms / raw_ms);
    json_num(j, "plain_ms", plain_ms);
    json_num(j, "plain_over_raw", plain_ms / raw_ms);
    for (int c = 0; c < 3; c++)
      json_num(j, keys[c], callback_ms[c]);
  }
  if (k->host_task != NULL) {
    json_num(j, "gpu_host_ms", host_ms[0]);
    json_num(j, "gpu_host_pinned_ms", host_ms[1]);
  }
  json_num(j, "cpu_ms", cpu_ms);
  json_num(j, "cpu_gflops", k->gflop / cpu_ms * 1e3);
  json_num(j, "gpu_speedup", cpu_ms / gpu_ms);
  json_str(j, "note", k->note);
  json_close(j, '}');
  fflush(j->f);
  ms[0] = gpu_ms;
  ms[1] = raw_ms;
  ms[2] = cpu_ms;
  ms[3] = host_ms[0];
  ms[4] = host_ms[1];
  return rc;
}

/* Wall-clock median of uploads (or downloads) of a buffer from host memory. */
static int time_transfer(mr_buf *b, void *host, size_t bytes, int up, double *ms) {
  double t[HOST_REPS];
  int rc = 0;
  for (int i = 0; rc == 0 && i < 1 + HOST_REPS; i++) {
    double t0 = bench_now_ms();
    rc = up ? mr_buf_upload(b, 0, host, bytes, TERR) : mr_buf_download(b, 0, host, bytes, TERR);
    if (i > 0)
      t[i - 1] = bench_now_ms() - t0;
  }
  if (rc == 0)
    *ms = bench_median(t, HOST_REPS);
  return rc;
}

/* mr_buf_upload/download from pageable and from pinned host memory, with
 * plain cudaMemcpy of the same kind of memory underneath. */
static int transfers(const bench_ctx *ctx, mr_device *gpu) {
  size_t bytes = (size_t)(ctx->quick ? 8 : 256) << 20;
  bench_json *j = ctx->json;
  json_open(j, "transfers", '[');
  int rc = 0;
  for (int pinned = 0; rc == 0 && pinned < 2; pinned++) {
    void *host = NULL;
    mr_buf *b = NULL;
    rc = pinned ? mr_host_alloc(gpu, bytes, &host, TERR) : ((host = malloc(bytes)) ? 0 : MR_ENOMEM);
    if (rc == 0) {
      bench_random_fill(host, bytes / sizeof(mr_cfloat), 9);
      rc = mr_buf_create(gpu, bytes, &b, TERR);
    }
    for (int up = 1; rc == 0 && up >= 0; up--) {
      double ms = NAN, raw = NAN;
      rc = time_transfer(b, host, bytes, up, &ms);
#ifdef MR_HAVE_CUDA
      if (rc == 0 && (raw = raw_copy_ms(mr_device_ordinal(gpu), bytes, pinned, up, HOST_REPS)) < 0)
        raw = NAN;
#endif
      json_open(j, NULL, '{');
      json_str(j, "direction", up ? "upload" : "download");
      json_str(j, "host_memory", pinned ? "pinned" : "pageable");
      json_num(j, "mbyte", bytes / 1e6);
      json_num(j, "ms", ms);
      json_num(j, "gbps", bytes / 1e6 / ms);
      json_num(j, "raw_cudamemcpy_ms", raw);
      json_num(j, "raw_cudamemcpy_gbps", bytes / 1e6 / raw);
      json_close(j, '}');
      fprintf(stderr, "%-8s %-9s %7.1f MB %8.3f ms %6.1f GB/s (cudaMemcpy %6.1f GB/s)\n",
              up ? "upload" : "download", pinned ? "pinned" : "pageable", bytes / 1e6, ms,
              bytes / 1e6 / ms, bytes / 1e6 / raw);
    }
    if (rc < 0)
      fprintf(stderr, "mr-bench: transfer: %s (%s)\n", mr_strerror(rc), mr_test_last_error());
    mr_buf_destroy(b);
    if (pinned)
      mr_host_free(gpu, host);
    else
      free(host);
  }
  json_close(j, ']');
  return rc;
}

static void describe(bench_json *j, const char *key, mr_device *dev) {
  mr_device_info info;
  if (dev == NULL || mr_device_info_get(dev, &info, TERR) != 0)
    return;
  json_open(j, key, '{');
  json_str(j, "name", info.name);
  if (info.ordinal >= 0) {
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
    json_str(j, "compute_capability", cc);
    json_int(j, "multiprocessors", info.units);
  } else {
    json_int(j, "threads", info.units);
  }
  json_num(j, "memory_gib", info.mem_total / 1073741824.0);
  json_close(j, '}');
}

int bench_gpu(const bench_ctx *ctx) {
  mr_device *cpu, *gpu = NULL;
  mr_err err = {0};
  if (mr_pool_acquire(ctx->pool, "cpu", &cpu, &err) != 0 ||
      (mr_pool_gpu_count(ctx->pool) > 0 &&
       mr_pool_acquire(ctx->pool, "auto", &gpu, &err) != 0)) {
    fprintf(stderr, "mr-bench: %s\n", err.msg);
    return -1;
  }
  bench_json *j = ctx->json;
  describe(j, "gpu", gpu);
  describe(j, "cpu", cpu);
  json_num(j, "peak_fp32_gflops", BENCH_PEAK_FP32_GFLOPS);
  json_num(j, "peak_hbm_gbps", BENCH_PEAK_HBM_GBPS);
  json_str(j, "timing",
           "GPU: CUDA events on the worker's compute stream, median of 10 after 3 "
           "warm-up runs; CPU: monotonic clock, median of 3 after 1; gpu_host_ms: "
           "wall clock, median of 5 after 1");
  if (ctx->quick)
    json_str(j, "warning", "--quick: toy sizes, not a measurement");
  kase cases[16];
  int n = 0;
  int q = ctx->quick;
  cases[n++] = fft_case(2, q ? 64 : 256, q ? 64 : 256, 1, q ? 4 : 32, q ? NAN : 0.024);
  cases[n++] = fft_case(3, q ? 32 : 256, q ? 32 : 256, q ? 32 : 256, 1, q ? NAN : 0.32);
  /* 3D over coils; the 2D NUFFT's oversampled grid (2 x 256, 8 coils); an
   * even size that is no power of two; an odd one (the general path: a pass
   * before and after cuFFT, against one for even sizes). */
  cases[n++] = fft_case(3, q ? 16 : 128, q ? 16 : 128, q ? 16 : 128, q ? 2 : 8, NAN);
  cases[n++] = fft_case(2, q ? 64 : 512, q ? 64 : 512, 1, q ? 2 : 8, NAN);
  cases[n++] = fft_case(2, q ? 40 : 320, q ? 40 : 320, 1, q ? 4 : 32, NAN);
  cases[n++] = fft_case(2, q ? 63 : 255, q ? 63 : 255, 1, q ? 4 : 32, NAN);
  cases[n++] = blas_case(1, q ? 64 : 640, q ? 300 : 6000, q ? NAN : 0.46);
  cases[n++] = blas_case(1, q ? 128 : 2560, q ? 300 : 6000, q ? NAN : 3.4);
  cases[n++] = blas_case(0, q ? 64 : 640, q ? 300 : 6000, NAN);
  cases[n++] = blas_case(0, q ? 128 : 2560, q ? 300 : 6000, NAN);
  /* nrhs: 32 and 128 coils times (R - 1) = 3 for acceleration 4 */
  cases[n++] = solve_case(q ? 64 : 640, q ? 12 : 96);
  cases[n++] = solve_case(q ? 128 : 2560, q ? 24 : 384);
  cases[n++] = rss_case(q ? 4096 : 65536, q ? 4 : 32);
  json_open(j, "results", '[');
  int rc = 0, done = 0;
  double ms[16][5];
  for (; done < n && rc == 0; done++)
    rc = run_case(ctx, &cases[done], gpu, cpu, ms[done]);
  json_close(j, ']');
  fprintf(stderr, "%-8s %-22s %9s %9s %9s %10s %9s %7s %7s\n", "op", "shape", "gpu_ms",
          "raw_ms", "issue_ms", "cpu_ms", "speedup", "%fp32", "%hbm");
  for (int i = 0; i < done; i++)
    summary_line(&cases[i], ms[i][0], ms[i][1], ms[i][2]);
  for (int i = 0; i < done; i++)
    if (cases[i].host_task != NULL)
      fprintf(stderr, "%-8s %-22s from host memory: pageable %.3f ms, pinned %.3f ms\n",
              cases[i].op, cases[i].shape, ms[i][3], ms[i][4]);
#ifdef MR_HAVE_CUDA
  if (rc == 0 && gpu != NULL)
    rc = bench_gpu_toeplitz(ctx, gpu);
#endif
  if (rc == 0 && gpu != NULL)
    rc = transfers(ctx, gpu);
  if (gpu != NULL)
    mr_pool_release(ctx->pool, gpu);
  mr_pool_release(ctx->pool, cpu);
  return rc;
}
