/* host.h: host memory for a device; with --cuda, pinned memory through
 * every host-memory path (buffers, FFT, coil combination) against pageable
 * memory and the CPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "coil.h"
#include "fft.h"
#include "host.h"
#ifdef MR_HAVE_CUDA
#include "host_impl.h"
#endif
#include "test_gpu_common.h"
#include "test_support.h"

static void cpu_host_memory(void **state) {
  (void)state;
  void *p = NULL;
  GPU_OK(mr_host_alloc(gpu_test_cpu(), 1000, &p, TERR));
  assert_true((uintptr_t)p % 64 == 0);
  memset(p, 0x5a, 1000);
  mr_host_free(gpu_test_cpu(), p);
  mr_host_free(gpu_test_cpu(), NULL);
}

/* Issue 12, item 5: host memory and CPU compute buffers count against the
 * server's memory budget before they are allocated. */
static void cpu_budget_counts_host_memory(void **state) {
  (void)state;
  mr_budget_set(1 << 20);
  void *p = NULL, *q = NULL;
  mr_buf *b = NULL;
  GPU_OK(mr_host_alloc(gpu_test_cpu(), 600 << 10, &p, TERR));
  assert_int_equal(mr_budget_used(), 600 << 10);
  assert_int_equal(mr_host_alloc(gpu_test_cpu(), 600 << 10, &q, TERR), MR_ELIMIT);
  assert_non_null(strstr(mr_test_last_error(), "memory budget: host memory"));
  assert_int_equal(mr_buf_create(gpu_test_cpu(), 600 << 10, &b, TERR), MR_ELIMIT);
  assert_non_null(strstr(mr_test_last_error(), "memory budget: a compute buffer on the CPU"));
  mr_host_free(gpu_test_cpu(), p);
  assert_int_equal(mr_budget_used(), 0);
  GPU_OK(mr_buf_create(gpu_test_cpu(), 600 << 10, &b, TERR));
  assert_int_equal(mr_budget_used(), 600 << 10);
  mr_buf_destroy(b);
  assert_int_equal(mr_budget_used(), 0);
  mr_budget_set(0);
}

static void cuda_pinned_buffers(void **state) {
  (void)state;
  mr_device *gpu = gpu_test_gpu();
  const size_t n = (9u << 20) + 77; /* more than one staging slot */
  unsigned char *src, *dst;
  GPU_OK(mr_host_alloc(gpu, n, (void **)&src, TERR));
  GPU_OK(mr_host_alloc(gpu, n, (void **)&dst, TERR));
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 13 + i / 509);
  mr_buf *b;
  GPU_OK(mr_buf_create(gpu, n, &b, TERR));
  GPU_OK(mr_buf_upload(b, 0, src, n, TERR));
  memset(src, 0, n); /* the upload has finished with src */
  GPU_OK(mr_buf_download(b, 0, dst, n, TERR));
  for (size_t i = 0; i < n; i++)
    if (dst[i] != (unsigned char)(i * 13 + i / 509))
      fail_msg("byte %zu differs", i);
  mr_buf_destroy(b);
  mr_host_free(gpu, src);
  mr_host_free(gpu, dst);
}

/* FFT and coil combination from pinned memory give the CPU's answers. */
static void cuda_pinned_operations(void **state) {
  (void)state;
  mr_device *gpu = gpu_test_gpu();
  enum { NX = 128, NY = 96, COILS = 24 };
  size_t total = (size_t)NX * NY * COILS, bytes = total * sizeof(mr_cfloat);
  mr_fft_opts o = {.rank = 2, .dims = {NX, NY}, .batch = COILS};
  mr_fft_plan *cpu_plan, *gpu_plan;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &cpu_plan, TERR));
  GPU_OK(mr_fft_plan_create(gpu, &o, &gpu_plan, TERR));
  mr_cfloat *in, *out, *ref = malloc(bytes);
  GPU_OK(mr_host_alloc(gpu, bytes, (void **)&in, TERR));
  GPU_OK(mr_host_alloc(gpu, bytes, (void **)&out, TERR));
  gpu_test_random(in, total, 21);
  GPU_OK(mr_fft_execute(cpu_plan, MR_FFT_BACKWARD, in, ref, TERR));
  GPU_OK(mr_fft_execute_host(gpu_plan, MR_FFT_BACKWARD, in, out, TERR));
  assert_true(mr_test_rel_error_c(out, ref, total) < 1e-5);
  GPU_OK(mr_fft_execute_host(gpu_plan, MR_FFT_BACKWARD, in, in, TERR)); /* in place */
  assert_true(mr_test_rel_error_c(in, ref, total) < 1e-5);

  float *rss = malloc(sizeof(float) * NX * NY), *rss_pinned;
  GPU_OK(mr_host_alloc(gpu, sizeof(float) * NX * NY, (void **)&rss_pinned, TERR));
  GPU_OK(mr_coil_rss(gpu_test_cpu(), ref, COILS, (size_t)NX * NY, rss, TERR));
  GPU_OK(mr_coil_rss_host(gpu, in, COILS, (size_t)NX * NY, rss_pinned, TERR));
  assert_true(mr_test_rel_error_f(rss_pinned, rss, (size_t)NX * NY) < 1e-5);

  mr_host_free(gpu, in);
  mr_host_free(gpu, out);
  mr_host_free(gpu, rss_pinned);
  free(ref);
  free(rss);
  mr_fft_plan_destroy(cpu_plan);
  mr_fft_plan_destroy(gpu_plan);
}

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 7 + 3);
}

/* Rows of a [channel][line][sample] array, a run of lines of every channel,
 * into a buffer on dev; the rest of the buffer stays as it was. */
enum { CH = 5, LINES = 40, SAMPLES = 96, FIRST = 7, RUN = 12 };

static void upload_run(mr_device *dev, const unsigned char *src) {
  size_t pitch = LINES * SAMPLES, bytes = CH * pitch;
  mr_buf *b;
  GPU_OK(mr_buf_create(dev, bytes, &b, TERR));
  unsigned char *zero = calloc(bytes, 1);
  GPU_OK(mr_buf_upload(b, 0, zero, bytes, TERR));
  GPU_OK(mr_buf_upload_rows(b, FIRST * SAMPLES, pitch, src + FIRST * SAMPLES, pitch, RUN * SAMPLES,
                            CH, TERR));
  unsigned char *got = gpu_test_download(b);
  for (size_t i = 0; i < bytes; i++) {
    size_t line = i % pitch / SAMPLES;
    assert_int_equal(got[i], line >= FIRST && line < FIRST + RUN ? src[i] : 0);
  }
  assert_int_equal(mr_buf_upload_rows(b, 0, pitch, src, pitch, pitch + 1, 1, TERR), MR_EINVAL);
  free(got);
  free(zero);
  mr_buf_destroy(b);
}

/* The same run back from a buffer into dst (host memory of the kind the
 * test passes): those rows arrive, the rest of dst stays as it was. */
static void download_run(mr_device *dev, unsigned char *dst) {
  size_t pitch = LINES * SAMPLES, bytes = CH * pitch;
  unsigned char *src = malloc(bytes);
  fill(src, bytes);
  mr_buf *b;
  GPU_OK(mr_buf_create(dev, bytes, &b, TERR));
  GPU_OK(mr_buf_upload(b, 0, src, bytes, TERR));
  memset(dst, 0, bytes);
  GPU_OK(mr_buf_download_rows(b, FIRST * SAMPLES, pitch, dst + FIRST * SAMPLES, pitch,
                              RUN * SAMPLES, CH, TERR));
  for (size_t i = 0; i < bytes; i++) {
    size_t line = i % pitch / SAMPLES;
    assert_int_equal(dst[i], line >= FIRST && line < FIRST + RUN ? src[i] : 0);
  }
  assert_int_equal(mr_buf_download_rows(b, 0, pitch, dst, pitch, pitch + 1, 1, TERR), MR_EINVAL);
  free(src);
  mr_buf_destroy(b);
}

static void cpu_upload_rows(void **state) {
  (void)state;
  unsigned char *src = malloc(CH * LINES * SAMPLES);
  fill(src, CH * LINES * SAMPLES);
  upload_run(gpu_test_cpu(), src);
  download_run(gpu_test_cpu(), src);
  free(src);
}

/* From pinned memory (one 2D transfer) and from pageable memory (staged). */
static void cuda_upload_rows(void **state) {
  (void)state;
  mr_device *gpu = gpu_test_gpu();
  unsigned char *pinned, *pageable = malloc(CH * LINES * SAMPLES);
  GPU_OK(mr_host_alloc(gpu, CH * LINES * SAMPLES, (void **)&pinned, TERR));
  fill(pinned, CH * LINES * SAMPLES);
  fill(pageable, CH * LINES * SAMPLES);
  upload_run(gpu, pinned);
  upload_run(gpu, pageable);
  download_run(gpu, pinned);
  download_run(gpu, pageable);
  mr_host_free(gpu, pinned);
  free(pageable);
}

/* A freed pinned block serves the next request of its size from the cache
 * (pinning again would take milliseconds), aligned and still pinned. */
static void cuda_pinned_blocks_are_reused(void **state) {
  (void)state;
  mr_device *gpu = gpu_test_gpu();
  const size_t n = 3u << 20;
  void *a, *b, *c;
  GPU_OK(mr_host_alloc(gpu, n, &a, TERR));
  mr_host_free(gpu, a);
  GPU_OK(mr_host_alloc(gpu, n - 1000, &b, TERR));
  assert_ptr_equal(a, b);
  assert_true((uintptr_t)b % 64 == 0);
  memset(b, 1, n - 1000);
  mr_buf *d;
  GPU_OK(mr_buf_create(gpu, n - 1000, &d, TERR));
  GPU_OK(mr_buf_upload(d, 0, b, n - 1000, TERR)); /* the pinned path */
  mr_buf_destroy(d);
  mr_host_free(gpu, b);
  GPU_OK(mr_host_alloc(gpu, n / 4, &c, TERR)); /* would waste most of b's block */
  assert_ptr_not_equal(c, b);
  mr_host_free(gpu, c);
}

#ifdef MR_HAVE_CUDA
/* Every kept block given back (the budget's reclaim, forced by a
 * reservation that only fits without them). */
static void reclaim_all(void) {
  mr_budget_set(1);
  assert_int_equal(mr_budget_take(2, "a reclaim", NULL), MR_ELIMIT);
  mr_budget_set(0);
  assert_int_equal(mr_host_cuda_kept(NULL), 0);
}

/* Sixteen sessions free and take slice buffers at once: more blocks than
 * the old cache's eight are kept (as the budget's spare memory) and handed
 * out again without pinning, and a reservation that needs their room gets
 * it: the kept blocks are freed. */
static void cuda_pinned_blocks_are_spare_memory(void **state) {
  (void)state;
  enum { N = 20 };
  const size_t n = 4u << 20;
  mr_device *gpu = gpu_test_gpu();
  reclaim_all();
  uint64_t spare0 = mr_budget_spare();
  void *p[N], *q[N];
  for (int i = 0; i < N; i++)
    GPU_OK(mr_host_alloc(gpu, n, &p[i], TERR));
  for (int i = 0; i < N; i++)
    mr_host_free(gpu, p[i]);
  size_t kept = 0;
  assert_int_equal(mr_host_cuda_kept(&kept), N);
  assert_int_equal(kept, N * n);
  assert_int_equal(mr_budget_spare() - spare0, N * n);
  for (int i = 0; i < N; i++) {
    GPU_OK(mr_host_alloc(gpu, n, &q[i], TERR));
    int found = 0;
    for (int k = 0; k < N; k++)
      found |= q[i] == p[k];
    assert_true(found); /* a kept block, not a new pinning */
  }
  assert_int_equal(mr_host_cuda_kept(NULL), 0);
  assert_int_equal(mr_budget_spare(), spare0);
  for (int i = 0; i < N; i++)
    mr_host_free(gpu, q[i]);
  /* A budget of 30 MiB with 80 MiB kept: a 20 MiB reservation frees them. */
  mr_budget_set(30u << 20);
  GPU_OK(mr_budget_take(20u << 20, "a session's buffer", TERR));
  assert_int_equal(mr_host_cuda_kept(NULL), 0);
  assert_int_equal(mr_budget_spare(), spare0);
  mr_budget_give(20u << 20);
  /* Under that budget a freed block is kept only while it fits. */
  GPU_OK(mr_host_alloc(gpu, 12u << 20, &p[0], TERR));
  GPU_OK(mr_host_alloc(gpu, 12u << 20, &p[1], TERR));
  mr_host_free(gpu, p[0]); /* 12 used + 12 spare <= 30: kept */
  assert_int_equal(mr_host_cuda_kept(NULL), 1);
  GPU_OK(mr_host_alloc(gpu, 4u << 20, &p[2], TERR)); /* too small for the kept block */
  mr_host_free(gpu, p[1]); /* 4 used + 12 + 12 spare <= 30: kept */
  assert_int_equal(mr_host_cuda_kept(NULL), 2);
  mr_host_free(gpu, p[2]); /* 24 + 4 <= 30: kept */
  assert_int_equal(mr_host_cuda_kept(NULL), 3);
  reclaim_all();
}
#endif

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_host_memory),
      cmocka_unit_test(cpu_budget_counts_host_memory),
      cmocka_unit_test(cpu_upload_rows),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_pinned_buffers),
      cmocka_unit_test(cuda_pinned_operations),
      cmocka_unit_test(cuda_upload_rows),
      cmocka_unit_test(cuda_pinned_blocks_are_reused),
#ifdef MR_HAVE_CUDA
      cmocka_unit_test(cuda_pinned_blocks_are_spare_memory),
#endif
  };
  int failed = cuda ? cmocka_run_group_tests_name("host_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("host_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
