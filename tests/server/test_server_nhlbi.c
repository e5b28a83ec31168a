/* NHLBI-compressed streams end to end (protocol/nhlbi.h): the same
 * multi-coil Shepp-Logan scan sent plain, with Gadgetron's -P precision
 * mode and with its -T tolerance mode; the images of the compressed
 * streams must be within the error the compression allows of the plain
 * one. Prints the NRMSE of each as one JSON line. A block that does not
 * match its acquisition ends the session with an error naming it. */
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

#include "gadget_harness.h"
#include "inproc_server.h"
#include "nhlbi_encode.h"
#include "phantom.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"

#define N 64       /* recon matrix; the readout is oversampled 2x */
#define COILS 4

/* Served in this process (inproc_server.h). */
static mr_inproc_server server;

static int start(void **state) {
  (void)state;
  mr_inproc_server_init(&server);
  mr_inproc_server_start(&server);
  return 0;
}

static int stop(void **state) {
  (void)state;
  mr_inproc_server_stop(&server);
  return 0;
}

typedef struct mode {
  const char *name;
  unsigned bits;   /* -P: bits per value */
  float tolerance; /* -T: relative to the largest k-space magnitude */
} mode;

/* Line e1 of the phantom's k-space, 2N samples (oversampled readout). */
static mr_message *phantom_line(int e1) {
  mr_message *m = mr_harness_acquisition(2 * N, COILS, e1, 0,
                                         e1 == N - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                                         NULL, NULL);
  double complex v[COILS];
  for (int s = 0; s < 2 * N; s++) {
    double k[3] = {(double)(s - N) / (2 * N), (double)(e1 - N / 2) / N, 0};
    mr_phantom_kspace(2, N, COILS, k, v);
    for (int c = 0; c < COILS; c++)
      m->u.acq.data[(size_t)c * 2 * N + s] = (float complex)v[c];
  }
  return m;
}

/* The largest magnitude of a real or imaginary part, and the norm of
 * the whole k-space. */
static void kspace_extent(float *top, double *norm) {
  *top = 0;
  *norm = 0;
  for (int e1 = 0; e1 < N; e1++) {
    mr_message *m = phantom_line(e1);
    const float *f = (const float *)m->u.acq.data;
    for (int i = 0; i < 2 * 2 * N * COILS; i++) {
      *top = fmaxf(*top, fabsf(f[i]));
      *norm += (double)f[i] * f[i];
    }
    mr_message_unref(m);
  }
  *norm = sqrt(*norm);
}

/* A connection that has sent the cartesian config and the scan's header. */
static int open_scan(void) {
  int fd = mr_inproc_server_connect(&server);
  assert_true(fd >= 0);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  const char *xml = mr_harness_cartesian_header(2 * N, N, 1, N, N, 1);
  mr_test_send_msg(fd, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)));
  return fd;
}

/* Sends the scan in mode md; returns the magnitude image (N x N). */
static float *reconstruct(const mode *md, float top) {
  int fd = open_scan();
  for (int e1 = 0; e1 < N; e1++) {
    mr_message *m = phantom_line(e1);
    if (md->bits > 0 || md->tolerance > 0)
      assert_int_equal(mr_test_nhlbi_compress_acquisition(m, md->bits, md->tolerance * top), 0);
    mr_test_send_msg(fd, m);
  }
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r = {0};
  mr_test_receive(fd, &r, 30000);
  close(fd);
  assert_null(mr_test_reply_text(&r, "ERROR"));
  assert_int_equal(mr_test_reply_count(&r, MR_MSG_IMAGE), 1);
  float *img = NULL;
  for (int i = 0; i < r.n; i++)
    if (r.msgs[i]->kind == MR_MSG_IMAGE) {
      const mr_image *im = &r.msgs[i]->u.image;
      assert_int_equal(im->head.data_type, ISMRMRD_FLOAT);
      assert_int_equal(im->data_bytes, N * N * sizeof(float));
      img = malloc(im->data_bytes);
      memcpy(img, im->data, im->data_bytes);
    }
  mr_test_reply_free(&r);
  return img;
}

static double nrmse(const float *a, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
    den += (double)ref[i] * ref[i];
  }
  return sqrt(num / den);
}

static void test_compressed_images_match_plain(void **state) {
  (void)state;
  const mode modes[] = {
      {"P8", 8, 0},        {"P12", 12, 0},      {"P16", 16, 0},
      {"T1e-3", 0, 1e-3f}, {"T1e-4", 0, 1e-4f}, {"T1e-5", 0, 1e-5f},
  };
  float top;
  double knorm;
  kspace_extent(&top, &knorm);
  const mode plain = {"plain", 0, 0};
  float *ref = reconstruct(&plain, top);
  printf("{\"test\": \"nhlbi_nrmse\", \"matrix\": %d, \"coils\": %d", N, COILS);
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    float *img = reconstruct(&modes[i], top);
    double e = nrmse(img, ref, (size_t)N * N);
    /* The bound: every value is off by at most `err` (0.5 / scale), the
     * reconstruction is linear up to the coil combination (which cannot
     * add to the difference), cropping only removes error, and the
     * phantom lies inside the recon field of view: the image error is at
     * most err * sqrt(values) relative to the k-space norm (with the
     * float rounding of the FFTs as slack). */
    double err = modes[i].bits > 0 ? top / ((double)((1u << (modes[i].bits - 1)) - 1)) / 2
                                   : modes[i].tolerance * top;
    double bound = err * sqrt(2.0 * 2 * N * N * COILS) / knorm + 1e-6;
    printf(", \"%s\": {\"nrmse\": %.3g, \"bound\": %.3g}", modes[i].name, e, bound);
    assert_true(e < bound);
    assert_true(e > 0); /* lossy: the stream really was compressed */
    free(img);
  }
  printf("}\n");
  free(ref);
}

/* A block whose bit width does not match its length ends the session
 * with the acquisition named. */
static void test_bad_block_is_an_error(void **state) {
  (void)state;
  int fd = open_scan();
  mr_message *m = phantom_line(0);
  assert_int_equal(mr_test_nhlbi_compress_acquisition(m, 12, 0), 0);
  m->u.acq.head.scan_counter = 77;
  m->u.acq.compressed[12] = 13; /* bits: 12 -> 13 */
  mr_test_send_msg(fd, m);
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r = {0};
  mr_test_receive(fd, &r, 30000);
  close(fd);
  assert_non_null(mr_test_reply_text(&r, "acquisition 77: NHLBI block has"));
  assert_true(r.got_close);
  mr_test_reply_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compressed_images_match_plain),
      cmocka_unit_test(test_bad_block_is_an_error),
  };
  return cmocka_run_group_tests(tests, start, stop);
}
