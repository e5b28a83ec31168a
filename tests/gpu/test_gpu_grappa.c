/* grappa.h: calibration against the seed's Alg. 4.3 written out in double
 * precision, on random and on realistic (ill-conditioned) ACS data, exact
 * filling of data a kernel predicts exactly, option checks; with --cuda,
 * the GPU (direct, fused, hybrid) against the CPU by the seed's error
 * measure (eq. 5.1), and one tile step of the GPU's factorisation (factor,
 * inverse, the rows below) against its defining identities. */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grappa.h"
#include "grappa_impl.h"
#include "grappa_phantom.h"
#include "test_gpu_common.h"
#include "test_support.h"

/* ---- the reference ------------------------------------------------------ */

/* x = (m + lambda I)^-1 b, m n x n Hermitian (lower read), b n x nrhs. */
static void solve_double(double complex *m, int n, double lambda, double complex *b, int nrhs) {
  for (int j = 0; j < n; j++) {
    double d = creal(m[(size_t)j * n + j]) + lambda;
    for (int k = 0; k < j; k++)
      d -= creal(m[(size_t)k * n + j] * conj(m[(size_t)k * n + j]));
    d = sqrt(d);
    m[(size_t)j * n + j] = d;
    for (int i = j + 1; i < n; i++) {
      double complex v = m[(size_t)j * n + i];
      for (int k = 0; k < j; k++)
        v -= m[(size_t)k * n + i] * conj(m[(size_t)k * n + j]);
      m[(size_t)j * n + i] = v / d;
    }
  }
  for (int r = 0; r < nrhs; r++) {
    double complex *x = b + (size_t)r * n;
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < i; k++)
        x[i] -= m[(size_t)k * n + i] * x[k];
      x[i] /= m[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
      for (int k = i + 1; k < n; k++)
        x[i] -= conj(m[(size_t)i * n + k]) * x[k];
      x[i] /= m[(size_t)i * n + i];
    }
  }
}

/* Alg. 4.3 as the seed states it, per segment, into x (the weights). */
static void reference(const mr_grappa_opts *o, const mr_cfloat *acs, size_t cs, mr_cfloat *x) {
  int R = o->accel, nc = o->nc, kpe = o->kpe, kro = o->kro;
  int n_src = kpe * kro * nc, n_tgt = (R - 1) * nc, npe = o->nacs - (kpe - 1) * R;
  int dpe = R * (kpe / 2 - 1), dro = (kro - 1) / 2, nsh_ro = o->nro - kro + 1;
  for (int s = 0; s < o->segments; s++) {
    int c0 = s * nsh_ro / o->segments, c1 = (s + 1) * nsh_ro / o->segments, n = c1 - c0;
    int eqs = npe * n;
    double complex *a = calloc((size_t)n_src * eqs, sizeof *a);
    double complex *b = calloc((size_t)n_tgt * eqs, sizeof *b);
    double *pcol = calloc(eqs, sizeof *pcol), *row = calloc(npe, sizeof *row);
    for (int i = 0; i < npe; i++)
      for (int c = 0; c < n; c++) {
        int q = i * n + c;
        double pa = 0, pb = 0;
        for (int k = 0; k < nc; k++) {
          for (int p = 0; p < kpe; p++)
            for (int j = 0; j < kro; j++) {
              double complex v = acs[k * cs + (size_t)(i + p * R) * o->nro + c0 + c + j];
              a[(size_t)q * n_src + (k * kpe + p) * kro + j] = v;
              pa += creal(v * conj(v));
            }
          for (int m = 1; m < R; m++) {
            double complex v = acs[k * cs + (size_t)(i + dpe + m) * o->nro + c0 + c + dro];
            b[(size_t)q * n_tgt + k * (R - 1) + m - 1] = v;
            pb += creal(v * conj(v));
          }
        }
        pcol[q] = pa * n_tgt + pb * n_src;
        row[i] += pcol[q];
      }
    for (int q = 0; q < eqs; q++) {
      double psi = pow(row[q / n], -0.5 * o->eta);
      for (int r = 0; r < n_src; r++)
        a[(size_t)q * n_src + r] *= psi;
      for (int r = 0; r < n_tgt; r++)
        b[(size_t)q * n_tgt + r] *= psi;
    }
    /* power clipping: the largest powers first, the earlier equation first */
    int drop = (int)(o->kappa * (double)eqs);
    for (int d = 0; d < drop; d++) {
      int best = -1;
      for (int q = 0; q < eqs; q++)
        if (pcol[q] >= 0 && (best < 0 || pcol[q] > pcol[best]))
          best = q;
      pcol[best] = -1;
      memset(a + (size_t)best * n_src, 0, n_src * sizeof *a);
      memset(b + (size_t)best * n_tgt, 0, n_tgt * sizeof *b);
    }
    double complex *m = calloc((size_t)n_src * n_src, sizeof *m);
    double complex *u = calloc((size_t)n_src * n_tgt, sizeof *u);
    double trace = 0;
    for (int q = 0; q < eqs; q++) {
      const double complex *ac = a + (size_t)q * n_src, *bc = b + (size_t)q * n_tgt;
      for (int j = 0; j < n_src; j++) {
        for (int i = 0; i < n_src; i++)
          m[(size_t)j * n_src + i] += ac[i] * conj(ac[j]);
        trace += creal(ac[j] * conj(ac[j]));
      }
      for (int t = 0; t < n_tgt; t++)
        for (int i = 0; i < n_src; i++)
          u[(size_t)t * n_src + i] += ac[i] * conj(bc[t]);
    }
    solve_double(m, n_src, o->chi * trace / n_src, u, n_tgt);
    for (size_t i = 0; i < (size_t)n_src * n_tgt; i++)
      x[(size_t)s * n_src * n_tgt + i] = (float complex)u[i];
    free(a);
    free(b);
    free(pcol);
    free(row);
    free(m);
    free(u);
  }
}

static mr_cfloat *calibrate(mr_device *dev, const mr_grappa_opts *o, const mr_cfloat *acs,
                            size_t cs) {
  mr_grappa_plan *plan = NULL;
  GPU_OK(mr_grappa_plan_create(dev, o, &plan, TERR));
  mr_cfloat *w = malloc(mr_grappa_weights_count(o) * sizeof *w);
  GPU_OK(mr_grappa_calibrate_host(plan, acs, cs, w, TERR));
  mr_grappa_plan_destroy(plan);
  return w;
}

/* ---- CPU group ---------------------------------------------------------- */

/* The CPU calibration of acs (coil stride cs) against Alg. 4.3 in double
 * precision, within the seed's 1e-4 by eq. 5.1. */
static void check_against_reference(const mr_grappa_opts *o, const mr_cfloat *acs, size_t cs,
                                    const char *what) {
  size_t nw = mr_grappa_weights_count(o);
  mr_cfloat *want = malloc(nw * sizeof *want);
  reference(o, acs, cs, want);
  mr_cfloat *got = calibrate(gpu_test_cpu(), o, acs, cs);
  double err = grappa_rel_error_51(got, want, nw);
  print_message("CPU against the double-precision Alg. 4.3%s: eq. 5.1 error %.2e\n", what, err);
  assert_true(err < 1e-4);
  free(got);
  free(want);
}

static void matches_reference(void **state) {
  (void)state;
  mr_grappa_opts o = mr_grappa_opts_default(3, 40, 14, 3);
  o.kro = 3;
  o.segments = 3;
  o.kappa = 0.05f;
  o.eta = 1.0f;
  o.chi = 1e-3f;
  size_t cs = (size_t)o.nacs * o.nro;
  mr_cfloat *acs = malloc(cs * o.nc * sizeof *acs);
  gpu_test_random(acs, cs * o.nc, 21);
  check_against_reference(&o, acs, cs, "");
  free(acs);
}

/* The CPU sums the normal equations over (PE row, 16-position block)
 * pairs in chunks of about 16 MB (grappa_cpu.c): at 2 coils and R 2 a
 * chunk holds 1,899 pairs, and each of these two segments has 40 rows x
 * 51 blocks (798 positions and the taps' reach, 4 more), so each is summed
 * in two chunks, the second partial; the last block is partial too, and
 * power clipping takes equations out of both. */
static void matches_reference_in_chunks(void **state) {
  (void)state;
  mr_grappa_opts o = mr_grappa_opts_default(2, 1600, 46, 2);
  o.segments = 2;
  o.kappa = 0.05f;
  size_t cs = (size_t)o.nacs * o.nro;
  mr_cfloat *acs = malloc(cs * o.nc * sizeof *acs);
  gpu_test_random(acs, cs * o.nc, 5);
  check_against_reference(&o, acs, cs, ", two chunks a segment");
  free(acs);
}

/* Realistic ACS data (a phantom through smooth coil sensitivities, 2%
 * noise) make the normal equations ill-conditioned at chi = 1e-4: a
 * single-precision solve is off by 4e-3 here (2e-2 at 32 coils), the
 * double-precision calibration must stay within the seed's 1e-4. */
static void matches_reference_on_phantom(void **state) {
  (void)state;
  enum { NC = 16, NX = 96, NY = 40, NACS = 24, R = 4 };
  mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, R);
  size_t cs = (size_t)NY * NX;
  mr_cfloat *k = malloc(cs * NC * sizeof *k);
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), NX, NY, NC, 0.02, 3, k));
  check_against_reference(&o, k + (size_t)grappa_phantom_acs_start(NY, NACS) * NX, cs,
                          " on the phantom");
  free(k);
}

/* The CPU calibration cuts its work by the pool's thread count (the
 * lags' and right-hand sides' pieces, the tiles): on the 32-coil phantom
 * of `mr-bench grappa` (640 unknowns, 96 targets: right-hand-side pieces
 * of 96, 32, 20, 6 columns) pools of 1, 3, 5 and 16 threads give the same
 * weights to rounding (ZPOTRS on other column groups: 3e-11 measured). */
static void calibration_same_on_any_thread_count(void **state) {
  (void)state;
  enum { NC = 32, NX = 256, NY = 48, NACS = 24, R = 4 };
  static const int counts[] = {1, 3, 5, 16};
  mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, R);
  size_t cs = (size_t)NY * NX, nw = mr_grappa_weights_count(&o);
  mr_cfloat *k = malloc(cs * NC * sizeof *k), *first = NULL;
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), NX, NY, NC, 0.02, 9, k));
  const mr_cfloat *acs = k + (size_t)grappa_phantom_acs_start(NY, NACS) * NX;
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    mr_pool *pool;
    mr_device *cpu = gpu_test_cpu_pool(counts[i], &pool);
    mr_cfloat *w = calibrate(cpu, &o, acs, cs);
    gpu_test_cpu_pool_end(pool, cpu);
    if (first == NULL) {
      first = w;
      continue;
    }
    double err = grappa_rel_error_51(w, first, nw);
    print_message("%d threads against 1: eq. 5.1 error %.2e\n", counts[i], err);
    assert_true(err < 1e-8);
    free(w);
  }
  free(first);
  free(k);
}

/* Each coil sees the same nq plane waves (point sources) with its own
 * weights: a kernel predicts every line exactly, so GRAPPA must fill the
 * missing lines with the true values (away from the edges, where sources
 * fall outside the k-space). */
static void fills_predictable_data(void **state) {
  (void)state;
  enum { NC = 4, NX = 48, NY = 40, NACS = 20 };
  double freq[NC][2];
  double complex sens[NC][NC];
  mr_cfloat truth[NC * NY * NX];
  mr_cfloat data[NC * NY * NX];
  uint8_t sampled[NY];
  srand(5);
  for (int q = 0; q < NC; q++) {
    freq[q][0] = 2.5 * (rand() / (double)RAND_MAX - 0.5);
    freq[q][1] = 2.5 * (rand() / (double)RAND_MAX - 0.5);
    for (int c = 0; c < NC; c++)
      sens[c][q] = (rand() / (double)RAND_MAX - 0.5) + I * (rand() / (double)RAND_MAX - 0.5);
  }
  for (int c = 0; c < NC; c++)
    for (int y = 0; y < NY; y++)
      for (int x = 0; x < NX; x++) {
        double complex v = 0;
        for (int q = 0; q < NC; q++)
          v += sens[c][q] * cexp(I * (freq[q][0] * y + freq[q][1] * x));
        truth[(c * NY + y) * NX + x] = (float complex)v;
      }
  for (int accel = 2; accel <= 4; accel++)
    for (int variant = 0; variant < 2; variant++) {
      mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, accel);
      if (variant == 1) {
        o.segments = 2;
        o.kappa = 0.1f;
      }
      int a0 = grappa_phantom_acs_start(NY, NACS), phase = 1;
      grappa_phantom_pattern(NY, accel, phase, NACS, sampled);
      for (int c = 0; c < NC; c++)
        for (int y = 0; y < NY; y++)
          for (int x = 0; x < NX; x++)
            data[(c * NY + y) * NX + x] = sampled[y] ? truth[(c * NY + y) * NX + x] : 0;
      mr_grappa_plan *plan;
      GPU_OK(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR));
      mr_cfloat *w = malloc(mr_grappa_weights_count(&o) * sizeof *w);
      GPU_OK(mr_grappa_calibrate_host(plan, data + a0 * NX, (size_t)NY * NX, w, TERR));
      size_t filled = 0, missing = 0;
      GPU_OK(mr_grappa_apply_host(plan, w, sampled, NY, data, &filled, TERR));
      for (int y = 0; y < NY; y++)
        missing += !sampled[y];
      assert_int_equal(filled, missing);
      /* lines whose sources all lie inside, samples whose taps do */
      double err = 0, ref = 0;
      for (int y = 2 * accel; y < NY - 2 * accel; y++)
        for (int c = 0; c < NC; c++)
          for (int x = 2; x < NX - 2; x++) {
            if (sampled[y])
              continue;
            size_t i = (size_t)(c * NY + y) * NX + x;
            err += cabs(data[i] - truth[i]) * cabs(data[i] - truth[i]);
            ref += cabs(truth[i]) * cabs(truth[i]);
          }
      print_message("R %d %s: filled %zu lines, rel error %.2e\n", accel,
                    variant ? "2 segments, kappa 0.1" : "defaults", filled, sqrt(err / ref));
      assert_true(sqrt(err / ref) < 1e-3);
      free(w);
      mr_grappa_plan_destroy(plan);
    }
}

/* The fill by its definition, in double: each missing sample of a block's
 * line s + m is sum over sources of conj(W[src, target]) times the source
 * sample (zero outside k-space). */
static void fill_reference(const mr_grappa_opts *o, const mr_cfloat *w, const uint8_t *sampled,
                           int ny, const mr_cfloat *in, mr_cfloat *out) {
  int nc = o->nc, nx = o->nro, R = o->accel, kpe = o->kpe, kro = o->kro, dro = (kro - 1) / 2;
  int n_src = nc * kpe * kro, count[8] = {0}, phase = 0;
  for (int y = 0; y < ny; y++)
    count[y % R] += sampled[y];
  for (int r = 1; r < R; r++)
    if (count[r] > count[phase])
      phase = r; /* the pattern: the residue most sampled lines share */
  for (int s = phase - R; s < ny - 1; s += R)
    for (int m = 1; m < R; m++) {
      int y = s + m;
      if (y < 0 || y >= ny || sampled[y])
        continue;
      for (int c = 0; c < nc; c++)
        for (int x = 0; x < nx; x++) {
          double complex v = 0;
          int t = c * (R - 1) + m - 1;
          for (int k = 0; k < nc; k++)
            for (int pl = 0; pl < kpe; pl++)
              for (int j = 0; j < kro; j++) {
                int yy = s + (pl - kpe / 2 + 1) * R, xx = x + j - dro;
                if (yy < 0 || yy >= ny || xx < 0 || xx >= nx)
                  continue;
                v += conj((double complex)w[(size_t)t * n_src + (k * kpe + pl) * kro + j]) *
                     (double complex)in[((size_t)k * ny + yy) * nx + xx];
              }
          out[((size_t)c * ny + y) * nx + x] = (mr_cfloat)v;
        }
    }
}

/* The CPU fills a one-segment plan in hybrid space (a product per readout
 * frequency, grappa_cpu.c): against the definition, on a readout whose
 * padded length is not a power of two, for R 2..4 and two pattern phases
 * (blocks that start before the first line). */
static void cpu_fill_matches_definition(void **state) {
  (void)state;
  enum { NC = 6, NX = 61, NY = 44, NACS = 16 };
  size_t n = (size_t)NC * NY * NX;
  mr_cfloat *full = malloc(n * sizeof *full), *got = malloc(n * sizeof *got),
            *want = malloc(n * sizeof *want);
  uint8_t sampled[NY];
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), NX, NY, NC, 0.05, 3, full));
  for (int R = 2; R <= 4; R++)
    for (int phase = 0; phase < 2; phase++) {
      mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, R);
      grappa_phantom_pattern(NY, R, phase, NACS, sampled);
      for (size_t i = 0; i < n; i++)
        got[i] = sampled[(i / NX) % NY] ? full[i] : 0;
      memcpy(want, got, n * sizeof *want);
      mr_cfloat *w = calibrate(gpu_test_cpu(), &o, full + grappa_phantom_acs_start(NY, NACS) * NX,
                               (size_t)NY * NX);
      mr_grappa_plan *plan;
      size_t filled = 0;
      GPU_OK(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR));
      GPU_OK(mr_grappa_apply(plan, w, sampled, NY, got, &filled, TERR));
      fill_reference(&o, w, sampled, NY, want, want);
      double err = mr_test_rel_error_c(got, want, n);
      print_message("R %d phase %d: CPU fill against the definition rel error %.2e\n", R, phase,
                    err);
      assert_true(err < 1e-5);
      assert_true(filled > 0);
      mr_grappa_plan_destroy(plan);
      free(w);
    }
  free(full);
  free(got);
  free(want);
}

static void rejects_bad_options(void **state) {
  (void)state;
  mr_grappa_plan *plan = NULL;
  mr_grappa_opts o = mr_grappa_opts_default(4, 64, 12, 4); /* 4 x 5 at R 4 needs 13 lines */
  assert_int_equal(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_non_null(strstr(mr_test_last_error(), "13 consecutive ACS lines"));
  o = mr_grappa_opts_default(4, 64, 24, 1);
  assert_int_equal(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  o = mr_grappa_opts_default(4, 64, 24, 4);
  o.segments = 61; /* 60 readout positions */
  assert_int_equal(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  o = mr_grappa_opts_default(4, 64, 24, 4);
  o.kappa = 1.0f;
  assert_int_equal(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  o = mr_grappa_opts_default(4, 4, 24, 4);
  assert_int_equal(mr_grappa_plan_create(gpu_test_cpu(), &o, &plan, TERR), MR_EINVAL);
  assert_null(plan);
}

static void no_signal_is_numeric_failure(mr_device *dev, mr_grappa_method method) {
  mr_grappa_opts o = mr_grappa_opts_default(2, 32, 16, 2);
  o.method = method;
  mr_cfloat *acs = calloc((size_t)o.nc * o.nacs * o.nro, sizeof *acs);
  mr_cfloat *w = malloc(mr_grappa_weights_count(&o) * sizeof *w);
  mr_grappa_plan *plan;
  GPU_OK(mr_grappa_plan_create(dev, &o, &plan, TERR));
  assert_int_equal(mr_grappa_calibrate_host(plan, acs, (size_t)o.nacs * o.nro, w, TERR),
                   MR_ENUMERIC);
  mr_grappa_plan_destroy(plan);
  free(acs);
  free(w);
}

static void cpu_no_signal(void **state) {
  (void)state;
  no_signal_is_numeric_failure(gpu_test_cpu(), MR_GRAPPA_DIRECT);
}

static void tile_step_needs_gpu(void **state) {
  (void)state;
  enum { T = MR_GRAPPA_TILE };
  double *panel = calloc(2 * T * T, sizeof *panel), *inv = calloc(2 * T * T, sizeof *inv);
  assert_int_equal(mr_grappa_chol_tile(gpu_test_cpu(), T, panel, inv, NULL, NULL, NULL, TERR),
                   MR_EINVAL);
  assert_int_equal(mr_grappa_chol_tile(gpu_test_cpu(), T - 1, panel, inv, NULL, NULL, NULL, TERR),
                   MR_EINVAL);
  free(panel);
  free(inv);
}

/* ---- CUDA group ---------------------------------------------------------
 *
 * The CPU solves in double precision. The fused and hybrid GPU methods do
 * too and must match it to the seed's 1e-4 (eq. 5.1) on random ACS data
 * (the seed's test input, a well-conditioned system) and on realistic,
 * ill-conditioned data alike. The direct method is the plain single-
 * precision library chain: 1e-4 on random data, on realistic data only
 * what single precision gives there (2e-2 at 32 coils on the H100). */

/* Calibrates on both devices and compares by eq. 5.1. */
static double gpu_against_cpu(const mr_grappa_opts *o, const mr_cfloat *acs, size_t cs) {
  size_t nw = mr_grappa_weights_count(o);
  mr_cfloat *want = calibrate(gpu_test_cpu(), o, acs, cs);
  mr_cfloat *got = calibrate(gpu_test_gpu(), o, acs, cs);
  double err = grappa_rel_error_51(got, want, nw);
  free(want);
  free(got);
  return err;
}

typedef struct gpu_case {
  const char *what;
  int nc, nro, nacs, accel, kpe, kro, segments;
  float eta, chi, kappa;
  int phantom; /* 0: random ACS (the seed's test input), 1: the phantom */
} gpu_case;

static const gpu_case gpu_cases[] = {
    {"Table 5.1, random", 32, 512, 24, 4, 4, 5, 1, 1.0f, 1e-4f, 0.0f, 0},
    {"odd sizes: 5 coils, 2 x 3 kernel", 5, 77, 11, 3, 2, 3, 2, 1.0f, 1e-3f, 0.01f, 0},
    {"4 segments, kappa 0.02, random", 16, 256, 24, 3, 4, 5, 4, 0.5f, 1e-4f, 0.02f, 0},
    {"64 coils, random", 64, 512, 24, 4, 4, 5, 1, 1.0f, 1e-4f, 0.0f, 0},
    {"Table 5.1, phantom", 32, 512, 24, 4, 4, 5, 1, 1.0f, 1e-4f, 0.0f, 1},
    {"8 coils R 2, phantom", 8, 256, 32, 2, 4, 5, 1, 1.0f, 1e-4f, 0.0f, 1},
    {"4 segments, kappa 0.02, eta 0.5", 16, 256, 24, 3, 4, 5, 4, 0.5f, 1e-4f, 0.02f, 1},
};

static void gpu_matches_cpu(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof gpu_cases / sizeof *gpu_cases; t++) {
    const gpu_case *k = &gpu_cases[t];
    mr_grappa_opts o = mr_grappa_opts_default(k->nc, k->nro, k->nacs, k->accel);
    o.kpe = k->kpe;
    o.kro = k->kro;
    o.segments = k->segments;
    o.eta = k->eta;
    o.chi = k->chi;
    o.kappa = k->kappa;
    int ny = 2 * k->nacs + 8;
    size_t cs = (size_t)ny * k->nro;
    mr_cfloat *kspace = malloc(cs * k->nc * sizeof *kspace);
    if (k->phantom)
      GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), k->nro, ny, k->nc, 0.02, 3, kspace));
    else
      gpu_test_random(kspace, cs * k->nc, 17);
    const mr_cfloat *acs = kspace + (size_t)grappa_phantom_acs_start(ny, k->nacs) * k->nro;
    static const mr_grappa_method methods[] = {MR_GRAPPA_DIRECT, MR_GRAPPA_FUSED,
                                               MR_GRAPPA_HYBRID};
    static const char *names[] = {"library chain", "fused", "hybrid"};
    for (int m = 0; m < 3; m++) {
      o.method = methods[m];
      double err = gpu_against_cpu(&o, acs, cs);
      double bound = k->phantom && methods[m] == MR_GRAPPA_DIRECT ? 5e-2 : 1e-4;
      print_message("%-34s %-13s: eq. 5.1 error %.2e (bound %.1e)\n", k->what, names[m], err,
                    bound);
      if (!(err <= bound))
        fail_msg("%s (%s): GPU against CPU eq. 5.1 error %g > %g", k->what, names[m], err,
                 bound);
    }
    free(kspace);
  }
}

/* The GPU's fill (im2col, one GEMM, scatter) against the CPU's: in hybrid
 * space for one segment, im2col for two. */
static void gpu_fill_matches_cpu(void **state) {
  (void)state;
  enum { NC = 12, NX = 96, NY = 80, NACS = 24, R = 3 };
  size_t n = (size_t)NC * NY * NX;
  mr_cfloat *full = malloc(n * sizeof *full), *cpu = malloc(n * sizeof *cpu),
            *gpu = malloc(n * sizeof *gpu);
  uint8_t sampled[NY];
  GPU_OK(grappa_phantom_kspace(gpu_test_cpu(), NX, NY, NC, 0.01, 4, full));
  grappa_phantom_pattern(NY, R, 0, NACS, sampled);
  for (int segments = 1; segments <= 2; segments++) {
    mr_grappa_opts o = mr_grappa_opts_default(NC, NX, NACS, R);
    o.segments = segments;
    for (size_t i = 0; i < n; i++)
      cpu[i] = sampled[(i / NX) % NY] ? full[i] : 0;
    memcpy(gpu, cpu, n * sizeof *gpu);
    mr_cfloat *w = calibrate(gpu_test_cpu(), &o, full + grappa_phantom_acs_start(NY, NACS) * NX,
                             (size_t)NY * NX);
    size_t filled_cpu, filled_gpu;
    mr_grappa_plan *pc, *pg;
    GPU_OK(mr_grappa_plan_create(gpu_test_cpu(), &o, &pc, TERR));
    GPU_OK(mr_grappa_plan_create(gpu_test_gpu(), &o, &pg, TERR));
    GPU_OK(mr_grappa_apply_host(pc, w, sampled, NY, cpu, &filled_cpu, TERR));
    GPU_OK(mr_grappa_apply_host(pg, w, sampled, NY, gpu, &filled_gpu, TERR));
    assert_int_equal(filled_cpu, filled_gpu);
    double err = mr_test_rel_error_c(gpu, cpu, n);
    print_message("fill, %d segment(s): GPU against CPU rel error %.2e\n", segments, err);
    assert_true(err < 1e-5);
    mr_grappa_plan_destroy(pc);
    mr_grappa_plan_destroy(pg);
    free(w);
  }
  free(full);
  free(cpu);
  free(gpu);
}

/* Uniform in [-0.5, 0.5) (xorshift64). */
static double uniform(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* One tile step of the GPU factorisation: an ill-conditioned Hermitian
 * tile like M's (B B^H / T + 1e-6 I with B of rank 48: a condition number
 * near 1e6), NaN above its diagonal (never to be read), and 70 rows below
 * it. Checked in double on the host:
 * L L^H = A, L L^-1 = I with L^-1's upper triangle zero, and (the rows
 * below after) L^H = (the rows below before). Stamped (phase times asked
 * for: each phase's time is non-negative, and they sum to no more than the
 * kernel's) or not. */
static void tile_step(bool stamped) {
  enum { T = MR_GRAPPA_TILE, ROWS = T + 70 };
  double phase[MR_GRAPPA_TILE_PHASES], tile_ms = 0, sum = 0;
  double complex *b = malloc(T * T * sizeof *b), *a = malloc(ROWS * T * sizeof *a),
                 *got = malloc(ROWS * T * sizeof *got), *inv = malloc(T * T * sizeof *inv);
  uint64_t seed = 12345;
  for (int i = 0; i < T * T; i++) /* columns 48.. zero: rank 48 */
    b[i] = i < 48 * T ? uniform(&seed) + I * uniform(&seed) : 0;
  for (int c = 0; c < T; c++)
    for (int r = 0; r < ROWS; r++) {
      double complex v = 0;
      if (r >= T)
        v = uniform(&seed) + I * uniform(&seed);
      else if (r < c)
        v = NAN;
      else {
        for (int k = 0; k < T; k++)
          v += b[k * T + r] * conj(b[k * T + c]);
        v = v / T + (r == c ? 1e-6 : 0);
      }
      a[c * ROWS + r] = got[c * ROWS + r] = v;
    }
  GPU_OK(mr_grappa_chol_tile(gpu_test_gpu(), ROWS, (double *)got, (double *)inv, &tile_ms, NULL,
                             stamped ? phase : NULL, TERR));
  for (int i = 0; stamped && i < MR_GRAPPA_TILE_PHASES; i++) {
    assert_true(phase[i] >= 0);
    sum += phase[i];
  }
  if (stamped) {
    print_message("stamped: kernel %.1f us, phases %.1f us\n", tile_ms * 1e3, sum);
    assert_true(sum > 0 && sum <= tile_ms * 1e3 * 1.05);
  }
  double e_llh = 0, n_a = 0, e_inv = 0, e_below = 0, n_below = 0;
  for (int c = 0; c < T; c++) {
    assert_true(creal(got[c * ROWS + c]) > 0 && cimag(got[c * ROWS + c]) == 0);
    for (int r = 0; r < T; r++) {
      if (r < c)
        assert_true(inv[c * T + r] == 0);
      if (r >= c) { /* (L L^H)(r, c) against A */
        double complex s = 0;
        for (int k = 0; k <= c; k++)
          s += got[k * ROWS + r] * conj(got[k * ROWS + c]);
        e_llh = fmax(e_llh, cabs(s - a[c * ROWS + r]));
        n_a = fmax(n_a, cabs(a[c * ROWS + r]));
      }
      double complex s = 0; /* (L L^-1)(r, c) */
      for (int k = c; k <= r; k++)
        s += got[k * ROWS + r] * inv[c * T + k];
      e_inv = fmax(e_inv, cabs(s - (r == c ? 1.0 : 0.0)));
    }
    for (int r = T; r < ROWS; r++) { /* (X L^H)(r, c), X the rows below after */
      double complex s = 0;
      for (int k = 0; k <= c; k++)
        s += got[k * ROWS + r] * conj(got[k * ROWS + c]);
      e_below = fmax(e_below, cabs(s - a[c * ROWS + r]));
      n_below = fmax(n_below, cabs(a[c * ROWS + r]));
    }
  }
  print_message("tile step%s: |L L^H - A| %.1e of %.1e, |L L^-1 - I| %.1e, "
                "|X L^H - B| %.1e of %.1e\n",
                stamped ? " (stamped)" : "", e_llh, n_a, e_inv, e_below, n_below);
  assert_true(e_llh <= 1e-13 * n_a);
  assert_true(e_inv <= 1e-8);
  assert_true(e_below <= 1e-8 * n_below);
  /* a tile that is not positive definite */
  for (int c = 0; c < T; c++)
    for (int r = c; r < ROWS; r++)
      got[c * ROWS + r] = r == c ? -1.0 : 0.0;
  assert_int_equal(mr_grappa_chol_tile(gpu_test_gpu(), ROWS, (double *)got, (double *)inv, NULL,
                                       NULL, NULL, TERR),
                   MR_ENUMERIC);
  free(b);
  free(a);
  free(got);
  free(inv);
}

static void gpu_tile_step(void **state) {
  (void)state;
  tile_step(false);
  tile_step(true);
}

static void gpu_no_signal(void **state) {
  (void)state;
  no_signal_is_numeric_failure(gpu_test_gpu(), MR_GRAPPA_FUSED);
  no_signal_is_numeric_failure(gpu_test_gpu(), MR_GRAPPA_HYBRID);
  no_signal_is_numeric_failure(gpu_test_gpu(), MR_GRAPPA_DIRECT);
}

int main(int argc, char **argv) {
  int cuda = gpu_test_init(argc, argv);
  const struct CMUnitTest cpu_tests[] = {
      cmocka_unit_test(matches_reference),
      cmocka_unit_test(matches_reference_on_phantom),
      cmocka_unit_test(matches_reference_in_chunks),
      cmocka_unit_test(calibration_same_on_any_thread_count),
      cmocka_unit_test(fills_predictable_data),
      cmocka_unit_test(cpu_fill_matches_definition),
      cmocka_unit_test(rejects_bad_options),
      cmocka_unit_test(cpu_no_signal),
      cmocka_unit_test(tile_step_needs_gpu),
  };
  const struct CMUnitTest cuda_tests[] = {
      cmocka_unit_test(gpu_matches_cpu),
      cmocka_unit_test(gpu_fill_matches_cpu),
      cmocka_unit_test(gpu_no_signal),
      cmocka_unit_test(gpu_tile_step),
  };
  int failed = cuda ? cmocka_run_group_tests_name("grappa_cuda", cuda_tests, NULL, NULL)
                    : cmocka_run_group_tests_name("grappa_cpu", cpu_tests, NULL, NULL);
  gpu_test_fini();
  return failed;
}
