/* partial_fourier: homodyne detection is exact for a real object under a
 * constant phase (either side left out, two coils with their own phase);
 * an evenly sampled k-space passes unchanged; clear errors. */
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

#include "gadget_harness.h"
#include "kspace.h"
#include "test_support.h"

enum { NX = 32, NY = 32, NCH = 2 };

/* A real object: two overlapping boxes and a ramp, nothing symmetric. */
static double object(int x, int y) {
  double v = (x > 6 && x < 20 && y > 9 && y < 27) ? 1.0 : 0.0;
  v += (x > 14 && x < 26 && y > 4 && y < 15) ? 0.5 : 0.0;
  return v * (1.0 + 0.02 * x);
}

/* The centered k-space of the object under phase `phase` (coil c adds c). */
static void kspace_of(double phase, double complex *out) {
  double complex *im = malloc(sizeof *im * NX * NY);
  for (int c = 0; c < NCH; c++) {
    for (int y = 0; y < NY; y++)
      for (int x = 0; x < NX; x++)
        im[y * NX + x] = object(x, y) * cexp(I * (phase + c));
    mr_test_centered_dft(im, out + (size_t)c * NX * NY, NX, NY, 1, -1);
  }
  free(im);
}

static void open_gadget(mr_harness *h) {
  assert_int_equal(mr_harness_open(h, "[{\"gadget\":\"partial_fourier\",\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(NX, NY, 1, NX, NY, 1)), 0);
}

/* Lines [lo, hi] of k as a k-space buffer (the rest zero, unsampled). */
static mr_message *buffer(const double complex *k, int lo, int hi) {
  mr_err e = {0};
  mr_kspace *b = mr_kspace_new(NX, NY, 1, NCH, 0, &e);
  assert_non_null(b);
  for (int y = lo; y <= hi; y++) {
    b->sampled[y] = 1;
    for (int c = 0; c < NCH; c++)
      for (int x = 0; x < NX; x++)
        b->data[((size_t)c * NY + y) * NX + x] = (float complex)k[((size_t)c * NY + y) * NX + x];
  }
  return mr_kspace_message(b);
}

static const mr_kspace *result(mr_harness *h) {
  assert_int_equal(h->nout, 1);
  assert_int_equal(h->out[0]->kind, MR_MSG_KSPACE);
  return h->out[0]->u.object.ptr;
}

/* Homodyne of a real object under a constant phase gives the object
 * itself (per coil, whatever the coil's phase), as a real image whose
 * magnitude is the object's (the sign follows the low-resolution image's,
 * whose ringing may be negative). */
static void homodyne_is_exact_for_real_objects(void **state) {
  (void)state;
  double complex *k = malloc(sizeof *k * NCH * NX * NY),
                 *got = malloc(sizeof *got * NX * NY), *im = malloc(sizeof *im * NX * NY);
  float *mag = malloc(sizeof *mag * NX * NY), *want = malloc(sizeof *want * NX * NY);
  kspace_of(0.7, k);
  const int ranges[2][2] = {{10, NY - 1}, {0, NY - 11}}; /* 22 of 32 lines, either side */
  for (int r = 0; r < 2; r++) {
    /* Line 0 (-NY/2) is its own mirror: lost when not acquired. */
    double complex *kt = malloc(sizeof *kt * NCH * NX * NY);
    kspace_of(0.0, kt);
    if (ranges[r][0] > 0)
      memset(kt, 0, sizeof *kt * NX);
    mr_test_centered_dft(kt, im, NX, NY, 1, +1);
    for (int i = 0; i < NX * NY; i++)
      want[i] = (float)cabs(im[i]);
    free(kt);
    mr_harness h;
    open_gadget(&h);
    assert_int_equal(mr_harness_push(&h, buffer(k, ranges[r][0], ranges[r][1])), 0);
    const mr_kspace *out = result(&h);
    for (int y = 0; y < NY; y++)
      assert_true(out->sampled[y]);
    for (int c = 0; c < NCH; c++) {
      for (int i = 0; i < NX * NY; i++)
        got[i] = out->data[(size_t)c * NX * NY + i];
      mr_test_centered_dft(got, im, NX, NY, 1, +1);
      double imag = 0;
      for (int i = 0; i < NX * NY; i++) {
        mag[i] = (float)cabs(im[i]);
        imag = fmax(imag, fabs(cimag(im[i])));
      }
      double e = mr_test_rel_error_f(mag, want, (size_t)NX * NY);
      print_message("lines %d to %d, coil %d: relative error %.2e, largest imaginary part %.1e\n",
                    ranges[r][0], ranges[r][1], c, e, imag);
      assert_true(e < 1e-5 && imag < 1e-5);
    }
    mr_harness_close(&h);
  }
  free(k);
  free(got);
  free(im);
  free(mag);
  free(want);
}

static void even_sampling_passes_unchanged(void **state) {
  (void)state;
  double complex *k = malloc(sizeof *k * NCH * NX * NY);
  kspace_of(0.3, k);
  mr_harness h;
  open_gadget(&h);
  mr_message *m = buffer(k, 4, NY - 4); /* centre 16: 12 lines below, 12 above */
  mr_kspace *in = m->u.object.ptr;
  float complex *before = malloc(sizeof *before * NCH * NX * NY);
  memcpy(before, in->data, sizeof *before * NCH * NX * NY);
  assert_int_equal(mr_harness_push(&h, m), 0);
  const mr_kspace *out = result(&h);
  assert_memory_equal(out->data, before, sizeof *before * NCH * NX * NY);
  assert_false(out->sampled[0]);
  free(before);
  mr_harness_close(&h);
  free(k);
}

static void clear_errors(void **state) {
  (void)state;
  double complex *k = malloc(sizeof *k * NCH * NX * NY);
  kspace_of(0.3, k);
  mr_harness h;
  open_gadget(&h);
  assert_int_equal(mr_harness_push(&h, buffer(k, 18, NY - 1)), MR_EDATA); /* no centre */
  assert_non_null(strstr(h.err.msg, "leave out the k-space centre"));
  mr_harness_close(&h);
  open_gadget(&h);
  assert_int_equal(mr_harness_push(&h, buffer(k, 14, NY - 1)), MR_EDATA); /* 2 lines below */
  assert_non_null(strstr(h.err.msg, "homodyne needs"));
  mr_harness_close(&h);
  free(k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(homodyne_is_exact_for_real_objects),
      cmocka_unit_test(even_sampling_passes_unchanged),
      cmocka_unit_test(clear_errors),
  };
  return cmocka_run_group_tests_name("gadgets_partial_fourier", tests, NULL, NULL);
}
