/* kspace: a buffer's sampled lines gathered into one array on a device and
 * put back; buffers for a gatherer (samples undefined) and the zeroing of
 * the lines it never filled. On the CPU device (the GPU's copies are
 * covered by test_gpu_host's row transfers and test_gadgets_configs --cuda);
 * with --cuda, what pinned host memory counts against the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "buf.h"
#include "kspace.h"
#include "pool.h"
#include "scratch.h"
#include "test_err.h"

enum { NRO = 4, NE1 = 7, NCH = 3 };

static mr_pool *pool;
static mr_device *cpu;

static int setup(void **state) {
  (void)state;
  mr_pool_opts po = {.gpus = "none"};
  if (mr_pool_create(&po, &pool, NULL) < 0 || mr_pool_acquire(pool, "cpu", &cpu, NULL) < 0)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  return 0;
}

static float complex tag(size_t ch, size_t e1, size_t ro) {
  return (float)(100 * ch + 10 * e1 + ro) + I * (float)ch;
}

/* Lines 1, 2 and 5 sampled: two runs, gathered in their order. */
static mr_kspace *tagged_buffer(void) {
  mr_kspace *k = mr_kspace_new(NRO, NE1, 1, NCH, 0, NULL);
  assert_non_null(k);
  for (size_t ch = 0; ch < NCH; ch++)
    for (size_t e1 = 0; e1 < NE1; e1++)
      for (size_t ro = 0; ro < NRO; ro++)
        k->data[(ch * NE1 + e1) * NRO + ro] = tag(ch, e1, ro);
  k->sampled[1] = k->sampled[2] = k->sampled[5] = 1;
  return k;
}

static void gathers_and_scatters_sampled_lines(void **state) {
  (void)state;
  static const size_t lines[] = {1, 2, 5};
  mr_kspace *k = tagged_buffer();
  mr_buf *b = NULL;
  size_t m = 0;
  assert_int_equal(mr_kspace_gather_sampled(k, cpu, &b, &m, TERR), 0);
  assert_int_equal(m, 3);
  assert_non_null(b);
  assert_int_equal(mr_buf_size(b), 3 * NRO * NCH * sizeof(float complex));
  float complex *g = mr_buf_data(b);
  for (size_t ch = 0; ch < NCH; ch++)
    for (size_t j = 0; j < 3; j++)
      for (size_t ro = 0; ro < NRO; ro++) {
        float complex *v = &g[(ch * 3 + j) * NRO + ro];
        assert_true(*v == tag(ch, lines[j], ro));
        *v = -*v;
      }
  assert_int_equal(mr_kspace_scatter_sampled(k, b, TERR), 0);
  for (size_t ch = 0; ch < NCH; ch++)
    for (size_t e1 = 0; e1 < NE1; e1++)
      for (size_t ro = 0; ro < NRO; ro++) {
        float complex want = k->sampled[e1] ? -tag(ch, e1, ro) : tag(ch, e1, ro);
        assert_true(k->data[(ch * NE1 + e1) * NRO + ro] == want);
      }
  mr_buf_destroy(b);
  mr_kspace_free(k);
}

static void gathers_nothing_without_sampled_lines(void **state) {
  (void)state;
  mr_kspace *k = mr_kspace_new(NRO, NE1, 1, NCH, 0, NULL);
  mr_buf *b = NULL;
  size_t m = 1;
  assert_int_equal(mr_kspace_gather_sampled(k, cpu, &b, &m, TERR), 0);
  assert_int_equal(m, 0);
  assert_null(b);
  mr_kspace_free(k);
}

static void zeroes_the_lines_never_filled(void **state) {
  (void)state;
  mr_kspace *k = mr_kspace_new_gather(cpu, NRO, NE1, 1, NCH, 0, NULL);
  assert_non_null(k);
  memset(k->data, 0x7f, NRO * NE1 * NCH * sizeof *k->data); /* what it may hold */
  k->sampled[3] = 1;
  mr_kspace_zero_unsampled(k);
  for (size_t ch = 0; ch < NCH; ch++)
    for (size_t e1 = 0; e1 < NE1; e1++)
      for (size_t ro = 0; ro < NRO; ro++) {
        float complex v = k->data[(ch * NE1 + e1) * NRO + ro];
        if (e1 == 3)
          assert_true(v != 0);
        else
          assert_true(v == 0);
      }
  mr_kspace_free(k);
}

/* The block cache is spare memory of the budget: a freed buffer's samples
 * are kept only while they fit beside what is in use (a small
 * --memory-budget), and are freed when a new buffer would not fit
 * otherwise, so the sessions and the cache together stay within it. */
static void the_block_cache_stays_within_the_budget(void **state) {
  (void)state;
  const size_t mib = (size_t)1 << 20, masks = 4096; /* the sampled-line masks beside */
  mr_budget_set(5 * mib + masks);
  /* 2 MiB of samples: 256 x 256 x 4 channels x 8 bytes */
  mr_kspace *a = mr_kspace_new(256, 256, 1, 4, 0, NULL);
  assert_non_null(a);
  mr_kspace_free(a);
  assert_int_equal(mr_budget_spare(), 2 * mib); /* kept: 2 of 5 MiB */
  assert_int_equal(mr_budget_used(), 0);
  /* 4 MiB fits only once the cache lets go of its block. */
  mr_kspace *b = mr_kspace_new(256, 256, 1, 8, 0, NULL);
  assert_non_null(b);
  assert_int_equal(mr_budget_spare(), 0);
  assert_true(mr_budget_used() <= 5 * mib + masks);
  /* With 4 MiB in use, a freed 2 MiB block is not kept (4 + 2 > 5). */
  a = mr_kspace_new(128, 256, 1, 4, 0, NULL);
  assert_non_null(a);
  mr_kspace_free(b);
  assert_int_equal(mr_budget_spare(), 4 * mib);
  mr_kspace_free(a); /* 4 + 1 <= 5: kept too */
  assert_int_equal(mr_budget_spare(), 5 * mib);
  assert_true(mr_budget_used() + mr_budget_spare() <= 5 * mib + masks);
  /* Any reservation reclaims the spare memory, not only a k-space buffer's. */
  assert_int_equal(mr_budget_take(3 * mib, "a test", NULL), 0);
  assert_int_equal(mr_budget_spare(), 0);
  mr_budget_give(3 * mib);
  mr_budget_set(0);
}

static mr_device *gpu;

static int setup_gpu(void **state) {
  (void)state;
  mr_pool_opts po = {.gpus = "all"};
  return mr_pool_create(&po, &pool, NULL) < 0 || mr_pool_acquire(pool, "auto", &gpu, NULL) < 0 ||
                 !mr_device_is_gpu(gpu)
             ? -1
             : 0;
}

static int teardown_gpu(void **state) {
  (void)state;
  mr_pool_release(pool, gpu);
  mr_pool_destroy(pool);
  return 0;
}

/* Pinned samples (a k-space buffer's, a gadget's scratch) count against
 * the budget once: mr_host_alloc counts them, their maker not again (it
 * did, and a budget held half the pinned buffers it should have). */
static void pinned_memory_counted_once(void **state) {
  (void)state;
  const size_t samples = (size_t)256 * 256 * 4 * sizeof(float complex), mask = 256;
  uint64_t before = mr_budget_used();
  mr_kspace *k = mr_kspace_new_pinned(gpu, 256, 256, 1, 4, TERR);
  assert_non_null(k);
  assert_ptr_equal(k->pinned, gpu);
  assert_int_equal(mr_budget_used() - before, samples + mask);
  assert_non_null(mr_kspace_on(k, gpu, TERR)); /* a device copy beside: counted too */
  assert_int_equal(mr_budget_used() - before, 2 * samples + mask);
  mr_kspace_changed_on(k, gpu); /* the host copy dropped */
  assert_int_equal(mr_budget_used() - before, samples + mask);
  mr_kspace_free(k);
  assert_int_equal(mr_budget_used(), before);
  mr_scratch s = {0};
  assert_int_equal(mr_scratch_grow_pinned(&s, gpu, samples, "a test", TERR), 0);
  assert_ptr_equal(s.pinned, gpu);
  assert_int_equal(mr_budget_used() - before, samples);
  mr_scratch_free(&s);
  assert_int_equal(mr_budget_used(), before);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
    mr_pool_opts po = {.gpus = "all"};
    mr_pool *probe = NULL;
    int gpus = mr_pool_create(&po, &probe, NULL) == 0 ? mr_pool_gpu_count(probe) : 0;
    mr_pool_destroy(probe);
    if (gpus == 0)
      return 77; /* skipped: no GPU */
    const struct CMUnitTest cuda[] = {cmocka_unit_test(pinned_memory_counted_once)};
    return cmocka_run_group_tests_name("gadgets_kspace_cuda", cuda, setup_gpu, teardown_gpu);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gathers_and_scatters_sampled_lines),
      cmocka_unit_test(gathers_nothing_without_sampled_lines),
      cmocka_unit_test(zeroes_the_lines_never_filled),
      cmocka_unit_test(the_block_cache_stays_within_the_budget),
  };
  return cmocka_run_group_tests_name("gadgets_kspace", tests, setup, teardown);
}
