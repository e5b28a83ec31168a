/* mr-bench: shared pieces of the benchmark subcommands.
 *
 * Each subcommand measures one area (gpu, and later grappa, nufft, fhd) and
 * writes one JSON object; progress goes to stderr. Timings are medians of
 * several runs after warm-up: GPU work with CUDA events on the device
 * worker's compute stream (mr_device_time), CPU work with the monotonic
 * clock. Benchmarks never fail on timing; they fail only when an operation
 * returns an error. */
#ifndef MR_BENCH_H
#define MR_BENCH_H

#include <stdio.h>

#include "buf.h"
#include "cfloat.h"
#include "device.h"
#include "pool.h"

/* A streaming JSON writer: values separated and nested correctly. */
typedef struct bench_json {
  FILE *f;
  int depth;
  int count[32]; /* values written so far at each depth */
} bench_json;

/* Every value call takes a key inside objects and NULL inside arrays. */
void json_open(bench_json *j, const char *key, char bracket); /* '{' or '[' */
void json_close(bench_json *j, char bracket);                 /* '}' or ']' */
void json_num(bench_json *j, const char *key, double v);      /* NaN: null */
void json_int(bench_json *j, const char *key, long long v);
void json_str(bench_json *j, const char *key, const char *s);

typedef struct bench_ctx {
  mr_pool *pool;
  int quick;      /* small sizes: a smoke run, not a measurement */
  bench_json *json;
  /* Options of the end-to-end subcommands (stream); NULL or 0: defaults. */
  const char *server;  /* the reconserver binary */
  const char *configs; /* the configs directory the servers get */
  const char *cases;   /* comma-separated case names to run */
  const char *gpus;    /* mr-bench --gpus: the GPU server's --gpus (stream) */
  int rounds;          /* best of this many rounds */
  int sessions;        /* load: sessions at once (0: each case's default) */
  int fake_gpus;       /* mr-bench --fake-gpus: also the load server's */
  int gpu_lanes;       /* the GPU servers' --gpu-lanes (stream, load; 0: theirs) */
} bench_ctx;

/* A subcommand: writes its results as members of the open object. */
typedef int (*bench_fn)(const bench_ctx *ctx);

int bench_gpu(const bench_ctx *ctx);
#ifdef MR_HAVE_CUDA
/* mr-bench gpu's "toeplitz" rows on gpu (bench_toeplitz.c). */
int bench_gpu_toeplitz(const bench_ctx *ctx, mr_device *gpu);
#endif
int bench_grappa(const bench_ctx *ctx);
int bench_fhd(const bench_ctx *ctx);
int bench_nufft(const bench_ctx *ctx);
int bench_stream(const bench_ctx *ctx);
int bench_split(const bench_ctx *ctx);
int bench_sparse(const bench_ctx *ctx);
int bench_espirit(const bench_ctx *ctx);
int bench_load(const bench_ctx *ctx);
int bench_sms(const bench_ctx *ctx);

/* Takes the CPU and, when the pool has one, GPU 0 (*gpu NULL otherwise)
 * and records their names in the open object ("gpu", "cpu",
 * "cpu_threads"). Give them back with bench_devices_release(). */
int bench_devices(const bench_ctx *ctx, mr_device **cpu, mr_device **gpu);
void bench_devices_release(const bench_ctx *ctx, mr_device *cpu, mr_device *gpu);

/* The H100 SXM's datasheet peaks, against which every kernel's work is set. */
#define BENCH_PEAK_FP32_GFLOPS 67000.0 /* FP32 without tensor cores */
#define BENCH_PEAK_FP64_GFLOPS 34000.0 /* FP64 without tensor cores */
#define BENCH_PEAK_FP64_TENSOR_GFLOPS 67000.0 /* FP64 on the tensor cores (DGEMM/ZGEMM) */
#define BENCH_PEAK_HBM_GBPS 3350.0     /* HBM3 */

/* The arithmetic peak a kernel's work is set against: the units it runs on. */
typedef enum bench_peak {
  BENCH_FP32,       /* single precision, CUDA cores */
  BENCH_FP64,       /* double precision, CUDA cores */
  BENCH_FP64_TENSOR /* double precision products on the tensor cores (cuBLAS ZGEMM/ZHERK) */
} bench_peak;

/* Writes, as members of the open object, the physical limits of one timed
 * kernel: the work it must do (gflop, counted from the algorithm, not from
 * what a library does) and the bytes it must move through device memory
 * (mbyte: each input read once, each output written once), both written
 * too, the rates reached in `ms`, their fractions of the peaks (`peak`:
 * the arithmetic one), and which peak is nearer ("bound": "memory" or
 * "compute"), so the next step is visible. Keys are prefixed with `prefix`
 * (e.g. "gpu_"). */
void bench_limits(bench_json *j, const char *prefix, double gflop, double mbyte, double ms,
                  bench_peak peak);

/* n complex samples with parts uniform in [-1, 1), the same for the same
 * seed in every run (a 64-bit linear congruential generator). */
void bench_random_fill(mr_cfloat *x, size_t n, unsigned seed);

/* A new buffer (*out, the caller's) of n such samples, seed's, on dev:
 * random data, never zeros, which can hide unwritten outputs and run faster
 * than real data. */
int bench_random_buf(mr_device *dev, size_t n, unsigned seed, mr_buf **out);

/* Median of n values (n >= 1); reorders v. */
double bench_median(double *v, int n);

/* --case: 1 when name is in the comma-separated list (NULL: every name
 * is); bench_unknown_case() writes the first name of list that is none of
 * names[0..count-1] into out and returns 1, else 0. */
int bench_listed(const char *list, const char *name);
int bench_unknown_case(const char *list, const char *const *names, int count, char *out,
                       size_t size);

/* Milliseconds on the monotonic clock. */
double bench_now_ms(void);

#endif
