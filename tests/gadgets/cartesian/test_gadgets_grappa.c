/* grappa through the gadget chain of configs/grappa.json (on the CPU):
 * the ISMRMRD phantom, accelerated, against its fully sampled
 * reconstruction — noiseless (NRMSE <= 0.02) and with the generator's noise
 * over R x coils with and without prewhitening (a regression grid); the
 * calibration modes (embedded, separate reference scan, reuse for later
 * repetitions) on synthetic data; clear errors; on the CPU, slices
 * calibrated and filled at once give what one at a time gives, in order,
 * and a failing slice is reported at its place. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "budget.h"
#include "dataset_chain.h"
#include "gadget_harness.h"
#include "grappa.h"
#include "grappa_phantom.h"
#include "kspace.h"
#include "test_support.h"

#define GENERATOR "ismrmrd_generate_cartesian_shepp_logan"

/* The gadget list of configs/grappa.json, as JSON text (malloc'd); with
 * whiten = 0 without its noise_adjust entry. */
static char *grappa_chain(int whiten) {
  cJSON *doc = mr_harness_installed_config("grappa");
  assert_non_null(doc);
  cJSON *gadgets = cJSON_GetObjectItem(doc, "gadgets");
  int noise = -1;
  for (int i = 0; i < cJSON_GetArraySize(gadgets); i++)
    if (strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(gadgets, i), "gadget")->valuestring,
               "noise_adjust") == 0)
      noise = i;
  assert_true(noise >= 0);
  if (!whiten)
    cJSON_DeleteItemFromArray(gadgets, noise);
  char *out = cJSON_PrintUnformatted(gadgets);
  cJSON_Delete(doc);
  return out;
}

/* The dataset through configs/grappa.json (without prewhitening when
 * whiten = 0), on the CPU. */
static float *reconstruct(const char *h5, int whiten, int first_repetition_only, int *count,
                          size_t *pixels) {
  char *chain = grappa_chain(whiten);
  float *images = mr_test_reconstruct(h5, chain, "none", first_repetition_only, count, pixels);
  free(chain);
  return images;
}

/* acs: the calibration width (-w; 0: none, which the generator's header
 * calls interleaved calibration). */
static void generate_frames(const char *path, int coils, int accel, int acs, int repetitions,
                            double noise, int noise_scans) {
  char cmd[1024], width[32] = "";
  if (acs > 0)
    snprintf(width, sizeof width, "-w %d", acs);
  snprintf(cmd, sizeof cmd,
           GENERATOR " -m 128 -c %d -a %d %s -r %d -n %g %s -o %s > /dev/null 2>&1", coils,
           accel, width, repetitions, noise, noise_scans ? "-C" : "", path);
  assert_int_equal(system(cmd), 0);
}

static void generate(const char *path, int coils, int accel, double noise, int noise_scans) {
  generate_frames(path, coils, accel, 32, 1, noise, noise_scans);
}

static int have_generator(void) {
  if (mr_test_have_tool(GENERATOR))
    return 1;
  print_message("skipped: %s is not installed\n", GENERATOR);
  return 0;
}

static void noiseless_matches_fully_sampled(void **state) {
  (void)state;
  if (!have_generator())
    skip();
  const char *dir = mr_test_tmpdir("grappa");
  char full[512], accel[512];
  snprintf(full, sizeof full, "%s/full.h5", dir);
  snprintf(accel, sizeof accel, "%s/r2.h5", dir);
  generate(full, 8, 1, 0, 0);
  generate(accel, 8, 2, 0, 0);
  int nref, n;
  size_t px, px2;
  float *ref = reconstruct(full, 1, 0, &nref, &px);
  float *img = reconstruct(accel, 1, 0, &n, &px2);
  assert_int_equal(nref, 1);
  assert_int_equal(n, 2); /* the generator's two shifted repetitions */
  assert_int_equal(px, px2);
  for (int i = 0; i < n; i++) {
    double e = mr_test_nrmse_scaled(img + i * px, ref, px);
    print_message("noiseless, 8 coils, R 2, repetition %d: NRMSE %.4f\n", i, e);
    assert_true(e <= 0.02);
  }
  free(ref);
  free(img);
}

/* NRMSE against the noiseless fully sampled image, generator noise 0.05,
 * measured on this code (CPU): a guard against regressions, 25% slack. */
static const struct {
  int accel, coils;
  double nrmse; /* with prewhitening */
} grid[] = {
    {2, 8, 0.1589}, {2, 16, 0.1208}, {2, 32, 0.0968}, {3, 8, 0.2084}, {3, 16, 0.1857},
    {3, 32, 0.1689}, {4, 8, 0.2669}, {4, 16, 0.2502}, {4, 32, 0.2466},
};

static void noise_grid(void **state) {
  (void)state;
  if (!have_generator())
    skip();
  const char *dir = mr_test_tmpdir("grappa_grid");
  char path[512];
  print_message("NRMSE vs fully sampled (noiseless), generator noise 0.05:\n"
                "  R coils  whitened  plain\n");
  for (size_t g = 0; g < sizeof grid / sizeof *grid; g++) {
    int R = grid[g].accel, coils = grid[g].coils, nref, n, n2;
    size_t px, px2;
    snprintf(path, sizeof path, "%s/full%d.h5", dir, coils);
    generate(path, coils, 1, 0, 0);
    float *ref = reconstruct(path, 1, 0, &nref, &px);
    snprintf(path, sizeof path, "%s/r%dc%d.h5", dir, R, coils);
    generate(path, coils, R, 0.05, 1);
    float *white = reconstruct(path, 1, 1, &n, &px2);
    float *plain = reconstruct(path, 0, 1, &n2, &px2);
    assert_int_equal(n, 1);
    assert_int_equal(n2, 1);
    double ew = mr_test_nrmse_scaled(white, ref, px), ep = mr_test_nrmse_scaled(plain, ref, px);
    print_message("  %d  %5d  %.4f    %.4f\n", R, coils, ew, ep);
    assert_true(ew <= ep * 1.01 + 1e-4); /* prewhitening never makes it worse */
    assert_true(ew <= grid[g].nrmse * 1.25);
    free(ref);
    free(white);
    free(plain);
  }
}

/* Interleaved calibration (the generator's -a R without -w: R frames
 * sampled at shifted positions, no ACS lines, calibrationMode interleaved):
 * every frame comes out, the first R - 1 once the union of R frames
 * calibrates, and about as close to the fully sampled image as with 32
 * embedded ACS lines (the same R, coils and noise). */
static void interleaved_matches_embedded(void **state) {
  (void)state;
  if (!have_generator())
    skip();
  const char *dir = mr_test_tmpdir("grappa_interleaved");
  char path[512];
  print_message("NRMSE vs fully sampled (noiseless), 16 coils:\n"
                "  R  noise  frames  interleaved (worst frame)  embedded 32 ACS\n");
  snprintf(path, sizeof path, "%s/full.h5", dir);
  generate_frames(path, 16, 1, 0, 1, 0, 0);
  int nref, n;
  size_t px, px2;
  float *ref = reconstruct(path, 1, 0, &nref, &px);
  assert_int_equal(nref, 1);
  static const struct {
    int accel, repetitions;
    double noise;
  } cases[] = {{2, 1, 0}, {3, 2, 0}, {2, 1, 0.05}, {4, 1, 0.05}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    int R = cases[c].accel, reps = cases[c].repetitions;
    double noise = cases[c].noise;
    snprintf(path, sizeof path, "%s/il%d_%d_%g.h5", dir, R, reps, noise);
    generate_frames(path, 16, R, 0, reps, noise, noise > 0);
    float *img = reconstruct(path, 1, 0, &n, &px2);
    assert_int_equal(n, R * reps); /* every frame */
    assert_int_equal(px2, px);
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double e = mr_test_nrmse_scaled(img + (size_t)i * px, ref, px);
      worst = e > worst ? e : worst;
    }
    free(img);
    snprintf(path, sizeof path, "%s/emb%d_%d_%g.h5", dir, R, reps, noise);
    generate_frames(path, 16, R, 32, reps, noise, noise > 0);
    img = reconstruct(path, 1, 0, &n, &px2);
    assert_int_equal(n, R * reps);
    double embedded = 0;
    for (int i = 0; i < n; i++) {
      double e = mr_test_nrmse_scaled(img + (size_t)i * px, ref, px);
      embedded = e > embedded ? e : embedded;
    }
    free(img);
    print_message("  %d  %.2f  %6d  %.4f                     %.4f\n", R, noise, R * reps, worst,
                  embedded);
    /* The embedded frames have 32 more measured lines (their ACS lines
     * join the image): with them left out both are the same to 2%. */
    assert_true(worst <= (noise > 0 ? 1.4 : 1.1) * embedded);
  }
  free(ref);
}

/* ---- calibration modes on synthetic data ----------------------------- */

enum { NX = 96, NY = 96, NC = 8, NACS = 24, R = 3 };

/* Line y of a k-space, times gain. */
typedef struct line_src {
  const mr_cfloat *kspace;
  int y;
  float gain;
} line_src;

static float complex line_value(int c, int s, void *arg) {
  const line_src *l = arg;
  return l->gain * l->kspace[((size_t)c * NY + l->y) * NX + s];
}

static const char *chain_kspace =
    "[{\"gadget\":\"accumulate\"},{\"gadget\":\"grappa\"}]";

/* A harness running chain_kspace under a header with calibration mode
 * `mode`, and the phantom's k-space (the caller frees it). */
static mr_cfloat *open_synthetic(mr_harness *h, const char *mode) {
  mr_cfloat *truth = malloc(sizeof *truth * NC * NY * NX);
  assert_int_equal(mr_harness_open(h, chain_kspace, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_accelerated_header(NX, NY, R, mode)), 0);
  assert_int_equal(grappa_phantom_kspace(h->device, NX, NY, NC, 0.0, 1, truth), 0);
  return truth;
}

/* Line y of k times gain as repetition rep of slice `slice`. */
static int try_slice_line(mr_harness *h, const mr_cfloat *k, float gain, int y, int rep,
                          int slice, uint64_t flags) {
  line_src l = {k, y, gain};
  mr_message *m = mr_harness_acquisition(NX, NC, y, 0, flags, line_value, &l);
  m->u.acq.head.idx.repetition = (uint16_t)rep;
  m->u.acq.head.idx.slice = (uint16_t)slice;
  return mr_harness_push(h, m);
}

static int try_line(mr_harness *h, const mr_cfloat *k, int y, int rep, uint64_t flags) {
  return try_slice_line(h, k, 1.0f, y, rep, 0, flags);
}

static void push_line(mr_harness *h, const mr_cfloat *k, int y, int rep, uint64_t flags) {
  if (try_line(h, k, y, rep, flags) != 0)
    fail_msg("push: %s", h->err.msg);
}

/* The accelerated lines of repetition rep from line phase (no ACS), the
 * last one flagged; the first push error. */
static int try_frame(mr_harness *h, const mr_cfloat *k, int rep, int phase) {
  int rc = 0;
  for (int y = phase; y < NY && rc == 0; y += R)
    rc = try_line(h, k, y, rep, y + R >= NY ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0);
  return rc;
}

static void push_frame(mr_harness *h, const mr_cfloat *k, int rep, int phase) {
  if (try_frame(h, k, rep, phase) != 0)
    fail_msg("push: %s", h->err.msg);
}

/* The lines of an embedded-calibration scan of slice `slice` (k times
 * gain) from line first on: every R-th, and NACS ACS lines around the
 * centre; the first push error. */
static int try_embedded(mr_harness *h, const mr_cfloat *k, float gain, int first, int slice) {
  int a0 = grappa_phantom_acs_start(NY, NACS), rc = 0;
  for (int y = first; y < NY && rc == 0; y++) {
    int acs = y >= a0 && y < a0 + NACS, imaging = y % R == 0;
    if (!acs && !imaging)
      continue;
    uint64_t f = acs ? MR_FLAG(imaging ? ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING
                                       : ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)
                     : 0;
    if (y == NY - 1 - (NY - 1) % R)
      f |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
    rc = try_slice_line(h, k, gain, y, 0, slice, f);
  }
  return rc;
}

static void push_embedded(mr_harness *h, const mr_cfloat *k, int first) {
  if (try_embedded(h, k, 1.0f, first, 0) != 0)
    fail_msg("push: %s", h->err.msg);
}

static void push_accelerated(mr_harness *h, const mr_cfloat *k, int rep) {
  push_frame(h, k, rep, 0);
}

static double kspace_error(const mr_harness *h, int index, const mr_cfloat *truth) {
  assert_true(index < h->nout);
  assert_int_equal(h->out[index]->kind, MR_MSG_KSPACE);
  const mr_kspace *k = h->out[index]->u.object.ptr;
  assert_int_equal(k->nch, NC);
  for (size_t y = 0; y < k->ne1; y++)
    assert_true(k->sampled[y]);
  return mr_test_rel_error_c(k->data, truth, (size_t)NC * NY * NX);
}

static void separate_reference_and_reuse(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "separate");
  /* the reference scan: ACS lines alone, its own buffer */
  int a0 = grappa_phantom_acs_start(NY, NACS);
  for (int y = a0; y < a0 + NACS; y++)
    push_line(&h, truth, y, 0,
              MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION) |
                  (y == a0 + NACS - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
  assert_int_equal(h.nout, 0); /* calibrated on, not passed on */
  push_accelerated(&h, truth, 0);
  push_accelerated(&h, truth, 1); /* reuses the weights */
  assert_int_equal(h.nout, 2);
  for (int i = 0; i < 2; i++) {
    double e = kspace_error(&h, i, truth);
    print_message("separate reference scan, repetition %d: k-space rel error %.4f\n", i, e);
    assert_true(e < 0.08);
  }
  mr_harness_close(&h);
  free(truth);
}

static void embedded_acs_lines_join(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "embedded");
  int a0 = grappa_phantom_acs_start(NY, NACS);
  push_embedded(&h, truth, 0);
  assert_int_equal(h.nout, 1);
  const mr_kspace *k = h.out[0]->u.object.ptr;
  /* calibration-only lines are measured data: kept exactly */
  size_t y = (size_t)a0 + 1;
  assert_true(y % R != 0);
  assert_memory_equal(k->data + y * NX, truth + y * NX, NX * sizeof *truth);
  double e = kspace_error(&h, 0, truth);
  print_message("embedded ACS: k-space rel error %.4f\n", e);
  assert_true(e < 0.08);
  mr_harness_close(&h);
  free(truth);
}

/* Partial Fourier: the lines the scan left out (more than R - 1 lines
 * from the acquired ones) stay unsampled after the filling, for a
 * partial_fourier gadget after grappa. */
static void partial_fourier_lines_stay_missing(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "embedded");
  int first = 30;
  push_embedded(&h, truth, first);
  assert_int_equal(h.nout, 1);
  const mr_kspace *k = h.out[0]->u.object.ptr;
  for (int y = 0; y < NY; y++)
    assert_int_equal(k->sampled[y], y >= first - (R - 1));
  mr_harness_close(&h);
  free(truth);
}

/* The reference scans of a slice are counted: images after a new one carry
 * a new calibration generation (coil_combine then remakes its maps). */
static void new_reference_scan_new_generation(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "separate");
  int a0 = grappa_phantom_acs_start(NY, NACS);
  for (int scan = 0; scan < 2; scan++) {
    for (int y = a0; y < a0 + NACS; y++)
      push_line(&h, truth, y, 2 * scan,
                MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION) |
                    (y == a0 + NACS - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0));
    push_accelerated(&h, truth, 2 * scan + 1);
  }
  assert_int_equal(h.nout, 2);
  for (int i = 0; i < 2; i++)
    assert_int_equal(((const mr_kspace *)h.out[i]->u.object.ptr)->calib_generation, i + 1);
  mr_harness_close(&h);
  free(truth);
}

/* Interleaved frames: the first R - 1 wait for the union of R, then come
 * out in their order with its weights; every later frame recalibrates on
 * the union of the last R (a new calibration generation). */
static void interleaved_frames_wait_then_roll(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "interleaved");
  push_frame(&h, truth, 0, 0);
  push_frame(&h, truth, 1, 1);
  assert_int_equal(h.nout, 0);
  push_frame(&h, truth, 2, 2);
  assert_int_equal(h.nout, 3);
  push_frame(&h, truth, 3, 0);
  assert_int_equal(h.nout, 4);
  assert_int_equal(mr_harness_flush(&h), 0);
  for (int i = 0; i < 4; i++) {
    const mr_kspace *k = h.out[i]->u.object.ptr;
    assert_int_equal(k->ref.idx.repetition, i);
    assert_int_equal(k->calib_generation, i < 3 ? 1 : 2);
    double e = kspace_error(&h, i, truth);
    print_message("interleaved, frame %d: k-space rel error %.4f\n", i, e);
    assert_true(e < 0.08);
  }
  mr_harness_close(&h);
  free(truth);
}

/* Frames that never make a union to calibrate on are refused: R frames at
 * the same positions at once, a stream that ends with frames waiting at
 * its end. */
static void interleaved_frames_that_do_not_cover(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "interleaved");
  push_frame(&h, truth, 0, 1);
  push_frame(&h, truth, 1, 1);
  assert_int_equal(try_frame(&h, truth, 2, 1), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "sampled at the same positions"));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
  free(truth);

  truth = open_synthetic(&h, "interleaved");
  push_frame(&h, truth, 0, 0);
  assert_int_equal(mr_harness_flush(&h), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "ended after 1 interleaved frame"));
  mr_harness_close(&h);
  free(truth);
}

/* Interleaved calibration keeps a frame per slice for the session: it
 * counts against the memory budget, and a refusal names it. */
static void interleaved_frames_count_against_budget(void **state) {
  (void)state;
  mr_harness h;
  mr_cfloat *truth = open_synthetic(&h, "interleaved");
  /* the k-space buffer fits, the frames do not */
  uint64_t kspace = (uint64_t)NX * NY * NC * sizeof(mr_cfloat) + NY;
  mr_budget_set(mr_budget_used() + kspace + kspace / 2);
  assert_int_equal(try_frame(&h, truth, 0, 0), MR_ELIMIT);
  assert_non_null(strstr(h.err.msg, "interleaved calibration frames"));
  mr_harness_close(&h);
  mr_budget_set(0);
  free(truth);
}

static void clear_errors(void **state) {
  (void)state;
  mr_cfloat *truth = malloc(sizeof *truth * NC * NY * NX);
  mr_harness h;
  /* no calibration lines and no fully sampled centre */
  assert_int_equal(mr_harness_open(&h, chain_kspace, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_accelerated_header(NX, NY, R, "embedded")), 0);
  assert_int_equal(grappa_phantom_kspace(h.device, NX, NY, NC, 0.0, 1, truth), 0);
  for (int y = 0; y < NY; y += R)
    if (y + R < NY)
      push_line(&h, truth, y, 0, 0);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(NX, NC, NY - 1 - (NY - 1) % R, 0,
                                                              MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE),
                                                              NULL, NULL)),
                   MR_EDATA);
  assert_non_null(strstr(h.err.msg, "calibration lines"));
  mr_harness_close(&h);
  /* too few ACS lines for the kernel */
  assert_int_equal(mr_harness_open(&h, chain_kspace, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_accelerated_header(NX, NY, R, "separate")), 0);
  for (int y = 40; y < 45; y++)
    push_line(&h, truth, y, 0, MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION));
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(
                                           NX, NC, 45, 0,
                                           MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION) |
                                               MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE),
                                           NULL, NULL)),
                   MR_EDATA);
  assert_non_null(strstr(h.err.msg, "needs 10"));
  mr_harness_close(&h);
  free(truth);
}

/* Slices at once (the CPU's workers): buffers with their own calibration
 * lines, pushed through a pipelined chain whose grappa runs `slices` of
 * them at once. Slice i carries the phantom times gain[i] (0: no signal,
 * which its calibration refuses). */
enum { SLICES = 6 };

/* Runs SLICES embedded-calibration slices of the phantom (into truth)
 * through grappa with `slices` at once; returns the first failure of the
 * pushes and the flush, outputs in h. */
static int run_slices(mr_harness *h, int slices, mr_cfloat *truth, const float *gain) {
  char chain[160];
  snprintf(chain, sizeof chain, "[{\"gadget\":\"accumulate\"},{\"gadget\":\"grappa\","
           "\"slices\":%d}]", slices);
  assert_int_equal(mr_harness_open(h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  assert_int_equal(mr_harness_set_pipelined(h, 2), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_accelerated_header(NX, NY, R, "embedded")),
                   0);
  assert_int_equal(grappa_phantom_kspace(h->device, NX, NY, NC, 0.0, 1, truth), 0);
  int rc = 0;
  for (int sl = 0; sl < SLICES && rc == 0; sl++)
    rc = try_embedded(h, truth, gain[sl], 0, sl);
  int flushed = mr_harness_flush(h);
  return rc < 0 ? rc : flushed;
}

/* The same slices, in the same order, bit for bit. */
static void assert_same_slices(const mr_harness *one, const mr_harness *many) {
  assert_int_equal(one->nout, SLICES);
  assert_int_equal(many->nout, SLICES);
  for (int i = 0; i < SLICES; i++) {
    const mr_kspace *a = one->out[i]->u.object.ptr, *b = many->out[i]->u.object.ptr;
    assert_int_equal(b->ref.idx.slice, i); /* in the order they came */
    assert_int_equal(b->calib_generation, a->calib_generation);
    assert_memory_equal(b->sampled, a->sampled, NY);
    assert_memory_equal(b->data, a->data, sizeof *b->data * NC * NY * NX);
  }
}

/* Four at once give what one at a time gives; their four plans count
 * against the memory budget (until the session ends); when they do not
 * fit, the slices come one at a time, the same. */
static void slices_at_once_match_one_at_a_time(void **state) {
  (void)state;
  mr_cfloat *truth = malloc(sizeof *truth * NC * NY * NX);
  float gain[SLICES];
  for (int i = 0; i < SLICES; i++)
    gain[i] = 1.0f + 0.25f * (float)i;
  mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, R);
  uint64_t plans = 4 * mr_grappa_host_bytes(&o, NY);
  mr_harness one, many, tight;
  assert_int_equal(run_slices(&one, 1, truth, gain), 0);
  uint64_t before = mr_budget_used();
  assert_int_equal(run_slices(&many, 4, truth, gain), 0);
  assert_true(mr_budget_used() - before >= plans);
  assert_same_slices(&one, &many);
  double e = kspace_error(&many, 0, truth); /* gain 1 */
  print_message("slices at once, slice 0: k-space rel error %.4f\n", e);
  assert_true(e < 0.08);
  mr_harness_close(&many);
  assert_int_equal(mr_budget_used(), before);

  mr_budget_set(before + plans / 2); /* the k-spaces fit, four plans do not */
  assert_int_equal(run_slices(&tight, 4, truth, gain), 0);
  assert_true(mr_budget_used() - before < plans / 2);
  assert_same_slices(&one, &tight);
  mr_harness_close(&tight);
  mr_budget_set(0);
  mr_harness_close(&one);
  free(truth);
}

/* A slice whose calibration fails among slices at once: the slices before
 * it come out, none after it, and its failure is the session's, as one
 * at a time. */
static void slices_at_once_fail_in_order(void **state) {
  (void)state;
  mr_cfloat *truth = malloc(sizeof *truth * NC * NY * NX);
  float gain[SLICES];
  for (int i = 0; i < SLICES; i++)
    gain[i] = i == 3 ? 0.0f : 1.0f;
  for (int slices = 1; slices <= 4; slices += 3) {
    mr_harness h;
    assert_int_equal(run_slices(&h, slices, truth, gain), MR_ENUMERIC);
    assert_non_null(strstr(h.err.msg, "carry no signal"));
    assert_int_equal(h.nout, 3);
    for (int i = 0; i < 3; i++)
      assert_int_equal(((const mr_kspace *)h.out[i]->u.object.ptr)->ref.idx.slice, i);
    mr_harness_close(&h);
  }
  free(truth);
}

/* The installed config, pipelined as a server runs it, on the generator's
 * repetitions (each with its own ACS lines, so each is calibrated): the
 * images with four slices at once are those of one at a time, bit for
 * bit, in order. */
static void config_slices_at_once_same_images(void **state) {
  (void)state;
  if (!have_generator())
    skip();
  const char *dir = mr_test_tmpdir("grappa");
  char path[512];
  snprintf(path, sizeof path, "%s/slices.h5", dir);
  generate_frames(path, 8, 4, 24, 2, 0.02, 1); /* 2 x R = 8 images */
  int n[2];
  size_t px[2];
  float *img[2];
  for (int i = 0; i < 2; i++) {
    char *chain = mr_test_config_chain("grappa", "grappa", i == 0 ? "{\"slices\": 1}"
                                                                  : "{\"slices\": 4}");
    img[i] = mr_test_reconstruct_pipelined(path, chain, "none", 2, &n[i], &px[i]);
    free(chain);
  }
  assert_int_equal(n[0], 8);
  assert_int_equal(n[1], n[0]);
  assert_int_equal(px[1], px[0]);
  assert_memory_equal(img[1], img[0], (size_t)n[0] * px[0] * sizeof *img[0]);
  free(img[0]);
  free(img[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(noiseless_matches_fully_sampled),
      cmocka_unit_test(noise_grid),
      cmocka_unit_test(interleaved_matches_embedded),
      cmocka_unit_test(separate_reference_and_reuse),
      cmocka_unit_test(embedded_acs_lines_join),
      cmocka_unit_test(clear_errors),
      cmocka_unit_test(new_reference_scan_new_generation),
      cmocka_unit_test(partial_fourier_lines_stay_missing),
      cmocka_unit_test(interleaved_frames_count_against_budget),
      cmocka_unit_test(interleaved_frames_wait_then_roll),
      cmocka_unit_test(interleaved_frames_that_do_not_cover),
      cmocka_unit_test(slices_at_once_match_one_at_a_time),
      cmocka_unit_test(slices_at_once_fail_in_order),
      cmocka_unit_test(config_slices_at_once_same_images),
  };
  return cmocka_run_group_tests_name("gadgets_grappa", tests, NULL, NULL);
}
