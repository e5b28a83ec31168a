/* sampling and simulate_sampled: the undersampling masks (acceleration
 * within 2 %, the calibration centre complete, the same mask for the same
 * seed and another for another, the Poisson disc's minimum distance, the
 * density falling from the centre, refusals) and the undersampled datasets
 * `reconclient simulate --sampling` writes (only the mask's phase encodes,
 * each once, with their counters, flags and the closed-form samples; the
 * header's limits and parallelImaging; the reference array the root sum of
 * squares of the whole grid's centred DFT). */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <ismrmrd/dataset.h>

#include "phantom.h"
#include "sampling.h"
#include "simulate.h"
#include "test_support.h"

static long count(const uint8_t *mask, size_t n) {
  long c = 0;
  for (size_t i = 0; i < n; i++)
    c += mask[i];
  return c;
}

static void vd_lines(void **state) {
  (void)state;
  const double rs[] = {2, 3, 4, 6.5};
  for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
    mr_sampling s = {.kind = MR_SAMPLING_VD, .ny = 256, .nz = 1, .r = rs[i], .calibration = 24,
                     .seed = 7};
    uint8_t mask[256], again[256];
    mr_err err = {0};
    long got = mr_sampling_mask(&s, mask, NULL, &err);
    assert_int_equal(got, count(mask, 256));
    assert_true(fabs(256.0 / got - rs[i]) <= 0.02 * rs[i]);
    for (int y = 128 - 12; y < 128 + 12; y++) {
      assert_true(mask[y]);
      assert_true(mr_sampling_in_calibration(&s, y, 0));
    }
    assert_false(mr_sampling_in_calibration(&s, 128 - 13, 0));
    assert_false(mr_sampling_in_calibration(&s, 128 + 12, 0));
    /* denser inside |ky| < 64 than outside */
    long inner = count(mask + 64, 128), outer = got - inner;
    assert_true(inner / 128.0 > outer / 128.0);
    assert_int_equal(mr_sampling_mask(&s, again, NULL, &err), got);
    assert_memory_equal(mask, again, 256);
    s.seed = 8;
    mr_sampling_mask(&s, again, NULL, &err);
    assert_memory_not_equal(mask, again, 256);
  }
}

/* Poisson disc on 96 x 48 at R 6, centre 12 x 12: every pair of points not
 * both in the centre at least the smaller of their radii apart. */
static void poisson_disc(void **state) {
  (void)state;
  enum { NY = 96, NZ = 48 };
  mr_sampling s = {.kind = MR_SAMPLING_POISSON, .ny = NY, .nz = NZ, .r = 6, .calibration = 12,
                   .seed = 3};
  static uint8_t mask[NY * NZ], again[NY * NZ];
  mr_err err = {0};
  double r0 = 0;
  long got = mr_sampling_mask(&s, mask, &r0, &err);
  print_message("Poisson disc %dx%d R 6: %ld points (R %.3f), radius scale %.3f\n", NY, NZ, got,
                (double)NY * NZ / got, r0);
  assert_int_equal(got, count(mask, NY * NZ));
  assert_true(fabs((double)NY * NZ / got - 6) <= 0.02 * 6);
  assert_true(mr_sampling_radius(&s, r0, 0, 0) > 2); /* a disc where it thins out */
  for (int z = 0; z < NZ; z++)
    for (int y = 0; y < NY; y++) {
      assert_int_equal(mr_sampling_in_calibration(&s, y, z), y >= 42 && y < 54 && z >= 18 && z < 30);
      if (mr_sampling_in_calibration(&s, y, z))
        assert_true(mask[z * NY + y]);
    }
  int pairs = 0;
  for (int p = 0; p < NY * NZ; p++) {
    if (!mask[p])
      continue;
    int py = p % NY, pz = p / NY;
    for (int q = p + 1; q < NY * NZ; q++) {
      int qy = q % NY, qz = q / NY;
      if (!mask[q] || (mr_sampling_in_calibration(&s, py, pz) &&
                       mr_sampling_in_calibration(&s, qy, qz)))
        continue;
      double d = hypot(py - qy, pz - qz);
      double rp = mr_sampling_radius(&s, r0, py, pz), rq = mr_sampling_radius(&s, r0, qy, qz);
      assert_true(d >= (rp < rq ? rp : rq) - 1e-9);
      pairs++;
    }
  }
  assert_true(pairs > 1000);
  assert_int_equal(mr_sampling_mask(&s, again, NULL, &err), got);
  assert_memory_equal(mask, again, sizeof mask);
  /* thinner at the edge: the outer half (in k) holds fewer points per
   * grid point than the inner */
  long inner = 0, inner_grid = 0;
  for (int z = 0; z < NZ; z++)
    for (int y = 0; y < NY; y++) {
      double ky = (y - NY / 2) / (0.5 * NY), kz = (z - NZ / 2) / (0.5 * NZ);
      if (ky * ky + kz * kz < 0.25) {
        inner += mask[z * NY + y];
        inner_grid++;
      }
    }
  assert_true((double)inner / inner_grid > 1.5 * (double)(got - inner) / (NY * NZ - inner_grid));
}

static void refusals(void **state) {
  (void)state;
  uint8_t mask[64 * 64];
  mr_err err = {0};
  mr_sampling s = {.kind = MR_SAMPLING_VD, .ny = 64, .nz = 1, .r = 4, .calibration = 24};
  assert_true(mr_sampling_mask(&s, mask, NULL, &err) < 0); /* 24 > 64 / 4 */
  assert_non_null(strstr(err.msg, "--calibration 24"));
  s.r = 0.5;
  assert_true(mr_sampling_mask(&s, mask, NULL, &err) < 0);
  s = (mr_sampling){.kind = MR_SAMPLING_VD, .ny = 64, .nz = 64, .r = 4, .calibration = 8};
  err = (mr_err){0};
  assert_true(mr_sampling_mask(&s, mask, NULL, &err) < 0);
  assert_non_null(strstr(err.msg, "poisson"));
  s = (mr_sampling){.kind = MR_SAMPLING_POISSON, .ny = 64, .nz = 1, .r = 4, .calibration = 8};
  assert_true(mr_sampling_mask(&s, mask, NULL, &err) < 0);
  s = (mr_sampling){.kind = MR_SAMPLING_VD, .ny = 64, .nz = 1, .r = 64, .calibration = 0};
  assert_true(mr_sampling_mask(&s, mask, NULL, &err) < 0); /* one line */
  s.r = 1;
  assert_int_equal(mr_sampling_mask(&s, mask, NULL, &err), 64);
}

/* ---- the datasets ---- */

static char dir[] = "/tmp/mr-sampling-XXXXXX";

static void path_in(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void open_dataset(const char *path, ISMRMRD_Dataset *d) {
  assert_int_equal(ismrmrd_init_dataset(d, path, "dataset"), ISMRMRD_NOERROR);
  assert_int_equal(ismrmrd_open_dataset(d, false), ISMRMRD_NOERROR);
}

static void close_dataset(ISMRMRD_Dataset *d) {
  ismrmrd_close_dataset(d);
  free(d->filename);
  free(d->groupname);
}

/* A 3D Poisson-disc scan of 16 x 16 x 8, 3 coils, R 3, centre 4 x 4,
 * noiseless: the readouts are the mask's points in order with the closed
 * form's samples and the calibration flag on the centre's; the reference is
 * the RSS of the grid's centred DFT. */
static void poisson_dataset(void **state) {
  (void)state;
  enum { N = 16, NZ = 8, C = 3 };
  char path[512];
  path_in(path, sizeof path, "poisson.h5");
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = N, .three_d = 1, .coils = C,
                      .sampling = MR_SAMPLING_POISSON, .acceleration = 3, .calibration = 4,
                      .partitions = NZ, .seed = 5, .path = path};
  mr_err err = {0};
  assert_int_equal(mr_simulate(&o, &err), 0);
  assert_true(mr_simulate(&o, &err) < 0); /* exists */
  mr_sampling s = {.kind = MR_SAMPLING_POISSON, .ny = N, .nz = NZ, .r = 3, .calibration = 4,
                   .seed = 5};
  uint8_t mask[N * NZ];
  long points = mr_sampling_mask(&s, mask, NULL, &err);
  ISMRMRD_Dataset d;
  open_dataset(path, &d);
  assert_int_equal(ismrmrd_get_number_of_acquisitions(&d), points);
  char *xml = ismrmrd_read_header(&d);
  assert_non_null(strstr(xml, "<matrixSize><x>16</x><y>16</y><z>8</z></matrixSize>"));
  assert_non_null(strstr(xml, "<kspace_encoding_step_2><minimum>0</minimum><maximum>7</maximum>"
                              "<center>4</center>"));
  assert_non_null(strstr(xml, "<accelerationFactor><kspace_encoding_step_1>3"
                              "</kspace_encoding_step_1><kspace_encoding_step_2>1"));
  assert_non_null(strstr(xml, "<calibrationMode>embedded</calibrationMode>"));
  free(xml);
  long at = 0;
  for (int z = 0; z < NZ; z++)
    for (int y = 0; y < N; y++) {
      if (!mask[z * N + y])
        continue;
      ISMRMRD_Acquisition a;
      ismrmrd_init_acquisition(&a);
      assert_int_equal(ismrmrd_read_acquisition(&d, (uint32_t)at, &a), ISMRMRD_NOERROR);
      assert_int_equal(a.head.idx.kspace_encode_step_1, y);
      assert_int_equal(a.head.idx.kspace_encode_step_2, z);
      assert_int_equal(a.head.number_of_samples, N);
      assert_int_equal(a.head.center_sample, N / 2);
      assert_int_equal(a.head.active_channels, C);
      int calibration = ismrmrd_is_flag_set(a.head.flags,
                                            ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING);
      assert_int_equal(calibration, mr_sampling_in_calibration(&s, y, z));
      assert_int_equal(ismrmrd_is_flag_set(a.head.flags, ISMRMRD_ACQ_FIRST_IN_SLICE), at == 0);
      assert_int_equal(ismrmrd_is_flag_set(a.head.flags, ISMRMRD_ACQ_LAST_IN_MEASUREMENT),
                       at + 1 == points);
      for (int x = 0; x < N; x += 5) {
        double k[3] = {(double)(x - N / 2) / N, (double)(y - N / 2) / N, (double)(z - NZ / 2) / N};
        double complex want[C];
        mr_phantom_kspace(3, N, C, k, want);
        for (int c = 0; c < C; c++)
          assert_true(cabs(a.data[c * N + x] - want[c]) <= 1e-5 * (1 + cabs(want[c])));
      }
      ismrmrd_cleanup_acquisition(&a);
      at++;
    }
  /* the reference */
  size_t grid = (size_t)N * N * NZ;
  double complex *ks = malloc(grid * C * sizeof *ks), *img = malloc(grid * C * sizeof *img);
  for (size_t i = 0; i < grid; i++) {
    int x = (int)(i % N), y = (int)(i / N % N), z = (int)(i / (N * N));
    double k[3] = {(double)(x - N / 2) / N, (double)(y - N / 2) / N, (double)(z - NZ / 2) / N};
    double complex v[C];
    mr_phantom_kspace(3, N, C, k, v);
    for (int c = 0; c < C; c++)
      ks[c * grid + i] = v[c];
  }
  for (int c = 0; c < C; c++)
    mr_test_centered_dft(ks + c * grid, img + c * grid, N, N, NZ, +1);
  ISMRMRD_NDArray ref;
  ismrmrd_init_ndarray(&ref);
  assert_int_equal(ismrmrd_read_array(&d, "reference", 0, &ref), ISMRMRD_NOERROR);
  assert_int_equal(ref.data_type, ISMRMRD_FLOAT);
  assert_true(ref.ndim >= 3); /* libismrmrd reads back a trailing dimension of 1 */
  assert_int_equal(ref.dims[2], NZ);
  const float *got = ref.data;
  double worst = 0, peak = 0;
  for (size_t i = 0; i < grid; i++) {
    double rss = 0;
    for (int c = 0; c < C; c++)
      rss += creal(img[c * grid + i] * conj(img[c * grid + i]));
    worst = fmax(worst, fabs(got[i] - sqrt(rss)));
    peak = fmax(peak, sqrt(rss));
  }
  assert_true(worst <= 1e-5 * peak);
  ismrmrd_cleanup_ndarray(&ref);
  ISMRMRD_NDArray ph;
  ismrmrd_init_ndarray(&ph);
  assert_int_equal(ismrmrd_read_array(&d, "phantom", 0, &ph), ISMRMRD_NOERROR);
  assert_int_equal(ph.data_type, ISMRMRD_CXFLOAT);
  assert_int_equal(ph.dims[2], NZ);
  ismrmrd_cleanup_ndarray(&ph);
  close_dataset(&d);
  free(ks);
  free(img);
}

/* 2D vd with noise: as many readouts as lines, noise on them (the samples
 * differ from the closed form by about sigma), another seed another set. */
static void vd_dataset(void **state) {
  (void)state;
  char a[512], b[512];
  path_in(a, sizeof a, "vd-a.h5");
  path_in(b, sizeof b, "vd-b.h5");
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = 64, .coils = 2,
                      .sampling = MR_SAMPLING_VD, .acceleration = 4, .calibration = 8,
                      .noise = 0.01, .seed = 1, .path = a};
  mr_err err = {0};
  assert_int_equal(mr_simulate(&o, &err), 0);
  o.seed = 2;
  o.path = b;
  assert_int_equal(mr_simulate(&o, &err), 0);
  ISMRMRD_Dataset da, db;
  open_dataset(a, &da);
  open_dataset(b, &db);
  assert_int_equal(ismrmrd_get_number_of_acquisitions(&da), 16);
  assert_int_equal(ismrmrd_get_number_of_acquisitions(&db), 16);
  int differ = 0;
  double noise2 = 0;
  for (uint32_t i = 0; i < 16; i++) {
    ISMRMRD_Acquisition x, y;
    ismrmrd_init_acquisition(&x);
    ismrmrd_init_acquisition(&y);
    ismrmrd_read_acquisition(&da, i, &x);
    ismrmrd_read_acquisition(&db, i, &y);
    differ |= x.head.idx.kspace_encode_step_1 != y.head.idx.kspace_encode_step_1;
    int ky = x.head.idx.kspace_encode_step_1;
    for (int s = 0; s < 64; s++) {
      double k[3] = {(s - 32) / 64.0, (ky - 32) / 64.0, 0};
      double complex want[2];
      mr_phantom_kspace(2, 64, 2, k, want);
      noise2 += pow(cabs(x.data[s] - want[0]), 2);
    }
    ismrmrd_cleanup_acquisition(&x);
    ismrmrd_cleanup_acquisition(&y);
  }
  double sigma = sqrt(noise2 / (16 * 64) / 2);
  assert_true(sigma > 0.008 && sigma < 0.012);
  assert_true(differ);
  char *xml = ismrmrd_read_header(&da);
  assert_non_null(strstr(xml, "<accelerationFactor><kspace_encoding_step_1>4"));
  free(xml);
  close_dataset(&da);
  close_dataset(&db);
}

static void dataset_refusals(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "refused.h5");
  mr_err err = {0};
  mr_sim_options o = {.trajectory = MR_SIM_RADIAL, .matrix = 64, .coils = 2,
                      .sampling = MR_SAMPLING_VD, .acceleration = 4, .calibration = 8,
                      .path = path};
  assert_true(mr_simulate(&o, &err) < 0);
  assert_non_null(strstr(err.msg, "cartesian"));
  o.trajectory = MR_SIM_CARTESIAN;
  o.matrix = 63;
  assert_true(mr_simulate(&o, &err) < 0);
  o.matrix = 64;
  o.partitions = 16; /* not 3D */
  assert_true(mr_simulate(&o, &err) < 0);
  o.partitions = 0;
  o.calibration = 40;
  assert_true(mr_simulate(&o, &err) < 0);
  assert_int_equal(access(path, F_OK), -1); /* nothing left behind */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vd_lines),        cmocka_unit_test(poisson_disc),
      cmocka_unit_test(refusals),        cmocka_unit_test(poisson_dataset),
      cmocka_unit_test(vd_dataset),      cmocka_unit_test(dataset_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
