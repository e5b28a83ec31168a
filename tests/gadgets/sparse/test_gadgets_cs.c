/* cs: on a 4x variable-density phantom (2D 256 x 256, 8 coils, noise 0.05,
 * 24 centre lines) the L1-wavelet image (default parameters) beats the
 * SENSE (l2, lambda 0.005) image by >= 5 dB PSNR against the noiseless
 * truth, and beats the zero-filled image; TV beats SENSE too; a 3D ky-kz
 * scan reconstructs; the recon matrix crops; a scan without calibration
 * lines, a lambda of 0, NaN samples and a mask with one line get errors
 * that say so. --table prints the PSNRs. */
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

#include "cJSON.h"
#include "dataset_chain.h"
#include "fft.h"
#include "gadget_harness.h"
#include "image_array.h"
#include "kspace.h"
#include "test_err.h"
#include "test_support.h"

static int table;

/* A reproducible uniform number in [0, 1). */
static double uniform(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (*state >> 8) / 16777216.0;
}

/* Two nested ellipsoids and a few small blobs, seen through ncoils
 * smooth coils (Gaussian, on a ring, with a phase ramp): the noiseless
 * coil images' root sum of squares into truth, the centred k-space with
 * complex Gaussian noise (noise relative to the k-space's RMS) into
 * kspace [coil][z][y][x]. */
static void phantom(mr_device *cpu, const size_t dims[3], size_t nch, double noise,
                    float *truth, float complex *kspace) {
  size_t n = dims[0] * dims[1] * dims[2];
  for (size_t c = 0; c < nch; c++)
    for (size_t i = 0; i < n; i++) {
      double x = (double)(i % dims[0]) / (double)dims[0] - 0.5;
      double y = (double)(i / dims[0] % dims[1]) / (double)dims[1] - 0.5;
      double z = dims[2] > 1 ? (double)(i / dims[0] / dims[1]) / (double)dims[2] - 0.5 : 0;
      double r2 = x * x / 0.16 + y * y / 0.12 + z * z / 0.16;
      double v = r2 < 1 ? 0.6 : 0;
      if (x * x / 0.05 + (y - 0.05) * (y - 0.05) / 0.03 + z * z / 0.05 < 1)
        v = 1.0;
      if ((x - 0.15) * (x - 0.15) + y * y + z * z < 0.003)
        v = 0.2;
      if ((x + 0.12) * (x + 0.12) + (y + 0.15) * (y + 0.15) + z * z < 0.002)
        v = 0.1;
      double a = 2 * M_PI * (double)c / (double)nch;
      double dx = x - 0.45 * cos(a), dy = y - 0.45 * sin(a);
      double g = exp(-(dx * dx + dy * dy) / 0.25);
      kspace[c * n + i] = (float complex)(v * g * cexp(I * (a + 2 * x)));
    }
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (size_t c = 0; c < nch; c++)
      s += pow(cabsf(kspace[c * n + i]), 2);
    truth[i] = (float)sqrt(s);
  }
  mr_fft_plan *plan;
  mr_fft_opts o = {.rank = dims[2] > 1 ? 3 : 2, .dims = {dims[0], dims[1], dims[2]},
                   .batch = nch};
  assert_int_equal(mr_fft_plan_create(cpu, &o, &plan, TERR), 0);
  assert_int_equal(mr_fft_execute(plan, MR_FFT_FORWARD, kspace, kspace, TERR), 0);
  mr_fft_plan_destroy(plan);
  double rms = 0;
  for (size_t i = 0; i < n * nch; i++)
    rms += pow(cabsf(kspace[i]), 2);
  rms = sqrt(rms / (double)(n * nch));
  unsigned st = 12345;
  for (size_t i = 0; i < n * nch; i++) {
    double u1 = uniform(&st) + 1e-12, u2 = uniform(&st);
    double r = sqrt(-2 * log(u1)) * noise * rms / sqrt(2);
    kspace[i] += (float complex)(r * cexp(2 * M_PI * I * u2));
  }
}

/* A variable-density mask of about 1/accel of the lines: the centre calib
 * x calib box and random lines with density falling off from the centre. */
static void vd_mask(const size_t dims[3], int accel, size_t calib, uint8_t *mask) {
  size_t ny = dims[1], nz = dims[2], lines = ny * nz, want = lines / (size_t)accel, got = 0;
  unsigned st = 777;
  memset(mask, 0, lines);
  for (size_t z = 0; z < nz; z++)
    for (size_t y = 0; y < ny; y++) {
      int in_y = y + calib / 2 >= ny / 2 && y < ny / 2 + calib / 2;
      int in_z = nz == 1 || (z + calib / 2 >= nz / 2 && z < nz / 2 + calib / 2);
      if (in_y && in_z) {
        mask[z * ny + y] = 1;
        got++;
      }
    }
  while (got < want) {
    size_t y = (size_t)(uniform(&st) * (double)ny), z = (size_t)(uniform(&st) * (double)nz);
    double ry = fabs((double)y - (double)ny / 2) / ((double)ny / 2);
    double rz = nz > 1 ? fabs((double)z - (double)nz / 2) / ((double)nz / 2) : 0;
    double r = sqrt(ry * ry + rz * rz);
    if (!mask[z * ny + y] && uniform(&st) < pow(1 - fmin(r, 1), 2)) {
      mask[z * ny + y] = 1;
      got++;
    }
  }
}

/* The buffer of an undersampled scan: kspace where mask says. */
static mr_kspace *scan(const size_t dims[3], size_t nch, const float complex *kspace,
                       const uint8_t *mask) {
  mr_kspace *k = mr_kspace_new(dims[0], dims[1], dims[2], nch, 0, NULL);
  assert_non_null(k);
  size_t n = dims[0] * dims[1] * dims[2];
  for (size_t l = 0; l < dims[1] * dims[2]; l++) {
    k->sampled[l] = mask[l];
    if (mask[l])
      for (size_t c = 0; c < nch; c++)
        memcpy(k->data + c * n + l * dims[0], kspace + c * n + l * dims[0],
               dims[0] * sizeof *kspace);
  }
  k->recon.matrix.x = (uint16_t)dims[0];
  k->recon.matrix.y = (uint16_t)dims[1];
  k->recon.matrix.z = (uint16_t)dims[2];
  return k;
}

/* Runs `gadget` (a JSON object) on k; the image's magnitudes into img (n
 * of them) and 0, or the chain's error with its text in err. */
static int reconstruct(const char *gadget, const size_t dims[3], mr_kspace *k, float *img,
                       size_t n, char *err) {
  char chain[512];
  snprintf(chain, sizeof chain, "[%s]", gadget);
  mr_harness h;
  int rc = mr_harness_open(&h, chain, MR_KIND_BIT(MR_MSG_KSPACE));
  if (rc == 0)
    rc = mr_harness_configure(&h, mr_harness_cartesian_header((int)dims[0], (int)dims[1],
                                                              (int)dims[2], (int)dims[0],
                                                              (int)dims[1], (int)dims[2]));
  if (rc == 0)
    rc = mr_harness_push(&h, mr_kspace_message(k));
  else
    mr_kspace_free(k);
  if (rc == 0) {
    assert_int_equal(h.nout, 1);
    const mr_image_array *a = h.out[0]->u.object.ptr;
    assert_int_equal(a->nch, 1);
    assert_int_equal(a->nx * a->ny * a->nz, n);
    for (size_t i = 0; i < n; i++)
      img[i] = cabsf(a->data[i]);
  }
  if (err != NULL)
    snprintf(err, 256, "%.200s", h.err.msg);
  mr_harness_close(&h);
  return rc;
}

static double psnr(const float *x, const float *truth, size_t n) {
  double peak = 0, se = 0;
  for (size_t i = 0; i < n; i++) {
    peak = fmax(peak, truth[i]);
    se += pow((double)x[i] - truth[i], 2);
  }
  return 10 * log10(peak * peak / (se / (double)n));
}

typedef struct scan_data {
  size_t dims[3], nch, n;
  float *truth;
  float complex *kspace;
  uint8_t *mask;
} scan_data;

static scan_data make_scan(const size_t dims[3], size_t nch, int accel, size_t calib) {
  scan_data d = {{dims[0], dims[1], dims[2]}, nch, dims[0] * dims[1] * dims[2], NULL, NULL, NULL};
  d.truth = malloc(d.n * sizeof *d.truth);
  d.kspace = malloc(d.n * nch * sizeof *d.kspace);
  d.mask = malloc(dims[1] * dims[2]);
  mr_pool *pool;
  mr_device *cpu;
  mr_pool_opts po = {.gpus = "none", .cpu_threads = 2};
  assert_int_equal(mr_pool_create(&po, &pool, NULL), 0);
  assert_int_equal(mr_pool_acquire(pool, "cpu", &cpu, NULL), 0);
  phantom(cpu, dims, nch, 0.05, d.truth, d.kspace);
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  vd_mask(dims, accel, calib, d.mask);
  return d;
}

static void free_scan(scan_data *d) {
  free(d->truth);
  free(d->kspace);
  free(d->mask);
}

static double run_psnr(const scan_data *d, const char *gadget) {
  float *img = malloc(d->n * sizeof *img);
  char err[256];
  int rc = reconstruct(gadget, d->dims, scan(d->dims, d->nch, d->kspace, d->mask), img, d->n, err);
  if (rc != 0)
    fail_msg("%s: %s", gadget, err);
  double p = psnr(img, d->truth, d->n);
  free(img);
  if (table)
    printf("%zux%zux%zu %s: PSNR %.2f dB\n", d->dims[0], d->dims[1], d->dims[2], gadget, p);
  return p;
}

static void beats_sense_2d(void **state) {
  (void)state;
  size_t dims[3] = {256, 256, 1};
  scan_data d = make_scan(dims, 8, 4, 24);
  double zero = run_psnr(&d, "{\"gadget\":\"cs\",\"regularizer\":\"l2\",\"iterations\":1}");
  double sense = run_psnr(&d, "{\"gadget\":\"cs\",\"regularizer\":\"l2\"}");
  double wav = run_psnr(&d, "{\"gadget\":\"cs\"}");
  double tv = run_psnr(&d, "{\"gadget\":\"cs\",\"regularizer\":\"tv\",\"iterations\":30}");
  /* ESPIRiT's maps (gpu/coil) serve the same solve: as far above SENSE,
   * within a dB of the lowres maps' image */
  double espirit = run_psnr(&d, "{\"gadget\":\"cs\",\"maps\":\"espirit\"}");
  assert_true(espirit >= sense + 5);
  assert_true(fabs(espirit - wav) < 1);
  assert_true(wav >= sense + 5);
  assert_true(wav > zero);
  assert_true(tv >= sense + 5);
  free_scan(&d);
}

static void beats_zero_filled_3d(void **state) {
  (void)state;
  size_t dims[3] = {32, 32, 24};
  scan_data d = make_scan(dims, 4, 4, 8);
  double zero = run_psnr(&d, "{\"gadget\":\"cs\",\"regularizer\":\"l2\",\"iterations\":1}");
  double wav = run_psnr(&d, "{\"gadget\":\"cs\",\"iterations\":40}");
  assert_true(wav > zero + 1);
  free_scan(&d);
}

/* The image comes cropped to a smaller recon matrix. */
static void crops_to_recon(void **state) {
  (void)state;
  size_t dims[3] = {32, 40, 1};
  scan_data d = make_scan(dims, 2, 2, 12);
  mr_kspace *k = scan(dims, 2, d.kspace, d.mask);
  k->recon.matrix.y = 32;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"cs\",\"iterations\":5}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(32, 40, 1, 32, 32, 1)),
                   0);
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), 0);
  const mr_image_array *a = h.out[0]->u.object.ptr;
  assert_int_equal(a->nx, 32);
  assert_int_equal(a->ny, 32);
  mr_harness_close(&h);
  free_scan(&d);
}

static void expect_error(const scan_data *d, const char *gadget, const char *says) {
  char err[256];
  float *img = malloc(d->n * sizeof *img);
  int rc = reconstruct(gadget, d->dims, scan(d->dims, d->nch, d->kspace, d->mask), img, d->n, err);
  free(img);
  assert_true(rc < 0);
  if (strstr(err, says) == NULL)
    fail_msg("expected \"%s\" in \"%s\"", says, err);
}

static void errors(void **state) {
  (void)state;
  size_t dims[3] = {32, 32, 1};
  scan_data d = make_scan(dims, 2, 2, 12);
  expect_error(&d, "{\"gadget\":\"cs\",\"lambda\":0}", "lambda 0");
  expect_error(&d, "{\"gadget\":\"cs\",\"regularizer\":\"tv\",\"lambda\":0}", "lambda 0");
  /* Every fourth line, no fully sampled centre. */
  for (size_t y = 0; y < 32; y++)
    d.mask[y] = y % 4 == 0;
  expect_error(&d, "{\"gadget\":\"cs\"}", "no calibration region");
  memset(d.mask, 0, 32);
  d.mask[16] = 1;
  expect_error(&d, "{\"gadget\":\"cs\"}", "1 sampled line");
  vd_mask(dims, 2, 12, d.mask);
  d.kspace[16 * 32 + 3] = NAN;
  expect_error(&d, "{\"gadget\":\"cs\"}", "NaN");
  free_scan(&d);
}

#define GENERATOR "ismrmrd_generate_cartesian_shepp_logan"

/* An installed config's gadget list as JSON text (malloc'd). */
static char *config_chain(const char *config) {
  cJSON *doc = mr_harness_installed_config(config);
  assert_non_null(doc);
  char *out = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "gadgets"));
  cJSON_Delete(doc);
  return out;
}

static float *run_config(const char *config, const char *h5, size_t *pixels) {
  char *chain = config_chain(config);
  int count;
  float *img = mr_test_reconstruct(h5, chain, "none", 1, &count, pixels);
  free(chain);
  assert_int_equal(count, 1);
  return img;
}

/* configs/cs.json end to end on ISMRMRD's generator (128 x 128, 8 coils,
 * R 4 with 24 calibration lines, noise 0.05 and noise lines for the
 * prewhitening): closer to the noiseless fully sampled image than the
 * zero-filled image (the cartesian config on the same scan). */
static void config_end_to_end(void **state) {
  (void)state;
  if (!mr_test_have_tool(GENERATOR)) {
    print_message("skipped: %s is not installed\n", GENERATOR);
    skip();
  }
  const char *dir = mr_test_tmpdir("cs");
  char full[512], accel[512], cmd[1400];
  snprintf(full, sizeof full, "%s/full.h5", dir);
  snprintf(accel, sizeof accel, "%s/r4.h5", dir);
  snprintf(cmd, sizeof cmd, GENERATOR " -m 128 -c 8 -n 0 -o %s > /dev/null 2>&1", full);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, GENERATOR " -m 128 -c 8 -a 4 -w 24 -n 0.05 -C -o %s > /dev/null 2>&1",
           accel);
  assert_int_equal(system(cmd), 0);
  size_t px, px2, px3;
  float *ref = run_config("cartesian", full, &px);
  float *zero = run_config("cartesian", accel, &px2);
  float *cs = run_config("cs", accel, &px3);
  assert_int_equal(px, px2);
  assert_int_equal(px, px3);
  double e_zero = mr_test_nrmse_scaled(zero, ref, px), e_cs = mr_test_nrmse_scaled(cs, ref, px);
  print_message("generator R 4: NRMSE zero-filled %.4f, cs %.4f\n", e_zero, e_cs);
  assert_true(e_cs < e_zero);
  free(ref);
  free(zero);
  free(cs);
}

int main(int argc, char **argv) {
  table = argc > 1 && strcmp(argv[1], "--table") == 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(beats_sense_2d),
      cmocka_unit_test(beats_zero_filled_3d),
      cmocka_unit_test(crops_to_recon),
      cmocka_unit_test(errors),
      cmocka_unit_test(config_end_to_end),
  };
  return cmocka_run_group_tests_name("gadgets_cs", tests, NULL, NULL);
}
