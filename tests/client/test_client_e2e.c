/* reconclient against reconserver on loopback, as a user runs them: the
 * image of a Shepp-Logan phantom matches ismrmrd_recon_cartesian_2d's,
 * repetitions come back as separate images, ping/info/configs answer, and
 * failures exit non-zero with their one-line reasons. Skips (77) without
 * the ISMRMRD tools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <ismrmrd/dataset.h>

#include "client_env.h"
#include "test_support.h"

static mr_test_client_env env;

static char out[65536], err[65536];

static int run_client(const char *const *args) {
  return mr_test_reconclient(&env, args, out, sizeof out, err, sizeof err);
}

static void path_in(char *buf, size_t size, const char *name) {
  mr_test_client_path(&env, buf, size, name);
}

static void phantom(const char *name, const char *reps) {
  char path[512];
  path_in(path, sizeof path, name);
  const char *gen[] = {"ismrmrd_generate_cartesian_shepp_logan", "-m", "128", "-c", "8", "-r",
                       reps, "-o", path, NULL};
  assert_int_equal(mr_test_run(gen, env.dir, out, sizeof out, err, sizeof err), 0);
}

typedef struct read_images {
  ISMRMRD_Image im[8];
  uint32_t n;
} read_images;

static void read_all(const char *path, const char *group, const char *var, read_images *r) {
  r->n = mr_test_read_images(path, group, var, r->im, 8);
}

static void free_all(read_images *r) {
  for (uint32_t i = 0; i < r->n; i++)
    ismrmrd_cleanup_image(&r->im[i]);
}

static int setup(void **state) {
  (void)state;
  if (!mr_test_have_tool("ismrmrd_generate_cartesian_shepp_logan") ||
      !mr_test_have_tool("ismrmrd_recon_cartesian_2d")) {
    fprintf(stderr, "skipped: the ISMRMRD tools (ismrmrd-tools) are not installed\n");
    exit(MR_TEST_SKIP);
  }
  mr_test_client_env_start(&env, "mr-client-e2e");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_test_client_env_stop(&env);
  return 0;
}

static void test_matches_reference(void **state) {
  (void)state;
  char data[512], result[512], pngs[512], png[600];
  phantom("phantom.h5", "1");
  path_in(data, sizeof data, "phantom.h5");
  path_in(result, sizeof result, "out.h5");
  path_in(pngs, sizeof pngs, "png");
  const char *recon[] = {"ismrmrd_recon_cartesian_2d", data, NULL};
  assert_int_equal(mr_test_run(recon, env.dir, out, sizeof out, err, sizeof err), 0);

  const char *send[] = {"send", data, "-p", env.port, "-o", result, "--png", pngs, NULL};
  int rc = run_client(send);
  if (rc != 0)
    fprintf(stderr, "reconclient: %s", err);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "1 image -> "));

  read_images ours, ref;
  read_all(result, "default.xml", "image_1", &ours);
  read_all(data, "dataset", "cpp", &ref);
  assert_int_equal(ours.n, 1);
  assert_int_equal(ref.n, 1);
  const ISMRMRD_ImageHeader *h = &ours.im[0].head;
  assert_int_equal(h->data_type, ISMRMRD_FLOAT);
  assert_int_equal(h->matrix_size[0], ref.im[0].head.matrix_size[0]);
  assert_int_equal(h->matrix_size[1], ref.im[0].head.matrix_size[1]);
  assert_int_equal(ref.im[0].head.data_type, ISMRMRD_FLOAT);
  size_t n = (size_t)h->matrix_size[0] * h->matrix_size[1];
  double nrmse = mr_test_nrmse_scaled(ours.im[0].data, ref.im[0].data, n);
  fprintf(stderr, "NRMSE vs ismrmrd_recon_cartesian_2d: %.3g\n", nrmse);
  assert_true(nrmse <= 1e-4);
  free_all(&ours);
  free_all(&ref);

  snprintf(png, sizeof png, "%s/image_1_000000.png", pngs); /* padded: names sort */
  assert_int_equal(access(png, R_OK), 0);

  /* The same output group again is refused, and the file keeps its image. */
  assert_int_equal(run_client(send), 1);
  assert_non_null(strstr(err, "already has a group 'default.xml'; not appending"));
  read_all(result, "default.xml", "image_1", &ours);
  assert_int_equal(ours.n, 1);
  free_all(&ours);
}

static void test_repetitions(void **state) {
  (void)state;
  char data[512], result[512];
  phantom("reps.h5", "4");
  path_in(data, sizeof data, "reps.h5");
  path_in(result, sizeof result, "reps-out.h5");
  const char *send[] = {"send", data, "-p", env.port, "-o", result, "-G", "reps", NULL};
  assert_int_equal(run_client(send), 0);
  read_images ours;
  read_all(result, "reps", "image_1", &ours);
  assert_int_equal(ours.n, 4);
  for (uint32_t i = 0; i < 4; i++)
    assert_int_equal(ours.im[i].head.repetition, i);
  free_all(&ours);

  /* Issue 27 item 12: the files a run writes are bounded (--max-files):
   * four images as PNGs and DICOM files (8 files) do not fit in 6; the
   * first images are written, then a clear failure. */
  char pngs[512], dicoms[512];
  path_in(pngs, sizeof pngs, "reps-png");
  path_in(dicoms, sizeof dicoms, "reps-dcm");
  const char *bounded[] = {"send", data, "-p", env.port, "-o", result, "-G", "bounded",
                           "--png", pngs, "--dicom", dicoms, "--dicom-images",
                           "--max-files", "6", NULL};
  assert_int_equal(run_client(bounded), 1);
  if (strstr(err, "image_1_000003 would pass --max-files 6") == NULL)
    fail_msg("reconclient said: %s", err);
  char cmd[1200], listing[64];
  snprintf(cmd, sizeof cmd, "ls '%s' '%s' | grep -c -e '\\.png$' -e '\\.dcm$'", pngs, dicoms);
  FILE *ls = popen(cmd, "r");
  assert_non_null(ls);
  assert_non_null(fgets(listing, sizeof listing, ls));
  pclose(ls);
  assert_int_equal(atoi(listing), 6);
}

/* Issue 14: GRAPPA with interleaved calibration (the generator's -a 2
 * without -w: two frames at shifted positions, no ACS lines) through the
 * grappa config by its Gadgetron name: both frames come back, each as
 * close to the fully sampled image as embedded ACS lines give. */
static void test_interleaved_grappa(void **state) {
  (void)state;
  char full[512], il[512], full_out[512], il_out[512];
  path_in(full, sizeof full, "il_full.h5");
  path_in(il, sizeof il, "il_r2.h5");
  path_in(full_out, sizeof full_out, "il_full_out.h5");
  path_in(il_out, sizeof il_out, "il_r2_out.h5");
  const char *gen_full[] = {"ismrmrd_generate_cartesian_shepp_logan", "-m", "128", "-c", "8",
                            "-n", "0", "-o", full, NULL};
  const char *gen_il[] = {"ismrmrd_generate_cartesian_shepp_logan", "-m", "128", "-c", "8",
                          "-n", "0", "-a", "2", "-o", il, NULL};
  assert_int_equal(mr_test_run(gen_full, env.dir, out, sizeof out, err, sizeof err), 0);
  assert_int_equal(mr_test_run(gen_il, env.dir, out, sizeof out, err, sizeof err), 0);
  const char *send_full[] = {"send", full, "-p", env.port, "-c", "Generic_Cartesian_Grappa.xml",
                             "-o", full_out, NULL};
  const char *send_il[] = {"send", il, "-p", env.port, "-c", "Generic_Cartesian_Grappa.xml",
                           "-o", il_out, NULL};
  assert_int_equal(run_client(send_full), 0);
  int rc = run_client(send_il);
  if (rc != 0)
    fprintf(stderr, "reconclient: %s", err);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "2 images -> "));
  read_images ref, ours;
  read_all(full_out, "Generic_Cartesian_Grappa.xml", "image_1", &ref);
  read_all(il_out, "Generic_Cartesian_Grappa.xml", "image_1", &ours);
  assert_int_equal(ref.n, 1);
  assert_int_equal(ours.n, 2);
  size_t n = (size_t)ref.im[0].head.matrix_size[0] * ref.im[0].head.matrix_size[1];
  for (uint32_t i = 0; i < ours.n; i++) {
    assert_int_equal(ours.im[i].head.repetition, i);
    double nrmse = mr_test_nrmse_scaled(ours.im[i].data, ref.im[0].data, n);
    fprintf(stderr, "interleaved GRAPPA R 2, frame %u: NRMSE %.4f vs fully sampled\n", i, nrmse);
    assert_true(nrmse <= 0.02);
  }
  free_all(&ref);
  free_all(&ours);
}

static void test_config_script(void **state) {
  (void)state;
  char data[512], result[512], config[512], src[512];
  phantom("script.h5", "1");
  path_in(data, sizeof data, "script.h5");
  path_in(result, sizeof result, "script-out.h5");
  path_in(config, sizeof config, "mine.json");
  snprintf(src, sizeof src, "%s/configs/cartesian.json", mr_test_source_dir());
  const char *copy[] = {"cp", src, config, NULL};
  assert_int_equal(mr_test_run(copy, env.dir, out, sizeof out, err, sizeof err), 0);
  const char *send[] = {"send", data, "-p", env.port, "-o", result, "-C", config, NULL};
  assert_int_equal(run_client(send), 0);
  read_images ours;
  read_all(result, "mine", "image_1", &ours); /* the group is named after the file */
  assert_int_equal(ours.n, 1);
  free_all(&ours);
}

/* Waveforms travel with the acquisitions (the server passes them through)
 * and do not disturb the image. */
static void test_waveforms(void **state) {
  (void)state;
  char data[512], result[512];
  phantom("wave.h5", "1");
  path_in(data, sizeof data, "wave.h5");
  path_in(result, sizeof result, "wave-out.h5");
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, data, "dataset"), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  for (uint32_t j = 0; j < 10; j++) {
    ISMRMRD_Waveform w;
    ismrmrd_init_waveform(&w);
    w.head.number_of_samples = 50;
    w.head.channels = 2;
    w.head.time_stamp = j;
    ismrmrd_make_consistent_waveform(&w);
    memset(w.data, 0, 100 * sizeof(uint32_t));
    assert_int_equal(ismrmrd_append_waveform(&d, &w), 0);
    free(w.data);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  const char *send[] = {"send", data, "-p", env.port, "-o", result, NULL};
  assert_int_equal(run_client(send), 0);
  assert_non_null(strstr(out, "1 image -> "));
  assert_non_null(strstr(out, "128 acquisitions, 10 waveforms"));
}

static void test_queries(void **state) {
  (void)state;
  const char *ping[] = {"ping", "-p", env.port, "-t", "2000", NULL};
  assert_int_equal(run_client(ping), 0);
  assert_non_null(strstr(out, "answered in"));
  const char *info[] = {"info", "-p", env.port, NULL};
  assert_int_equal(run_client(info), 0);
  assert_non_null(strstr(out, "reconserver"));
  assert_non_null(strstr(out, "cuda devices: "));
  const char *configs[] = {"configs", "-p", env.port, NULL};
  assert_int_equal(run_client(configs), 0);
  assert_non_null(strstr(out, "cartesian  (also: default.xml"));
}

static void test_failures(void **state) {
  (void)state;
  char data[512], result[512], want[256];
  phantom("fail.h5", "1");
  path_in(data, sizeof data, "fail.h5");
  path_in(result, sizeof result, "fail-out.h5");

  const char *bad_config[] = {"send", data, "-p", env.port, "-o", result, "-c", "nosuch", NULL};
  assert_int_equal(run_client(bad_config), 1);
  /* Said once, by the failure line (issue 27 item 17). */
  assert_null(strstr(err, "server: ERROR: "));
  assert_non_null(strstr(err, "reconclient: the server reported an error: "));
  char *first = strstr(err, "nosuch");
  assert_non_null(first);
  assert_null(strstr(first + 1, "nosuch"));
  assert_int_not_equal(access(result, F_OK), 0); /* no image, no file */

  /* A port nobody listens on: bound and closed a moment ago. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  char closed[16];
  snprintf(closed, sizeof closed, "%d", ntohs(a.sin_port));
  const char *refused[] = {"ping", "-p", closed, NULL};
  assert_int_equal(run_client(refused), 1);
  snprintf(want, sizeof want, "reconclient: cannot connect to 127.0.0.1:%s: Connection refused\n",
           closed);
  assert_string_equal(err, want);
  const char *send_refused[] = {"send", data, "-p", closed, "-o", result, NULL};
  assert_int_equal(run_client(send_refused), 1);
  assert_string_equal(err, want);

  const char *usage[] = {"send", NULL};
  assert_int_equal(run_client(usage), 2);
  /* An unknown option: getopt's line, then the usage (issue 27 item 17). */
  const char *bogus[] = {"send", "--bogus", NULL};
  assert_int_equal(run_client(bogus), 2);
  assert_non_null(strstr(err, "unrecognized option '--bogus'"));
  assert_non_null(strstr(err, "usage: reconclient COMMAND"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_reference),
      cmocka_unit_test(test_repetitions),
      cmocka_unit_test(test_interleaved_grappa),
      cmocka_unit_test(test_config_script),
      cmocka_unit_test(test_waveforms),
      cmocka_unit_test(test_queries),
      cmocka_unit_test(test_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
