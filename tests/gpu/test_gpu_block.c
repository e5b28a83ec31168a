/* block.h: copy, centre crop and centre pad against index loops; with
 * --cuda, the GPU against the CPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block.h"
#include "test_gpu_common.h"

static const size_t big[3] = {12, 7, 5}, small[3] = {5, 4, 2};
enum { BATCH = 3 };

static size_t count(const size_t d[3]) { return d[0] * d[1] * d[2]; }

static size_t index_of(const size_t d[3], size_t item, size_t x, size_t y, size_t z) {
  return ((item * d[2] + z) * d[1] + y) * d[0] + x;
}

/* Expected dst after copying the extent block at sa of src to da of dst. */
static void expect(const mr_cfloat *src, const size_t sd[3], const size_t sa[3],
                   mr_cfloat *dst, const size_t dd[3], const size_t da[3],
                   const size_t ext[3]) {
  for (size_t t = 0; t < BATCH; t++)
    for (size_t z = 0; z < ext[2]; z++)
      for (size_t y = 0; y < ext[1]; y++)
        for (size_t x = 0; x < ext[0]; x++)
          dst[index_of(dd, t, da[0] + x, da[1] + y, da[2] + z)] =
              src[index_of(sd, t, sa[0] + x, sa[1] + y, sa[2] + z)];
}

typedef struct outputs {
  mr_cfloat *copied, *cropped, *padded;
} outputs;

/* The three operations on dev from host src_big/src_small, dst prefilled. */
static void run_all(mr_device *dev, const mr_cfloat *src_big, const mr_cfloat *src_small,
                    const mr_cfloat *prefill, outputs *o) {
  size_t nb = BATCH * count(big), ns = BATCH * count(small);
  const size_t sa[3] = {3, 1, 2}, da[3] = {1, 1, 0}, ext[3] = {4, 3, 2};
  mr_buf *bb = gpu_test_upload(dev, src_big, nb * sizeof(mr_cfloat));
  mr_buf *bs = gpu_test_upload(dev, src_small, ns * sizeof(mr_cfloat));
  mr_buf *out_small = gpu_test_upload(dev, prefill, ns * sizeof(mr_cfloat));
  mr_buf *out_big = gpu_test_upload(dev, prefill, nb * sizeof(mr_cfloat));
  GPU_OK(mr_block_copy(dev, BATCH, mr_buf_data(bb), big, sa, mr_buf_data(out_small), small, da, ext,
                       TERR));
  o->copied = gpu_test_download(out_small);
  GPU_OK(
      mr_block_crop_center(dev, BATCH, mr_buf_data(bb), big, mr_buf_data(out_small), small, TERR));
  o->cropped = gpu_test_download(out_small);
  GPU_OK(mr_block_pad_center(dev, BATCH, mr_buf_data(bs), small, mr_buf_data(out_big), big, TERR));
  o->padded = gpu_test_download(out_big);
  mr_buf_destroy(bb);
  mr_buf_destroy(bs);
  mr_buf_destroy(out_small);
  mr_buf_destroy(out_big);
}

static void inputs(mr_cfloat **b, mr_cfloat **s, mr_cfloat **prefill) {
  size_t nb = BATCH * count(big), ns = BATCH * count(small);
  *b = malloc(nb * sizeof **b);
  *s = malloc(ns * sizeof **s);
  *prefill = malloc(nb * sizeof **prefill);
  gpu_test_random(*b, nb, 1);
  gpu_test_random(*s, ns, 2);
  gpu_test_random(*prefill, nb, 3);
}

static void free_outputs(outputs *o) {
  free(o->copied);
  free(o->cropped);
  free(o->padded);
}

static void cpu_blocks(void **state) {
  (void)state;
  mr_cfloat *b, *s, *prefill;
  inputs(&b, &s, &prefill);
  size_t nb = BATCH * count(big), ns = BATCH * count(small);
  outputs o;
  run_all(gpu_test_cpu(), b, s, prefill, &o);

  mr_cfloat *want = malloc(nb * sizeof *want);
  const size_t sa[3] = {3, 1, 2}, da[3] = {1, 1, 0}, ext[3] = {4, 3, 2}, zero[3] = {0};
  memcpy(want, prefill, ns * sizeof *want);
  expect(b, big, sa, want, small, da, ext);
  assert_memory_equal(o.copied, want, ns * sizeof *want);

  /* centres at n/2: offsets 12/2-5/2 = 4, 7/2-4/2 = 1, 5/2-2/2 = 1 */
  const size_t crop_at[3] = {4, 1, 1};
  expect(b, big, crop_at, want, small, zero, small);
  assert_memory_equal(o.cropped, want, ns * sizeof *want);

  memset(want, 0, nb * sizeof *want);
  expect(s, small, zero, want, big, crop_at, small);
  assert_memory_equal(o.padded, want, nb * sizeof *want);

  free_outputs(&o);
  free(want);
  free(b);
  free(s);
  free(prefill);
}

static void bad_blocks(void **state) {
  (void)state;
  mr_cfloat d[1];
  const size_t at[3] = {8, 0, 0}, ext[3] = {5, 1, 1};
  assert_int_equal(mr_block_copy(gpu_test_cpu(), 1, d, big, at, d, big, at, ext, TERR), MR_EINVAL);
  assert_int_equal(mr_block_crop_center(gpu_test_cpu(), 1, d, small, d, big, TERR), MR_EINVAL);
  assert_int_equal(mr_block_pad_center(gpu_test_cpu(), 1, d, big, d, small, TERR), MR_EINVAL);
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  mr_cfloat *b, *s, *prefill;
  inputs(&b, &s, &prefill);
  size_t nb = BATCH * count(big), ns = BATCH * count(small);
  outputs want, got;
  run_all(gpu_test_cpu(), b, s, prefill, &want);
  run_all(gpu_test_gpu(), b, s, prefill, &got);
  assert_memory_equal(got.copied, want.copied, ns * sizeof(mr_cfloat));
  assert_memory_equal(got.cropped, want.cropped, ns * sizeof(mr_cfloat));
  assert_memory_equal(got.padded, want.padded, nb * sizeof(mr_cfloat));
  free_outputs(&want);
  free_outputs(&got);
  free(b);
  free(s);
  free(prefill);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_blocks),
      cmocka_unit_test(bad_blocks),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("block_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("block_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
