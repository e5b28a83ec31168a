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

#include "gpu.h"

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
  int rounds;          /* best of this many rounds */
} bench_ctx;

/* A subcommand: writes its results as members of the open object. */
typedef int (*bench_fn)(const bench_ctx *ctx);

int bench_gpu(const bench_ctx *ctx);
int bench_grappa(const bench_ctx *ctx);
int bench_fhd(const bench_ctx *ctx);
int bench_nufft(const bench_ctx *ctx);
int bench_stream(const bench_ctx *ctx);

/* Takes the CPU and, when the pool has one, GPU 0 (*gpu NULL otherwise)
 * and records their names in the open object ("gpu", "cpu",
 * "cpu_threads"). Give them back with bench_devices_release(). */
int bench_devices(const bench_ctx *ctx, mr_device **cpu, mr_device **gpu);
void bench_devices_release(const bench_ctx *ctx, mr_device *cpu, mr_device *gpu);

/* Median of n values (n >= 1); reorders v. */
double bench_median(double *v, int n);

/* Milliseconds on the monotonic clock. */
double bench_now_ms(void);

#endif
