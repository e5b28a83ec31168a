/* coil_combine: root sum of squares against a direct computation; the
 * sensitivity-weighted combination against a double-precision reference of
 * the map estimate (centered DFTs, Hann window along every axis), with the
 * maps made once per slice (reused for a repetition, remade for a new
 * calibration generation) or per image; with ESPIRiT maps the combined
 * magnitude is the root sum of squares (unit-norm eigenvector maps); a
 * budget too small for the maps gives an error that says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <math.h>

#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "fft.h"
#include "gadget_harness.h"
#include "image_array.h"
#include "test_err.h"

static void test_rss(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"coil_combine\",\"method\":\"rss\"}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_image_array *a = mr_image_array_new(5, 4, 2, 6, NULL);
  size_t per = 5 * 4 * 2;
  for (size_t i = 0; i < per * 6; i++)
    a->data[i] = (float)(i % 7) - 3.0f + I * (float)(i % 5);
  a->ref.idx.repetition = 2;
  a->fov_mm.y = 123;
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), 0);
  const mr_image_array *b = h.out[0]->u.object.ptr;
  assert_int_equal(b->nch, 1);
  assert_int_equal(b->nx * b->ny * b->nz, per);
  assert_int_equal(b->ref.idx.repetition, 2);
  assert_float_equal(b->fov_mm.y, 123, 0);
  for (size_t p = 0; p < per; p++) {
    double sum = 0;
    for (size_t c = 0; c < 6; c++) {
      double re = (double)((c * per + p) % 7) - 3.0, im = (double)((c * per + p) % 5);
      sum += re * re + im * im;
    }
    assert_float_equal(crealf(b->data[p]), sqrt(sum), 1e-4 * sqrt(sum));
    assert_float_equal(cimagf(b->data[p]), 0, 0);
  }
  mr_harness_close(&h);
}

/* One axis of a centered unitary DFT in place over a [nz][ny][nx] array:
 * out[k] = sum_m x[m] exp(sign 2 pi i (k - n/2)(m - n/2) / n) / sqrt(n). */
static void dft_axis(double complex *a, const size_t dims[3], int axis, int sign) {
  size_t n = dims[axis], stride = axis == 0 ? 1 : axis == 1 ? dims[0] : dims[0] * dims[1];
  size_t total = dims[0] * dims[1] * dims[2];
  double complex *line = malloc(n * sizeof *line);
  for (size_t start = 0; start < total; start++) {
    if ((start / stride) % n != 0)
      continue; /* not the first sample of a line along axis */
    for (size_t k = 0; k < n; k++) {
      double complex v = 0;
      for (size_t m = 0; m < n; m++)
        v += a[start + m * stride] *
             cexp(sign * 2 * M_PI * I * ((double)k - (double)(n / 2)) *
                  ((double)m - (double)(n / 2)) / (double)n);
      line[k] = v / sqrt((double)n);
    }
    for (size_t k = 0; k < n; k++)
      a[start + k * stride] = line[k];
  }
  free(line);
}

static double hann_ref(size_t i, size_t n, int w) {
  double d = (double)i - (double)(n / 2);
  if (w > (int)n)
    w = (int)n;
  return fabs(d) * 2 < w ? 0.5 * (1 + cos(2 * M_PI * d / w)) : 0;
}

/* The weighted combination of `images` with maps from `maps_from`, both
 * [nch][z][y][x], in double: what the gadget computed for every image
 * before maps were kept (with the window along z too). */
static void weighted_ref(const float complex *images, const float complex *maps_from,
                         const size_t dims[3], size_t nch, const int calib[2],
                         double complex *out) {
  size_t n = dims[0] * dims[1] * dims[2];
  double complex *m = malloc(n * nch * sizeof *m);
  int width[3] = {calib[0], calib[1], calib[1]};
  for (size_t c = 0; c < nch; c++) {
    double complex *mc = m + c * n;
    for (size_t p = 0; p < n; p++)
      mc[p] = maps_from[c * n + p];
    for (int d = 0; d < 3; d++)
      if (dims[d] > 1)
        dft_axis(mc, dims, d, -1);
    for (size_t p = 0; p < n; p++)
      mc[p] *= hann_ref(p % dims[0], dims[0], width[0]) *
               hann_ref(p / dims[0] % dims[1], dims[1], width[1]) *
               hann_ref(p / dims[0] / dims[1], dims[2], width[2]);
    for (int d = 0; d < 3; d++)
      if (dims[d] > 1)
        dft_axis(mc, dims, d, +1);
  }
  double peak = 0;
  double *rss = malloc(n * sizeof *rss);
  for (size_t p = 0; p < n; p++) {
    double ss = 0;
    for (size_t c = 0; c < nch; c++)
      ss += creal(m[c * n + p] * conj(m[c * n + p]));
    rss[p] = sqrt(ss);
    peak = rss[p] > peak ? rss[p] : peak;
  }
  for (size_t p = 0; p < n; p++) {
    double complex num = 0;
    double den = 0;
    for (size_t c = 0; c < nch; c++) {
      double complex s = rss[p] > 1e-6 * peak ? m[c * n + p] / rss[p] : 0;
      num += conj(s) * images[c * n + p];
      den += creal(s * conj(s));
    }
    out[p] = den > 0 ? num / den : 0;
  }
  free(rss);
  free(m);
}

/* Smooth coil profiles times an object, plus a little per-image variation. */
static mr_image_array *coil_images(const size_t dims[3], size_t nch, int slice, int rep,
                                   unsigned seed) {
  mr_image_array *a = mr_image_array_new(dims[0], dims[1], dims[2], nch, NULL);
  size_t n = dims[0] * dims[1] * dims[2];
  srand(seed);
  for (size_t c = 0; c < nch; c++)
    for (size_t p = 0; p < n; p++) {
      double x = (double)(p % dims[0]) / dims[0], y = (double)(p / dims[0] % dims[1]) / dims[1];
      double z = (double)(p / dims[0] / dims[1]) / dims[2];
      double complex coil = cexp(I * (1.0 + c) * (x - 0.3 * y + 0.2 * z)) *
                            (1.5 + cos(2 * M_PI * (x + 0.25 * c)) * sin(M_PI * (y + 0.1 * c)));
      double object = 1 + 0.5 * cos(6 * x * y) + 0.1 * z;
      double noise = (double)rand() / RAND_MAX - 0.5;
      a->data[c * n + p] = (float complex)(coil * (object + 0.05 * noise));
    }
  a->ref.idx.slice = (uint16_t)slice;
  a->ref.idx.repetition = (uint16_t)rep;
  return a;
}

static double rel_diff(const float complex *got, const double complex *want, size_t n) {
  double err = 0, norm = 0;
  for (size_t p = 0; p < n; p++) {
    double e = cabs(got[p] - want[p]), w = cabs(want[p]);
    err = e > err ? e : err;
    norm = w > norm ? w : norm;
  }
  return err / norm;
}

static void open_weighted(mr_harness *h, const char *maps) {
  char chain[160];
  snprintf(chain, sizeof chain,
           "[{\"gadget\":\"coil_combine\",\"method\":\"weighted\","
           "\"calib_size\":[6,4],\"maps\":\"%s\"}]",
           maps);
  assert_int_equal(mr_harness_open(h, chain, MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(16, 12, 1, 16, 12, 1)), 0);
}

/* Maps per slice: the first image of a slice as before; a repetition reuses
 * them; another slice and a new calibration generation get their own. */
static void test_weighted_maps_per_slice(void **state) {
  (void)state;
  const size_t dims[3] = {16, 12, 1}, nch = 4, n = 16 * 12;
  const int calib[2] = {6, 4};
  mr_harness h;
  open_weighted(&h, "slice");
  mr_image_array *in[4] = {coil_images(dims, nch, 0, 0, 1), coil_images(dims, nch, 0, 1, 2),
                           coil_images(dims, nch, 1, 0, 3), coil_images(dims, nch, 0, 2, 4)};
  in[3]->calib_generation = 1;
  /* image i's maps come from image maps_of[i] */
  const int maps_of[4] = {0, 0, 2, 3};
  float complex *copies[4];
  for (int i = 0; i < 4; i++) {
    copies[i] = malloc(n * nch * sizeof *copies[i]);
    memcpy(copies[i], in[i]->data, n * nch * sizeof *copies[i]);
    assert_int_equal(mr_harness_push(&h, mr_image_array_message(in[i])), 0);
  }
  assert_int_equal(h.nout, 4);
  double complex *want = malloc(n * sizeof *want);
  for (int i = 0; i < 4; i++) {
    const mr_image_array *b = h.out[i]->u.object.ptr;
    assert_int_equal(b->nch, 1);
    weighted_ref(copies[i], copies[maps_of[i]], dims, nch, calib, want);
    double d = rel_diff(b->data, want, n);
    print_message("image %d (maps of image %d): %.2e\n", i, maps_of[i], d);
    assert_true(d <= 1e-5);
  }
  /* the repetition really used the first image's maps, not its own */
  weighted_ref(copies[1], copies[1], dims, nch, calib, want);
  assert_true(rel_diff(((const mr_image_array *)h.out[1]->u.object.ptr)->data, want, n) > 1e-5);
  for (int i = 0; i < 4; i++)
    free(copies[i]);
  free(want);
  mr_harness_close(&h);
}

/* "maps": "image" makes them from every image, as before they were kept. */
static void test_weighted_maps_per_image(void **state) {
  (void)state;
  const size_t dims[3] = {16, 12, 1}, nch = 4, n = 16 * 12;
  const int calib[2] = {6, 4};
  mr_harness h;
  open_weighted(&h, "image");
  double complex *want = malloc(n * sizeof *want);
  for (int i = 0; i < 2; i++) {
    mr_image_array *a = coil_images(dims, nch, 0, i, 10 + (unsigned)i);
    float complex *copy = malloc(n * nch * sizeof *copy);
    memcpy(copy, a->data, n * nch * sizeof *copy);
    assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), 0);
    weighted_ref(copy, copy, dims, nch, calib, want);
    assert_true(rel_diff(((const mr_image_array *)h.out[i]->u.object.ptr)->data, want, n) <=
                1e-5);
    free(copy);
  }
  free(want);
  mr_harness_close(&h);
}

/* 3D: the maps are low-passed along z as well (the window's third axis
 * takes calib_size's second value). */
static void test_weighted_3d_windows_z(void **state) {
  (void)state;
  const size_t dims[3] = {8, 8, 8}, nch = 3, n = 8 * 8 * 8;
  const int calib[2] = {4, 4};
  mr_harness h;
  assert_int_equal(mr_harness_open(&h,
                                   "[{\"gadget\":\"coil_combine\",\"method\":\"weighted\","
                                   "\"calib_size\":[4,4]}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 8, 8, 8, 8)), 0);
  mr_image_array *a = coil_images(dims, nch, 0, 0, 20);
  /* a sharp structure along z that only a z window smooths out of the maps */
  for (size_t c = 0; c < nch; c++)
    for (size_t p = 0; p < n; p++)
      if ((p / 64) % 2)
        a->data[c * n + p] *= (float)(1 + c);
  float complex *copy = malloc(n * nch * sizeof *copy);
  memcpy(copy, a->data, n * nch * sizeof *copy);
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), 0);
  double complex *want = malloc(n * sizeof *want);
  weighted_ref(copy, copy, dims, nch, calib, want);
  double d = rel_diff(((const mr_image_array *)h.out[0]->u.object.ptr)->data, want, n);
  print_message("3D against the reference windowed along z: %.2e\n", d);
  assert_true(d <= 1e-5);
  free(copy);
  free(want);
  mr_harness_close(&h);
}

/* The maps count against the memory budget; when they do not fit, the
 * error names them. */
static void test_weighted_maps_over_budget(void **state) {
  (void)state;
  const size_t dims[3] = {16, 12, 1}, nch = 4, n = 16 * 12;
  mr_harness h;
  open_weighted(&h, "slice");
  mr_image_array *a = coil_images(dims, nch, 0, 0, 30);
  /* room for the combined image (the input is counted already), not for
   * the maps */
  mr_budget_set(mr_budget_used() + (n + n * nch / 2) * sizeof(float complex));
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(a)), MR_ELIMIT);
  print_message("%s\n", h.err.msg);
  assert_non_null(strstr(h.err.msg, "coil maps"));
  mr_budget_set(0);
  mr_harness_close(&h);
}

/* ESPIRiT maps are unit vectors along each pixel's coil profile: the
 * weighted combination's magnitude is the root sum of squares. */
static void test_weighted_espirit_is_rss(void **state) {
  (void)state;
  size_t dims[3] = {32, 32, 1}, nch = 4, n = 32 * 32;
  mr_image_array *in = coil_images(dims, nch, 0, 0, 21);
  float complex *copy = malloc(sizeof *copy * n * nch);
  memcpy(copy, in->data, sizeof *copy * n * nch);
  mr_harness h;
  assert_int_equal(mr_harness_open(&h,
                                   "[{\"gadget\":\"coil_combine\",\"method\":\"weighted\","
                                   "\"estimator\":\"espirit\",\"calib_size\":[16,16]}]",
                                   MR_KIND_BIT(MR_MSG_IMAGE_ARRAY)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(32, 32, 1, 32, 32, 1)), 0);
  assert_int_equal(mr_harness_push(&h, mr_image_array_message(in)), 0);
  assert_int_equal(h.nout, 1);
  const mr_image_array *out = h.out[0]->u.object.ptr;
  double err = 0, peak = 0;
  size_t covered = 0;
  for (size_t p = 0; p < n; p++) {
    double rss = 0;
    for (size_t c = 0; c < nch; c++)
      rss += pow(cabsf(copy[c * n + p]), 2);
    rss = sqrt(rss);
    peak = fmax(peak, rss);
    size_t x = p % 32, y = p / 32;
    if (out->data[p] != 0)
      covered++;
    /* away from the field of view's edges, where these profiles jump
     * (they are not periodic) */
    if (out->data[p] != 0 && x >= 4 && x < 28 && y >= 4 && y < 28)
      err = fmax(err, fabs(cabsf(out->data[p]) - rss));
  }
  print_message("espirit-weighted against rss: %.2e of the peak over %zu of %zu pixels\n",
                err / peak, covered, n);
  assert_true(err < 5e-3 * peak);
  assert_true(covered > n * 9 / 10);
  free(copy);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rss),
      cmocka_unit_test(test_weighted_maps_per_slice),
      cmocka_unit_test(test_weighted_maps_per_image),
      cmocka_unit_test(test_weighted_3d_windows_z),
      cmocka_unit_test(test_weighted_espirit_is_rss),
      cmocka_unit_test(test_weighted_maps_over_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
