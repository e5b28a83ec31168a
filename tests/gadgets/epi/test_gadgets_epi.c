/* The epi gadget on simulated EPI (reconclient simulate --trajectory epi,
 * 64 x 64, 8 coils): single-shot with an odd/even error of 0.6 rad + 3 rad
 * across the readout's field of view, flat-top and ramp-sampled, against
 * the reconstruction of the same scan without the error (NRMSE <= 0.01,
 * the target) and for its N/2 ghost (ghost-to-signal ratio < 1%,
 * the ghost's mean magnitude over what the error-free image has there,
 * against the signal's; 33% uncorrected); segmented scans with an error
 * per shot; the error-free reconstruction against the band-limited truth;
 * noise through the ramp regridding (as through the flat-top readout); the
 * installed config with in-plane GRAPPA (R 2, a reference scan); the fit
 * and its filter over repetitions; what
 * a scan lacks (navigators, a trajectoryDescription) refused; with --cuda
 * the GPU chain against the CPU chain, and the SMS case on the GPU. */
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
#include <cjson/cJSON.h>

#include "dataset.h"
#include "dataset_chain.h"
#include "gadget_harness.h"
#include "ghost_fit.h"
#include "kspace.h"
#include "phantom_support.h"
#include "simulate.h"
#include "test_support.h"

enum { N = 64, COILS = 8 };

static const char *gpus = "none";

/* The epi config's chain with an RSS combination (compared with the RSS
 * truth) and the ghost mode asked for. */
static char *chain(const char *ghost) {
  static char text[1024];
  snprintf(text, sizeof text,
           "[{\"gadget\":\"epi\",\"ghost\":\"%s\"},{\"gadget\":\"accumulate\"},"
           "{\"gadget\":\"remove_oversampling\"},{\"gadget\":\"fft\"},"
           "{\"gadget\":\"coil_combine\",\"method\":\"rss\"},"
           "{\"gadget\":\"image_out\",\"type\":\"magnitude\"}]",
           ghost);
  return text;
}

static int coils = COILS;

/* A multiband scan: its factor (0: single-band) and CAIPI shift. */
typedef struct multiband {
  int factor, caipi;
} multiband;

static const char *simulate_scan(const char *name, mr_sim_epi epi, multiband mb, double noise) {
  static char paths[8][512];
  static int next;
  char *path = paths[next++ % 8];
  snprintf(path, 512, "%s/%s", mr_test_tmpdir("mr-epi"), name);
  remove(path);
  mr_sim_options o = {.trajectory = MR_SIM_EPI, .matrix = N, .coils = coils, .epi = epi,
                      .multiband = mb.factor, .caipi = mb.caipi, .noise = noise, .seed = 1,
                      .path = path};
  mr_err err = {0};
  if (mr_simulate(&o, &err) != 0)
    fail_msg("simulate: %s", err.msg);
  return path;
}

static const char *simulate_noisy(const char *name, mr_sim_epi epi, double noise) {
  return simulate_scan(name, epi, (multiband){0, 0}, noise);
}

static const char *simulate(const char *name, mr_sim_epi epi) {
  return simulate_noisy(name, epi, 0);
}

static float *reconstruct(const char *h5, const char *ghost) {
  int count = 0;
  size_t pixels = 0;
  float *img = mr_test_reconstruct(h5, chain(ghost), gpus, 0, &count, &pixels);
  assert_int_equal(count, 1);
  assert_int_equal(pixels, N * N);
  return img;
}

static double nrmse(const float *a, const float *b) {
  double e = 0, r = 0;
  for (int i = 0; i < N * N; i++) {
    e += (a[i] - b[i]) * (double)(a[i] - b[i]);
    r += b[i] * (double)b[i];
  }
  return sqrt(e / r);
}

/* Mean magnitude where the object's N/2 ghost falls (the object's support
 * shifted by half the field of view along y, at least 4 pixels from the
 * object: clear of its own ringing) over the mean within the object. */
static double ghost_to_signal(const float *img, const float *truth) {
  double peak = 0;
  for (int i = 0; i < N * N; i++)
    peak = truth[i] > peak ? truth[i] : peak;
  static int object[N * N];
  for (int i = 0; i < N * N; i++)
    object[i] = truth[i] > 0.1 * peak;
  double in = 0, ghost = 0;
  int nin = 0, nghost = 0;
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      int near = 0;
      for (int dy = -4; dy <= 4 && !near; dy++)
        for (int dx = -4; dx <= 4 && !near; dx++)
          near = y + dy >= 0 && y + dy < N && x + dx >= 0 && x + dx < N &&
                 object[(y + dy) * N + x + dx];
      if (object[y * N + x]) {
        in += img[y * N + x];
        nin++;
      } else if (!near && object[((y + N / 2) % N) * N + x]) {
        ghost += img[y * N + x];
        nghost++;
      }
    }
  assert_true(nin > 0 && nghost > 0);
  return (ghost / nghost) / (in / nin);
}

/* NRMSE of a against b after the least-squares scale of a (the truth is
 * at another scale than a reconstruction of an oversampled readout). */
static double scaled_nrmse(const float *a, const float *b) {
  double ab = 0, aa = 0;
  for (int i = 0; i < N * N; i++) {
    ab += a[i] * (double)b[i];
    aa += a[i] * (double)a[i];
  }
  static float scaled[N * N];
  for (int i = 0; i < N * N; i++)
    scaled[i] = (float)(a[i] * ab / aa);
  return nrmse(scaled, b);
}

static void check_correction(mr_sim_epi error_free, const char *name) {
  mr_sim_epi ghosted = error_free;
  ghosted.ghost[0] = 0.6;
  ghosted.ghost[1] = 3;
  char a[64], b[64];
  snprintf(a, sizeof a, "%s_ghosted.h5", name);
  snprintf(b, sizeof b, "%s_clean.h5", name);
  const char *ghosted_h5 = simulate(a, ghosted), *clean_h5 = simulate(b, error_free);
  float *clean = reconstruct(clean_h5, "navigators");
  float *corrected = reconstruct(ghosted_h5, "navigators");
  float *uncorrected = reconstruct(ghosted_h5, "none");
  float truth[N * N];
  phantom_test_band_limited_rss(N, COILS, truth);
  double e = nrmse(corrected, clean), e_none = nrmse(uncorrected, clean);
  /* the ghost the error leaves: over what the error-free image has there
   * (its own ringing and background, 1.3% of the signal) */
  double g_clean = ghost_to_signal(clean, truth);
  double g = ghost_to_signal(corrected, truth) - g_clean;
  double g_none = ghost_to_signal(uncorrected, truth) - g_clean;
  double e_truth = scaled_nrmse(clean, truth);
  print_message("%s: NRMSE vs error-free %.4f (uncorrected %.3f); ghost/signal %.4f "
                "(uncorrected %.3f; the error-free image's own %.4f there); error-free vs "
                "truth %.4f\n",
                name, e, e_none, g, g_none, g_clean, e_truth);
  assert_true(e <= 0.01);
  assert_true(g < 0.01);
  assert_true(g_none > 0.05); /* the error is there to correct */
  assert_true(e_none > 0.1);
  assert_true(e_truth < 0.05);
  free(clean);
  free(corrected);
  free(uncorrected);
}

static void flat_top(void **state) {
  (void)state;
  check_correction((mr_sim_epi){0}, "flat");
}

static void ramp_sampled(void **state) {
  (void)state;
  check_correction((mr_sim_epi){.ramp = 1}, "ramp");
}

static void segmented(void **state) {
  (void)state;
  check_correction((mr_sim_epi){.shots = 4, .ramp = 1}, "segmented");
}

/* Noise through the regridding: a ramp-sampled scan's image is about as
 * noisy as a flat-top one's (the truncated SVD; the plain pseudo-inverse
 * would leave nothing but noise). */
static void ramp_noise_bounded(void **state) {
  (void)state;
  double noise = 0.5; /* some 2% of the k-space centre's magnitude per coil */
  float *flat = reconstruct(simulate("nf.h5", (mr_sim_epi){0}), "navigators");
  float *flat_noisy = reconstruct(simulate_noisy("nfn.h5", (mr_sim_epi){0}, noise), "navigators");
  float *ramp = reconstruct(simulate("nr.h5", (mr_sim_epi){.ramp = 1}), "navigators");
  float *ramp_noisy = reconstruct(simulate_noisy("nrn.h5", (mr_sim_epi){.ramp = 1}, noise),
                                  "navigators");
  double e_flat = nrmse(flat_noisy, flat), e_ramp = nrmse(ramp_noisy, ramp);
  print_message("noise: NRMSE flat-top %.4f, ramp-sampled %.4f\n", e_flat, e_ramp);
  assert_true(e_flat > 0.005); /* there is noise */
  assert_true(e_ramp < 2 * e_flat);
  free(flat);
  free(flat_noisy);
  free(ramp);
  free(ramp_noisy);
}

/* The installed config's chain (malloc'd text). */
static char *installed_chain(void) {
  cJSON *cfg = mr_harness_installed_config("epi");
  assert_non_null(cfg);
  char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "gadgets"));
  cJSON_Delete(cfg);
  return text;
}

/* The installed config: in-plane GRAPPA (R 2, the reference scan's 24
 * lines, with navigators of its own) on a ghosted, ramp-sampled scan
 * against the same scan without the error (the correction), and that
 * against the fully sampled one (GRAPPA's own error on this phantom, as
 * on Cartesian data: 0.062 for the flat-top scan too). */
static void config_with_grappa(void **state) {
  (void)state;
  char *config = installed_chain();
  const char *h5[4] = {simulate("r2g.h5", (mr_sim_epi){.ramp = 1, .accel = 2, .ghost = {0.6, 3}}),
                       simulate("r2.h5", (mr_sim_epi){.ramp = 1, .accel = 2}),
                       simulate("r1.h5", (mr_sim_epi){.ramp = 1}),
                       simulate("r1g.h5", (mr_sim_epi){.ramp = 1, .ghost = {0.6, 3}})};
  float *img[4];
  for (int i = 0; i < 4; i++) {
    int count = 0;
    size_t pixels = 0;
    img[i] = mr_test_reconstruct(h5[i], config, gpus, 0, &count, &pixels);
    assert_int_equal(count, 1);
    assert_int_equal(pixels, N * N);
  }
  double e_r2 = nrmse(img[0], img[1]), grappa = nrmse(img[1], img[2]);
  double e_r1 = nrmse(img[3], img[2]);
  print_message("config epi: R 2 ghosted vs R 2 error-free %.4f (GRAPPA vs fully sampled %.4f); "
                "R 1 ghosted vs error-free %.4f\n",
                e_r2, grappa, e_r1);
  assert_true(e_r2 <= 0.01);
  assert_true(e_r1 <= 0.01);
  assert_true(grappa < 0.08);
  for (int i = 0; i < 4; i++)
    free(img[i]);
  free(config);
}

/* The installed config `name`'s images of h5 (count of them). */
static float *installed_images(const char *name, const char *h5, int count) {
  cJSON *cfg = mr_harness_installed_config(name);
  assert_non_null(cfg);
  char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "gadgets"));
  cJSON_Delete(cfg);
  int n = 0;
  size_t pixels = 0;
  float *img = mr_test_reconstruct(h5, text, gpus, 0, &n, &pixels);
  free(text);
  assert_int_equal(n, count);
  assert_int_equal(pixels, N * N);
  return img;
}

/* Every acquisition of h5 through chain (opened into h, flushed). */
static void run_chain(mr_harness *h, const char *chain, const char *h5) {
  mr_err err = {0};
  mr_dataset *ds;
  if (mr_dataset_open(h5, "dataset", &ds, &err) != 0)
    fail_msg("%s", err.msg);
  assert_int_equal(mr_harness_open_gpus(h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION), gpus), 0);
  assert_int_equal(mr_harness_configure(h, mr_dataset_header(ds)), 0);
  mr_message *m;
  while (mr_dataset_next(ds, &m, &err) == 0 && m != NULL) {
    if (m->kind != MR_MSG_ACQUISITION)
      mr_message_unref(m);
    else if (mr_harness_push(h, m) != 0)
      fail_msg("push: %s", h->err.msg);
  }
  assert_int_equal(mr_harness_flush(h), 0);
  mr_dataset_close(ds);
}

/* The energy of each slice's k-space as slice_grappa splits h5 (the
 * installed epi_sms config's steps up to it): leakage without a coil
 * combination in between. */
static void slice_energies(const char *h5, int count, double *energy) {
  cJSON *cfg = mr_harness_installed_config("epi_sms");
  assert_non_null(cfg);
  cJSON *steps = cJSON_GetObjectItemCaseSensitive(cfg, "gadgets");
  int at = 0;
  while (at < cJSON_GetArraySize(steps) &&
         strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, at), "gadget")
                    ->valuestring, "slice_grappa") != 0)
    at++;
  assert_true(at < cJSON_GetArraySize(steps));
  while (cJSON_GetArraySize(steps) > at + 1)
    cJSON_DeleteItemFromArray(steps, at + 1);
  char *chain = cJSON_PrintUnformatted(steps);
  cJSON_Delete(cfg);
  mr_err err = {0};
  mr_harness h;
  run_chain(&h, chain, h5);
  for (int z = 0; z < count; z++)
    energy[z] = 0;
  for (int i = 0; i < h.nout; i++) {
    if (h.out[i]->kind != MR_MSG_KSPACE)
      continue;
    mr_kspace *k = h.out[i]->u.object.ptr;
    const float complex *d = mr_kspace_host(k, &err);
    assert_non_null(d);
    assert_true(k->ref.idx.slice < count);
    size_t n = k->nro * k->ne1 * k->ne2 * k->nch;
    for (size_t j = 0; j < n; j++)
      energy[k->ref.idx.slice] += crealf(d[j] * conjf(d[j]));
  }
  mr_harness_close(&h);
  free(chain);
}

/* Simultaneous multi-slice: multiband 4, CAIPI FOV/3, 32 coils, the
 * odd/even error, through the installed epi_sms config, against the same
 * slices acquired single-band through the epi config: per slice NRMSE <=
 * 0.05 (the target); slice leakage from collapsed data holding one
 * slice's signal alone: the mean magnitude of every other slice's image
 * over its own <= 1% (the target), and the root energy ratio of
 * the slices' k-spaces before the coil combination <= 1% too. */
static void sms(void **state) {
  (void)state;
  enum { M = 4 };
  coils = 32;
  mr_sim_epi mb = {.ghost = {0.6, 3}};
  const multiband sms4 = {M, 3};
  mr_sim_epi single = {.slices = M};
  char name[64];
  snprintf(name, sizeof name, "sms.h5");
  float *got = installed_images("epi_sms", simulate_scan(name, mb, sms4, 0), M);
  float *want = installed_images("epi", simulate("sms_single.h5", single), M);
  for (int z = 0; z < M; z++) {
    double e = nrmse(got + z * N * N, want + z * N * N);
    print_message("sms: slice %d NRMSE against single-band %.4f\n", z, e);
    assert_true(e <= 0.05);
  }
  double worst = 0, worst_k = 0;
  for (int p = 1; p <= M; p++) {
    mr_sim_epi probe = mb;
    probe.leak_probe = p;
    snprintf(name, sizeof name, "sms_probe%d.h5", p);
    const char *h5 = simulate_scan(name, probe, sms4, 0);
    float *img = installed_images("epi_sms", h5, M);
    double own = 0, energy[M];
    for (int i = 0; i < N * N; i++)
      own += img[(p - 1) * N * N + i];
    slice_energies(h5, M, energy);
    for (int z = 0; z < M; z++) {
      if (z == p - 1)
        continue;
      double leak = 0;
      for (int i = 0; i < N * N; i++)
        leak += img[z * N * N + i];
      print_message("sms: slice %d in slice %d's image: %.4f of its signal\n", p - 1, z,
                    leak / own);
      worst = leak / own > worst ? leak / own : worst;
      double k = sqrt(energy[z] / energy[p - 1]);
      worst_k = k > worst_k ? k : worst_k;
    }
    free(img);
  }
  print_message("sms: worst leakage %.4f; in k-space (root energy ratio, every coil) %.4f\n",
                worst, worst_k);
  assert_true(worst <= 0.01);
  assert_true(worst_k <= 0.01);
  free(got);
  free(want);
  coils = COILS;
}

/* Multiband 4 with in-plane R 2: slice-GRAPPA on the acquired lines, then
 * GRAPPA per slice calibrated on its single-band reference (what
 * slice_grappa passes along), against the fully sampled single-band
 * slices; beside it the single-band R 2 scan through the epi config, whose
 * GRAPPA error on this phantom (0.062-0.068) is most of it: the multiband
 * scan's 0.096-0.097 held to 0.12 and to 1.7 times the single-band's. */
static void sms_in_plane(void **state) {
  (void)state;
  enum { M = 4 };
  coils = 32;
  float *got = installed_images(
      "epi_sms", simulate_scan("sms_r2.h5", (mr_sim_epi){.accel = 2}, (multiband){M, 3}, 0), M);
  float *want = installed_images("epi", simulate("sms_r1_single.h5", (mr_sim_epi){.slices = M}), M);
  float *single = installed_images(
      "epi", simulate("sms_r2_single.h5", (mr_sim_epi){.slices = M, .accel = 2}), M);
  for (int z = 0; z < M; z++) {
    double e = nrmse(got + z * N * N, want + z * N * N);
    double e1 = nrmse(single + z * N * N, want + z * N * N);
    print_message("sms R 2: slice %d NRMSE against single-band R 1 %.4f (single-band R 2: %.4f)\n",
                  z, e, e1);
    assert_true(e <= 0.12);
    assert_true(e <= 1.7 * e1);
  }
  free(got);
  free(want);
  free(single);
  coils = COILS;
}

/* An fMRI series (the simulator's --volumes) through the installed epi_sms
 * config: multiband 2 with CAIPI FOV/2, 8 slices in 4 groups, 3 volumes,
 * the single-band reference once before them, the odd/even error: every
 * slice of every volume comes out once as its own image, with its slice
 * index, its volume's repetition and its position (slice z at z mm along
 * the normal), each within NRMSE 0.05 of the same slice acquired
 * single-band through the epi config (the volumes' data are alike). */
static void fmri_series(void **state) {
  (void)state;
  enum { M = 2, Z = 8, V = 3 };
  coils = 16;
  const char *h5 = simulate_scan(
      "fmri.h5", (mr_sim_epi){.ghost = {0.6, 3}, .slices = Z, .volumes = V}, (multiband){M, 2}, 0);
  float *want = installed_images("epi", simulate("fmri_single.h5", (mr_sim_epi){.slices = Z}), Z);
  cJSON *cfg = mr_harness_installed_config("epi_sms");
  assert_non_null(cfg);
  char *steps = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(cfg, "gadgets"));
  cJSON_Delete(cfg);
  mr_harness h;
  run_chain(&h, steps, h5);
  int seen[Z][V] = {{0}}, images = 0;
  double worst = 0;
  for (int i = 0; i < h.nout; i++) {
    if (h.out[i]->kind != MR_MSG_IMAGE)
      continue;
    const mr_image *im = &h.out[i]->u.image;
    int z = im->head.slice, v = im->head.repetition;
    assert_true(z < Z && v < V);
    assert_int_equal(im->head.matrix_size[0] * im->head.matrix_size[1], N * N);
    assert_float_equal(im->head.position[2], z, 1e-4);
    seen[z][v]++;
    images++;
    double e = nrmse(im->data, want + z * N * N);
    worst = e > worst ? e : worst;
    assert_true(e <= 0.05);
  }
  print_message("fmri: %d images of %d slices x %d volumes, worst NRMSE against single-band %.4f\n",
                images, Z, V, worst);
  assert_int_equal(images, Z * V);
  for (int z = 0; z < Z; z++)
    for (int v = 0; v < V; v++)
      assert_int_equal(seen[z][v], 1);
  mr_harness_close(&h);
  free(steps);
  free(want);
  coils = COILS;
}

/* The fit on profiles with a known odd/even phase, where only part of the
 * readout has signal; the mean over repetitions. */
static void ghost_fit_filtered(void **state) {
  (void)state;
  enum { NX = 128, C = 3 };
  static mr_cfloat fwd[NX * C], rev[NX * C];
  for (int c = 0; c < C; c++)
    for (int j = 0; j < NX; j++) {
      double x = j - NX / 2;
      double complex v = fabs(x) < NX / 4 ? (1 + 0.3 * c) * cexp(I * (0.2 * c + 0.01 * x)) : 0;
      fwd[c * NX + j] = (mr_cfloat)v;
      rev[c * NX + j] = (mr_cfloat)(v * cexp(I * (-2.5 + 3.0 * x / NX)));
    }
  mr_ghost_fit f = mr_ghost_fit_profiles(fwd, rev, NX, C);
  assert_float_equal(f.constant, -2.5, 1e-6);
  assert_float_equal(f.slope * NX, 3.0, 1e-6);
  mr_cfloat factors[NX];
  mr_ghost_correction(f, NX, factors);
  assert_float_equal(cargf(factors[NX / 2]), 2.5, 1e-5);
  /* filter 2: the mean of the last two; the constant's mean on the circle
   * (3.1 and -3.1 average to pi, not 0) */
  mr_ghost_history h = {0};
  mr_ghost_fit m = mr_ghost_history_add(&h, (mr_ghost_fit){3.1, 0.01}, 2);
  assert_float_equal(m.constant, 3.1, 1e-9);
  m = mr_ghost_history_add(&h, (mr_ghost_fit){-3.1, 0.03}, 2);
  assert_float_equal(fabs(m.constant), M_PI, 1e-9);
  assert_float_equal(m.slope, 0.02, 1e-12);
  m = mr_ghost_history_add(&h, (mr_ghost_fit){0.5, 0.05}, 1);
  assert_float_equal(m.constant, 0.5, 1e-9);
}

/* What the scan lacks: refused with a line that says what. */
static void refusals(void **state) {
  (void)state;
  /* an echo with no navigator before it */
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, chain("navigators"), MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  char header[4096];
  snprintf(header, sizeof header, "%s", mr_harness_cartesian_header(2 * N, N, 1, N, N, 1));
  assert_int_equal(mr_harness_configure(&h, header), 0);
  int rc = mr_harness_push(&h, mr_harness_acquisition(2 * N, 2, 0, 0,
                                                      MR_FLAG(ISMRMRD_ACQ_IS_REVERSE), NULL, NULL));
  assert_int_equal(rc, MR_EDATA);
  assert_non_null(strstr(h.err.msg, "before any navigator"));
  mr_harness_close(&h);
  /* readouts longer than the encoded matrix without a trajectoryDescription */
  assert_int_equal(mr_harness_open(&h, chain("none"), MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_configure(&h, header), 0);
  rc = mr_harness_push(&h, mr_harness_acquisition(3 * N, 2, 0, 0, 0, NULL, NULL));
  assert_int_equal(rc, MR_EDATA);
  assert_non_null(strstr(h.err.msg, "trajectoryDescription"));
  mr_harness_close(&h);
}

/* The GPU chain against the CPU chain on the ramp-sampled ghosted scan. */
static void cuda_matches_cpu(void **state) {
  (void)state;
  const char *h5 = simulate("cuda.h5", (mr_sim_epi){.ramp = 1, .ghost = {0.6, 3}});
  gpus = "none";
  float *cpu = reconstruct(h5, "navigators");
  gpus = "all";
  float *gpu = reconstruct(h5, "navigators");
  double e = nrmse(gpu, cpu);
  print_message("GPU vs CPU: %.2e\n", e);
  assert_true(e < 1e-4);
  free(cpu);
  free(gpu);
  check_correction((mr_sim_epi){.ramp = 1}, "ramp_gpu");
}

/* The SMS cases on the GPU (slice_grappa's HERK, GEMMs and solve there;
 * with in-plane R the separation on the acquired lines, the slices left on
 * the device for grappa), held to the same limits as on the CPU. */
static void cuda_sms(void **state) {
  gpus = "all";
  sms(state);
}

static void cuda_sms_in_plane(void **state) {
  gpus = "all";
  sms_in_plane(state);
}

static void cuda_fmri_series(void **state) {
  gpus = "all";
  fmri_series(state);
}

int main(int argc, char **argv) {
  int cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
  if (cuda && !mr_harness_have_gpu()) {
    fprintf(stderr, "no GPU: skipped\n");
    return 77;
  }
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(flat_top),
      cmocka_unit_test(ramp_sampled),
      cmocka_unit_test(segmented),
      cmocka_unit_test(ramp_noise_bounded),
      cmocka_unit_test(config_with_grappa),
      cmocka_unit_test(sms), cmocka_unit_test(sms_in_plane), cmocka_unit_test(fmri_series),
      cmocka_unit_test(refusals),
      cmocka_unit_test(ghost_fit_filtered),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(cuda_matches_cpu), cmocka_unit_test(cuda_sms),
      cmocka_unit_test(cuda_sms_in_plane), cmocka_unit_test(cuda_fmri_series)};
  return cuda ? cmocka_run_group_tests_name("epi_cuda", cuda_tests, NULL, NULL)
              : cmocka_run_group_tests_name("epi_cpu", cpu_tests, NULL, NULL);
}
