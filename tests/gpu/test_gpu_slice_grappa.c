/* slice_grappa.h: simultaneous multi-slice separation of synthetic
 * multiband data (distinct objects per slice, coils around a cylinder so
 * that the sensitivities vary along the slice direction too). CPU group:
 * per-slice NRMSE of the coil images against each slice's own k-space
 * (what a single-band reference reconstructs), slice leakage (a collapsed
 * acquisition with only slice j lit, separated: the energy landing in
 * slice m over the energy in slice j), leak-blocked against plain
 * kernels, in-plane undersampled data, the errors, the CPU's im2col
 * against its definition, and epi_sms's noiseless calibration solved by
 * the Cholesky factorisation. --cuda: the GPU against the CPU. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cblas.h>

#include "fft.h"
#include "slice_grappa.h"
#include "slice_grappa_impl.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { N = 64 };

/* The object of slice m: an ellipse phantom scaled, moved and for odd m
 * mirrored, so that no two slices look alike. */
static double object(int m, double x, double y) {
  static const double e[][6] = {
      {0.0, 0.0, 0.69, 0.92, 0.0, 1.0},     {0.0, -0.02, 0.66, 0.87, 0.0, -0.7},
      {0.22, 0.0, 0.11, 0.31, -0.31, 0.4},  {-0.22, 0.0, 0.16, 0.41, 0.31, 0.3},
      {0.0, 0.35, 0.21, 0.25, 0.0, 0.5},    {0.05, -0.5, 0.1, 0.06, 0.0, 0.6},
  };
  double s = 1.0 - 0.08 * m, v = 0;
  x = x / s - 0.05 * m;
  y = (m % 2 ? -y : y) / s;
  for (size_t i = 0; i < sizeof e / sizeof *e; i++) {
    double c = cos(e[i][4]), sn = sin(e[i][4]), dx = x - e[i][0], dy = y - e[i][1];
    double u = (dx * c + dy * sn) / e[i][2], w = (-dx * sn + dy * c) / e[i][3];
    if (u * u + w * w <= 1)
      v += e[i][5];
  }
  return v;
}

/* Coil c of nc on a cylinder around the object: rings of 8 at heights
 * spread over the slab, a Gaussian profile in 3D and a smooth phase. */
static double complex coil(int c, int nc, double x, double y, double z) {
  int rings = (nc + 7) / 8, ring = c / 8;
  double a = 2 * M_PI * (c % 8) / 8 + 0.4 * ring;
  double cz = rings > 1 ? -0.6 + 1.2 * ring / (rings - 1) : 0.0;
  double dx = x - 1.3 * cos(a), dy = y - 1.3 * sin(a), dz = z - cz;
  return exp(-(dx * dx + dy * dy + dz * dz) / 1.2) *
         cexp(I * (0.7 * c + 0.6 * (x * sin(a) - y * cos(a)) + 0.5 * z));
}

/* Single-band k-space of every slice: [mb][nc][N][N]; slice m lies at
 * z = (m - (mb - 1) / 2) 0.5. */
static mr_cfloat *reference(int mb, int nc) {
  size_t plane = (size_t)nc * N * N;
  mr_cfloat *k = malloc(plane * mb * sizeof *k);
  assert_non_null(k);
  for (int m = 0; m < mb; m++) {
    double z = (m - (mb - 1) / 2.0) * 0.5;
    for (int c = 0; c < nc; c++)
      for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++) {
          double px = 2.0 * (x - N / 2) / N, py = 2.0 * (y - N / 2) / N;
          k[m * plane + ((size_t)c * N + y) * N + x] =
              (float complex)(object(m, px, py) * coil(c, nc, px, py, z));
        }
  }
  mr_fft_opts o = {.rank = 2, .dims = {N, N, 1}, .batch = (size_t)(nc * mb)};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, k, k, TERR));
  mr_fft_plan_destroy(plan);
  return k;
}

/* The collapsed acquisition of the slices in `lit` (a bit per slice): the
 * sum of their CAIPI-shifted k-spaces. */
static mr_cfloat *collapse(const mr_cfloat *ref, int mb, int nc, int caipi, unsigned lit) {
  size_t plane = (size_t)nc * N * N;
  mr_cfloat *shifted = malloc(plane * sizeof *shifted), *sum = calloc(plane, sizeof *sum);
  assert_true(shifted != NULL && sum != NULL);
  for (int m = 0; m < mb; m++) {
    if (!(lit & (1u << m)))
      continue;
    memcpy(shifted, ref + m * plane, plane * sizeof *shifted);
    GPU_OK(mr_slice_grappa_caipi(gpu_test_cpu(), nc, N, N, caipi, m, 1, 1, shifted, TERR));
    for (size_t i = 0; i < plane; i++)
      sum[i] += shifted[i];
  }
  free(shifted);
  return sum;
}

static double norm2(const mr_cfloat *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += crealf(x[i]) * crealf(x[i]) + cimagf(x[i]) * cimagf(x[i]);
  return s;
}

/* |a - b| / |b| (k-space and coil images alike: the FFT is unitary). */
static double nrmse(const mr_cfloat *a, const mr_cfloat *b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; i++) {
    mr_cfloat e = a[i] - b[i];
    d += crealf(e) * crealf(e) + cimagf(e) * cimagf(e);
  }
  return sqrt(d / norm2(b, n));
}

typedef struct result {
  double nrmse[MR_SLICE_GRAPPA_MAX_MB], leak; /* worst slice-to-slice leakage */
} result;

/* Calibrates on the reference and separates the collapsed data (every
 * slice lit, then each alone for the leakage) on dev. */
static result separate(mr_device *dev, const mr_slice_grappa_opts *o, const mr_cfloat *ref) {
  size_t plane = (size_t)o->nc * N * N;
  mr_slice_grappa_plan *plan = NULL;
  GPU_OK(mr_slice_grappa_plan_create(dev, o, &plan, TERR));
  mr_cfloat *w = malloc(mr_slice_grappa_weights_count(o) * sizeof *w);
  mr_cfloat *out = malloc(plane * o->mb * sizeof *out);
  assert_true(w != NULL && out != NULL);
  GPU_OK(mr_slice_grappa_calibrate_host(plan, ref, w, TERR));
  result r = {.leak = 0};
  mr_cfloat *all = collapse(ref, o->mb, o->nc, o->caipi, (1u << o->mb) - 1);
  GPU_OK(mr_slice_grappa_apply_host(plan, w, all, out, TERR));
  for (int m = 0; m < o->mb; m++)
    r.nrmse[m] = nrmse(out + m * plane, ref + m * plane, plane);
  free(all);
  for (int j = 0; j < o->mb; j++) {
    mr_cfloat *one = collapse(ref, o->mb, o->nc, o->caipi, 1u << j);
    GPU_OK(mr_slice_grappa_apply_host(plan, w, one, out, TERR));
    double own = norm2(out + j * plane, plane);
    for (int m = 0; m < o->mb; m++)
      if (m != j && sqrt(norm2(out + m * plane, plane) / own) > r.leak)
        r.leak = sqrt(norm2(out + m * plane, plane) / own);
    free(one);
  }
  free(out);
  free(w);
  mr_slice_grappa_plan_destroy(plan);
  return r;
}

static void check_separation(int mb, int caipi, int nc) {
  mr_cfloat *ref = reference(mb, nc);
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(nc, N, N, mb, caipi);
  result r = separate(gpu_test_cpu(), &o, ref);
  for (int m = 0; m < mb; m++) {
    print_message("MB %d, FOV/%d, %d coils: slice %d NRMSE %.4f\n", mb, caipi, nc, m,
                  r.nrmse[m]);
    assert_true(r.nrmse[m] <= 0.05);
  }
  print_message("leakage %.5f\n", r.leak);
  assert_true(r.leak <= 0.01);
  free(ref);
}

static void cpu_mb2(void **state) {
  (void)state;
  check_separation(2, 2, 16);
}

static void cpu_mb3(void **state) {
  (void)state;
  check_separation(3, 3, 16);
}

/* The split-slice objective holds the other slices out better than plain
 * slice-GRAPPA, whose kernels only see the slices summed. */
static void cpu_leak_block(void **state) {
  (void)state;
  mr_cfloat *ref = reference(3, 16);
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(16, N, N, 3, 3);
  o.kx = o.ky = 3;
  result blocked = separate(gpu_test_cpu(), &o, ref);
  o.leak_block = 0;
  result plain = separate(gpu_test_cpu(), &o, ref);
  print_message("leakage: leak-blocked %.5f, plain %.5f\n", blocked.leak, plain.leak);
  assert_true(blocked.leak < plain.leak);
  free(ref);
}

/* In-plane R 2 on top: taps two lines apart; lines not acquired stay zero
 * and the acquired ones match the reference. */
static void cpu_in_plane(void **state) {
  (void)state;
  enum { MB = 2, NC = 16 };
  size_t plane = (size_t)NC * N * N;
  mr_cfloat *ref = reference(MB, NC);
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(NC, N, N, MB, 2);
  o.ystep = 2;
  o.ky = 3;
  mr_cfloat *all = collapse(ref, MB, NC, 2, 3), *out = malloc(plane * MB * sizeof *out);
  mr_cfloat *w = malloc(mr_slice_grappa_weights_count(&o) * sizeof *w);
  assert_true(out != NULL && w != NULL);
  for (int c = 0; c < NC; c++)
    for (int y = 1; y < N; y += 2)
      memset(all + ((size_t)c * N + y) * N, 0, N * sizeof *all);
  mr_slice_grappa_plan *plan = NULL;
  GPU_OK(mr_slice_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_slice_grappa_calibrate(plan, ref, w, TERR));
  GPU_OK(mr_slice_grappa_apply(plan, w, all, out, TERR));
  for (int m = 0; m < MB; m++) {
    double err = 0, total = 0;
    for (int c = 0; c < NC; c++)
      for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++) {
          size_t i = m * plane + ((size_t)c * N + y) * N + x;
          if (y % 2) {
            assert_true(cabsf(out[i]) == 0.0f);
            continue;
          }
          err += cabsf(out[i] - ref[i]) * cabsf(out[i] - ref[i]);
          total += cabsf(ref[i]) * cabsf(ref[i]);
        }
    print_message("in-plane R 2, slice %d: NRMSE on the acquired lines %.4f\n", m,
                  sqrt(err / total));
    assert_true(sqrt(err / total) <= 0.05);
  }
  mr_slice_grappa_plan_destroy(plan);
  free(w);
  free(out);
  free(all);
  free(ref);
}

/* A singular Gram matrix (coil 1 a copy of coil 0, so every tap of the
 * one repeats the other's) at lambda 0: no positive-definite solve exists,
 * and the calibration takes the least-norm solution on what the data span
 * (the eigen-decomposition with the null space left out) instead of
 * failing or blowing the weights up; the slices still separate. */
static void cpu_singular_lambda_zero(void **state) {
  (void)state;
  enum { MB = 2, NC = 16 };
  size_t plane = (size_t)NC * N * N, pix = (size_t)N * N;
  mr_cfloat *ref = reference(MB, NC);
  for (int m = 0; m < MB; m++)
    memcpy(ref + m * plane + pix, ref + m * plane, pix * sizeof *ref);
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(NC, N, N, MB, 2);
  o.lambda = 0;
  result r = separate(gpu_test_cpu(), &o, ref);
  for (int m = 0; m < MB; m++) {
    print_message("lambda 0, a repeated coil: slice %d NRMSE %.4f\n", m, r.nrmse[m]);
    assert_true(r.nrmse[m] <= 0.05);
  }
  print_message("leakage %.5f\n", r.leak);
  assert_true(r.leak <= 0.01);
  free(ref);
}

/* The CPU's Gram matrix (built from tap pairs a tap row apart, the box's
 * lines that leave and enter) against a plain ZHERK of the same widened
 * im2col matrix, to 1e-12 of its largest value, accumulated over two
 * k-spaces, and the columns of the centre tap of the last one's: kernels of 5 x 3 taps 1 and 2 lines apart (a box shorter than
 * the step too), cut kernels reaching out of the k-space. */
static void cpu_gram(void **state) {
  (void)state;
  enum { NC = 3, NX = 12, NY = 14 };
  mr_cfloat k[2][NC * NY * NX];
  for (int v = 0; v < NC * NY * NX; v++) {
    k[0][v] = (float)sin(0.7 * v) + I * (float)cos(1.3 * v);
    k[1][v] = (float)cos(0.4 * v + 1) - I * (float)sin(0.9 * v);
  }
  const mr_sg_window windows[] = {
      {NC, NX, NY, 5, 3, 1, 0, 5, 0, 3, 2, NX - 2, 1, NY - 1},
      {NC, NX, NY, 5, 3, 2, 0, 5, 0, 3, 2, NX - 2, 2, NY - 2},
      {NC, NX, NY, 5, 5, 2, 1, 5, 0, 3, 0, 4, 3, 4},
      {NC, NX, NY, 3, 5, 1, 0, 2, 2, 5, 0, NX, 0, NY},
  };
  for (size_t q = 0; q < sizeof windows / sizeof *windows; q++) {
    const mr_sg_window *w = &windows[q];
    size_t rows = (size_t)(w->x1 - w->x0) * (w->y1 - w->y0);
    size_t n = (size_t)(w->i1 - w->i0) * (w->j1 - w->j0) * NC;
    mr_cfloat *a = malloc(rows * n * sizeof *a);
    mr_cdouble *aw = malloc(rows * n * sizeof *aw), *g = malloc(n * n * sizeof *g);
    mr_cdouble *want = calloc(n * n, sizeof *want), *own = malloc(n * NC * sizeof *own);
    mr_cdouble *own_want = malloc(n * NC * sizeof *own_want);
    assert_true(a != NULL && aw != NULL && g != NULL && want != NULL && own != NULL &&
                own_want != NULL);
    size_t taps = n / NC, wi = (size_t)(w->i1 - w->i0);
    size_t centre = (size_t)(w->ky / 2 - w->j0) * wi + (size_t)(w->kx / 2 - w->i0);
    const mr_cdouble one = 1, zero = 0;
    for (int s = 0; s < 2; s++) {
      GPU_OK(mr_sg_cpu_im2col(gpu_test_cpu(), w, k[s], a));
      GPU_OK(mr_sg_cpu_gram(gpu_test_cpu(), w, a, s > 0, aw, g, own, (int)n, TERR));
      cblas_zherk(CblasColMajor, CblasLower, CblasConjTrans, (int)n, (int)rows, 1.0, aw,
                  (int)rows, 1.0, want, (int)n);
    }
    /* own: the last call's products with the centre tap of every coil */
    cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, (int)n, NC, (int)rows, &one, aw,
                (int)rows, aw + centre * rows, (int)(taps * rows), &zero, own_want, (int)n);
    double big = 0, err = 0, own_err = 0;
    for (size_t c = 0; c < n; c++)
      for (size_t r = c; r < n; r++) {
        big = fmax(big, cabs(want[c * n + r]));
        err = fmax(err, cabs(g[c * n + r] - want[c * n + r]));
      }
    for (size_t v = 0; v < n * NC; v++)
      own_err = fmax(own_err, cabs(own[v] - own_want[v]));
    print_message("Gram of window %zu (%zu x %zu): worst %.1e of %.1e; centre columns %.1e\n", q,
                  rows, n, err, big, own_err);
    assert_true(err <= 1e-12 * big);
    assert_true(own_err <= 1e-12 * big);
    free(own_want);
    free(own);
    free(want);
    free(g);
    free(aw);
    free(a);
  }
}

/* The configuration of configs/epi_sms.json (5 x 5 kernel, calibration on
 * the whole 64 x 64, lambda 1e-5, leak-blocked) for multiband 4, FOV/3,
 * 32 coils. */
static mr_slice_grappa_opts epi_sms_opts(void) {
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(32, N, N, 4, 3);
  o.cx = o.cy = N;
  o.lambda = 1e-5f;
  return o;
}

/* epi_sms on noiseless data: its normal equations, built in double
 * precision by the backend functions the calibration uses, are positive
 * definite at lambda 1e-5 (the full kernel's Cholesky factorisation does
 * not fail, so no eigen-decomposition is needed: summed in single
 * precision they were not, on an H100), and the calibration's full kernel
 * is that Cholesky solve's (the eigen-decomposition's solution, which
 * leaves directions out, would differ from it). */
static void cpu_noiseless_cholesky(void **state) {
  (void)state;
  mr_slice_grappa_opts o = epi_sms_opts();
  enum { K = 5 };
  mr_device *dev = gpu_test_cpu();
  size_t plane = (size_t)o.nc * N * N, n = (size_t)K * K * o.nc, ntgt = (size_t)o.mb * o.nc;
  size_t rows = (size_t)(N - K + 1) * (N - K + 1);
  mr_sg_window src = {o.nc, N, N, K, K, 1, 0, K, 0, K, K / 2, N - K / 2, K / 2, N - K / 2};
  mr_sg_window tgt = src;
  tgt.kx = tgt.ky = tgt.i1 = tgt.j1 = 1;
  mr_cfloat *ref = reference(o.mb, o.nc), *shifted = malloc(plane * o.mb * sizeof *shifted);
  mr_cfloat *a = malloc(rows * n * sizeof *a), *b = malloc(rows * o.nc * sizeof *b);
  mr_cdouble *aw = malloc(rows * n * sizeof *aw), *bw = malloc(rows * o.nc * sizeof *bw);
  mr_cdouble *g = malloc(n * n * sizeof *g), *rhs = malloc(n * ntgt * sizeof *rhs);
  mr_cdouble *scratch = malloc((n * n + n * ntgt) * sizeof *scratch);
  mr_cfloat *x = malloc(n * ntgt * sizeof *x);
  mr_cfloat *w = malloc(mr_slice_grappa_weights_count(&o) * sizeof *w);
  assert_true(shifted != NULL && a != NULL && b != NULL && aw != NULL && bw != NULL &&
              g != NULL && rhs != NULL && scratch != NULL && x != NULL && w != NULL);
  memcpy(shifted, ref, plane * o.mb * sizeof *ref);
  GPU_OK(mr_sg_cpu_caipi(dev, o.nc, N, N, o.caipi, 0, o.mb, 1, shifted));
  for (int m = 0; m < o.mb; m++) {
    GPU_OK(mr_sg_cpu_im2col(dev, &src, shifted + m * plane, a));
    GPU_OK(mr_sg_cpu_gram(dev, &src, a, m > 0, aw, g, NULL, 0, TERR));
    GPU_OK(mr_sg_cpu_im2col(dev, &tgt, shifted + m * plane, b));
    GPU_OK(mr_sg_cpu_cross(dev, (int)rows, (int)n, aw, o.nc, b, bw, rhs + m * o.nc * n, (int)n));
  }
  double trace = 0;
  for (size_t i = 0; i < n; i++)
    trace += creal(g[i * n + i]);
  mr_sg_class full = {0, K, 0, K, K / 2, N - K / 2, K / 2, N - K / 2, (int)n, 0};
  mr_sg_system sys = {K, K, o.nc, (int)n, (int)ntgt, &full, 1};
  int failed = -1;
  GPU_OK(mr_sg_cpu_solve(dev, &sys, g, rhs, o.lambda * trace / (double)n, scratch, 1, x,
                         &failed));
  assert_int_equal(failed, 0);
  mr_slice_grappa_plan *plan = NULL;
  GPU_OK(mr_slice_grappa_plan_create(dev, &o, &plan, TERR));
  GPU_OK(mr_slice_grappa_calibrate(plan, ref, w, TERR));
  double rel = nrmse(w, x, n * ntgt);
  print_message("epi_sms, noiseless: the full kernel's Cholesky succeeds; the calibration's "
                "kernel against it %.2e\n", rel);
  assert_true(rel <= 1e-5);
  mr_slice_grappa_plan_destroy(plan);
  free(w);
  free(x);
  free(scratch);
  free(rhs);
  free(g);
  free(bw);
  free(aw);
  free(b);
  free(a);
  free(shifted);
  free(ref);
}

static void cpu_errors(void **state) {
  (void)state;
  mr_slice_grappa_plan *plan = NULL;
  mr_slice_grappa_opts o = mr_slice_grappa_opts_default(2, N, N, 4, 3);
  assert_int_equal(mr_slice_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "2 coils cannot separate 4 slices"));
  o = mr_slice_grappa_opts_default(32, N, N, 1, 1);
  assert_int_equal(mr_slice_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "multiband factor 1"));
  o = mr_slice_grappa_opts_default(32, N, N, 2, 2);
  o.cx = o.cy = 8;
  assert_int_equal(mr_slice_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "equations"));
  o = mr_slice_grappa_opts_default(32, N, N, 2, 2);
  o.kx = 4;
  assert_int_equal(mr_slice_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_null(plan);
}

/* The GPU's separation against the CPU's, to 1e-4 of the k-space's norm:
 * plain and leak-blocked kernels (multiband 3, 16 coils), and epi_sms
 * (epi_sms_opts). */
static void cuda_matches_cpu(void **state) {
  (void)state;
  for (int c = 0; c < 3; c++) {
    mr_slice_grappa_opts o =
        c < 2 ? mr_slice_grappa_opts_default(16, N, N, 3, 3) : epi_sms_opts();
    o.leak_block = c > 0;
    size_t plane = (size_t)o.nc * N * N;
    mr_cfloat *ref = reference(o.mb, o.nc);
    mr_cfloat *all = collapse(ref, o.mb, o.nc, o.caipi, (1u << o.mb) - 1);
    mr_cfloat *out[2];
    mr_device *devs[2] = {gpu_test_cpu(), gpu_test_gpu()};
    for (int d = 0; d < 2; d++) {
      mr_slice_grappa_plan *plan = NULL;
      mr_cfloat *w = malloc(mr_slice_grappa_weights_count(&o) * sizeof *w);
      out[d] = malloc(plane * o.mb * sizeof *out[d]);
      assert_true(w != NULL && out[d] != NULL);
      GPU_OK(mr_slice_grappa_plan_create(devs[d], &o, &plan, TERR));
      GPU_OK(mr_slice_grappa_calibrate_host(plan, ref, w, TERR));
      GPU_OK(mr_slice_grappa_apply_host(plan, w, all, out[d], TERR));
      mr_slice_grappa_plan_destroy(plan);
      free(w);
    }
    double rel = nrmse(out[1], out[0], plane * o.mb);
    print_message("multiband %d, %d coils, lambda %g, leak-block %d: GPU against CPU %.2e\n",
                  o.mb, o.nc, o.lambda, o.leak_block, rel);
    assert_true(rel <= 1e-4);
    free(out[0]);
    free(out[1]);
    free(all);
    free(ref);
  }
}

/* The CPU's im2col against its definition (slice_grappa_impl.h), value for
 * value: whole kernels over the whole k-space (taps 1 and 2 lines apart,
 * reaching out of it on every side), cut kernels over edge boxes, a box
 * inside. */
static void cpu_im2col(void **state) {
  (void)state;
  enum { NC = 2, NX = 11, NY = 13 };
  mr_cfloat k[NC * NY * NX];
  for (int v = 0; v < NC * NY * NX; v++)
    k[v] = (float)(v + 1) + I * (float)(v % 7);
  const mr_sg_window windows[] = {
      {NC, NX, NY, 5, 5, 1, 0, 5, 0, 5, 0, NX, 0, NY},
      {NC, NX, NY, 5, 3, 2, 0, 5, 0, 3, 0, NX, 0, NY},
      {NC, NX, NY, 5, 5, 2, 2, 5, 0, 4, 0, 2, 0, 4},
      {NC, NX, NY, 5, 5, 1, 0, 3, 1, 5, NX - 2, NX, NY - 1, NY},
      {NC, NX, NY, 3, 3, 1, 0, 3, 0, 3, 1, NX - 1, 1, NY - 1},
  };
  for (size_t n = 0; n < sizeof windows / sizeof *windows; n++) {
    const mr_sg_window *w = &windows[n];
    int bx = w->x1 - w->x0, rows = bx * (w->y1 - w->y0);
    int wi = w->i1 - w->i0, wj = w->j1 - w->j0, cols = wi * wj * w->nc;
    mr_cfloat *out = malloc((size_t)rows * cols * sizeof *out);
    assert_non_null(out);
    GPU_OK(mr_sg_cpu_im2col(gpu_test_cpu(), w, k, out));
    for (int c = 0; c < w->nc; c++)
      for (int j = w->j0; j < w->j1; j++)
        for (int i = w->i0; i < w->i1; i++)
          for (int y = w->y0; y < w->y1; y++)
            for (int x = w->x0; x < w->x1; x++) {
              int col = (c * wj + j - w->j0) * wi + i - w->i0;
              int row = (y - w->y0) * bx + x - w->x0;
              int xs = x + i - w->kx / 2, ys = y + (j - w->ky / 2) * w->ystep;
              mr_cfloat want = xs >= 0 && xs < NX && ys >= 0 && ys < NY
                                   ? k[(c * NY + ys) * NX + xs]
                                   : 0;
              assert_true(out[(size_t)col * rows + row] == want);
            }
    free(out);
  }
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_mb2),   cmocka_unit_test(cpu_mb3),    cmocka_unit_test(cpu_leak_block),
      cmocka_unit_test(cpu_in_plane), cmocka_unit_test(cpu_singular_lambda_zero),
      cmocka_unit_test(cpu_errors), cmocka_unit_test(cpu_im2col),
      cmocka_unit_test(cpu_gram), cmocka_unit_test(cpu_noiseless_cholesky),
  };
  const struct CMUnitTest cuda_tests[] = {cmocka_unit_test(cuda_matches_cpu)};
  int rc = cuda ? cmocka_run_group_tests(cuda_tests, NULL, NULL)
                : cmocka_run_group_tests(cpu_tests, NULL, NULL);
  gpu_test_fini();
  return rc;
}
