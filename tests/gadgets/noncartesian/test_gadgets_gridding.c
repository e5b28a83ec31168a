/* gridding: a simulated radial dataset through accumulate and gridding
 * against `bart nufft -a` with the same density weights (NRMSE <= 1e-3),
 * trajectory-carried weights in 3D against the exact adjoint DFT, spiral
 * data with Pipe-Menon weights against the phantom, a kept plan given new
 * positions frame after frame against fresh plans, trajectories outside the
 * encoded k-space (+-1e30) refused, and the other refusals. With --cuda
 * (exit 77 without a GPU): the GPU's frames against the CPU's, coil images
 * brought back, cropped on the device, and handed on the device to
 * coil_combine. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataset.h"
#include "density.h"
#include "gadget_harness.h"
#include "image_array.h"
#include "kspace.h"
#include "nufft_support.h"
#include "phantom_support.h"
#include "simulate.h"
#include "test_err.h"
#include "test_support.h"

/* Simulates a dataset into the test's directory; returns its path. */
static const char *simulate(mr_sim_options *o, const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", mr_test_tmpdir("mr-gridding"), name);
  o->path = path;
  mr_err err = {0};
  if (mr_simulate(o, &err) != 0)
    fail_msg("simulate: %s", err.msg);
  return path;
}

/* Runs a dataset through `gadgets` (JSON array); returns the harness,
 * whose outputs the caller reads and closes. */
static void run_file(mr_harness *h, const char *path, const char *gadgets) {
  mr_dataset *ds;
  mr_err err = {0};
  if (mr_dataset_open(path, "dataset", &ds, &err) != 0)
    fail_msg("%s", err.msg);
  assert_int_equal(mr_harness_open(h, gadgets, MR_KIND_BIT(MR_MSG_ACQUISITION)), 0);
  if (mr_harness_configure(h, mr_dataset_header(ds)) != 0)
    fail_msg("configure: %s", h->err.msg);
  for (;;) {
    mr_message *m;
    assert_int_equal(mr_dataset_next(ds, &m, &err), 0);
    if (m == NULL)
      break;
    if (mr_harness_push(h, m) != 0)
      fail_msg("push: %s", h->err.msg);
  }
  if (mr_harness_flush(h) != 0)
    fail_msg("flush: %s", h->err.msg);
  mr_dataset_close(ds);
}

/* ||s a - b|| / ||b|| with the complex least-squares s. */
static double nrmse_complex(const float complex *a, const float complex *b, size_t n) {
  double complex ab = 0;
  double aa = 0, bb = 0, rr = 0;
  for (size_t i = 0; i < n; i++) {
    ab += conj(a[i]) * b[i];
    aa += cabsf(a[i]) * (double)cabsf(a[i]);
    bb += cabsf(b[i]) * (double)cabsf(b[i]);
  }
  double complex s = ab / aa;
  for (size_t i = 0; i < n; i++)
    rr += cabs(s * a[i] - b[i]) * cabs(s * a[i] - b[i]);
  return sqrt(rr / bb);
}

/* BART's .hdr/.cfl pair (column-major complex float). */
static void write_cfl(const char *base, const long dims[4], const float complex *x) {
  char path[600];
  snprintf(path, sizeof path, "%s.hdr", base);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "# Dimensions\n%ld %ld %ld %ld\n", dims[0], dims[1], dims[2], dims[3]);
  fclose(f);
  snprintf(path, sizeof path, "%s.cfl", base);
  f = fopen(path, "wb");
  assert_non_null(f);
  size_t n = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]);
  assert_int_equal(fwrite(x, sizeof *x, n, f), n);
  fclose(f);
}

static float complex *read_cfl(const char *base, size_t n) {
  char path[600];
  snprintf(path, sizeof path, "%s.cfl", base);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  float complex *x = malloc(n * sizeof *x);
  assert_int_equal(fread(x, sizeof *x, n, f), n);
  fclose(f);
  return x;
}

static int run_tool(const char *const *argv) {
  pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void matches_bart(void **state) {
  (void)state;
  if (!mr_test_have_tool("bart")) {
    print_message("skipped: bart is not installed\n");
    skip();
  }
  enum { N = 64, COILS = 3, SPOKES = 101, SAMPLES = 2 * N };
  mr_sim_options o = {.trajectory = MR_SIM_RADIAL, .matrix = N, .coils = COILS, .spokes = SPOKES};
  const char *path = simulate(&o, "radial.h5");
  mr_harness h;
  run_file(&h, path, "[{\"gadget\":\"accumulate\"},"
                     "{\"gadget\":\"gridding\",\"density\":\"radial\",\"tolerance\":1e-5,"
                     "\"device\":\"cpu\"}]");
  assert_int_equal(h.nout, 1);
  const mr_image_array *a = h.out[0]->u.object.ptr;
  assert_int_equal(a->nx, N);
  assert_int_equal(a->nch, COILS);

  /* the same samples, weights and trajectory for BART (k in 1/FOV units) */
  mr_dataset *ds;
  mr_err err = {0};
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), 0);
  size_t m = (size_t)SPOKES * SAMPLES;
  float *k = malloc(m * 2 * sizeof *k), *w = malloc(m * sizeof *w);
  float complex *traj = malloc(m * 3 * sizeof *traj), *ksp = malloc(m * COILS * sizeof *ksp);
  mr_message *msg;
  for (size_t s = 0; mr_dataset_next(ds, &msg, &err) == 0 && msg != NULL; s++) {
    const mr_acquisition *acq = &msg->u.acq;
    for (size_t i = 0; i < SAMPLES; i++) {
      for (int d = 0; d < 2; d++)
        k[(s * SAMPLES + i) * 2 + d] = acq->traj[i * 2 + d];
      for (int c = 0; c < COILS; c++)
        ksp[c * m + s * SAMPLES + i] = acq->data[c * SAMPLES + i];
    }
    mr_message_unref(msg);
  }
  mr_dataset_close(ds);
  assert_int_equal(mr_density_radial(2, m, k, SPOKES, 1.0 / SAMPLES, w, TERR), 0);
  for (size_t j = 0; j < m; j++) {
    traj[j * 3] = k[j * 2] * N;
    traj[j * 3 + 1] = k[j * 2 + 1] * N;
    traj[j * 3 + 2] = 0;
    for (int c = 0; c < COILS; c++)
      ksp[c * m + j] *= w[j];
  }
  char tbase[512], kbase[512], ibase[512];
  const char *dir = mr_test_tmpdir("mr-gridding-bart");
  snprintf(tbase, sizeof tbase, "%s/traj", dir);
  snprintf(kbase, sizeof kbase, "%s/ksp", dir);
  snprintf(ibase, sizeof ibase, "%s/img", dir);
  write_cfl(tbase, (long[]){3, SAMPLES, SPOKES, 1}, traj);
  write_cfl(kbase, (long[]){1, SAMPLES, SPOKES, COILS}, ksp);
  /* -P: k-space periodic, as in the DFT and ours; without it BART drops
   * the part of a footprint that wraps past |k| = 0.5, which the density
   * weights make visible (6e-3 from the exact sum here). */
  const char *nufft[] = {"bart", "nufft", "-a", "-P", "-d", "64:64:1", tbase, kbase, ibase, NULL};
  assert_int_equal(run_tool(nufft), 0);
  float complex *bart = read_cfl(ibase, (size_t)N * N * COILS);
  double worst = 0;
  for (int c = 0; c < COILS; c++) {
    double e = nrmse_complex(a->data + (size_t)c * N * N, bart + (size_t)c * N * N, (size_t)N * N);
    worst = e > worst ? e : worst;
  }
  print_message("radial %dx%d, %d spokes, %d coils: NRMSE vs bart nufft -a -P %.2e\n", N, N,
                SPOKES, COILS, worst);
  assert_true(worst <= 1e-3);
  free(k);
  free(w);
  free(traj);
  free(ksp);
  free(bart);
  mr_harness_close(&h);
}

/* NRMSE of a combined image against the band-limited phantom. */
static double vs_band_limited(const mr_image_array *a, int n, int ncoils) {
  size_t npix = (size_t)n * n;
  float *want = malloc(npix * sizeof *want), *got = malloc(npix * sizeof *got);
  phantom_test_band_limited_rss(n, ncoils, want);
  for (size_t i = 0; i < npix; i++)
    got[i] = crealf(a->data[i]);
  double e = mr_test_nrmse_scaled(got, want, npix);
  free(want);
  free(got);
  return e;
}

static void spiral_pipe_menon(void **state) {
  (void)state;
  enum { N = 48, COILS = 4 };
  mr_sim_options o = {.trajectory = MR_SIM_SPIRAL, .matrix = N, .coils = COILS, .interleaves = 16};
  const char *path = simulate(&o, "spiral.h5");
  const char *chains[2] = {
      "[{\"gadget\":\"accumulate\"},{\"gadget\":\"gridding\",\"device\":\"cpu\"},"
      "{\"gadget\":\"coil_combine\",\"device\":\"cpu\"}]",
      "[{\"gadget\":\"accumulate\"},{\"gadget\":\"gridding\",\"density\":\"none\","
      "\"device\":\"cpu\"},{\"gadget\":\"coil_combine\",\"device\":\"cpu\"}]"};
  double e[2];
  for (int i = 0; i < 2; i++) {
    mr_harness h;
    run_file(&h, path, chains[i]);
    assert_int_equal(h.nout, 1);
    e[i] = vs_band_limited(h.out[0]->u.object.ptr, N, COILS);
    mr_harness_close(&h);
  }
  print_message("spiral %dx%d, 16 arms: NRMSE vs the band-limited phantom %.3f with Pipe-Menon "
                "weights, %.3f without\n", N, N, e[0], e[1]);
  assert_true(e[0] < 0.35 && e[1] > 2 * e[0]);
}

/* Weights carried in the trajectory's 4th component, 3D, against the
 * exact adjoint sum of the weighted samples; unsampled lines ignored. */
static void trajectory_weights_3d(void **state) {
  (void)state;
  enum { N = 10, NRO = 40, LINES = 30, COILS = 2 };
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"gridding\",\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(N, N, N, N, N, N)), 0);
  mr_kspace *k = mr_kspace_new(NRO, LINES + 2, 1, COILS, 4, NULL);
  k->encoded = k->recon = h.hdr.encoding[0].encoded;
  size_t m = (size_t)NRO * LINES;
  float *pos = malloc(m * 3 * sizeof *pos);
  float complex *smp = malloc(m * COILS * sizeof *smp);
  nufft_test_random_points(pos, m, 3, 4);
  for (size_t l = 0; l < LINES; l++) {
    k->sampled[l] = 1; /* lines LINES, LINES + 1 stay unsampled (zeros) */
    for (size_t i = 0; i < NRO; i++) {
      size_t j = l * NRO + i;
      float wt = 0.5f + (float)(j % 7) / 7.0f;
      for (int d = 0; d < 3; d++)
        k->traj[j * 4 + d] = pos[j * 3 + d];
      k->traj[j * 4 + 3] = wt;
      for (int c = 0; c < COILS; c++) {
        float complex v = sinf(0.1f * j + c) + I * cosf(0.3f * j - c);
        k->data[c * (size_t)NRO * (LINES + 2) + j] = v;
        smp[c * m + j] = v * wt;
      }
    }
  }
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), 0);
  assert_int_equal(h.nout, 1);
  const mr_image_array *a = h.out[0]->u.object.ptr;
  assert_int_equal(a->nz, N);
  size_t dims[3] = {N, N, N}, npix = (size_t)N * N * N;
  double complex *ref = malloc(npix * COILS * sizeof *ref);
  nufft_test_dft_adjoint(3, dims, COILS, m, pos, smp, ref);
  double e = nufft_test_rel_error(a->data, ref, npix * COILS);
  print_message("3D, trajectory weights: rel error vs the exact sum %.2e\n", e);
  assert_true(e <= 1e-4);
  free(pos);
  free(smp);
  free(ref);
  mr_harness_close(&h);
}

/* A k-space buffer of `lines` radial spokes of ns samples through the
 * centre of an 8 x 8 encoding, spoke l at angle l * 111.25 degrees plus
 * `turn`, with smooth data. */
static mr_kspace *spokes(const mr_harness *h, size_t ns, size_t lines, double turn) {
  mr_kspace *k = mr_kspace_new(ns, lines, 1, 2, 2, NULL);
  k->encoded = k->recon = h->hdr.encoding[0].encoded;
  for (size_t l = 0; l < lines; l++) {
    k->sampled[l] = 1;
    double t = turn + l * M_PI * (sqrt(5) - 1) / 2;
    for (size_t i = 0; i < ns; i++) {
      double r = ((double)i - ns / 2) / ns;
      k->traj[(l * ns + i) * 2] = (float)(r * cos(t));
      k->traj[(l * ns + i) * 2 + 1] = (float)(r * sin(t));
      for (size_t c = 0; c < 2; c++)
        k->data[c * ns * lines + l * ns + i] = (float)exp(-40 * r * r) * (1.0f + I * (float)c);
    }
  }
  return k;
}

static const char *const radial_chain =
    "[{\"gadget\":\"gridding\",\"density\":\"radial\",\"device\":\"cpu\"}]";

/* Grids each buffer through a fresh gadget; images[i] get copies. */
static void grid_fresh(mr_kspace *const *bufs, int n, float complex **images, size_t npix) {
  for (int i = 0; i < n; i++) {
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, radial_chain, MR_KIND_BIT(MR_MSG_KSPACE)), 0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
    assert_int_equal(mr_harness_push(&h, mr_kspace_message(bufs[i])), 0);
    assert_int_equal(h.nout, 1);
    const mr_image_array *a = h.out[0]->u.object.ptr;
    images[i] = malloc(npix * sizeof **images);
    memcpy(images[i], a->data, npix * sizeof **images);
    mr_harness_close(&h);
  }
}

/* One gadget fed frames with new positions (a kept plan given new points),
 * the same positions again (points kept) and more samples (arrays grown)
 * makes the images fresh gadgets make. */
static void kept_plan_new_points(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, radial_chain, MR_KIND_BIT(MR_MSG_KSPACE)), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  enum { FRAMES = 4 };
  const double turns[FRAMES] = {0, 0.3, 0.3, 1.1};
  const size_t lines[FRAMES] = {6, 6, 6, 9};
  mr_kspace *fresh[FRAMES];
  for (int f = 0; f < FRAMES; f++) {
    fresh[f] = spokes(&h, 16, lines[f], turns[f]);
    assert_int_equal(mr_harness_push(&h, mr_kspace_message(spokes(&h, 16, lines[f], turns[f]))),
                     0);
  }
  assert_int_equal(h.nout, FRAMES);
  float complex *want[FRAMES];
  size_t npix = 8 * 8 * 2;
  grid_fresh(fresh, FRAMES, want, npix);
  for (int f = 0; f < FRAMES; f++) {
    const mr_image_array *a = h.out[f]->u.object.ptr;
    double e = mr_test_rel_error_c(a->data, want[f], npix);
    print_message("frame %d: kept plan vs a fresh one: rel difference %.2e\n", f, e);
    assert_true(e <= 1e-6);
    free(want[f]);
  }
  /* and the frames differ (new points were used) */
  assert_true(mr_test_rel_error_c(((const mr_image_array *)h.out[0]->u.object.ptr)->data,
                                   ((const mr_image_array *)h.out[1]->u.object.ptr)->data,
                                   npix) > 1e-3);
  mr_harness_close(&h);
}

/* Issue 12 item 9: positions of +-1e30 (finite, absurd) are refused with
 * the value named, and no image (of NaN) goes out; so is a NaN. */
static void absurd_trajectory(void **state) {
  (void)state;
  const float bad[] = {1e30f, -1e30f, NAN, 0.76f};
  for (int b = 0; b < 4; b++) {
    mr_harness h;
    assert_int_equal(mr_harness_open(&h, radial_chain, MR_KIND_BIT(MR_MSG_KSPACE)), 0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)),
                     0);
    mr_kspace *k = spokes(&h, 16, 6, 0);
    k->traj[(2 * 16 + 5) * 2 + 1] = bad[b];
    assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), MR_EDATA);
    print_message("%s\n", h.err.msg);
    assert_non_null(strstr(h.err.msg, "line 2"));
    assert_non_null(strstr(h.err.msg, "sample 5"));
    assert_non_null(strstr(h.err.msg, "outside"));
    assert_int_equal(h.nout, 0);
    mr_harness_close(&h);
  }
  /* the edge itself, and a little past it, are fine */
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, radial_chain, MR_KIND_BIT(MR_MSG_KSPACE)), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_kspace *k = spokes(&h, 16, 6, 0);
  k->traj[(2 * 16 + 5) * 2 + 1] = 0.5f;
  k->traj[(3 * 16 + 5) * 2] = -0.74f;
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), 0);
  assert_int_equal(h.nout, 1);
  mr_harness_close(&h);
}

static void refusals(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"gridding\",\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_kspace *cart = mr_kspace_new(8, 8, 1, 1, 0, NULL);
  cart->encoded = h.hdr.encoding[0].encoded;
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(cart)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "use fft"));
  mr_harness_close(&h);

  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"gridding\",\"density\":\"trajectory\","
                                       "\"device\":\"cpu\"}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  mr_kspace *two = mr_kspace_new(8, 2, 1, 1, 2, NULL);
  two->encoded = h.hdr.encoding[0].encoded;
  two->sampled[0] = 1;
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(two)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "no weights"));
  mr_harness_close(&h);

  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"gridding\",\"upsampling\":1.1}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_not_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  assert_non_null(strstr(h.err.msg, "upsampling"));
  mr_harness_close(&h);
}

/* FRAMES radial frames with new positions through `chain` on a pool of
 * `gpus` ("none": the CPU), the recon matrix cropped to recon x recon;
 * the images of every output (host copies, back to back) into *out. */
static size_t run_frames(const char *gpus, const char *chain, uint16_t recon,
                         float complex **out) {
  enum { FRAMES = 3 };
  mr_harness h;
  assert_int_equal(mr_harness_open_gpus(&h, chain, MR_KIND_BIT(MR_MSG_KSPACE), gpus), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  for (int f = 0; f < FRAMES; f++) {
    mr_kspace *k = spokes(&h, 16, 6 + (size_t)f, 0.4 * f);
    k->recon.matrix.x = k->recon.matrix.y = recon;
    if (mr_harness_push(&h, mr_kspace_message(k)) != 0)
      fail_msg("push: %s", h.err.msg);
  }
  assert_int_equal(h.nout, FRAMES);
  size_t total = 0, at = 0;
  for (int i = 0; i < (int)h.nout; i++) {
    const mr_image_array *a = h.out[i]->u.object.ptr;
    total += mr_image_array_channel_size(a) * a->nch;
  }
  *out = malloc(total * sizeof **out);
  for (int i = 0; i < (int)h.nout; i++) {
    mr_image_array *a = h.out[i]->u.object.ptr;
    assert_int_equal(a->nx, (size_t)recon);
    mr_err e = {0};
    const float complex *px = mr_image_array_host(a, &e);
    if (px == NULL)
      fail_msg("host copy: %s", e.msg);
    size_t n = mr_image_array_channel_size(a) * a->nch;
    memcpy(*out + at, px, n * sizeof *px);
    at += n;
  }
  mr_harness_close(&h);
  return total;
}

/* The GPU path (device buffers, device crop, device hand-off) makes the
 * CPU's images to the NUFFT's tolerance. */
static void gpu_matches_cpu(void **state) {
  (void)state;
  static const char *const chains[] = {
      "[{\"gadget\":\"gridding\",\"density\":\"radial\",\"upsampling\":2}]",
      "[{\"gadget\":\"gridding\",\"density\":\"radial\",\"upsampling\":2},"
      "{\"gadget\":\"coil_combine\",\"method\":\"rss\"}]"};
  for (int c = 0; c < 2; c++)
    for (uint16_t recon = 6; recon <= 8; recon += 2) {
      float complex *cpu, *gpu;
      size_t n = run_frames("none", chains[c], recon, &cpu);
      assert_int_equal(run_frames("all", chains[c], recon, &gpu), n);
      double e = mr_test_rel_error_c(gpu, cpu, n);
      print_message("%s, recon %u: GPU vs CPU rel difference %.2e\n",
                    c == 0 ? "coil images" : "rss", recon, e);
      assert_true(e <= 1e-4);
      free(cpu);
      free(gpu);
    }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
    if (!mr_harness_have_gpu()) {
      fprintf(stderr, "skipped: no usable GPU\n");
      return 77;
    }
    const struct CMUnitTest gpu_tests[] = {cmocka_unit_test(gpu_matches_cpu)};
    return cmocka_run_group_tests_name("gadgets_gridding_cuda", gpu_tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matches_bart),
      cmocka_unit_test(spiral_pipe_menon),
      cmocka_unit_test(trajectory_weights_3d),
      cmocka_unit_test(kept_plan_new_points),
      cmocka_unit_test(absurd_trajectory),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
