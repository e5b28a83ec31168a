/* fft.h: the CPU transform against a literal double-precision
 * fftshift(dft(ifftshift(x))); with --cuda, the GPU against the CPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fft.h"
#include "halve.h"
#include "test_gpu_common.h"
#include "test_support.h"

typedef struct shape {
  int rank;
  size_t n[3];
  size_t batch;
} shape;

/* Even, odd and mixed sizes in each rank; rows and columns that do not
 * fill the CPU's last block of lines (16 at a time). */
static const shape shapes[] = {
    {1, {32, 1, 1}, 4}, {1, {7, 1, 1}, 3},  {2, {16, 12, 1}, 3},
    {2, {15, 9, 1}, 2}, {2, {10, 7, 1}, 2}, {3, {8, 6, 4}, 2},
    {3, {5, 6, 3}, 2},  {2, {20, 6, 1}, 3}, {3, {18, 4, 6}, 1},
};

static size_t array_len(const shape *s) { return s->n[0] * s->n[1] * s->n[2]; }

static mr_fft_opts opts_of(const shape *s) {
  return (mr_fft_opts){.rank = s->rank, .dims = {s->n[0], s->n[1], s->n[2]},
                       .batch = s->batch};
}

/* One centered 1-D DFT along dimension d of every array, in double, done
 * literally: ifftshift, the plain DFT sum, fftshift, 1/sqrt(n); or with
 * plain set the DFT sum alone. */
static void dft_dim(double complex *x, const shape *s, int d, int sign, int plain) {
  size_t n = s->n[d], a = plain ? 0 : n / 2;
  double scale = plain ? 1.0 : 1.0 / sqrt((double)n);
  size_t stride = d == 0 ? 1 : d == 1 ? s->n[0] : s->n[0] * s->n[1];
  size_t lines = s->batch * array_len(s) / n;
  double complex *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
  for (size_t line = 0; line < lines; line++) {
    size_t inner = line % stride, outer = line / stride;
    size_t base = outer * stride * n + inner;
    for (size_t i = 0; i < n; i++)
      in[i] = x[base + ((i + a) % n) * stride]; /* ifftshift */
    for (size_t k = 0; k < n; k++) {
      double complex sum = 0;
      for (size_t i = 0; i < n; i++)
        sum += in[i] * cexp(sign * 2.0 * M_PI * I * (double)((k * i) % n) / n);
      out[k] = sum * scale;
    }
    for (size_t k = 0; k < n; k++)
      x[base + k * stride] = out[(k + n - a) % n]; /* fftshift */
  }
  free(in);
  free(out);
}

static void reference(const shape *s, int sign, int plain, const mr_cfloat *in,
                      mr_cfloat *out) {
  size_t total = s->batch * array_len(s);
  double complex *x = malloc(total * sizeof *x);
  for (size_t i = 0; i < total; i++)
    x[i] = in[i];
  for (int d = 0; d < s->rank; d++)
    dft_dim(x, s, d, sign, plain);
  for (size_t i = 0; i < total; i++)
    out[i] = (float complex)x[i];
  free(x);
}

/* The CPU plan of s (plain or centred) against the literal reference, out
 * of place (in unchanged) and in place. The plan comes from
 * mr_fft_plan_keep after one of the other kind for the same shape, which
 * must give way. */
static void check_cpu(const shape *s, unsigned seed, int plain) {
  size_t total = s->batch * array_len(s);
  mr_fft_opts o = opts_of(s);
  mr_fft_plan *plan = NULL;
  o.plain = !plain;
  GPU_OK(mr_fft_plan_keep(gpu_test_cpu(), &o, &plan, TERR));
  o.plain = plain;
  GPU_OK(mr_fft_plan_keep(gpu_test_cpu(), &o, &plan, TERR));
  mr_cfloat *in = malloc(total * sizeof *in), *copy = malloc(total * sizeof *in);
  mr_cfloat *out = malloc(total * sizeof *in), *ref = malloc(total * sizeof *in);
  for (int dir = -1; dir <= 1; dir += 2) {
    gpu_test_random(in, total, seed + (dir > 0));
    memcpy(copy, in, total * sizeof *in);
    reference(s, dir, plain, in, ref);
    GPU_OK(mr_fft_execute(plan, dir, in, out, TERR));
    double err = mr_test_rel_error_c(out, ref, total);
    if (err > 1e-5)
      fail_msg("shape %zux%zux%zu plain %d dir %d out of place: rel error %g", s->n[0],
               s->n[1], s->n[2], plain, dir, err);
    assert_memory_equal(in, copy, total * sizeof *in);
    GPU_OK(mr_fft_execute(plan, dir, copy, copy, TERR));
    err = mr_test_rel_error_c(copy, ref, total);
    if (err > 1e-5)
      fail_msg("shape %zux%zux%zu plain %d dir %d in place: rel error %g", s->n[0], s->n[1],
               s->n[2], plain, dir, err);
  }
  free(in);
  free(copy);
  free(out);
  free(ref);
  mr_fft_plan_destroy(plan);
}

static void cpu_matches_reference(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++)
    check_cpu(&shapes[t], (unsigned)(t * 2), 0);
}

/* Plain plans: the DFT sum alone, no shifts, no scale. */
static void cpu_plain_matches_reference(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++)
    check_cpu(&shapes[t], (unsigned)(t * 2), 1);
  const shape no_rows = {2, {1, 8, 1}, 2}; /* nx 1: the CPU makes no row pass */
  check_cpu(&no_rows, 77, 1);
}

/* fft.h's fold for even shapes: centred(x) = t * plain(s * x) / sqrt(N)
 * with the checkerboard signs s and t, in both directions. */
static void checkerboard_fold(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
    const shape *s = &shapes[t];
    if (s->n[0] % 2 || s->n[1] % 2 || s->n[2] % 2)
      continue;
    size_t total = s->batch * array_len(s), nx = s->n[0], ny = s->n[1], nz = s->n[2];
    mr_fft_opts o = opts_of(s);
    mr_fft_plan *centred, *plain;
    GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &centred, TERR));
    o.plain = 1;
    GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plain, TERR));
    mr_cfloat *x = malloc(total * sizeof *x), *ref = malloc(total * sizeof *x);
    int flip = (int)((nx / 2 + ny / 2 + nz / 2) % 2);
    for (int dir = -1; dir <= 1; dir += 2) {
      gpu_test_random(x, total, (unsigned)(50 + t));
      GPU_OK(mr_fft_execute(centred, dir, x, ref, TERR));
      for (size_t i = 0; i < total; i++) {
        size_t m = i % nx + i / nx % ny + i / nx / ny % nz;
        x[i] *= m % 2 ? -1.0f : 1.0f;
      }
      GPU_OK(mr_fft_execute(plain, dir, x, x, TERR));
      float scale = (float)(1.0 / sqrt((double)array_len(s)));
      for (size_t i = 0; i < total; i++) {
        size_t k = i % nx + i / nx % ny + i / nx / ny % nz;
        x[i] *= (k + (size_t)flip) % 2 ? -scale : scale;
      }
      double err = mr_test_rel_error_c(x, ref, total);
      if (err > 1e-5)
        fail_msg("shape %zu dir %d: the fold is off by %g", t, dir, err);
    }
    free(x);
    free(ref);
    mr_fft_plan_destroy(centred);
    mr_fft_plan_destroy(plain);
  }
}

/* The convention the reconstruction relies on: a k-space peak at the
 * centre (index n/2) transforms BACKWARD to a flat real image, and back. */
static void centre_convention(void **state) {
  (void)state;
  enum { NX = 8, NY = 6 };
  mr_fft_opts o = {.rank = 2, .dims = {NX, NY}, .batch = 1};
  mr_fft_plan *plan;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  mr_cfloat k[NX * NY] = {0}, img[NX * NY];
  k[(NY / 2) * NX + NX / 2] = 1;
  GPU_OK(mr_fft_execute(plan, MR_FFT_BACKWARD, k, img, TERR));
  for (int i = 0; i < NX * NY; i++) {
    assert_float_equal(crealf(img[i]), 1.0 / sqrt(NX * NY), 1e-6);
    assert_float_equal(cimagf(img[i]), 0.0, 1e-6);
  }
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, img, img, TERR));
  assert_true(mr_test_rel_error_c(img, k, NX * NY) < 1e-6);
  mr_fft_plan_destroy(plan);
}

/* Round trip and Parseval on a buffer that FFTW sees as unaligned. */
static void unaligned_round_trip(void **state) {
  (void)state;
  enum { N = 24, BATCH = 5 };
  mr_fft_opts o = {.rank = 2, .dims = {N, N}, .batch = BATCH};
  mr_fft_plan *plan;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  size_t total = (size_t)N * N * BATCH;
  mr_cfloat *store = malloc((total + 1) * sizeof *store), *x = store + 1;
  mr_cfloat *orig = malloc(total * sizeof *orig);
  gpu_test_random(orig, total, 99);
  memcpy(x, orig, total * sizeof *x);
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, x, x, TERR));
  double e_in = 0, e_out = 0;
  for (size_t i = 0; i < total; i++) {
    e_in += cabsf(orig[i]) * cabsf(orig[i]);
    e_out += cabsf(x[i]) * cabsf(x[i]);
  }
  assert_true(fabs(e_out - e_in) / e_in < 1e-5);
  GPU_OK(mr_fft_execute(plan, MR_FFT_BACKWARD, x, x, TERR));
  assert_true(mr_test_rel_error_c(x, orig, total) < 1e-5);
  free(store);
  free(orig);
  mr_fft_plan_destroy(plan);
}

/* halve.h: each line's readouts against a double-precision centred
 * inverse DFT of NRO, its central NRO/2 and a forward DFT of those; a NULL
 * line zeroed, lines not named untouched; bit for bit the same on pools of
 * 1, 2 and 4 threads and one line at a time. */
static void halve_matches_crop(void **state) {
  (void)state;
  enum { NRO = 64, M = NRO / 2, NCH = 5, LINES = 9, IN_STRIDE = LINES * NRO + 3 };
  enum { OUT_STRIDE = LINES * M + 1 };
  static const int counts[] = {1, 2, 4};
  mr_cfloat *in = malloc((size_t)NCH * IN_STRIDE * sizeof *in);
  mr_cfloat *out = malloc((size_t)NCH * OUT_STRIDE * sizeof *out);
  mr_cfloat *first = malloc((size_t)NCH * OUT_STRIDE * sizeof *first);
  gpu_test_random(in, (size_t)NCH * IN_STRIDE, 31);
  const mr_cfloat *from[LINES];
  mr_cfloat *to[LINES];
  for (int b = 0; b < LINES; b++) { /* line 7 is not named: it keeps the fill */
    int l = b < 7 ? b : b + 1;
    from[b] = b == 3 ? NULL : in + (size_t)l * NRO;
    to[b] = out + (size_t)l * M;
  }
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    mr_pool *pool;
    mr_device *cpu = gpu_test_cpu_pool(counts[i], &pool);
    mr_fft_halve *h;
    GPU_OK(mr_fft_halve_create(cpu, NRO, NCH, &h, TERR));
    for (size_t v = 0; v < (size_t)NCH * OUT_STRIDE; v++)
      out[v] = 7.0f;
    GPU_OK(mr_fft_halve_host(h, from, IN_STRIDE, to, OUT_STRIDE, LINES - 1, TERR));
    if (i == 0)
      memcpy(first, out, (size_t)NCH * OUT_STRIDE * sizeof *out);
    else
      assert_memory_equal(out, first, (size_t)NCH * OUT_STRIDE * sizeof *out);
    for (int b = 0; b < LINES - 1; b++) { /* one line a call */
      for (int c = 0; c < NCH; c++)
        for (int x = 0; x < M; x++)
          to[b][(size_t)c * OUT_STRIDE + x] = 7.0f;
      GPU_OK(mr_fft_halve_host(h, &from[b], IN_STRIDE, &to[b], OUT_STRIDE, 1, TERR));
    }
    assert_memory_equal(out, first, (size_t)NCH * OUT_STRIDE * sizeof *out);
    mr_fft_halve_destroy(h);
    gpu_test_cpu_pool_end(pool, cpu);
  }
  for (int l = 0; l < LINES; l++)
    for (int c = 0; c < NCH; c++) {
      const mr_cfloat *x = in + (size_t)c * IN_STRIDE + (size_t)l * NRO;
      const mr_cfloat *y = out + (size_t)c * OUT_STRIDE + (size_t)l * M;
      double complex k[NRO], image[NRO], want[M];
      mr_cfloat wantf[M];
      for (int s = 0; s < NRO; s++)
        k[s] = x[s];
      mr_test_centered_dft(k, image, NRO, 1, 1, +1);
      mr_test_centered_dft(image + NRO / 2 - M / 2, want, M, 1, 1, -1);
      for (int s = 0; s < M; s++)
        wantf[s] = l == 3 ? 0.0f : l == 7 ? 7.0f : (mr_cfloat)want[s];
      double err = mr_test_rel_error_c(y, wantf, M);
      if (err > 1e-5)
        fail_msg("halve: line %d channel %d: rel error %g", l, c, err);
    }
  mr_fft_halve *h;
  assert_int_equal(mr_fft_halve_create(gpu_test_cpu(), 66, 2, &h, TERR), MR_EINVAL);
  free(in);
  free(out);
  free(first);
}

static void bad_shapes(void **state) {
  (void)state;
  mr_fft_plan *plan = NULL;
  mr_fft_opts rank4 = {.rank = 4, .dims = {2, 2, 2}, .batch = 1};
  mr_fft_opts zero = {.rank = 2, .dims = {8, 0}, .batch = 1};
  mr_fft_opts nobatch = {.rank = 1, .dims = {8}, .batch = 0};
  assert_int_equal(mr_fft_plan_create(gpu_test_cpu(), &rank4, &plan, TERR), MR_EINVAL);
  assert_int_equal(mr_fft_plan_create(gpu_test_cpu(), &zero, &plan, TERR), MR_EINVAL);
  assert_int_equal(mr_fft_plan_create(gpu_test_cpu(), &nobatch, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "batch"));
  assert_null(plan);
}

/* The GPU against the CPU, device-resident and from host memory; centred
 * plans, then plain ones. */
static void cuda_matches_cpu(void **state) {
  (void)state;
  for (size_t u = 0; u < 2 * sizeof shapes / sizeof *shapes; u++) {
    size_t t = u % (sizeof shapes / sizeof *shapes);
    const shape *s = &shapes[t];
    size_t total = s->batch * array_len(s), bytes = total * sizeof(mr_cfloat);
    mr_fft_opts o = opts_of(s);
    o.plain = u >= sizeof shapes / sizeof *shapes;
    mr_fft_plan *cpu_plan, *gpu_plan;
    GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &cpu_plan, TERR));
    GPU_OK(mr_fft_plan_create(gpu_test_gpu(), &o, &gpu_plan, TERR));
    mr_cfloat *in = malloc(bytes), *ref = malloc(bytes), *host_out = malloc(bytes);
    for (int dir = -1; dir <= 1; dir += 2) {
      gpu_test_random(in, total, (unsigned)(100 + t));
      GPU_OK(mr_fft_execute(cpu_plan, dir, in, ref, TERR));
      mr_buf *a = gpu_test_upload(gpu_test_gpu(), in, bytes), *b;
      GPU_OK(mr_buf_create(gpu_test_gpu(), bytes, &b, TERR));
      GPU_OK(mr_fft_execute(gpu_plan, dir, mr_buf_data(a), mr_buf_data(b), TERR));
      mr_cfloat *got = gpu_test_download(b), *kept = gpu_test_download(a);
      double err = mr_test_rel_error_c(got, ref, total);
      if (err > 1e-5)
        fail_msg("shape %zu (plain %d) dir %d out of place: rel error %g", t, o.plain, dir, err);
      assert_memory_equal(kept, in, bytes);
      free(got);
      GPU_OK(mr_fft_execute(gpu_plan, dir, mr_buf_data(a), mr_buf_data(a), TERR));
      got = gpu_test_download(a);
      err = mr_test_rel_error_c(got, ref, total);
      if (err > 1e-5)
        fail_msg("shape %zu (plain %d) dir %d in place: rel error %g", t, o.plain, dir, err);
      GPU_OK(mr_fft_execute_host(gpu_plan, dir, in, host_out, TERR));
      err = mr_test_rel_error_c(host_out, ref, total);
      if (err > 1e-5)
        fail_msg("shape %zu (plain %d) dir %d from host: rel error %g", t, o.plain, dir, err);
      free(got);
      free(kept);
      mr_buf_destroy(a);
      mr_buf_destroy(b);
    }
    free(in);
    free(ref);
    free(host_out);
    mr_fft_plan_destroy(cpu_plan);
    mr_fft_plan_destroy(gpu_plan);
  }
}

/* A batch larger than one staging chunk exercises the overlapped host path. */
static void cuda_host_pipeline(void **state) {
  (void)state;
  mr_fft_opts o = {.rank = 2, .dims = {256, 256}, .batch = 40};
  size_t total = 256 * 256 * 40, bytes = total * sizeof(mr_cfloat);
  mr_fft_plan *cpu_plan, *gpu_plan;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &cpu_plan, TERR));
  GPU_OK(mr_fft_plan_create(gpu_test_gpu(), &o, &gpu_plan, TERR));
  mr_cfloat *in = malloc(bytes), *ref = malloc(bytes), *out = malloc(bytes);
  gpu_test_random(in, total, 7);
  GPU_OK(mr_fft_execute(cpu_plan, MR_FFT_BACKWARD, in, ref, TERR));
  GPU_OK(mr_fft_execute_host(gpu_plan, MR_FFT_BACKWARD, in, out, TERR));
  assert_true(mr_test_rel_error_c(out, ref, total) < 1e-5);
  GPU_OK(mr_fft_execute_host(gpu_plan, MR_FFT_BACKWARD, in, in, TERR));
  assert_true(mr_test_rel_error_c(in, ref, total) < 1e-5);
  free(in);
  free(ref);
  free(out);
  mr_fft_plan_destroy(cpu_plan);
  mr_fft_plan_destroy(gpu_plan);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_matches_reference),
      cmocka_unit_test(cpu_plain_matches_reference),
      cmocka_unit_test(checkerboard_fold),
      cmocka_unit_test(centre_convention),
      cmocka_unit_test(unaligned_round_trip),
      cmocka_unit_test(bad_shapes),
      cmocka_unit_test(halve_matches_crop),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu),
      cmocka_unit_test(cuda_host_pipeline),
  };
  int failed = cuda ? cmocka_run_group_tests_name("fft_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("fft_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
