/* mr-bench gpu: the operations of gpu/ at reconstruction sizes, on the GPU
 * and the CPU in the same run, with the raw CUDA library calls underneath
 * (the wrappers' overhead) and the reference times given in issue 3.
 * centered_over_raw: the centred FFT's time over cuFFT's uncentred one;
 * beside it cuFFT with identity LTO callbacks, the floor under a centering
 * folded into cuFFT's loads and stores, and the plain plan (plain_over_raw:
 * the wrapper around cuFFT alone). "toeplitz": one apply of the Toeplitz
 * operator (gpu/iterative/toeplitz.h), which folds the centering into its
 * own kernels, against the same steps with centred transforms and against
 * the floor of cuFFT plus the operator's elementwise passes.
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

#include "bench.h"
#ifdef MR_HAVE_CUDA
#include "raw_cuda.h"
#include "toeplitz.h"
#include "toeplitz_impl.h"
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

/* A buffer of n complex samples on dev holding random data (never zeros:
 * they can hide unwritten outputs and run faster than real data). */
static int random_buf(mr_device *dev, size_t n, unsigned seed, mr_buf **out) {
  mr_cfloat *host = malloc(n * sizeof *host);
  if (host == NULL)
    return MR_ENOMEM;
  bench_random_fill(host, n, seed);
  int rc = mr_buf_create(dev, n * sizeof *host, out);
  if (rc == 0)
    rc = mr_buf_upload(*out, 0, host, n * sizeof *host);
  free(host);
  return rc;
}

static mr_cfloat *data(const kase *k, int i) { return mr_buf_data(k->buf[i]); }

/* ---- FFT ---------------------------------------------------------------- */

static int fft_prepare(kase *k, mr_device *dev) {
  mr_fft_opts o = {.rank = k->rank, .dims = {k->dims[0], k->dims[1], k->dims[2]},
                   .batch = k->batch, .plain = k->plain};
  size_t n = k->dims[0] * k->dims[1] * k->dims[2] * k->batch;
  int rc = mr_fft_plan_create(dev, &o, &k->plan);
  if (rc == 0)
    rc = random_buf(dev, n, 1, &k->buf[0]);
  for (int i = 0; rc == 0 && mr_device_is_gpu(dev) && !k->plain && i < 2; i++) {
    k->host[i] = malloc(n * sizeof(mr_cfloat));
    rc = k->host[i] == NULL ? MR_ENOMEM : mr_host_alloc(dev, n * sizeof(mr_cfloat),
                                                         (void **)&k->pinned[i]);
    if (rc == 0) {
      bench_random_fill(k->host[i], n, 2);
      memcpy(k->pinned[i], k->host[i], n * sizeof(mr_cfloat));
    }
  }
  return rc;
}

static int fft_task(mr_device *dev, void *p) {
  (void)dev;
  kase *k = p;
  return mr_fft_execute(k->plan, MR_FFT_BACKWARD, data(k, 0), data(k, 0));
}

static int fft_host_task(kase *k, int pinned) {
  mr_cfloat **h = pinned ? k->pinned : k->host;
  return mr_fft_execute_host(k->plan, MR_FFT_BACKWARD, h[0], h[1]);
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
  int rc = random_buf(dev, a, 3, &k->buf[0]);
  if (rc == 0)
    rc = random_buf(dev, a, 4, &k->buf[1]);
  if (rc == 0)
    rc = random_buf(dev, c, 5, &k->buf[2]);
  return rc;
}

static int herk_task(mr_device *dev, void *p) {
  kase *k = p;
  return mr_blas_herk(dev, MR_BLAS_C, 1.0f, mr_cmat_dense(data(k, 0), k->k, k->n), 0.0f,
                      mr_cmat_dense(data(k, 2), k->n, k->n), 1);
}

static int gemm_task(mr_device *dev, void *p) {
  kase *k = p;
  return mr_blas_gemm(dev, MR_BLAS_C, MR_BLAS_N, 1.0f, mr_cmat_dense(data(k, 0), k->k, k->n),
                      mr_cmat_dense(data(k, 1), k->k, k->n), 0.0f,
                      mr_cmat_dense(data(k, 2), k->n, k->n), 1);
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
  int rc = mr_buf_create(dev, nn * sizeof *a, &k->buf[0]);
  if (rc == 0)
    rc = mr_buf_upload(k->buf[0], 0, a, nn * sizeof *a);
  free(a);
  if (rc == 0)
    rc = random_buf(dev, nb, 7, &k->buf[1]);
  if (rc == 0)
    rc = mr_buf_create(dev, nn * sizeof(mr_cfloat), &k->buf[2]);
  if (rc == 0)
    rc = mr_buf_create(dev, nb * sizeof(mr_cfloat), &k->buf[3]);
  return rc;
}

static int solve_task(mr_device *dev, void *p) {
  kase *k = p;
  size_t nn = (size_t)k->n * k->n, nb = (size_t)k->n * k->nrhs;
  int rc = mr_vec_copy(dev, nn, data(k, 0), data(k, 2));
  if (rc == 0)
    rc = mr_vec_copy(dev, nb, data(k, 1), data(k, 3));
  if (rc == 0)
    rc = mr_solve_hpd(dev, mr_cmat_dense(data(k, 2), k->n, k->n), 1e-2f,
                      mr_cmat_dense(data(k, 3), k->n, k->nrhs), 1);
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
  int rc = random_buf(dev, k->dims[0] * k->batch, 8, &k->buf[0]);
  if (rc == 0)
    rc = mr_buf_create(dev, k->dims[0] * sizeof(float), &k->buf[1]);
  return rc;
}

static int rss_task(mr_device *dev, void *p) {
  kase *k = p;
  return mr_coil_rss(dev, data(k, 0), k->batch, k->dims[0], mr_buf_data(k->buf[1]));
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
    rc = mr_device_time(dev, k->task, k, warmup, reps, t);
  if (rc == 0)
    *ms = bench_median(t, reps);
  for (int pinned = 0; rc == 0 && host_ms != NULL && k->host_task != NULL && pinned < 2;
       pinned++)
    rc = time_host(k, pinned, &host_ms[pinned]);
  if (rc < 0)
    fprintf(stderr, "mr-bench: %s %s on %s: %s (%s)\n", k->op, k->shape,
            gpu ? "GPU" : "CPU", mr_strerror(rc), mr_device_last_error());
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
    rc = up ? mr_buf_upload(b, 0, host, bytes) : mr_buf_download(b, 0, host, bytes);
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
    rc = pinned ? mr_host_alloc(gpu, bytes, &host) : ((host = malloc(bytes)) ? 0 : MR_ENOMEM);
    if (rc == 0) {
      bench_random_fill(host, bytes / sizeof(mr_cfloat), 9);
      rc = mr_buf_create(gpu, bytes, &b);
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
      fprintf(stderr, "mr-bench: transfer: %s (%s)\n", mr_strerror(rc), mr_device_last_error());
    mr_buf_destroy(b);
    if (pinned)
      mr_host_free(gpu, host);
    else
      free(host);
  }
  json_close(j, ']');
  return rc;
}

#ifdef MR_HAVE_CUDA
/* ---- Toeplitz operator ------------------------------------------------------ */

/* One apply of the Toeplitz operator (lambda 0) on an image of n, with
 * `coils` random maps (0: none), on the doubled grid. Three ways:
 * folded, the operator itself (plain transforms, the centering folded into
 * its kernel); centred, the same launches with fft.h's centred transforms
 * (expand, centred forward, times sqrt(P) F_c(q), centred backward,
 * gather: the operator before the fold); the floor, the operator's three
 * elementwise passes alone plus cuFFT forward and backward of the same
 * batch called directly (raw_cufft_round_trip_ms). Each is timed
 * TOEPLITZ_REPEAT times back to back and divided, as CG runs its applies
 * (its scalars stay on the device: no host wait between them), so that
 * no piece carries the gap before its first launch: timed one at a time,
 * the floor's separately timed pieces would each carry it. */
#define TOEPLITZ_REPEAT 20

typedef struct toeplitz_run {
  mr_device *dev;
  size_t dims[3], big[3], nvox, nbig, images, coils;
  mr_toeplitz *op;
  mr_fft_plan *centred, *centred1; /* `images` per execute; one */
  mr_buf *x, *y, *maps, *work, *kernel;
} toeplitz_run;

static const mr_cfloat *maps_of(const toeplitz_run *r) {
  return r->coils > 0 ? mr_buf_data(r->maps) : NULL;
}

static int folded_once(mr_device *dev, void *p) {
  (void)dev;
  toeplitz_run *r = p;
  return mr_toeplitz_apply(r->op, mr_buf_data(r->x), mr_buf_data(r->y));
}

/* The three elementwise passes, with the centred transforms between them
 * when `centred` is set. */
static int toeplitz_steps(toeplitz_run *r, int centred) {
  mr_cfloat *w = mr_buf_data(r->work);
  int rc = mr_toeplitz_cuda_expand(r->dev, r->images, maps_of(r), mr_buf_data(r->x), r->dims,
                                   r->big, w);
  if (rc == 0 && centred)
    rc = mr_fft_execute(r->centred, MR_FFT_FORWARD, w, w);
  if (rc == 0)
    rc = mr_toeplitz_cuda_kernel_mul(r->dev, r->images, r->nbig, mr_buf_data(r->kernel), w);
  if (rc == 0 && centred)
    rc = mr_fft_execute(r->centred, MR_FFT_BACKWARD, w, w);
  if (rc == 0)
    rc = mr_toeplitz_cuda_gather(r->dev, r->images, maps_of(r), w, r->dims, r->big, NULL, 0,
                                 mr_buf_data(r->y));
  return rc;
}

static int centred_once(mr_device *dev, void *p) {
  (void)dev;
  return toeplitz_steps(p, 1);
}

static int passes_once(mr_device *dev, void *p) {
  (void)dev;
  return toeplitz_steps(p, 0);
}

/* TOEPLITZ_REPEAT of each, back to back. */
static int repeat(mr_device_task once, mr_device *dev, void *p) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < TOEPLITZ_REPEAT; i++)
    rc = once(dev, p);
  return rc;
}

static int folded_task(mr_device *dev, void *p) { return repeat(folded_once, dev, p); }
static int centred_task(mr_device *dev, void *p) { return repeat(centred_once, dev, p); }
static int passes_task(mr_device *dev, void *p) { return repeat(passes_once, dev, p); }

/* The centred operator's kernel sqrt(P) F_c(q), q already in r->kernel. */
static int centred_kernel_task(mr_device *dev, void *p) {
  toeplitz_run *r = p;
  mr_cfloat *k = mr_buf_data(r->kernel);
  int rc = mr_fft_execute(r->centred1, MR_FFT_FORWARD, k, k);
  return rc == 0 ? mr_vec_scale(dev, r->nbig, (mr_cfloat)sqrtf((float)r->nbig), k) : rc;
}

static int toeplitz_prepare(toeplitz_run *r, mr_device *gpu, int rank, size_t side,
                            size_t coils) {
  *r = (toeplitz_run){.dev = gpu, .nvox = 1, .nbig = 1, .coils = coils,
                      .images = coils > 0 ? coils : 1};
  for (int d = 0; d < 3; d++) {
    r->dims[d] = d < rank ? side : 1;
    r->big[d] = 2 * r->dims[d] - (d >= rank);
    r->nvox *= r->dims[d];
    r->nbig *= r->big[d];
  }
  mr_toeplitz_opts o = {.rank = rank, .n = {r->dims[0], r->dims[1], r->dims[2]},
                        .reg = MR_REG_IDENTITY, .coils = coils};
  mr_fft_opts fo = {.rank = rank, .dims = {r->big[0], r->big[1], r->big[2]},
                    .batch = r->images};
  mr_cfloat *q = malloc(r->nbig * sizeof *q), *maps = malloc(r->images * r->nvox * sizeof *q);
  int rc = q != NULL && maps != NULL ? 0 : MR_ENOMEM;
  if (rc == 0) {
    bench_random_fill(q, r->nbig, 11);
    bench_random_fill(maps, r->images * r->nvox, 12);
    rc = mr_toeplitz_create(gpu, &o, q, &r->op);
  }
  if (rc == 0 && coils > 0)
    rc = mr_toeplitz_set_maps(r->op, maps);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->images * r->nvox * sizeof *q, &r->maps);
  if (rc == 0)
    rc = mr_buf_upload(r->maps, 0, maps, r->images * r->nvox * sizeof *q);
  if (rc == 0)
    rc = mr_fft_plan_create(gpu, &fo, &r->centred);
  fo.batch = 1;
  if (rc == 0)
    rc = mr_fft_plan_create(gpu, &fo, &r->centred1);
  if (rc == 0)
    rc = random_buf(gpu, r->nbig, 11, &r->kernel); /* the same values as q */
  if (rc == 0)
    rc = mr_device_run(gpu, centred_kernel_task, r);
  if (rc == 0)
    rc = random_buf(gpu, r->nvox, 13, &r->x);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->nvox * sizeof *q, &r->y);
  if (rc == 0)
    rc = mr_buf_create(gpu, r->images * r->nbig * sizeof *q, &r->work);
  free(q);
  free(maps);
  return rc;
}

static void toeplitz_release(toeplitz_run *r) {
  mr_toeplitz_destroy(r->op);
  mr_fft_plan_destroy(r->centred);
  mr_fft_plan_destroy(r->centred1);
  mr_buf_destroy(r->x);
  mr_buf_destroy(r->y);
  mr_buf_destroy(r->maps);
  mr_buf_destroy(r->work);
  mr_buf_destroy(r->kernel);
}

/* The output of `task` (host memory, nvox values). */
static int toeplitz_output(toeplitz_run *r, mr_device_task task, mr_cfloat *out) {
  int rc = mr_device_run(r->dev, task, r);
  return rc == 0 ? mr_buf_download(r->y, 0, out, r->nvox * sizeof *out) : rc;
}

static double rel_diff(const mr_cfloat *a, const mr_cfloat *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += pow(cabs((double complex)a[i] - b[i]), 2);
    den += pow(cabs((double complex)b[i]), 2);
  }
  return sqrt(num / den);
}

typedef struct toeplitz_shape {
  int rank;
  size_t side, coils; /* the image's side in every dimension; 0 coils: no maps */
} toeplitz_shape;

static int toeplitz_row(const bench_ctx *ctx, mr_device *gpu, const toeplitz_shape *shape) {
  int rank = shape->rank;
  size_t coils = shape->coils;
  toeplitz_run r;
  double ms[3] = {NAN, NAN, NAN}, t[GPU_REPS], raw = NAN, diff = NAN; /* folded, centred, passes */
  mr_device_task tasks[3] = {folded_task, centred_task, passes_task};
  int rc = toeplitz_prepare(&r, gpu, rank, shape->side, coils);
  for (int i = 0; rc == 0 && i < 3; i++)
    if ((rc = mr_device_time(gpu, tasks[i], &r, GPU_WARMUP, GPU_REPS, t)) == 0)
      ms[i] = bench_median(t, GPU_REPS) / TOEPLITZ_REPEAT;
  mr_cfloat *a = malloc(r.nvox * sizeof *a), *b = malloc(r.nvox * sizeof *b);
  if (rc == 0)
    rc = a != NULL && b != NULL ? toeplitz_output(&r, folded_once, a) : MR_ENOMEM;
  if (rc == 0 && (rc = toeplitz_output(&r, centred_once, b)) == 0)
    diff = rel_diff(a, b, r.nvox);
  int n[3];
  for (int d = 0; d < rank; d++)
    n[d] = (int)r.big[rank - 1 - d];
  if (rc == 0 && (raw = raw_cufft_round_trip_ms(mr_device_ordinal(gpu), rank, n, (int)r.images,
                                                TOEPLITZ_REPEAT, GPU_REPS)) < 0)
    raw = NAN;
  if (rc < 0)
    fprintf(stderr, "mr-bench: toeplitz: %s (%s)\n", mr_strerror(rc), mr_device_last_error());
  char image[64], grid[64];
  snprintf(image, sizeof image, rank == 2 ? "%zux%zu" : "%zux%zux%zu", r.dims[0], r.dims[1],
           r.dims[2]);
  snprintf(grid, sizeof grid, rank == 2 ? "%zux%zu x %zu" : "%zux%zux%zu x %zu", r.big[0],
           r.big[1], rank == 2 ? r.images : r.big[2], r.images);
  double floor_ms = raw + ms[2];
  fprintf(stderr, "toeplitz %-10s coils %2zu: folded %.4f centred %.4f floor %.4f ms "
          "(%.3f, %.3f of the floor)\n", image, coils, ms[0], ms[1], floor_ms,
          ms[0] / floor_ms, ms[1] / floor_ms);
  bench_json *j = ctx->json;
  json_open(j, NULL, '{');
  json_str(j, "image", image);
  json_int(j, "coils", (long long)coils);
  json_str(j, "doubled_grid", grid);
  json_num(j, "folded_ms", ms[0]);
  json_num(j, "centred_ms", ms[1]);
  json_num(j, "passes_ms", ms[2]);
  json_num(j, "raw_cufft_round_trip_ms", raw);
  json_num(j, "floor_ms", floor_ms);
  json_num(j, "folded_over_floor", ms[0] / floor_ms);
  json_num(j, "centred_over_floor", ms[1] / floor_ms);
  json_num(j, "centred_over_folded", ms[1] / ms[0]);
  json_num(j, "folded_vs_centred_rel_diff", diff);
  json_close(j, '}');
  free(a);
  free(b);
  toeplitz_release(&r);
  return rc;
}

static int toeplitz_rows(const bench_ctx *ctx, mr_device *gpu) {
  /* rank, image side, coils: the stream's 2-D CG-SENSE frame (128^2, 16
   * coils) and a larger one, mr-bench fhd's 3-D problems (64^3 and its
   * CG's 128^3), with and without coils. */
  static const toeplitz_shape full[] = {{2, 128, 0}, {2, 128, 16}, {2, 256, 0}, {2, 256, 16},
                                        {3, 64, 0},  {3, 64, 8},   {3, 128, 0}};
  static const toeplitz_shape quick[] = {{2, 16, 0}, {2, 16, 2}, {3, 8, 0}, {3, 8, 2}};
  const toeplitz_shape *shapes = ctx->quick ? quick : full;
  size_t count = ctx->quick ? 4 : sizeof full / sizeof *full;
  bench_json *j = ctx->json;
  json_str(j, "toeplitz_note",
           "one apply of the Toeplitz operator, lambda 0, random Q, maps and image; folded: "
           "the operator (plain cuFFT plans, the centering folded into its kernel); centred: "
           "the same launches with fft.h's centred transforms (the operator before the "
           "fold); passes: its three elementwise launches alone (expand, times the kernel, "
           "gather); raw_cufft_round_trip_ms: cuFFT forward and inverse of the same batch, "
           "called directly; floor: passes plus that round trip; each the time of one of "
           "20 run back to back (as CG runs its applies); folded_vs_centred_rel_diff: their "
           "outputs against each other");
  json_open(j, "toeplitz", '[');
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < count; i++)
    rc = toeplitz_row(ctx, gpu, &shapes[i]);
  json_close(j, ']');
  return rc;
}
#endif

static void describe(bench_json *j, const char *key, mr_device *dev) {
  mr_device_info info;
  if (dev == NULL || mr_device_info_get(dev, &info) != 0)
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
    rc = toeplitz_rows(ctx, gpu);
#endif
  if (rc == 0 && gpu != NULL)
    rc = transfers(ctx, gpu);
  if (gpu != NULL)
    mr_pool_release(ctx->pool, gpu);
  mr_pool_release(ctx->pool, cpu);
  return rc;
}
