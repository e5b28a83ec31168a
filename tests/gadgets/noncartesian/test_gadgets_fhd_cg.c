/* fhd_cg: non-Cartesian k-space buffers (data from exact forward sums of a
 * smooth multi-coil object) to images, 2D and 3D, per coil and through
 * estimated maps; the operator kept for a repeated trajectory and rebuilt
 * for a new one; unsampled lines ignored; maps reused between refreshes
 * ("maps_every"); trajectories of +-1e30 and Cartesian buffers refused. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fhd.h"
#include "gadget_harness.h"
#include "image_array.h"
#include "iterative_support.h"
#include "kspace.h"
#include "pool.h"
#include "test_err.h"
#include "test_support.h"

typedef struct scan {
  int rank;
  size_t n[3], nvox, coils;
  int spokes, samples;
  float complex *truth; /* [coils][nvox]: S_c rho */
  float *rss;           /* [nvox]: |rho| sqrt(sum_c |S_c|^2) */
} scan;

/* Gaussian blobs (band-limited to far below Nyquist) under smooth complex
 * coil sensitivities. */
static scan make_scan(int rank, size_t nx, size_t ny, size_t nz, size_t coils, int spokes,
                      int samples) {
  scan s = {.rank = rank, .n = {nx, ny, nz}, .nvox = nx * ny * nz, .coils = coils,
            .spokes = spokes, .samples = samples};
  s.truth = malloc(coils * s.nvox * sizeof *s.truth);
  s.rss = malloc(s.nvox * sizeof *s.rss);
  const double blobs[3][5] = {{0, 0, 0, 1.0, 3.0}, {3, -2, 1, 0.7, 1.6}, {-3, 2, -1, -0.4, 1.8}};
  for (size_t i = 0; i < s.nvox; i++) {
    double x[3] = {(double)(i % nx) - nx / 2, (double)(i / nx % ny) - ny / 2,
                   (double)(i / nx / ny) - nz / 2};
    double rho = 0;
    for (int b = 0; b < 3; b++) {
      double r2 = 0;
      for (int d = 0; d < rank; d++)
        r2 += pow(x[d] - blobs[b][d], 2);
      rho += blobs[b][3] * exp(-r2 / (2 * blobs[b][4] * blobs[b][4]));
    }
    double ss = 0;
    for (size_t c = 0; c < coils; c++) {
      double a = 2 * M_PI * c / coils;
      double complex sens = (1 + 0.3 * cos(a) * x[0] / nx + 0.3 * sin(a) * x[1] / ny) *
                            cexp(I * (a + 0.05 * x[0]));
      s.truth[c * s.nvox + i] = (float complex)(sens * rho);
      ss += pow(cabs(sens), 2);
    }
    s.rss[i] = (float)(fabs(rho) * sqrt(ss));
  }
  return s;
}

static void free_scan(scan *s) {
  free(s->truth);
  free(s->rss);
}

/* The scan's k-space along radial spokes (a line per spoke), exactly.
 * Lines listed in `skip` are marked unsampled and filled with garbage. */
static mr_kspace *acquire(const scan *s, mr_device *cpu, const int *skip, int nskip) {
  size_t m = (size_t)s->spokes * s->samples;
  float *k = malloc(m * s->rank * sizeof *k);
  iter_radial(s->rank, s->spokes, s->samples, k);
  mr_fhd_opts o = {.rank = s->rank, .grid = {s->n[0], s->n[1], s->n[2]}, .batch = s->coils,
                   .precision = MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  assert_int_equal(mr_fhd_plan_create(cpu, &o, &plan, TERR), 0);
  assert_int_equal(mr_fhd_set_points(plan, m, k, TERR), 0);
  mr_kspace *ks = mr_kspace_new(s->samples, s->spokes, 1, s->coils, s->rank, NULL);
  assert_int_equal(mr_fhd_forward(plan, s->truth, ks->data, TERR), 0);
  mr_fhd_plan_destroy(plan);
  memcpy(ks->traj, k, m * s->rank * sizeof *k);
  memset(ks->sampled, 1, s->spokes);
  for (int i = 0; i < nskip; i++) {
    ks->sampled[skip[i]] = 0;
    for (int r = 0; r < s->samples; r++) {
      for (int d = 0; d < s->rank; d++)
        ks->traj[((size_t)skip[i] * s->samples + r) * s->rank + d] = 0.1f * (float)d;
      for (size_t c = 0; c < s->coils; c++)
        ks->data[(c * s->spokes + skip[i]) * s->samples + r] = 1e3f;
    }
  }
  ks->recon.matrix.x = (uint16_t)s->n[0];
  ks->recon.matrix.y = (uint16_t)s->n[1];
  ks->recon.matrix.z = (uint16_t)s->n[2];
  free(k);
  return ks;
}

static const char *chain(const char *extra) {
  static char json[512];
  snprintf(json, sizeof json,
           "[{\"gadget\":\"fhd_cg\",\"device\":\"cpu\",\"iterations\":60,\"tolerance\":1e-6%s}]",
           extra);
  return json;
}

/* A harness around fhd_cg with the parameters chain() gives, configured. */
static void open_chain(mr_harness *h, const char *extra) {
  assert_int_equal(mr_harness_open(h, chain(extra), MR_KIND_BIT(MR_MSG_KSPACE)), 0);
  assert_int_equal(mr_harness_configure(h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
}

/* Runs one buffer through fhd_cg and returns the output image array. */
static const mr_image_array *run(mr_harness *h, mr_kspace *ks) {
  int before = h->nout;
  assert_int_equal(mr_harness_push(h, mr_kspace_message(ks)), 0);
  assert_int_equal(h->nout, before + 1);
  assert_int_equal(h->out[before]->kind, MR_MSG_IMAGE_ARRAY);
  return h->out[before]->u.object.ptr;
}

static void check_coils(const scan *s, const mr_image_array *a, double tol) {
  assert_int_equal(a->nx, s->n[0]);
  assert_int_equal(a->ny, s->n[1]);
  assert_int_equal(a->nz, s->n[2]);
  assert_int_equal(a->nch, s->coils);
  double err = mr_test_rel_error_c(a->data, s->truth, s->coils * s->nvox);
  print_message("%dD %zux%zux%zu, %zu coils: coil images rel error %.2e\n", s->rank, s->n[0],
                s->n[1], s->n[2], s->coils, err);
  assert_true(err < tol);
}

static mr_pool *pool;
static mr_device *cpu;

static int setup(void **state) {
  (void)state;
  mr_err e = {0};
  if (mr_pool_create(&(mr_pool_opts){.gpus = "none", .cpu_threads = 2}, &pool, &e) < 0 ||
      mr_pool_acquire(pool, "cpu", &cpu, &e) < 0)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mr_pool_release(pool, cpu);
  mr_pool_destroy(pool);
  return 0;
}

static void test_2d_per_coil(void **state) {
  (void)state;
  scan s = make_scan(2, 24, 20, 1, 2, 48, 48);
  mr_harness h;
  open_chain(&h, "");
  check_coils(&s, run(&h, acquire(&s, cpu, NULL, 0)), 1e-2);
  mr_harness_close(&h);
  free_scan(&s);
}

/* The NUFFT's F^H D and Q (each within 1e-6 of the direct sums) give the
 * direct sums' image to within what the solve's conditioning makes of
 * that: regularized, since without it 3D radial leaves the cube's corners
 * unsampled and the solve amplifies any difference there. */
static void test_nufft_matches_direct(void **state) {
  (void)state;
  for (int rank = 2; rank <= 3; rank++) {
    scan s = rank == 2 ? make_scan(2, 24, 20, 1, 2, 48, 48) : make_scan(3, 12, 12, 10, 2, 260, 24);
    const mr_image_array *img[2];
    mr_harness h[2];
    for (int i = 0; i < 2; i++) {
      open_chain(&h[i], i ? ",\"lambda\":0.1,\"regularizer\":\"differences\",\"fhd\":\"nufft\""
                          : ",\"lambda\":0.1,\"regularizer\":\"differences\"");
      img[i] = run(&h[i], acquire(&s, cpu, NULL, 0));
    }
    double err = mr_test_rel_error_c(img[1]->data, img[0]->data, s.coils * s.nvox);
    print_message("%dD: NUFFT (1e-6) against direct sums: %.2e\n", rank, err);
    assert_true(err < 5e-4);
    for (int i = 0; i < 2; i++)
      mr_harness_close(&h[i]);
    free_scan(&s);
  }
}

static void test_3d_per_coil(void **state) {
  (void)state;
  scan s = make_scan(3, 12, 12, 10, 2, 260, 24);
  mr_harness h;
  open_chain(&h, "");
  check_coils(&s, run(&h, acquire(&s, cpu, NULL, 0)), 3e-2);
  mr_harness_close(&h);
  free_scan(&s);
}

/* The same trajectory twice gives the same image (the kept operator); a
 * new trajectory (fewer spokes) its own, with the marked-unsampled lines'
 * garbage left out. */
static void test_operator_kept_and_rebuilt(void **state) {
  (void)state;
  scan s = make_scan(2, 24, 20, 1, 2, 48, 48);
  mr_harness h;
  open_chain(&h, "");
  const mr_image_array *a = run(&h, acquire(&s, cpu, NULL, 0));
  const mr_image_array *b = run(&h, acquire(&s, cpu, NULL, 0));
  assert_memory_equal(a->data, b->data, s.coils * s.nvox * sizeof *a->data);
  const int skip[] = {3, 10, 11, 30};
  const mr_image_array *c = run(&h, acquire(&s, cpu, skip, 4));
  double err = mr_test_rel_error_c(c->data, s.truth, s.coils * s.nvox);
  print_message("4 of 48 spokes skipped: rel error %.2e\n", err);
  assert_true(err < 3e-2);
  assert_true(mr_test_rel_error_c(c->data, a->data, s.coils * s.nvox) > 1e-6);
  mr_harness_close(&h);
  free_scan(&s);
}

/* A stream's next frame: the same shape, a new trajectory (the spokes
 * turned by 0.1 rad). The gadget keeps its operators and only gives them
 * the new Q (and maps): its image of the second frame is, bit for bit,
 * what a gadget that sees only that frame makes, per coil and through
 * maps, by direct sums and by the NUFFT. */
static void test_new_trajectory_same_shape(void **state) {
  (void)state;
  scan s = make_scan(2, 20, 20, 1, 3, 30, 40);
  const char *extras[] = {"", ",\"fhd\":\"nufft\"",
                          ",\"sensitivities\":\"estimate\",\"fhd\":\"nufft\"",
                          ",\"sensitivities\":\"estimate\",\"lambda\":0.01"};
  for (size_t e = 0; e < sizeof extras / sizeof *extras; e++) {
    mr_kspace *second[2];
    for (int g = 0; g < 2; g++) {
      second[g] = acquire(&s, cpu, NULL, 0);
      size_t m = (size_t)s.spokes * s.samples;
      for (size_t j = 0; j < m; j++) {
        float *k = second[g]->traj + j * 2, x = k[0], y = k[1];
        k[0] = cosf(0.1f) * x - sinf(0.1f) * y;
        k[1] = sinf(0.1f) * x + cosf(0.1f) * y;
      }
    }
    mr_harness kept, fresh;
    open_chain(&kept, extras[e]);
    open_chain(&fresh, extras[e]);
    run(&kept, acquire(&s, cpu, NULL, 0));
    const mr_image_array *a = run(&kept, second[0]);
    const mr_image_array *b = run(&fresh, second[1]);
    assert_int_equal(a->nch, b->nch);
    assert_memory_equal(a->data, b->data, a->nch * s.nvox * sizeof *a->data);
    mr_harness_close(&kept);
    mr_harness_close(&fresh);
  }
  free_scan(&s);
}

/* Estimated maps: one image, the coils' root sum of squares up to a smooth
 * factor; compared after least-squares scaling. */
static void test_estimated_maps(void **state) {
  (void)state;
  scan s = make_scan(2, 24, 24, 1, 4, 48, 48);
  mr_harness h;
  open_chain(&h, ",\"sensitivities\":\"estimate\",\"lambda\":0.001,"
                 "\"regularizer\":\"differences\"");
  const mr_image_array *a = run(&h, acquire(&s, cpu, NULL, 0));
  assert_int_equal(a->nch, 1);
  float *mag = malloc(s.nvox * sizeof *mag);
  for (size_t i = 0; i < s.nvox; i++)
    mag[i] = cabsf(a->data[i]);
  double err = mr_test_nrmse_scaled(mag, s.rss, s.nvox);
  print_message("estimated maps: NRMSE %.2e against the coils' RSS\n", err);
  assert_true(err < 5e-2);
  free(mag);
  mr_harness_close(&h);
  free_scan(&s);
}

/* Magnitude image of a against the scan's RSS (least-squares scaled). */
static double rss_error(const scan *s, const mr_image_array *a) {
  float *mag = malloc(s->nvox * sizeof *mag);
  for (size_t i = 0; i < s->nvox; i++)
    mag[i] = cabsf(a->data[i]);
  double err = mr_test_nrmse_scaled(mag, s->rss, s->nvox);
  free(mag);
  return err;
}

/* "gpus": the SENSE solve of a 3D scan split across 3 (fake) GPUs gives
 * one GPU's image to float rounding, and holds a place on each GPU. Only
 * the order of the coils' float sums differs, a difference CG grows as it
 * converges (2e-7 after 2 iterations, 1e-6 after 4, 2e-5 after 6 on this
 * small, quickly solved scan): 4 iterations. */
static void test_split_across_gpus(void **state) {
  (void)state;
  scan s = make_scan(3, 10, 10, 8, 5, 60, 16);
  mr_cfloat *one = malloc(s.nvox * sizeof *one);
  for (int gpus = 1; gpus <= 3; gpus += 2) {
    char json[512];
    snprintf(json, sizeof json,
             "[{\"gadget\":\"fhd_cg\",\"iterations\":4,\"tolerance\":0,"
             "\"sensitivities\":\"estimate\",\"lambda\":0.1,\"gpus\":%d}]",
             gpus);
    mr_harness h;
    assert_int_equal(mr_harness_open_pool(&h, json, MR_KIND_BIT(MR_MSG_KSPACE),
                                          &(mr_pool_opts){.fake_gpus = 3}),
                     0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(10, 10, 8, 10, 10, 8)),
                     0);
    const mr_image_array *a = run(&h, acquire(&s, cpu, NULL, 0));
    assert_int_equal(a->nch, 1);
    mr_device_info info;
    for (int i = 0; i < 3; i++) { /* the session's GPU 0, and the split's others */
      assert_int_equal(mr_pool_gpu_info(h.pool, i, &info), 0);
      assert_int_equal(info.load, i == 0 || gpus == 3);
    }
    if (gpus == 1) {
      memcpy(one, a->data, s.nvox * sizeof *one);
    } else {
      double err = mr_test_rel_error_c(a->data, one, s.nvox);
      print_message("3D SENSE on 3 GPUs against 1: rel difference %.2e\n", err);
      assert_true(err < 1e-5);
      assert_true(rss_error(&s, a) < 0.1);
    }
    mr_harness_close(&h);
  }
  free(one);
  free_scan(&s);
}

/* "maps_every": 2 estimates maps from buffers 1 and 3 and reuses them for
 * buffer 2. Buffer 2's coils are swapped (coil 0 and 1 trade places), so
 * buffer 1's maps do not fit it: its image is off, while a gadget that
 * estimates every time gets it right, and buffer 3 (swapped too, new maps)
 * is right again. */
static void test_maps_every(void **state) {
  (void)state;
  scan s = make_scan(2, 24, 24, 1, 4, 48, 48);
  scan swapped = make_scan(2, 24, 24, 1, 4, 48, 48);
  memcpy(swapped.truth, s.truth + s.nvox, s.nvox * sizeof *s.truth);
  memcpy(swapped.truth + s.nvox, s.truth, s.nvox * sizeof *s.truth);
  const char *sense = ",\"sensitivities\":\"estimate\",\"lambda\":0.001,"
                      "\"regularizer\":\"differences\",\"maps_every\":%d";
  char extra[256];
  double err[2][3];
  for (int every = 1; every <= 2; every++) {
    mr_harness h;
    snprintf(extra, sizeof extra, sense, every);
    open_chain(&h, extra);
    err[every - 1][0] = rss_error(&s, run(&h, acquire(&s, cpu, NULL, 0)));
    err[every - 1][1] = rss_error(&s, run(&h, acquire(&swapped, cpu, NULL, 0)));
    err[every - 1][2] = rss_error(&s, run(&h, acquire(&swapped, cpu, NULL, 0)));
    print_message("maps_every %d: NRMSE %.3f, %.3f (coils swapped), %.3f\n", every,
                  err[every - 1][0], err[every - 1][1], err[every - 1][2]);
    mr_harness_close(&h);
  }
  for (int i = 0; i < 3; i++)
    assert_true(err[0][i] < 5e-2);
  assert_true(err[1][0] < 5e-2 && err[1][2] < 5e-2);
  assert_true(err[1][1] > 3 * err[0][1]);
  free_scan(&s);
  free_scan(&swapped);
}

/* Issue 12 item 9: positions of +-1e30 are refused with the value named,
 * and no image goes out. */
static void test_absurd_trajectory(void **state) {
  (void)state;
  scan s = make_scan(2, 16, 16, 1, 2, 24, 32);
  const float bad[] = {1e30f, -1e30f, INFINITY};
  for (int b = 0; b < 3; b++) {
    mr_harness h;
    open_chain(&h, "");
    mr_kspace *k = acquire(&s, cpu, NULL, 0);
    k->traj[(5 * 32 + 7) * 2] = bad[b];
    assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), MR_EDATA);
    print_message("%s\n", h.err.msg);
    assert_non_null(strstr(h.err.msg, "line 5"));
    assert_non_null(strstr(h.err.msg, "sample 7"));
    assert_non_null(strstr(h.err.msg, "outside"));
    assert_int_equal(h.nout, 0);
    mr_harness_close(&h);
  }
  free_scan(&s);
}

static void test_cartesian_refused(void **state) {
  (void)state;
  mr_harness h;
  open_chain(&h, "");
  mr_kspace *k = mr_kspace_new(8, 8, 1, 1, 0, NULL);
  assert_int_equal(mr_harness_push(&h, mr_kspace_message(k)), MR_EDATA);
  assert_non_null(strstr(h.err.msg, "Cartesian"));
  mr_harness_close(&h);
}

/* The chain's cancel (a client that left, the server's drain deadline)
 * reaches the solve: raised 300 ms into a solve of 8 coils' 10,000
 * iterations (without the check the push returned 3.7 s after the flag on
 * an idle 2-core machine, 9.6 s on a loaded one), it ends the push with
 * MR_ECANCELED within about an iteration (42 to 180 ms there), and nothing
 * comes out. The bound is loose for loaded or sanitized runs. */
typedef struct raiser {
  atomic_int flag;
  double raised_ms;
} raiser;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *raise_later(void *arg) {
  raiser *r = arg;
  nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
  r->raised_ms = now_ms();
  atomic_store(&r->flag, 1);
  return NULL;
}

static void test_a_cancel_ends_the_solve(void **state) {
  (void)state;
  scan s = make_scan(2, 64, 64, 1, 8, 24, 64);
  mr_harness h;
  assert_int_equal(mr_harness_open(&h,
                                   "[{\"gadget\":\"fhd_cg\",\"device\":\"cpu\","
                                   "\"iterations\":10000,\"tolerance\":0,\"lambda\":0.01}]",
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(64, 64, 1, 64, 64, 1)),
                   0);
  raiser r = {0};
  atomic_init(&r.flag, 0);
  mr_harness_set_cancel(&h, &r.flag);
  mr_kspace *ks = acquire(&s, cpu, NULL, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, raise_later, &r), 0);
  int rc = mr_harness_push(&h, mr_kspace_message(ks));
  double returned_ms = now_ms();
  pthread_join(t, NULL);
  print_message("cancelled: push returned %.1f ms after the flag\n", returned_ms - r.raised_ms);
  assert_int_equal(rc, MR_ECANCELED);
  assert_int_equal(h.nout, 0);
  assert_true(returned_ms - r.raised_ms < 2000);
  mr_harness_close(&h);
  free_scan(&s);
}

static void test_bad_parameters(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, chain(",\"lambda\":-1"), MR_KIND_BIT(MR_MSG_KSPACE)),
                   MR_ECONFIG);
  mr_harness_close(&h);
  assert_int_equal(mr_harness_open(&h, chain(",\"regularizer\":\"l1\""),
                                   MR_KIND_BIT(MR_MSG_KSPACE)),
                   MR_ECONFIG);
  mr_harness_close(&h);
  /* a sparse prior needs the SENSE solve and a lambda */
  const char *sparse[] = {",\"regularizer\":\"tv\",\"lambda\":0.005",
                          ",\"regularizer\":\"wavelet\",\"sensitivities\":\"estimate\""};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(mr_harness_open(&h, chain(sparse[i]), MR_KIND_BIT(MR_MSG_KSPACE)), 0);
    assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)),
                     MR_ECONFIG);
    mr_harness_close(&h);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_2d_per_coil),
      cmocka_unit_test(test_3d_per_coil),
      cmocka_unit_test(test_nufft_matches_direct),
      cmocka_unit_test(test_operator_kept_and_rebuilt),
      cmocka_unit_test(test_new_trajectory_same_shape),
      cmocka_unit_test(test_estimated_maps),
      cmocka_unit_test(test_maps_every),
      cmocka_unit_test(test_split_across_gpus),
      cmocka_unit_test(test_absurd_trajectory),
      cmocka_unit_test(test_cartesian_refused),
      cmocka_unit_test(test_bad_parameters),
      cmocka_unit_test(test_a_cancel_ends_the_solve),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
