/* vec.h: every elementwise operation and reduction against double loops;
 * the coil sum built on them; with --cuda, the GPU against the CPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_gpu_common.h"
#include "test_support.h"
#include "vec.h"

enum { N = 200003 }; /* several reduction blocks and an uneven tail */

static const mr_cfloat alpha = 0.5f - 1.25f * I;

typedef struct results {
  mr_cfloat scaled[N], axpy[N], mul[N], conj_mul[N], copy[N], zero[N];
  float abs[N];
  double sumsq;
  mr_cfloat dot;
} results;

/* Every operation on dev, inputs x and y given in host memory. */
static void run_all(mr_device *dev, const mr_cfloat *x, const mr_cfloat *y, results *r) {
  size_t bytes = sizeof(mr_cfloat) * N;
  mr_buf *bx = NULL, *by = NULL, *bo = NULL, *bf = NULL;
  const mr_cfloat *px = x, *py = y;
  mr_cfloat *out = r->scaled;
  float *fout = r->abs;
  int gpu = mr_device_is_gpu(dev);
  if (gpu) {
    bx = gpu_test_upload(dev, x, bytes);
    by = gpu_test_upload(dev, y, bytes);
    GPU_OK(mr_buf_create(dev, bytes, &bo, TERR));
    GPU_OK(mr_buf_create(dev, sizeof(float) * N, &bf, TERR));
    px = mr_buf_data(bx);
    py = mr_buf_data(by);
    fout = mr_buf_data(bf);
  }
  mr_cfloat *targets[] = {r->scaled, r->axpy, r->mul, r->conj_mul, r->copy, r->zero};
  for (int op = 0; op < 6; op++) {
    if (!gpu)
      out = targets[op];
    else
      out = mr_buf_data(bo);
    if (op <= 1) { /* scale and axpy work in place on a copy of y */
      GPU_OK(mr_vec_copy(dev, N, py, out, TERR));
      if (op == 0)
        GPU_OK(mr_vec_scale(dev, N, alpha, out, TERR));
      else
        GPU_OK(mr_vec_axpy(dev, N, alpha, px, out, TERR));
    } else if (op == 2) {
      GPU_OK(mr_vec_mul(dev, N, px, py, out, TERR));
    } else if (op == 3) {
      GPU_OK(mr_vec_conj_mul(dev, N, px, py, out, TERR));
    } else if (op == 4) {
      GPU_OK(mr_vec_copy(dev, N, px, out, TERR));
    } else {
      GPU_OK(mr_vec_copy(dev, N, px, out, TERR));
      GPU_OK(mr_vec_zero(dev, N, out, TERR));
    }
    if (gpu)
      GPU_OK(mr_buf_download(bo, 0, targets[op], bytes, TERR));
  }
  GPU_OK(mr_vec_abs(dev, N, px, fout, TERR));
  if (gpu)
    GPU_OK(mr_buf_download(bf, 0, r->abs, sizeof(float) * N, TERR));
  GPU_OK(mr_vec_sumsq(dev, N, px, &r->sumsq, TERR));
  GPU_OK(mr_vec_dot(dev, N, px, py, &r->dot, TERR));
  mr_buf_destroy(bx);
  mr_buf_destroy(by);
  mr_buf_destroy(bo);
  mr_buf_destroy(bf);
}

/* Elementwise results within float rounding; sumsq within sumsq_tol (the
 * sums are in double on every backend, their order differs). */
static void compare(const results *r, const results *ref, double sumsq_tol) {
  assert_true(mr_test_rel_error_c(r->scaled, ref->scaled, N) < 1e-6);
  assert_true(mr_test_rel_error_c(r->axpy, ref->axpy, N) < 1e-6);
  assert_true(mr_test_rel_error_c(r->mul, ref->mul, N) < 1e-6);
  assert_true(mr_test_rel_error_c(r->conj_mul, ref->conj_mul, N) < 1e-6);
  assert_memory_equal(r->copy, ref->copy, sizeof r->copy);
  assert_memory_equal(r->zero, ref->zero, sizeof r->zero);
  assert_true(mr_test_rel_error_f(r->abs, ref->abs, N) < 1e-6);
  assert_true(fabs(r->sumsq - ref->sumsq) / ref->sumsq < sumsq_tol);
  assert_true(cabsf(r->dot - ref->dot) / cabsf(ref->dot) < 1e-6);
}

static void cpu_ops(void **state) {
  (void)state;
  mr_cfloat *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
  gpu_test_random(x, N, 1);
  gpu_test_random(y, N, 2);
  results *r = malloc(sizeof *r), *ref = malloc(sizeof *ref);
  double sumsq = 0;
  double complex dot = 0;
  for (size_t i = 0; i < N; i++) {
    double complex xi = x[i], yi = y[i];
    ref->scaled[i] = (float complex)(alpha * yi);
    ref->axpy[i] = (float complex)(alpha * xi + yi);
    ref->mul[i] = (float complex)(xi * yi);
    ref->conj_mul[i] = (float complex)(conj(xi) * yi);
    ref->copy[i] = x[i];
    ref->zero[i] = 0;
    ref->abs[i] = (float)cabs(xi);
    sumsq += creal(xi) * creal(xi) + cimag(xi) * cimag(xi);
    dot += conj(xi) * yi;
  }
  ref->sumsq = sumsq;
  ref->dot = (float complex)dot;
  run_all(gpu_test_cpu(), x, y, r);
  compare(r, ref, 1e-9);
  free(x);
  free(y);
  free(r);
  free(ref);
}

static void empty_is_a_no_op(void **state) {
  (void)state;
  double s = 1;
  GPU_OK(mr_vec_sumsq(gpu_test_cpu(), 0, NULL, &s, TERR));
  assert_true(s == 0);
  GPU_OK(mr_vec_scale(gpu_test_cpu(), 0, 1, NULL, TERR));
}

static void cuda_matches_cpu(void **state) {
  (void)state;
  mr_cfloat *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
  gpu_test_random(x, N, 3);
  gpu_test_random(y, N, 4);
  results *r = malloc(sizeof *r), *ref = malloc(sizeof *ref);
  run_all(gpu_test_cpu(), x, y, ref);
  run_all(gpu_test_gpu(), x, y, r);
  compare(r, ref, 1e-6);
  free(x);
  free(y);
  free(r);
  free(ref);
}

/* sum_c conj(s_c) x_c over 4 arrays against a double loop, with its own
 * scratch and with x's first array as the scratch (as the Toeplitz
 * operator's apply passes it). */
static void cpu_conj_mul_sum(void **state) {
  (void)state;
  enum { COUNT = 4, LEN = 1001 };
  mr_cfloat s[COUNT * LEN], x[COUNT * LEN], tmp[LEN], out[LEN];
  gpu_test_random(s, COUNT * LEN, 7);
  gpu_test_random(x, COUNT * LEN, 8);
  mr_cfloat want[LEN];
  for (size_t i = 0; i < LEN; i++) {
    double complex sum = 0;
    for (size_t c = 0; c < COUNT; c++)
      sum += conj((double complex)s[c * LEN + i]) * x[c * LEN + i];
    want[i] = (float complex)sum;
  }
  GPU_OK(mr_vec_conj_mul_sum(gpu_test_cpu(), COUNT, LEN, s, x, tmp, out, TERR));
  assert_true(mr_test_rel_error_c(out, want, LEN) < 1e-6);
  GPU_OK(mr_vec_conj_mul_sum(gpu_test_cpu(), COUNT, LEN, s, x, x, out, TERR));
  assert_true(mr_test_rel_error_c(out, want, LEN) < 1e-6);
}

/* Crops 3 arrays of 9 x 7 x 5 to 4 x 3 x 2 at (2, 3, 1). */
static const size_t crop_in[3] = {9, 7, 5}, crop_at[3] = {2, 3, 1}, crop_out[3] = {4, 3, 2};
enum { CROP_BATCH = 3, CROP_IN = 9 * 7 * 5, CROP_OUT = 4 * 3 * 2 };

static void cpu_crop(void **state) {
  (void)state;
  mr_cfloat in[CROP_BATCH * CROP_IN], out[CROP_BATCH * CROP_OUT];
  gpu_test_random(in, CROP_BATCH * CROP_IN, 5);
  GPU_OK(mr_vec_crop(gpu_test_cpu(), CROP_BATCH, in, crop_in, crop_at, out, crop_out, TERR));
  for (size_t b = 0; b < CROP_BATCH; b++)
    for (size_t z = 0; z < 2; z++)
      for (size_t y = 0; y < 3; y++)
        for (size_t x = 0; x < 4; x++)
          assert_true(out[((b * 2 + z) * 3 + y) * 4 + x] ==
                      in[((b * 5 + z + 1) * 7 + y + 3) * 9 + x + 2]);
  const size_t too_far[3] = {6, 0, 0};
  assert_int_equal(mr_vec_crop(gpu_test_cpu(), 1, in, crop_in, too_far, out, crop_out, TERR),
                   MR_EINVAL);
}

static void cuda_crop_matches_cpu(void **state) {
  (void)state;
  mr_cfloat in[CROP_BATCH * CROP_IN], want[CROP_BATCH * CROP_OUT];
  gpu_test_random(in, CROP_BATCH * CROP_IN, 6);
  GPU_OK(mr_vec_crop(gpu_test_cpu(), CROP_BATCH, in, crop_in, crop_at, want, crop_out, TERR));
  mr_buf *d = gpu_test_upload(gpu_test_gpu(), in, sizeof in), *o;
  GPU_OK(mr_buf_create(gpu_test_gpu(), sizeof want, &o, TERR));
  GPU_OK(mr_vec_crop(gpu_test_gpu(), CROP_BATCH, mr_buf_data(d), crop_in, crop_at, mr_buf_data(o),
                     crop_out, TERR));
  mr_cfloat *got = gpu_test_download(o);
  assert_memory_equal(got, want, sizeof want);
  free(got);
  mr_buf_destroy(d);
  mr_buf_destroy(o);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_ops),
      cmocka_unit_test(empty_is_a_no_op),
      cmocka_unit_test(cpu_crop),
      cmocka_unit_test(cpu_conj_mul_sum),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_crop_matches_cpu),
  };
  int failed = cuda ? cmocka_run_group_tests_name("vec_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("vec_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
