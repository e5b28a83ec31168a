/* cs on a dynamic series (temporal_lambda): `reconclient simulate
 * --sampling vd --frames F [--moving]` (64 x 64, 8 coils, 12 frames of R
 * 4, 8 calibration lines, each frame its own mask) through
 * configs/cs_dynamic: every frame's image against its noiseless reference,
 * the joint solve with temporal TV against the same config with
 * temporal_lambda 0 (each frame alone, spatial TV): a measured margin in
 * mean frame PSNR (measured: 26.8 -> 28.4 dB moving, 26.5 -> 30.9 dB
 * static; asserted: 1 dB and 3 dB);
 * and a temporal term with the wavelet refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ismrmrd/dataset.h>

#include "dataset_chain.h"
#include "gadget_harness.h"
#include "simulate.h"
#include "test_support.h"

enum { N = 64, COILS = 8, FRAMES = 12 };

/* The simulator's per-frame references ([frame][y][x]; malloc'd). */
static float *read_reference(const char *path) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, "dataset"), ISMRMRD_NOERROR);
  assert_int_equal(ismrmrd_open_dataset(&d, false), ISMRMRD_NOERROR);
  ISMRMRD_NDArray a;
  ismrmrd_init_ndarray(&a);
  assert_int_equal(ismrmrd_read_array(&d, "reference", 0, &a), ISMRMRD_NOERROR);
  assert_int_equal(a.data_type, ISMRMRD_FLOAT);
  assert_int_equal(a.dims[0] * a.dims[1] * a.dims[2], (size_t)N * N * FRAMES);
  float *ref = malloc(sizeof *ref * N * N * FRAMES);
  memcpy(ref, a.data, sizeof *ref * N * N * FRAMES);
  ismrmrd_cleanup_ndarray(&a);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return ref;
}

/* PSNR of x against ref after the least-squares scale of x to ref (the
 * maps' normalisation sets the image's: compare shapes, not scales). */
static double psnr(const float *x, const float *ref, size_t n) {
  double xr = 0, xx = 0, err = 0, peak = 0;
  for (size_t i = 0; i < n; i++) {
    xr += (double)x[i] * ref[i];
    xx += (double)x[i] * x[i];
  }
  double a = xx > 0 ? xr / xx : 0;
  for (size_t i = 0; i < n; i++) {
    err += (a * x[i] - ref[i]) * (a * x[i] - ref[i]);
    peak = fmax(peak, ref[i]);
  }
  return 20 * log10(peak / sqrt(err / (double)n));
}

static const char *simulate_series(int moving) {
  static char path[512];
  snprintf(path, sizeof path, "%s/series-%d.h5", mr_test_tmpdir("cs_series"), moving);
  remove(path);
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = N, .coils = COILS,
                      .noise = 0.02, .frames = FRAMES, .moving = moving, .seed = 3,
                      .sampling = 1 /* MR_SAMPLING_VD */, .acceleration = 4, .calibration = 8,
                      .path = path};
  mr_err err = {0};
  if (mr_simulate(&o, &err) != 0)
    fail_msg("simulate: %s", err.msg);
  return path;
}

/* Mean frame PSNR of the chain's images against the references. */
static double mean_psnr(const char *path, const char *with, const float *ref) {
  char *chain = mr_test_config_chain("cs_dynamic", "cs", with);
  int count;
  size_t px;
  float *img = mr_test_reconstruct(path, chain, "none", 0, &count, &px);
  free(chain);
  assert_int_equal(count, FRAMES);
  assert_int_equal(px, (size_t)N * N);
  double mean = 0;
  for (int f = 0; f < FRAMES; f++)
    mean += psnr(img + (size_t)f * px, ref + (size_t)f * px, px) / FRAMES;
  free(img);
  return mean;
}

/* The series with the config's temporal TV against each frame alone:
 * the mean frame PSNRs. */
static void joint_and_alone(int moving, double *joint, double *alone) {
  const char *path = simulate_series(moving);
  float *ref = read_reference(path);
  *alone = mean_psnr(path, "{\"temporal_lambda\": 0}", ref);
  *joint = mean_psnr(path, "{}", ref);
  print_message("dynamic series, %d %s frames, R 4: mean frame PSNR each frame alone %.2f dB, "
                "temporal TV %.2f dB\n", FRAMES, moving ? "moving" : "static", *alone, *joint);
  free(ref);
}

/* The whole object moving (mr_sim_motion: up to 4 pixels a frame at this
 * matrix), the hardest case for a temporal prior, and a static one. */
static void temporal_tv_beats_each_frame_alone(void **state) {
  (void)state;
  double joint, alone;
  joint_and_alone(1, &joint, &alone);
  assert_true(joint >= alone + 1);
  joint_and_alone(0, &joint, &alone);
  assert_true(joint >= alone + 3);
}

/* A temporal term with the wavelet regularizer: refused at configure. */
static void refused(void **state) {
  (void)state;
  mr_harness h;
  int rc = mr_harness_open(&h, "[{\"gadget\":\"cs\",\"regularizer\":\"wavelet\","
                               "\"temporal_lambda\":0.01}]", MR_KIND_BIT(MR_MSG_KSPACE));
  if (rc == 0)
    rc = mr_harness_configure(&h, mr_harness_cartesian_header(32, 32, 1, 32, 32, 1));
  assert_true(rc < 0);
  if (strstr(h.err.msg, "temporal_lambda") == NULL)
    fail_msg("expected temporal_lambda in \"%s\"", h.err.msg);
  mr_harness_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(temporal_tv_beats_each_frame_alone),
      cmocka_unit_test(refused),
  };
  return cmocka_run_group_tests_name("gadgets_cs_series", tests, NULL, NULL);
}
