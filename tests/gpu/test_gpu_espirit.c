/* espirit.h: the maps are eigenvectors of eigenvalue about 1 of the
 * ESPIRiT operator built here from its definition (the calibration
 * matrix's SVD, patch by patch in k-space), they match a phantom's known
 * sensitivities after phase alignment (2D, 3D, undersampled outside the
 * ACS), bad input gets clear errors; with --cuda, the GPU against the CPU;
 * with --bart, against `bart ecalib -m1` on the same data (77 without bart). */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bart_cfl.h"
#include "espirit.h"
#include "fft.h"
#include "grappa_phantom.h"
#include "host_svd.h"
#include "test_gpu_common.h"
#include "test_support.h"

enum { NX = 64, NY = 64, NC = 8 };

static mr_espirit_opts defaults(void) {
  mr_espirit_opts o;
  mr_espirit_opts_default(&o);
  return o;
}

/* |<a, b>| / (|a| |b|) at pixel p of two [coil][pixel] sets; -1 where
 * either is zero. */
static double agreement(const mr_cfloat *a, const mr_cfloat *b, size_t nc, size_t npix,
                        size_t p) {
  double complex dot = 0;
  double na = 0, nb = 0;
  for (size_t c = 0; c < nc; c++) {
    double complex x = a[c * npix + p], y = b[c * npix + p];
    dot += conj(x) * y;
    na += creal(x * conj(x));
    nb += creal(y * conj(y));
  }
  return na > 0 && nb > 0 ? cabs(dot) / sqrt(na * nb) : -1;
}

/* The worst agreement over the pixels where object is above 10% of its
 * largest value; *covered: the share of those where both sets are
 * non-zero. */
static double worst_inside(const mr_cfloat *a, const mr_cfloat *b, const float *object,
                           size_t nc, size_t npix, double *covered) {
  float peak = 0;
  for (size_t p = 0; p < npix; p++)
    peak = fmaxf(peak, fabsf(object[p]));
  double worst = 1;
  size_t inside = 0, both = 0;
  for (size_t p = 0; p < npix; p++) {
    if (fabsf(object[p]) <= 0.1f * peak)
      continue;
    inside++;
    double g = agreement(a, b, nc, npix, p);
    if (g < 0)
      continue;
    both++;
    worst = fmin(worst, g);
  }
  *covered = inside > 0 ? (double)both / (double)inside : 0;
  return worst;
}

static mr_cfloat *phantom_2d(int nx, int ny, int nc, double noise) {
  mr_cfloat *k = malloc(sizeof *k * (size_t)nx * ny * nc);
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), nx, ny, nc, noise, 3, k));
  return k;
}

/* A 3D phantom: an ellipsoid seen by nc Gaussian coils on a ring around
 * it at heights alternating above and below the centre, each with a smooth
 * phase; its k-space (centred forward transform). */
static void phantom_3d(size_t nx, size_t ny, size_t nz, size_t nc, float *object,
                       mr_cfloat *maps, mr_cfloat *kspace) {
  size_t npix = nx * ny * nz;
  for (size_t z = 0; z < nz; z++)
    for (size_t y = 0; y < ny; y++)
      for (size_t x = 0; x < nx; x++) {
        double px = 2.0 * ((double)x - (double)(nx / 2)) / (double)nx;
        double py = 2.0 * ((double)y - (double)(ny / 2)) / (double)ny;
        double pz = 2.0 * ((double)z - (double)(nz / 2)) / (double)nz;
        size_t p = (z * ny + y) * nx + x;
        double r = px * px / 0.5 + py * py / 0.7 + pz * pz / 0.6;
        object[p] = r <= 1 ? (float)(1 - 0.3 * (px > 0.2)) : 0;
        for (size_t c = 0; c < nc; c++) {
          double a = 2 * M_PI * (double)c / (double)nc, cz = c % 2 ? 0.8 : -0.8;
          double d2 = pow(px - 1.2 * cos(a), 2) + pow(py - 1.2 * sin(a), 2) + pow(pz - cz, 2);
          double complex s = exp(-d2 / 2) * cexp(I * (a + 0.6 * (px * sin(a) + pz)));
          maps[c * npix + p] = (float complex)s;
          kspace[c * npix + p] = (float complex)(s * object[p]);
        }
      }
  mr_fft_opts o = {.rank = 3, .dims = {nx, ny, nz}, .batch = nc};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, kspace, kspace, TERR));
  mr_fft_plan_destroy(plan);
}

/* The projector onto the span of the calibration region's patches (the
 * rows of the calibration matrix, here as the columns of its transpose),
 * kept as BART keeps them: sigma^2 > t sigma_max^2. */
static float complex *projector(const mr_cfloat *k, int nx, int ny, int nc, int cal, int ker,
                                float t) {
  int r = cal - ker + 1, m = r * r, n = ker * ker * nc;
  mr_host_svd *svd = NULL;
  GPU_OK(mr_host_svd_create(n, m, &svd, TERR));
  double complex *at = svd->a; /* n x m: column q is patch q */
  int x0 = nx / 2 - cal / 2, y0 = ny / 2 - cal / 2;
  for (int qy = 0; qy < r; qy++)
    for (int qx = 0; qx < r; qx++)
      for (int c = 0; c < nc; c++)
        for (int py = 0; py < ker; py++)
          for (int px = 0; px < ker; px++)
            at[(size_t)(qy * r + qx) * n + (c * ker + py) * ker + px] =
                k[((size_t)c * ny + y0 + qy + py) * nx + x0 + qx + px];
  GPU_OK(mr_host_svd_run(svd, TERR));
  const double *sv = svd->s;
  const double complex *u = svd->u;
  int mn = svd->r, keep = 0;
  while (keep < mn && sv[keep] * sv[keep] > t * sv[0] * sv[0])
    keep++;
  float complex *p = calloc((size_t)n * n, sizeof *p);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      double complex sum = 0;
      for (int l = 0; l < keep; l++)
        sum += u[(size_t)l * n + i] * conj(u[(size_t)l * n + j]);
      p[(size_t)j * n + i] = (float complex)sum;
    }
  mr_host_svd_destroy(svd);
  return p;
}

/* The ESPIRiT operator on coil images s: to k-space, every (circular)
 * patch projected and put back, averaged over the ker^2 patches covering
 * each sample, back to image space. */
static void espirit_operator(const float complex *p, const mr_cfloat *s, int nx, int ny, int nc,
                             int ker, mr_cfloat *out) {
  size_t npix = (size_t)nx * ny, n = (size_t)ker * ker * nc;
  mr_cfloat *k = malloc(sizeof *k * npix * nc);
  float complex *acc = calloc(npix * nc, sizeof *acc), *patch = malloc(sizeof *patch * n);
  mr_fft_opts o = {.rank = 2, .dims = {(size_t)nx, (size_t)ny, 1}, .batch = (size_t)nc};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(gpu_test_cpu(), &o, &plan, TERR));
  GPU_OK(mr_fft_execute(plan, MR_FFT_FORWARD, s, k, TERR));
  for (int qy = 0; qy < ny; qy++)
    for (int qx = 0; qx < nx; qx++) {
      for (int c = 0; c < nc; c++)
        for (int py = 0; py < ker; py++)
          for (int px = 0; px < ker; px++)
            patch[(c * ker + py) * ker + px] =
                k[(size_t)c * npix + (size_t)((qy + py) % ny) * nx + (size_t)((qx + px) % nx)];
      for (size_t i = 0; i < n; i++) {
        float complex sum = 0;
        for (size_t j = 0; j < n; j++)
          sum += p[j * n + i] * patch[j];
        int c = (int)(i / (size_t)(ker * ker)), py = (int)(i / (size_t)ker % (size_t)ker),
            px = (int)(i % (size_t)ker);
        acc[(size_t)c * npix + (size_t)((qy + py) % ny) * nx + (size_t)((qx + px) % nx)] += sum;
      }
    }
  for (size_t i = 0; i < npix * (size_t)nc; i++)
    k[i] = acc[i] / (float)(ker * ker);
  GPU_OK(mr_fft_execute(plan, MR_FFT_BACKWARD, k, out, TERR));
  mr_fft_plan_destroy(plan);
  free(k);
  free(acc);
  free(patch);
}

static void cpu_eigenvectors_of_the_operator(void **state) {
  (void)state;
  enum { N = 32, C = 4, CAL = 16, KER = 5 };
  size_t npix = (size_t)N * N;
  mr_cfloat *k = phantom_2d(N, N, C, 0.01), *maps = malloc(sizeof *maps * npix * C);
  mr_cfloat *w = malloc(sizeof *w * npix * C);
  float *object = malloc(sizeof *object * npix);
  mr_espirit_opts o = defaults();
  o.calib = CAL;
  o.kernel = KER;
  size_t dims[3] = {N, N, 1};
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, C, &o, maps, TERR));
  float complex *p = projector(k, N, N, C, CAL, KER, o.threshold);
  espirit_operator(p, maps, N, N, C, KER, w);
  grappa_phantom_truth(N, N, C, object, NULL);
  size_t checked = 0;
  for (size_t px = 0; px < npix; px++) {
    double complex lambda = 0;
    double norm = 0, res = 0;
    for (size_t c = 0; c < C; c++) {
      lambda += conj(maps[c * npix + px]) * w[c * npix + px];
      norm += pow(cabsf(maps[c * npix + px]), 2);
    }
    if (norm == 0)
      continue;
    for (size_t c = 0; c < C; c++)
      res += pow(cabs(w[c * npix + px] - lambda * maps[c * npix + px]), 2);
    assert_true(fabs(norm - 1) < 1e-4);           /* unit eigenvectors */
    /* W s = lambda s; loosest at the edge of the field of view, where the
     * coils' periodic copies give a second eigenvalue near the first */
    assert_true(sqrt(res) < 2e-2);
    assert_true(creal(lambda) >= o.crop - 1e-3); /* kept: at or above the crop */
    if (object[px] > 0.1f) {
      assert_true(creal(lambda) > 0.95); /* inside the object: about 1 */
      assert_true(sqrt(res) < 2e-3);
      checked++;
    }
  }
  assert_true(checked > npix / 4);
  free(k);
  free(maps);
  free(w);
  free(object);
  free(p);
}

static void cpu_analytic_maps(void **state) {
  (void)state;
  size_t npix = (size_t)NX * NY;
  mr_cfloat *k = phantom_2d(NX, NY, NC, 0.01), *maps = malloc(sizeof *maps * npix * NC);
  mr_cfloat *truth = malloc(sizeof *truth * npix * NC);
  float *object = malloc(sizeof *object * npix);
  mr_espirit_opts o = defaults();
  size_t dims[3] = {NX, NY, 1};
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, maps, TERR));
  grappa_phantom_truth(NX, NY, NC, object, truth);
  double covered, worst = worst_inside(maps, truth, object, NC, npix, &covered);
  print_message("2D phantom: worst agreement %.4f over %.1f%% of the object\n", worst,
                100 * covered);
  assert_true(worst >= 0.99);
  assert_true(covered >= 0.99);
  /* undersampled 3x outside 20 ACS lines: the calibration clips to them */
  uint8_t sampled[NY];
  grappa_phantom_pattern(NY, 3, 0, 20, sampled);
  for (size_t c = 0; c < NC; c++)
    for (size_t y = 0; y < NY; y++)
      if (!sampled[y])
        memset(k + (c * NY + y) * NX, 0, sizeof *k * NX);
  mr_cfloat *under = malloc(sizeof *under * npix * NC);
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, under, TERR));
  worst = worst_inside(under, truth, object, NC, npix, &covered);
  print_message("2D phantom, R 3, 20 ACS lines: worst %.4f over %.1f%%\n", worst, 100 * covered);
  assert_true(worst >= 0.99);
  assert_true(covered >= 0.99);
  free(k);
  free(maps);
  free(truth);
  free(object);
  free(under);
}

static void cpu_analytic_maps_3d(void **state) {
  (void)state;
  enum { X = 24, Y = 32, Z = 20, C = 6 };
  size_t npix = (size_t)X * Y * Z;
  float *object = malloc(sizeof *object * npix);
  mr_cfloat *truth = malloc(sizeof *truth * npix * C), *k = malloc(sizeof *k * npix * C);
  mr_cfloat *maps = malloc(sizeof *maps * npix * C);
  phantom_3d(X, Y, Z, C, object, truth, k);
  mr_espirit_opts o = defaults();
  size_t dims[3] = {X, Y, Z};
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, C, &o, maps, TERR));
  double covered, worst = worst_inside(maps, truth, object, C, npix, &covered);
  print_message("3D phantom: worst agreement %.4f over %.1f%% of the object\n", worst,
                100 * covered);
  assert_true(worst >= 0.99);
  assert_true(covered >= 0.99);
  free(object);
  free(truth);
  free(k);
  free(maps);
}

static void bad_input(void **state) {
  (void)state;
  size_t npix = (size_t)NX * NY, dims[3] = {NX, NY, 1};
  mr_cfloat *k = phantom_2d(NX, NY, NC, 0), *maps = malloc(sizeof *maps * npix * NC);
  mr_espirit_opts o = defaults();
  o.kernel = 0;
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, maps, TERR), MR_EINVAL);
  o = defaults();
  o.crop = 1.5f;
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, maps, TERR), MR_EINVAL);
  o = defaults();
  assert_int_equal(
      mr_espirit_maps(gpu_test_cpu(), k, dims, MR_ESPIRIT_MAX_COILS + 1, &o, maps, TERR),
      MR_EINVAL);
  /* every other line: no fully sampled centre */
  for (size_t c = 0; c < NC; c++)
    for (size_t y = 1; y < NY; y += 2)
      memset(k + (c * NY + y) * NX, 0, sizeof *k * NX);
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, maps, TERR), MR_EDATA);
  /* no signal at all */
  memset(k, 0, sizeof *k * npix * NC);
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k, dims, NC, &o, maps, TERR), MR_EDATA);
  free(k);
  free(maps);
}

/* A calibration region too small for the kernel is refused, with a line
 * that says so; one just large enough gives maps over the whole object.
 * 3D: only a k x k ky-kz centre sampled; 2D: only the centre lines. */
static void tiny_calibration(void **state) {
  (void)state;
  enum { X = 24, Y = 32, Z = 20, C = 6 };
  size_t npix = (size_t)X * Y * Z, dims[3] = {X, Y, Z};
  float *object = malloc(sizeof *object * npix);
  mr_cfloat *truth = malloc(sizeof *truth * npix * C), *k = malloc(sizeof *k * npix * C);
  mr_cfloat *maps = malloc(sizeof *maps * npix * C);
  phantom_3d(X, Y, Z, C, object, truth, k);
  mr_espirit_opts o = defaults();
  for (size_t c = 0; c < C; c++)
    for (size_t z = 0; z < Z; z++)
      for (size_t y = 0; y < Y; y++)
        if (y < Y / 2 - 6 || y >= Y / 2 + 6 || z < Z / 2 - 6 || z >= Z / 2 + 6)
          memset(k + ((c * Z + z) * Y + y) * X, 0, sizeof *k * X);
  double covered, worst;
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, C, &o, maps, TERR)); /* 12 x 12 */
  worst = worst_inside(maps, truth, object, C, npix, &covered);
  print_message("3D, a 12 x 12 centre: worst %.4f over %.1f%%\n", worst, 100 * covered);
  assert_true(worst >= 0.99);
  assert_true(covered >= 0.99);
  for (size_t c = 0; c < C; c++) /* 8 x 8 */
    for (size_t z = 0; z < Z; z++)
      for (size_t y = 0; y < Y; y++)
        if (y < Y / 2 - 4 || y >= Y / 2 + 4 || z < Z / 2 - 4 || z >= Z / 2 + 4)
          memset(k + ((c * Z + z) * Y + y) * X, 0, sizeof *k * X);
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k, dims, C, &o, maps, TERR), MR_EDATA);
  print_message("3D, an 8 x 8 centre: %s\n", mr_test_last_error());
  assert_non_null(strstr(mr_test_last_error(), "8 x 8, too small for the 6 x 6 kernel"));
  /* 2D, 6 centre lines: one kernel position along y */
  size_t npix2 = (size_t)NX * NY, dims2[3] = {NX, NY, 1};
  mr_cfloat *k2 = phantom_2d(NX, NY, NC, 0.01), *maps2 = malloc(sizeof *maps2 * npix2 * NC);
  for (size_t c = 0; c < NC; c++)
    for (size_t y = 0; y < NY; y++)
      if (y < NY / 2 - 3 || y >= NY / 2 + 3)
        memset(k2 + (c * NY + y) * NX, 0, sizeof *k2 * NX);
  assert_int_equal(mr_espirit_maps(gpu_test_cpu(), k2, dims2, NC, &o, maps2, TERR), MR_EDATA);
  assert_non_null(strstr(mr_test_last_error(), "too small"));
  free(object);
  free(truth);
  free(k);
  free(maps);
  free(k2);
  free(maps2);
}

/* --- the GPU against the CPU --- */

/* Inside the object (above 10% of its peak): outside it no data constrain
 * the maps, and where G(x) has several eigenvalues near 1 (the 3D phantom's
 * coils see far past its edge) any vector of their span is an eigenvector:
 * -m1 picks one, the CPU and GPU each their own (a 1e-6 perturbation of
 * the data moves them as far, on the CPU alone; inside, it moves the maps
 * 4e-7). */
static void gpu_vs_cpu(const mr_cfloat *k, const size_t dims[3], size_t nc, const float *object) {
  size_t npix = dims[0] * dims[1] * dims[2], n = npix * nc;
  mr_cfloat *want = malloc(sizeof *want * n);
  mr_espirit_opts o = defaults();
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, nc, &o, want, TERR));
  mr_device *gpu = gpu_test_gpu();
  mr_buf *dk = gpu_test_upload(gpu, k, sizeof *k * n), *dm = NULL;
  GPU_OK(mr_buf_create(gpu, sizeof *k * n, &dm, TERR));
  GPU_OK(mr_espirit_maps(gpu, mr_buf_data(dk), dims, nc, &o, mr_buf_data(dm), TERR));
  mr_cfloat *got = gpu_test_download(dm);
  float peak = 0;
  for (size_t p = 0; p < npix; p++)
    peak = fmaxf(peak, fabsf(object[p]));
  double num = 0, den = 0;
  size_t inside = 0;
  for (size_t p = 0; p < npix; p++) {
    if (fabsf(object[p]) <= 0.1f * peak)
      continue;
    inside++;
    for (size_t c = 0; c < nc; c++) {
      num += pow(cabsf(got[c * npix + p] - want[c * npix + p]), 2);
      den += pow(cabsf(want[c * npix + p]), 2);
    }
  }
  double err = sqrt(num / den);
  print_message("%zu x %zu x %zu, %zu coils: GPU against CPU %.2e over %zu pixels\n", dims[0],
                dims[1], dims[2], nc, err, inside);
  assert_true(inside > npix / 10);
  assert_true(err < 1e-4);
  mr_buf_destroy(dk);
  mr_buf_destroy(dm);
  free(want);
  free(got);
}

/* The 2D phantom, n x n with nc coils. */
static void matches_cpu_2d(int n, int nc) {
  mr_cfloat *k = phantom_2d(n, n, nc, 0.01);
  float *object = malloc(sizeof *object * (size_t)n * n);
  grappa_phantom_truth(n, n, nc, object, NULL);
  size_t dims[3] = {(size_t)n, (size_t)n, 1};
  gpu_vs_cpu(k, dims, (size_t)nc, object);
  free(k);
  free(object);
}

static void cuda_matches_cpu_2d(void **state) {
  (void)state;
  matches_cpu_2d(96, 32);
}

/* More than 32 coils: the GPU's eigenvector kernel with two rows of G a
 * lane. */
static void cuda_matches_cpu_40_coils(void **state) {
  (void)state;
  matches_cpu_2d(64, 40);
}

static void cuda_matches_cpu_3d(void **state) {
  (void)state;
  enum { X = 24, Y = 32, Z = 20, C = 6 };
  size_t npix = (size_t)X * Y * Z, dims[3] = {X, Y, Z};
  float *object = malloc(sizeof *object * npix);
  mr_cfloat *truth = malloc(sizeof *truth * npix * C), *k = malloc(sizeof *k * npix * C);
  phantom_3d(X, Y, Z, C, object, truth, k);
  gpu_vs_cpu(k, dims, C, object);
  free(object);
  free(truth);
  free(k);
}

/* --- against BART --- */

static void bart_agrees(void **state) {
  (void)state;
  enum { N = 96, C = 8 };
  size_t npix = (size_t)N * N, dims[4] = {N, N, 1, C};
  mr_cfloat *k = phantom_2d(N, N, C, 0.02), *ours = malloc(sizeof *ours * npix * C);
  mr_cfloat *theirs = malloc(sizeof *theirs * npix * C);
  float *object = malloc(sizeof *object * npix);
  bart_run("ecalib -m1", dims, k, npix * C, theirs);
  mr_espirit_opts o = defaults();
  GPU_OK(mr_espirit_maps(gpu_test_cpu(), k, dims, C, &o, ours, TERR));
  grappa_phantom_truth(N, N, C, object, NULL);
  double covered, worst = worst_inside(ours, theirs, object, C, npix, &covered);
  print_message("against bart ecalib -m1: worst %.4f over %.1f%% of the object\n", worst,
                100 * covered);
  assert_true(worst >= 0.99);
  assert_true(covered >= 0.99);
  free(k);
  free(ours);
  free(theirs);
  free(object);
}

int main(int argc, char **argv) {
  int group = bart_test_init(argc, argv), bart = group == 2, cuda = group == 1;
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(cpu_eigenvectors_of_the_operator),
      cmocka_unit_test(cpu_analytic_maps),
      cmocka_unit_test(cpu_analytic_maps_3d),
      cmocka_unit_test(bad_input),
      cmocka_unit_test(tiny_calibration),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu_2d),
      cmocka_unit_test(cuda_matches_cpu_40_coils),
      cmocka_unit_test(cuda_matches_cpu_3d),
  };
  const struct CMUnitTest bart_tests[] = {
      cmocka_unit_test(bart_agrees),
  };
  int failed = bart   ? cmocka_run_group_tests_name("espirit_bart", bart_tests, NULL, NULL)
               : cuda ? cmocka_run_group_tests_name("espirit_cuda", cuda_tests, NULL, NULL)
                      : cmocka_run_group_tests_name("espirit_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
