/* `reconclient simulate` then `reconclient send` to reconserver on
 * loopback: simulated radial and spiral datasets come back as one image
 * each through the radial.json and spiral.json pipelines, close to the
 * phantom (band-limited to the Cartesian square, coils combined), and a 3D
 * golden-angle dataset as one 3D image; real-time streams through the
 * realtime and realtime_cg pipelines, one image per frame; an absurd
 * trajectory refused. On a machine with a GPU the server grids there. */
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

#include "dataset.h"
#include "phantom_support.h"
#include "simulate.h"
#include "client_env.h"
#include "test_support.h"

static mr_test_client_env env;

/* Runs reconclient with args (NULL-terminated), output to the test's log. */
static int reconclient(const char *const *args) {
  return mr_test_reconclient(&env, args, NULL, 0, NULL, 0);
}

static void path_in(char *buf, size_t size, const char *name) {
  mr_test_client_path(&env, buf, size, name);
}

/* The one image of group/image_1 in path. */
static void read_image(const char *path, const char *group, ISMRMRD_Image *im) {
  assert_int_equal(mr_test_read_images(path, group, "image_1", im, 1), 1);
}

/* Simulates, sends through config, and returns the NRMSE of the image
 * against the band-limited phantom. */
static double round_trip(const char *trajectory, const char *config, int n, int coils) {
  char data[512], out[512], nstr[16], cstr[16];
  path_in(data, sizeof data, trajectory);
  strcat(data, ".h5");
  path_in(out, sizeof out, trajectory);
  strcat(out, "-out.h5");
  snprintf(nstr, sizeof nstr, "%d", n);
  snprintf(cstr, sizeof cstr, "%d", coils);
  const char *sim[] = {"simulate", "--trajectory", trajectory, "--matrix", nstr, "--coils", cstr,
                       "--noise", "0.001", "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", env.port, "-c", config, "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Image im;
  read_image(out, config, &im);
  assert_int_equal(im.head.data_type, ISMRMRD_FLOAT);
  assert_int_equal(im.head.matrix_size[0], n);
  assert_int_equal(im.head.matrix_size[1], n);
  size_t npix = (size_t)n * n;
  float *want = malloc(npix * sizeof *want);
  phantom_test_band_limited_rss(n, coils, want);
  double e = mr_test_nrmse_scaled(im.data, want, npix);
  free(want);
  ismrmrd_cleanup_image(&im);
  return e;
}

static int setup(void **state) {
  (void)state;
  mr_test_client_env_start(&env, "mr-simulate-e2e");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_test_client_env_stop(&env);
  return 0;
}

static void radial(void **state) {
  (void)state;
  double e = round_trip("radial", "radial", 64, 4);
  print_message("radial 64x64 through the server: NRMSE vs the phantom %.3f\n", e);
  assert_true(e < 0.2);
}

static void spiral(void **state) {
  (void)state;
  double e = round_trip("spiral", "spiral", 64, 4);
  print_message("spiral 64x64 through the server: NRMSE vs the phantom %.3f\n", e);
  assert_true(e < 0.4);
}

static void golden_3d(void **state) {
  (void)state;
  char data[512], out[512];
  path_in(data, sizeof data, "golden3d.h5");
  path_in(out, sizeof out, "golden3d-out.h5");
  const char *sim[] = {"simulate", "--trajectory", "golden", "--3d", "--matrix", "16",
                       "--coils", "2", "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", env.port, "-c", "radial", "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Image im;
  read_image(out, "radial", &im);
  assert_int_equal(im.head.matrix_size[2], 16);
  ismrmrd_cleanup_image(&im);
}

/* Real-time radial streams (simulate --frames): a golden-angle stream of a
 * moving phantom (64 x 64, 4 coils, 8 frames) through the realtime
 * (gridding) and realtime_cg (CG-SENSE) configs: each frame's image comes
 * back in order, numbered by frame, close to that frame's phantom and far
 * from another frame's (the object moved). */
enum { N = 64, COILS = 4, FRAMES = 8 };

/* The band-limited coil-combined phantom of every frame. */
static float *truths(void) {
  float *t = malloc((size_t)FRAMES * N * N * sizeof *t);
  for (int f = 0; f < FRAMES; f++) {
    double shift[3];
    mr_sim_motion(N, f, shift);
    phantom_test_band_limited_rss_moved(N, COILS, shift, t + (size_t)f * N * N);
  }
  return t;
}

/* Simulates a stream of `spokes` per frame, sends it through config and
 * checks every frame; returns the largest NRMSE against its own frame. */
static double stream(const char *config, const char *trajectory, int spokes, double bound) {
  char data[512], out[512], sp[16], fr[16], nn[16], cc[16];
  snprintf(data, sizeof data, "%s/%s-%s-%d.h5", env.dir, config, trajectory, spokes);
  snprintf(out, sizeof out, "%s/%s-%s-%d-out.h5", env.dir, config, trajectory, spokes);
  snprintf(sp, sizeof sp, "%d", spokes);
  snprintf(fr, sizeof fr, "%d", FRAMES);
  snprintf(nn, sizeof nn, "%d", N);
  snprintf(cc, sizeof cc, "%d", COILS);
  const char *sim[] = {"simulate", "--trajectory", trajectory, "--matrix", nn, "--coils", cc,
                       "--spokes", sp, "--frames", fr, "--moving", "--noise", "0.001",
                       "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", env.port, "-c", config, "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, out, config), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  assert_int_equal(ismrmrd_get_number_of_images(&d, "image_1"), FRAMES);
  float *want = truths();
  double worst = 0;
  for (int f = 0; f < FRAMES; f++) {
    ISMRMRD_Image im;
    ismrmrd_init_image(&im);
    assert_int_equal(ismrmrd_read_image(&d, "image_1", (uint32_t)f, &im), 0);
    assert_int_equal(im.head.matrix_size[0], N);
    assert_int_equal(im.head.matrix_size[1], N);
    assert_int_equal(im.head.repetition, f);
    assert_int_equal(im.head.image_index, f + 1);
    /* the frame's middle spoke's time stamp (the simulator counts spokes) */
    assert_int_equal(im.head.acquisition_time_stamp, (uint32_t)(f * spokes + spokes / 2));
    double own = mr_test_nrmse_scaled(im.data, want + (size_t)f * N * N, (size_t)N * N);
    /* against the frame whose shift is farthest from this one's: frame 0
     * (no shift) or frame 4 (the largest, n/16 pixels along x) */
    double shift[3];
    mr_sim_motion(N, f, shift);
    int other = shift[0] > N / 32.0 ? 0 : 4;
    double moved = mr_test_nrmse_scaled(im.data, want + (size_t)other * N * N, (size_t)N * N);
    print_message("%s, %s, %d spokes, frame %d: NRMSE %.3f vs its phantom, %.3f vs frame %d's\n",
                  config, trajectory, spokes, f, own, moved, other);
    assert_true(own < bound);
    assert_true(moved > 1.5 * own);
    worst = own > worst ? own : worst;
    ismrmrd_cleanup_image(&im);
  }
  free(want);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return worst;
}

/* Issue 12 item 9: a stream whose 3rd readout has a position of +-1e30
 * (finite, absurd) gets an ERROR naming the value through each config, and
 * no image (before, an image of NaN pixels came back with errors=0). */
static void absurd_trajectory(void **state) {
  (void)state;
  char data[512], nn[16];
  path_in(data, sizeof data, "absurd.h5");
  snprintf(nn, sizeof nn, "%d", 16);
  const char *sim[] = {"simulate", "--trajectory", "golden", "--matrix", nn, "--coils", "2",
                       "--spokes", "30", "--frames", "2", "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *configs[] = {"radial", "realtime", "realtime_cg"};
  for (int c = 0; c < 3; c++) {
    mr_dataset *ds;
    mr_err err = {0};
    assert_int_equal(mr_dataset_open(data, "dataset", &ds, &err), 0);
    int fd = mr_test_connect(env.server.port);
    assert_true(fd >= 0);
    mr_message *m = mr_message_new_config_file(configs[c]);
    assert_int_equal(mr_test_send(fd, m), 0);
    mr_message_unref(m);
    const char *xml = mr_dataset_header(ds);
    m = mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml) + 1);
    assert_int_equal(mr_test_send(fd, m), 0);
    mr_message_unref(m);
    for (int i = 0;; i++) {
      assert_int_equal(mr_dataset_next(ds, &m, &err), 0);
      if (m == NULL)
        break;
      if (i == 2)
        m->u.acq.traj[5 * 2 + 1] = c % 2 ? -1e30f : 1e30f;
      assert_int_equal(mr_test_send(fd, m), 0);
      mr_message_unref(m);
    }
    m = mr_message_new(MR_MSG_CLOSE);
    assert_int_equal(mr_test_send(fd, m), 0);
    mr_message_unref(m);
    mr_test_reply r = {0};
    mr_test_receive(fd, &r, 30000);
    const char *text = mr_test_reply_text(&r, "ERROR");
    print_message("%s: %s\n", configs[c], text != NULL ? text : "(no error)");
    assert_non_null(text);
    assert_non_null(strstr(text, "1e+30"));
    assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 0);
    assert_true(r.got_close);
    mr_test_reply_free(&r);
    close(fd);
    mr_dataset_close(ds);
  }
}

/* The images of group/image_1 in path, pixels back to back. */
static float *images(const char *path, const char *group, int count) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  assert_int_equal(ismrmrd_get_number_of_images(&d, "image_1"), count);
  float *px = malloc((size_t)count * N * N * sizeof *px);
  for (int f = 0; f < count; f++) {
    ISMRMRD_Image im;
    ismrmrd_init_image(&im);
    assert_int_equal(ismrmrd_read_image(&d, "image_1", (uint32_t)f, &im), 0);
    memcpy(px + (size_t)f * N * N, im.data, (size_t)N * N * sizeof *px);
    ismrmrd_cleanup_image(&im);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return px;
}

static void realtime_gridding(void **state) {
  (void)state;
  stream("realtime", "golden", 100, 0.2);
  /* the frames gadget gathers what accumulate gathers per repetition: the
   * radial config (accumulate + gridding) makes the same images */
  char data[512], out[512];
  path_in(data, sizeof data, "realtime-golden-100.h5");
  path_in(out, sizeof out, "radial-golden-100-out.h5");
  const char *send[] = {"send", data, "-p", env.port, "-c", "radial", "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  float *a = images(out, "radial", FRAMES);
  path_in(out, sizeof out, "realtime-golden-100-out.h5");
  float *b = images(out, "realtime", FRAMES);
  double e = mr_test_rel_error_f(b, a, (size_t)FRAMES * N * N);
  print_message("realtime vs radial (accumulate per repetition): rel difference %.2e\n", e);
  assert_true(e <= 1e-6);
  free(a);
  free(b);
  stream("realtime", "tiny-golden", 34, 0.4);
}

static void realtime_cg_sense(void **state) {
  (void)state;
  stream("realtime_cg", "golden", 100, 0.2);
  stream("realtime_cg", "golden", 34, 0.25);
}

/* Issue 24 item 5: an undersampled Cartesian scan written at R 1 (every
 * line) comes back from the `cartesian` config as the dataset's
 * "reference" array, to float precision; the same scan at R 4 (zero-filled
 * by `cartesian`) is far from it. */
static double cartesian_against_reference(const char *name, const char *r) {
  char data[512], out[512];
  path_in(data, sizeof data, name);
  strcat(data, ".h5");
  path_in(out, sizeof out, name);
  strcat(out, "-out.h5");
  const char *sim[] = {"simulate", "--trajectory", "cartesian", "--matrix", "64", "--coils", "4",
                       "--sampling", "vd", "--acceleration", r, "--calibration", "8",
                       "-o", data, NULL};
  assert_int_equal(reconclient(sim), 0);
  const char *send[] = {"send", data, "-p", env.port, "-c", "cartesian", "-o", out, NULL};
  assert_int_equal(reconclient(send), 0);
  ISMRMRD_Image im;
  read_image(out, "cartesian", &im);
  assert_int_equal(im.head.data_type, ISMRMRD_FLOAT);
  assert_int_equal(im.head.matrix_size[0], 64);
  assert_int_equal(im.head.matrix_size[1], 64);
  ISMRMRD_Dataset d;
  ISMRMRD_NDArray ref;
  assert_int_equal(ismrmrd_init_dataset(&d, data, "dataset"), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  ismrmrd_init_ndarray(&ref);
  assert_int_equal(ismrmrd_read_array(&d, "reference", 0, &ref), 0);
  const float *got = im.data, *want = ref.data;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < 64 * 64; i++) {
    diff += (got[i] - want[i]) * (double)(got[i] - want[i]);
    norm += want[i] * (double)want[i];
  }
  ismrmrd_cleanup_ndarray(&ref);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  ismrmrd_cleanup_image(&im);
  return sqrt(diff / norm);
}

static void sampled_reference(void **state) {
  (void)state;
  double full = cartesian_against_reference("sampled-r1", "1");
  double quarter = cartesian_against_reference("sampled-r4", "4");
  print_message("cartesian on a simulated scan, NRMSE vs its reference: R 1 %.2e, R 4 "
                "(zero-filled) %.3f\n", full, quarter);
  assert_true(full < 1e-5);
  assert_true(quarter > 0.05);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(radial),
      cmocka_unit_test(spiral),
      cmocka_unit_test(golden_3d),
      cmocka_unit_test(realtime_gridding),
      cmocka_unit_test(realtime_cg_sense),
      cmocka_unit_test(absurd_trajectory),
      cmocka_unit_test(sampled_reference),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
