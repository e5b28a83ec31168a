#include "test_gpu_common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_support.h"

static mr_pool *pool;
static mr_device *cpu, *gpu;

static void quiet(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "  [pool] %s\n", line);
}

int gpu_test_init(int argc, char **argv) {
  int cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
  mr_pool_opts opts = {.gpus = cuda ? "all" : "none", .log = quiet};
  mr_err err = {0};
  if (mr_pool_create(&opts, &pool, &err) != 0) {
    fprintf(stderr, "pool: %s\n", err.msg);
    exit(1);
  }
  if (mr_pool_acquire(pool, "cpu", &cpu, &err) != 0) {
    fprintf(stderr, "pool: %s\n", err.msg);
    exit(1);
  }
  if (cuda) {
    if (mr_pool_gpu_count(pool) == 0) {
      fprintf(stderr, "skipped: no usable GPU (see the pool line above)\n");
      gpu_test_fini();
      exit(MR_TEST_SKIP);
    }
    if (mr_pool_acquire(pool, "auto", &gpu, &err) != 0) {
      fprintf(stderr, "pool: %s\n", err.msg);
      exit(1);
    }
  }
  return cuda;
}

void gpu_test_fini(void) {
  if (gpu != NULL)
    mr_pool_release(pool, gpu);
  if (cpu != NULL)
    mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  pool = NULL;
  cpu = gpu = NULL;
}

mr_pool *gpu_test_pool(void) { return pool; }
mr_device *gpu_test_cpu(void) { return cpu; }
mr_device *gpu_test_gpu(void) { return gpu; }

mr_device *gpu_test_cpu_pool(int threads, mr_pool **pool) {
  mr_pool_opts po = {.gpus = "none", .cpu_threads = threads};
  mr_device *dev = NULL;
  GPU_OK(mr_pool_create(&po, pool, TERR));
  GPU_OK(mr_pool_acquire(*pool, "cpu", &dev, TERR));
  return dev;
}

void gpu_test_cpu_pool_end(mr_pool *pool, mr_device *cpu) {
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
}

void gpu_test_random(mr_cfloat *x, size_t n, unsigned seed) {
  uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    float v[2];
    for (int k = 0; k < 2; k++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v[k] = (float)((state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
    x[i] = v[0] + I * v[1];
  }
}

mr_buf *gpu_test_upload(mr_device *dev, const void *host, size_t bytes) {
  mr_buf *b = NULL;
  GPU_OK(mr_buf_create(dev, bytes, &b, TERR));
  GPU_OK(mr_buf_upload(b, 0, host, bytes, TERR));
  return b;
}

void *gpu_test_download(const mr_buf *buf) {
  void *host = malloc(mr_buf_size(buf));
  assert_non_null(host);
  GPU_OK(mr_buf_download(buf, 0, host, mr_buf_size(buf), TERR));
  return host;
}
