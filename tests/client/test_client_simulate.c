/* simulate and phantom: the closed-form k-space against a brute-force
 * Fourier sum over a finely sampled phantom (object and coils), and the
 * datasets `reconclient simulate` writes: header, readouts, trajectories
 * within [-0.5, 0.5), samples equal to the closed form, noise, the ground
 * truth array, real-time streams of frames (counters, flags, a trajectory
 * new in every frame, a moving object), EPI scans (navigators, reversed
 * echoes with the odd/even error, segments, ramps, reference lines),
 * refusals; the same file on one thread as on all. */
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

#include <ismrmrd/dataset.h>

#include "message.h"
#include "phantom.h"
#include "simulate.h"
#include "simulate_impl.h"
#include "stream_header.h"
#include "test_support.h"

/* integral of f(r) S_c(r) exp(-2 pi i k.r) dr by the midpoint rule on a
 * grid `fine` times finer than the pixels, for the object (out[0]) and
 * each coil (out[1 + c]) at each of nk positions: out[i][1 + ncoils]. */
static void brute_force(int rank, int n, int ncoils, const double (*k)[3], size_t nk, int fine,
                        double complex (*out)[4]) {
  int m = n * fine, mz = rank == 3 ? m : 1;
  double h = 1.0 / fine, cell = rank == 3 ? h * h * h : h * h;
  memset(out, 0, nk * sizeof *out);
  for (int z = 0; z < mz; z++)
    for (int y = 0; y < m; y++)
      for (int x = 0; x < m; x++) {
        double r[3] = {(x + 0.5) * h - n / 2.0, (y + 0.5) * h - n / 2.0,
                       rank == 3 ? (z + 0.5) * h - n / 2.0 : 0};
        double f = mr_phantom_value(rank, n, r);
        if (f == 0)
          continue;
        double complex coil[3];
        for (int c = 0; c < ncoils; c++)
          coil[c] = mr_phantom_coil(rank, n, c, ncoils, r);
        for (size_t i = 0; i < nk; i++) {
          double complex v =
              f * cell * cexp(-2 * M_PI * I * (k[i][0] * r[0] + k[i][1] * r[1] + k[i][2] * r[2]));
          out[i][0] += v;
          for (int c = 0; c < ncoils; c++)
            out[i][1 + c] += v * coil[c];
        }
      }
}

static void check_closed_form(int rank, int n, int fine, double tol) {
  enum { COILS = 3, NK = 4 };
  double ks[NK][3] = {{0, 0, 0}, {0.02, -0.01, 0.03}, {-0.05, 0.04, -0.02}, {0.1, 0.07, 0.05}};
  for (int i = 0; i < NK && rank == 2; i++)
    ks[i][2] = 0;
  double complex want[NK][4];
  brute_force(rank, n, COILS, (const double(*)[3])ks, NK, fine, want);
  double err = 0, norm = 0;
  for (int i = 0; i < NK; i++) {
    double complex got[1 + COILS];
    got[0] = mr_phantom_ft(rank, n, ks[i]);
    mr_phantom_kspace(rank, n, COILS, ks[i], got + 1);
    for (int c = 0; c < 1 + COILS; c++) {
      err += cabs(got[c] - want[i][c]) * cabs(got[c] - want[i][c]);
      norm += cabs(want[i][c]) * cabs(want[i][c]);
    }
  }
  print_message("%dD closed form vs Fourier sum: rel %.2e\n", rank, sqrt(err / norm));
  assert_true(sqrt(err / norm) < tol);
}

static void closed_form_2d(void **state) {
  (void)state;
  check_closed_form(2, 32, 16, 1e-3);
}

static void closed_form_3d(void **state) {
  (void)state;
  check_closed_form(3, 12, 6, 3e-3);
}

/* The phantom's values: 1 inside the skull (outer ellipse minus the next),
 * 0 far outside, and the ventricles darker. */
static void phantom_values(void **state) {
  (void)state;
  double outside[3] = {15.5, 15.5, 0}, centre[3] = {0, 0, 0}, rim[3] = {0, -14.5, 0};
  assert_true(mr_phantom_value(2, 32, outside) == 0);
  assert_float_equal(mr_phantom_value(2, 32, rim), 1.0, 1e-12);
  assert_float_equal(mr_phantom_value(2, 32, centre), 0.2, 1e-12);
  double c3[3] = {0, 0, 0};
  assert_float_equal(mr_phantom_value(3, 32, c3), 0.2, 1e-12);
  assert_float_equal(cabs(mr_phantom_coil(2, 32, 0, 4, centre)), 1.0, 1e-12);
}

typedef struct dataset {
  char *xml;
  uint32_t nacq;
  ISMRMRD_Acquisition *acq;
  ISMRMRD_NDArray phantom;
} dataset;

static void read_dataset(const char *path, dataset *ds) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, "dataset"), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  ds->xml = ismrmrd_read_header(&d);
  assert_non_null(ds->xml);
  ds->nacq = ismrmrd_get_number_of_acquisitions(&d);
  ds->acq = calloc(ds->nacq, sizeof *ds->acq);
  for (uint32_t i = 0; i < ds->nacq; i++) {
    ismrmrd_init_acquisition(&ds->acq[i]);
    assert_int_equal(ismrmrd_read_acquisition(&d, i, &ds->acq[i]), 0);
  }
  ismrmrd_init_ndarray(&ds->phantom);
  assert_int_equal(ismrmrd_get_number_of_arrays(&d, "phantom"), 1);
  assert_int_equal(ismrmrd_read_array(&d, "phantom", 0, &ds->phantom), 0);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
}

static void free_dataset(dataset *ds) {
  for (uint32_t i = 0; i < ds->nacq; i++)
    ismrmrd_cleanup_acquisition(&ds->acq[i]);
  free(ds->acq);
  free(ds->xml);
  ismrmrd_cleanup_ndarray(&ds->phantom);
}

static void simulate(mr_sim_options *o, const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", mr_test_tmpdir("mr-simulate"), name);
  o->path = path;
  mr_err err = {0};
  int rc = mr_simulate(o, &err);
  if (rc != 0)
    fail_msg("simulate: %s", err.msg);
}

/* Every readout's samples are the closed form at its trajectory (noise
 * off); returns the largest trajectory magnitude. */
static double check_samples(const dataset *ds, int rank, int n, int coils) {
  double kmax = 0;
  double complex *want = malloc(coils * sizeof *want);
  for (uint32_t r = 0; r < ds->nacq; r += 7) {
    const ISMRMRD_Acquisition *a = &ds->acq[r];
    int dims = a->head.trajectory_dimensions;
    for (int i = 0; i < a->head.number_of_samples; i += 5) {
      double k[3] = {0, 0, 0};
      for (int d = 0; d < dims; d++) {
        k[d] = a->traj[i * dims + d];
        kmax = fabs(k[d]) > kmax ? fabs(k[d]) : kmax;
      }
      mr_phantom_kspace(rank, n, coils, k, want);
      for (int c = 0; c < coils; c++) {
        double complex got = a->data[c * a->head.number_of_samples + i];
        /* the file holds floats; positions were rounded to float too */
        if (cabs(got - want[c]) > 1e-3 * cabs(want[c]) + 1e-2)
          fail_msg("readout %u sample %d coil %d: %g%+gi, closed form %g%+gi", r, i, c,
                   creal(got), cimag(got), creal(want[c]), cimag(want[c]));
      }
    }
  }
  free(want);
  return kmax;
}

static void header_of(const dataset *ds, mr_stream_header *h) {
  mr_err err = {0};
  if (mr_stream_header_parse(ds->xml, strlen(ds->xml), h, &err) != 0)
    fail_msg("header: %s", err.msg);
}

static void radial_dataset(void **state) {
  (void)state;
  mr_sim_options o = {.trajectory = MR_SIM_RADIAL, .matrix = 32, .coils = 3, .spokes = 40};
  simulate(&o, "radial.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_RADIAL);
  assert_int_equal(h.encoding[0].encoded.matrix.x, 32);
  assert_int_equal(h.encoding[0].limits.e1.maximum, 39);
  assert_int_equal(h.receiver_channels, 3);
  assert_int_equal(ds.nacq, 40);
  const ISMRMRD_AcquisitionHeader *first = &ds.acq[0].head, *last = &ds.acq[39].head;
  assert_int_equal(first->number_of_samples, 64);
  assert_int_equal(first->trajectory_dimensions, 2);
  assert_int_equal(first->center_sample, 32);
  assert_true(first->flags & (1ull << (ISMRMRD_ACQ_FIRST_IN_SLICE - 1)));
  assert_true(last->flags & (1ull << (ISMRMRD_ACQ_LAST_IN_SLICE - 1)));
  assert_int_equal(last->idx.kspace_encode_step_1, 39);
  /* sample 32 of every spoke is the centre, where coil c sees e^{i phi_c} F(0)-ish */
  assert_float_equal(ds.acq[5].traj[64], 0.0, 1e-7);
  double kmax = check_samples(&ds, 2, 32, 3);
  assert_true(kmax <= 0.5 && kmax > 0.45);
  /* reading an appended array back adds its count as the last dimension */
  assert_int_equal(ds.phantom.ndim, 3);
  assert_int_equal(ds.phantom.dims[0], 32);
  assert_int_equal(ds.phantom.dims[1], 32);
  assert_int_equal(ds.phantom.dims[2], 1);
  assert_int_equal(ds.phantom.data_type, ISMRMRD_CXFLOAT);
  const complex_float_t *px = ds.phantom.data;
  assert_float_equal(crealf(px[16 * 32 + 16]), 0.2, 1e-6); /* the centre pixel */
  mr_stream_header_free(&h);
  free_dataset(&ds);
}

static void spiral_and_3d_datasets(void **state) {
  (void)state;
  mr_sim_options sp = {.trajectory = MR_SIM_SPIRAL, .matrix = 32, .coils = 2, .interleaves = 4};
  simulate(&sp, "spiral.h5");
  dataset ds;
  read_dataset(sp.path, &ds);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_SPIRAL);
  assert_int_equal(ds.nacq, 4);
  assert_int_equal(ds.acq[0].head.number_of_samples, (int)ceil(M_PI * 32 * 32 / 4));
  double kmax = check_samples(&ds, 2, 32, 2);
  assert_true(kmax < 0.5 && kmax > 0.45);
  mr_stream_header_free(&h);
  free_dataset(&ds);

  mr_sim_options g3 = {.trajectory = MR_SIM_GOLDEN, .matrix = 12, .three_d = 1, .coils = 2,
                       .spokes = 100};
  simulate(&g3, "golden3d.h5");
  read_dataset(g3.path, &ds);
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_GOLDENANGLE);
  assert_int_equal(h.encoding[0].encoded.matrix.z, 12);
  assert_int_equal(ds.nacq, 100);
  assert_int_equal(ds.acq[0].head.trajectory_dimensions, 3);
  kmax = check_samples(&ds, 3, 12, 2);
  assert_true(kmax <= 0.5);
  assert_int_equal(ds.phantom.ndim, 4);
  assert_int_equal(ds.phantom.dims[2], 12);
  mr_stream_header_free(&h);
  free_dataset(&ds);

  mr_sim_options ss = {.trajectory = MR_SIM_SPIRAL, .matrix = 16, .three_d = 1, .coils = 1,
                       .interleaves = 2};
  simulate(&ss, "spiral3d.h5");
  read_dataset(ss.path, &ds);
  assert_int_equal(ds.nacq, 2 * 16);
  assert_int_equal(ds.acq[31].head.idx.kspace_encode_step_2, 15);
  check_samples(&ds, 3, 16, 1);
  free_dataset(&ds);
}

static void cartesian_dataset(void **state) {
  (void)state;
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = 16, .coils = 2};
  simulate(&o, "cartesian.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  assert_int_equal(ds.nacq, 16);
  assert_int_equal(ds.acq[0].head.trajectory_dimensions, 0);
  assert_int_equal(ds.acq[3].head.idx.kspace_encode_step_1, 3);
  /* line 8, sample 8 is k = 0 */
  double complex want[2];
  double k0[3] = {0, 0, 0};
  mr_phantom_kspace(2, 16, 2, k0, want);
  assert_true(cabs(ds.acq[8].data[8] - want[0]) < 1e-4 * cabs(want[0]));
  free_dataset(&ds);
}

/* --multiband 2 --caipi 2: the reference (encoding 1, flagged calibration,
 * each slice alone) and the collapsed lines (encoding 0), which are the
 * reference's slices summed with the CAIPI ramp; the header's multiband
 * fields; the objects per slice. */
static void multiband_dataset(void **state) {
  (void)state;
  enum { N = 16, COILS = 4, MB = 2 };
  mr_sim_options o = {.trajectory = MR_SIM_CARTESIAN, .matrix = N, .coils = COILS,
                      .multiband = MB, .caipi = 2};
  simulate(&o, "multiband.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  assert_int_equal(ds.nacq, (MB + 1) * N);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.nencodings, 2);
  const mr_multiband *mb = &h.encoding[0].parallel.multiband;
  assert_true(mb->present);
  assert_int_equal(mb->factor, MB);
  assert_int_equal(mb->calibration_encoding, 1);
  assert_float_equal(mb->spacing_mm[0], N / 4.0, 1e-6);
  assert_float_equal(1 / (mb->delta_kz * mb->spacing_mm[0]), 2, 1e-4);
  assert_int_equal(h.encoding[1].limits.slice.maximum, MB - 1);
  mr_stream_header_free(&h);
  const uint64_t calib = 1ull << (ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION - 1);
  for (int y = 0; y < N; y++) {
    const ISMRMRD_Acquisition *r0 = &ds.acq[y], *r1 = &ds.acq[N + y], *c = &ds.acq[MB * N + y];
    assert_true((r0->head.flags & calib) && (r1->head.flags & calib) && !(c->head.flags & calib));
    assert_int_equal(r1->head.idx.slice, 1);
    assert_int_equal(r1->head.encoding_space_ref, 1);
    assert_int_equal(c->head.encoding_space_ref, 0);
    assert_float_equal(r1->head.position[2] - r0->head.position[2], N / 4.0, 1e-6);
    double sign = (y - N / 2) % 2 ? -1 : 1; /* exp(-i pi (y - n/2)) */
    for (int i = 0; i < N * COILS; i++) {
      double complex want = r0->data[i] + sign * r1->data[i];
      assert_true(cabs(c->data[i] - want) <= 1e-5 * (cabs(want) + 1));
    }
  }
  assert_int_equal(ds.phantom.ndim, 4); /* n x n x MB, and a unit dimension as read back */
  assert_int_equal(ds.phantom.dims[2], MB);
  free_dataset(&ds);
}

/* Noise of the asked size, different per seed. */
static void noise(void **state) {
  (void)state;
  mr_sim_options a = {.trajectory = MR_SIM_RADIAL, .matrix = 16, .coils = 1, .spokes = 50,
                      .noise = 2.0, .seed = 1};
  mr_sim_options clean = a, b = a;
  clean.noise = 0;
  b.seed = 2;
  simulate(&a, "noisy1.h5");
  dataset da, db, dc;
  read_dataset(a.path, &da);
  simulate(&b, "noisy2.h5");
  read_dataset(b.path, &db);
  simulate(&clean, "clean.h5");
  read_dataset(clean.path, &dc);
  double var = 0, diff = 0;
  size_t count = 0;
  for (uint32_t r = 0; r < da.nacq; r++)
    for (int i = 0; i < da.acq[r].head.number_of_samples; i++) {
      double complex e = da.acq[r].data[i] - dc.acq[r].data[i];
      var += creal(e) * creal(e) + cimag(e) * cimag(e);
      diff += cabs(da.acq[r].data[i] - db.acq[r].data[i]);
      count++;
    }
  double sigma = sqrt(var / (2 * count));
  print_message("noise: measured sigma %.3f (asked 2)\n", sigma);
  assert_true(fabs(sigma - 2.0) < 0.1);
  assert_true(diff > 0);
  free_dataset(&da);
  free_dataset(&db);
  free_dataset(&dc);
}

/* The writer fills batches of readouts on every CPU the process may use:
 * the file is the same, noise included, as one thread makes it, for the
 * radial, the moving real-time and the multiband scans (the EPI scans fill
 * one at a time: a series' later volumes take the first one's samples).
 * Run with the affinity cut to one CPU for the reference. And the noise is
 * one stream across readouts, as it was drawn before batches: the 3D
 * radial scan less its noiseless twin is the generator's draws in order,
 * sample by sample, every coil. */
static void same_file_on_any_threads(void **state) {
  (void)state;
  mr_sim_options scans[3] = {
      {.trajectory = MR_SIM_RADIAL, .matrix = 16, .coils = 3, .spokes = 700, .three_d = 1,
       .noise = 0.5, .seed = 3},
      {.trajectory = MR_SIM_GOLDEN, .matrix = 16, .coils = 2, .spokes = 5, .frames = 60,
       .moving = 1, .noise = 0.1, .seed = 4},
      {.trajectory = MR_SIM_CARTESIAN, .matrix = 96, .coils = 2, .multiband = 2, .caipi = 2,
       .noise = 0.2, .seed = 5},
  };
  cpu_set_t all, one;
  mr_test_one_cpu(&all, &one);
  for (int s = 0; s < 3; s++) {
    char name[2][32];
    dataset ds[2];
    for (int threads_all = 0; threads_all < 2; threads_all++) {
      mr_sim_options o = scans[s];
      snprintf(name[threads_all], sizeof name[0], "threads%d-%d.h5", threads_all, s);
      assert_int_equal(sched_setaffinity(0, sizeof(cpu_set_t), threads_all ? &all : &one), 0);
      simulate(&o, name[threads_all]);
      read_dataset(o.path, &ds[threads_all]);
    }
    assert_int_equal(ds[0].nacq, ds[1].nacq);
    assert_true(ds[0].nacq > 256); /* more than one batch */
    for (uint32_t r = 0; r < ds[0].nacq; r++) {
      const ISMRMRD_Acquisition *a = &ds[0].acq[r], *b = &ds[1].acq[r];
      size_t n = (size_t)a->head.number_of_samples * a->head.active_channels;
      assert_int_equal(b->head.number_of_samples * b->head.active_channels, n);
      assert_memory_equal(a->data, b->data, n * sizeof *a->data);
    }
    if (s == 0) {
      mr_sim_options clean = scans[0];
      clean.noise = 0;
      simulate(&clean, "threads-clean.h5");
      dataset dc;
      read_dataset(clean.path, &dc);
      mr_sim_noise g;
      mr_sim_noise_init(&g, &scans[0]);
      for (uint32_t r = 0; r < dc.nacq; r++) {
        int ns = dc.acq[r].head.number_of_samples, nc = dc.acq[r].head.active_channels;
        for (int i = 0; i < ns; i++)
          for (int c = 0; c < nc; c++) {
            double complex want = mr_sim_gaussian(&g);
            double complex got = ds[1].acq[r].data[c * ns + i] - dc.acq[r].data[c * ns + i];
            if (cabs(got - want) > 1e-5 * (1 + cabs(dc.acq[r].data[c * ns + i])))
              fail_msg("readout %u sample %d coil %d: noise %g%+gi, drawn %g%+gi", r, i, c,
                       creal(got), cimag(got), creal(want), cimag(want));
          }
      }
      free_dataset(&dc);
    }
    free_dataset(&ds[0]);
    free_dataset(&ds[1]);
  }
}

/* A real-time stream: F x K readouts, frame counters and flags, K in the
 * header, the golden-angle sequence running on (so each frame's trajectory
 * is new), --samples per spoke, and a moving object's ground truth per
 * frame. */
static void realtime_stream(void **state) {
  (void)state;
  enum { F = 3, K = 5, NS = 40 };
  mr_sim_options o = {.trajectory = MR_SIM_GOLDEN, .matrix = 16, .coils = 2, .spokes = K,
                      .samples = NS, .frames = F, .moving = 1};
  simulate(&o, "realtime.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_GOLDENANGLE);
  assert_int_equal(h.encoding[0].limits.e1.maximum, K - 1);
  assert_int_equal(h.encoding[0].limits.repetition.maximum, F - 1);
  assert_int_equal(ds.nacq, F * K);
  const uint64_t first = (1ull << (ISMRMRD_ACQ_FIRST_IN_REPETITION - 1)),
                 last = (1ull << (ISMRMRD_ACQ_LAST_IN_REPETITION - 1));
  for (uint32_t r = 0; r < ds.nacq; r++) {
    const ISMRMRD_AcquisitionHeader *a = &ds.acq[r].head;
    assert_int_equal(a->number_of_samples, NS);
    assert_int_equal(a->center_sample, NS / 2);
    assert_int_equal(a->idx.repetition, r / K);
    assert_int_equal(a->idx.kspace_encode_step_1, r % K);
    assert_int_equal(a->idx.kspace_encode_step_2, 0);
    assert_int_equal((a->flags & first) != 0, r % K == 0);
    assert_int_equal((a->flags & last) != 0, r % K == K - 1);
    /* spoke r at r golden angles: its last sample's direction */
    double t = r * M_PI * (sqrt(5) - 1) / 2, rad = (NS - 1 - NS / 2) / (double)NS;
    assert_float_equal(ds.acq[r].traj[(NS - 1) * 2], rad * cos(t), 1e-6);
    assert_float_equal(ds.acq[r].traj[(NS - 1) * 2 + 1], rad * sin(t), 1e-6);
  }
  /* frames differ in trajectory */
  for (int f = 1; f < F; f++)
    assert_memory_not_equal(ds.acq[0].traj, ds.acq[f * K].traj, NS * 2 * sizeof(float));
  assert_true(ds.acq[F * K - 1].head.flags & (1ull << (ISMRMRD_ACQ_LAST_IN_MEASUREMENT - 1)));
  /* the moving object: samples match the closed form of the moved object */
  double complex want[2];
  for (uint32_t r = 0; r < ds.nacq; r += 4) {
    double shift[3], k[3] = {ds.acq[r].traj[6], ds.acq[r].traj[7], 0};
    mr_sim_motion(16, (int)(r / K), shift);
    mr_phantom_kspace_moved(2, 16, 2, k, shift, want);
    for (int c = 0; c < 2; c++)
      assert_true(cabs(ds.acq[r].data[c * NS + 3] - want[c]) <= 1e-3 * cabs(want[c]) + 1e-2);
  }
  /* the truth of every frame; frame 1 moved along x */
  assert_int_equal(ds.phantom.ndim, 4);
  assert_int_equal(ds.phantom.dims[2], F);
  const complex_float_t *px = ds.phantom.data;
  assert_memory_not_equal(px, px + 16 * 16, 16 * 16 * sizeof *px);
  double s1[3];
  mr_sim_motion(16, 1, s1);
  assert_true(s1[0] > 0.3 && s1[1] == 0);
  mr_stream_header_free(&h);
  free_dataset(&ds);

  mr_sim_options tiny = {.trajectory = MR_SIM_TINY_GOLDEN, .matrix = 16, .coils = 1,
                         .spokes = 3, .frames = 2};
  simulate(&tiny, "tiny.h5");
  read_dataset(tiny.path, &ds);
  assert_int_equal(ds.nacq, 6);
  double step = M_PI / ((1 + sqrt(5)) / 2 + 6);
  assert_float_equal(atan2(ds.acq[4].traj[1], ds.acq[4].traj[0]), 4 * step - M_PI, 1e-5);
  assert_int_equal(ds.phantom.ndim, 3); /* still: one truth */
  free_dataset(&ds);
}

static void refusals(void **state) {
  (void)state;
  mr_sim_options o = {.trajectory = MR_SIM_RADIAL, .matrix = 16, .coils = 1, .spokes = 4};
  simulate(&o, "once.h5");
  mr_err err = {0};
  assert_int_equal(mr_simulate(&o, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "not overwriting"));
  mr_sim_options bad = {.trajectory = MR_SIM_RADIAL, .matrix = 4, .coils = 1, .path = "/nonexistent/x.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--matrix"));
  mr_sim_options many = {.trajectory = MR_SIM_SPIRAL, .matrix = 512, .coils = 1, .interleaves = 1,
                         .path = "/nonexistent/y.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&many, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "more interleaves"));
  mr_sim_options frames = {.trajectory = MR_SIM_SPIRAL, .matrix = 16, .coils = 1, .frames = 2,
                           .path = "/nonexistent/z.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&frames, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--frames"));
  mr_sim_options moving = {.trajectory = MR_SIM_GOLDEN, .matrix = 16, .coils = 1, .moving = 1,
                           .path = "/nonexistent/z.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&moving, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--moving needs --frames"));
  mr_sim_options caipi = {.trajectory = MR_SIM_CARTESIAN, .matrix = 16, .coils = 2, .caipi = 2,
                          .path = "/nonexistent/z.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&caipi, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--caipi needs --multiband"));
  mr_sim_options radial_mb = {.trajectory = MR_SIM_RADIAL, .matrix = 16, .coils = 2,
                              .multiband = 2, .path = "/nonexistent/z.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&radial_mb, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "2D Cartesian"));
  caipi.multiband = 2;
  caipi.caipi = 3;
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&caipi, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--caipi must be"));
  assert_int_equal(mr_sim_trajectory_parse("tiny-golden"), MR_SIM_TINY_GOLDEN);
  assert_int_equal(mr_sim_trajectory_parse("golden"), MR_SIM_GOLDEN);
  assert_int_equal(mr_sim_trajectory_parse("rosette"), -1);
}

static uint64_t acq_flags(const dataset *ds, uint32_t i) { return ds->acq[i].head.flags; }

/* EPI: the navigators and echoes of each train, their flags, the reversed
 * readouts' samples in time order with the odd/even error, the header. */
static void epi_dataset(void **state) {
  (void)state;
  enum { N = 16, COILS = 2 };
  mr_sim_options o = {.trajectory = MR_SIM_EPI, .matrix = N, .coils = COILS,
                      .epi = {.ghost = {0.6, 3}}};
  simulate(&o, "epi.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  assert_int_equal(ds.nacq, 3 + N);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].trajectory, MR_TRAJ_EPI);
  assert_int_equal(h.encoding[0].encoded.matrix.x, 2 * N);
  assert_int_equal(h.encoding[0].recon.matrix.x, N);
  assert_null(strstr(ds.xml, "ConventionalEPI")); /* flat top: samples on the grid */
  mr_stream_header_free(&h);
  uint64_t nav = MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA), rev = MR_FLAG(ISMRMRD_ACQ_IS_REVERSE);
  assert_int_equal(acq_flags(&ds, 0) & (nav | rev), nav);
  assert_int_equal(acq_flags(&ds, 1) & (nav | rev), nav | rev);
  assert_int_equal(acq_flags(&ds, 2) & (nav | rev), nav);
  assert_true(acq_flags(&ds, 3) & rev);
  assert_true(acq_flags(&ds, 0) & MR_FLAG(ISMRMRD_ACQ_FIRST_IN_SLICE));
  assert_false(acq_flags(&ds, 4) & (rev | nav));
  assert_true(acq_flags(&ds, 3 + N - 1) & MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE));
  assert_int_equal(ds.acq[3].head.number_of_samples, 2 * N);
  assert_int_equal(ds.acq[3].head.trajectory_dimensions, 0);
  /* forward echo 1 (line 1): sample q at kx (q - N) / 2N; reversed echo 0
   * (line 0): sample q at the mirror image, shifted by 3 / 2 pi samples and
   * turned by 0.6 rad */
  for (int q = 0; q < 2 * N; q += 3) {
    double complex want[COILS];
    double kf[3] = {(q - N) / (2.0 * N), (1.0 - N / 2) / N, 0};
    mr_phantom_kspace(2, N, COILS, kf, want);
    for (int c = 0; c < COILS; c++)
      assert_true(cabs(ds.acq[4].data[c * 2 * N + q] - want[c]) < 1e-4 * cabs(want[c]) + 1e-5);
    double kr[3] = {(2 * N - 1 - q - N - 3 / (2 * M_PI)) / (2.0 * N), (0.0 - N / 2) / N, 0};
    mr_phantom_kspace(2, N, COILS, kr, want);
    for (int c = 0; c < COILS; c++)
      assert_true(cabs(ds.acq[3].data[c * 2 * N + q] - want[c] * cexp(0.6 * I)) <
                  1e-4 * cabs(want[c]) + 1e-5);
  }
  /* the truth beside it */
  assert_int_equal(ds.phantom.dims[0], N);
  assert_int_equal(ds.phantom.dims[1], N);
  free_dataset(&ds);
}

/* Segmented, ramp-sampled and accelerated: trains, counters, the
 * trajectoryDescription, the reference scan, the header's claims. */
static void epi_segmented_ramp(void **state) {
  (void)state;
  enum { N = 32 };
  mr_sim_options o = {.trajectory = MR_SIM_EPI, .matrix = N, .coils = 1,
                      .epi = {.shots = 2, .ramp = 1, .accel = 2, .claim_cartesian = 1}};
  simulate(&o, "epi_ramp.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  /* the reference train (3 navigators, 24 lines), then 2 shots of 3 + 8 */
  assert_int_equal(ds.nacq, 27 + 2 * 11);
  uint64_t calib = MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
  assert_true(acq_flags(&ds, 0) & calib);
  assert_true(acq_flags(&ds, 26) & calib);
  assert_int_equal(ds.acq[3].head.idx.kspace_encode_step_1, N / 2 - 12);
  assert_false(acq_flags(&ds, 27) & calib);
  assert_true(acq_flags(&ds, 27) & MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA));
  assert_true(acq_flags(&ds, 27) & MR_FLAG(ISMRMRD_ACQ_FIRST_IN_SLICE));
  /* shot 1 takes lines 2 (R) + 4 e, after shot 0's 0 + 4 e */
  assert_int_equal(ds.acq[31].head.idx.kspace_encode_step_1, 4);
  assert_int_equal(ds.acq[38 + 3].head.idx.kspace_encode_step_1, 2);
  assert_int_equal(ds.acq[38 + 3].head.idx.segment, 1);
  assert_non_null(strstr(ds.xml, "<trajectory>cartesian</trajectory>"));
  assert_non_null(strstr(ds.xml, "<identifier>ConventionalEPI</identifier>"));
  assert_non_null(strstr(ds.xml, "<name>rampUpTime</name><value>64</value>"));
  assert_non_null(strstr(ds.xml, "<name>flatTopTime</name><value>192</value>"));
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].parallel.accel_e1, 2);
  mr_stream_header_free(&h);
  /* the forward navigators of a train are the same readout */
  size_t ns = ds.acq[0].head.number_of_samples;
  assert_int_equal(ns, 2 * N);
  assert_memory_equal(ds.acq[0].data, ds.acq[2].data, ns * sizeof(complex_float_t));
  free_dataset(&ds);
  mr_err err = {0};
  mr_sim_options odd = {.trajectory = MR_SIM_EPI, .matrix = 20, .coils = 1,
                        .epi = {.shots = 3}, .path = "/nonexistent/e.h5"};
  assert_int_equal(mr_simulate(&odd, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "not a multiple of --shots"));
  mr_sim_options ramp = {.trajectory = MR_SIM_CARTESIAN, .matrix = 16, .coils = 1,
                         .epi = {.ramp = 1}, .path = "/nonexistent/e.h5"};
  mr_err_clear(&err);
  assert_int_equal(mr_simulate(&ramp, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "are for --trajectory epi"));
  assert_int_equal(mr_sim_trajectory_parse("epi"), MR_SIM_EPI);
}

/* Simultaneous multi-slice: a single-band reference train per slice, then
 * the collapsed train; the truth of every slice. */
static void epi_multiband(void **state) {
  (void)state;
  enum { N = 16 };
  mr_sim_options o = {.trajectory = MR_SIM_EPI, .matrix = N, .coils = 2,
                      .multiband = 2, .caipi = 2};
  simulate(&o, "epi_mb.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  assert_int_equal(ds.nacq, 3 * (3 + N));
  uint64_t calib = MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
  uint64_t last = MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
  assert_true(acq_flags(&ds, 0) & calib);
  assert_int_equal(ds.acq[0].head.idx.slice, 0);
  assert_true(acq_flags(&ds, 3 + N - 1) & last);
  assert_int_equal(ds.acq[3 + N].head.idx.slice, 1);
  assert_true(acq_flags(&ds, 2 * (3 + N) - 1) & last);
  assert_false(acq_flags(&ds, 2 * (3 + N)) & calib);
  assert_int_equal(ds.acq[2 * (3 + N)].head.idx.slice, 0);
  assert_true(acq_flags(&ds, ds.nacq - 1) & last);
  assert_int_equal(ds.phantom.ndim, 4); /* x, y, slice (the reader adds one) */
  assert_int_equal(ds.phantom.dims[2], 2);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].limits.slice.maximum, 1);
  mr_stream_header_free(&h);
  free_dataset(&ds);
  mr_err err = {0};
  mr_sim_options bad = {.trajectory = MR_SIM_EPI, .matrix = 16, .coils = 1,
                        .caipi = 3, .path = "/nonexistent/e.h5"};
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "need --multiband"));
}

/* An fMRI series: multiband 2, 4 slices (2 groups), 3 volumes: the
 * single-band reference of every slice once (at its position), then per
 * volume the two groups (idx.slice the group, idx.repetition the volume,
 * LAST_IN_REPETITION at its end, the group's first slice's position); the
 * volumes' samples alike without noise; the header's repetition limit and
 * multiband spacing (the groups, 1 mm apart) and deltaKz; sizes refused. */
static void epi_series(void **state) {
  (void)state;
  enum { N = 16, M = 2, Z = 4, G = Z / M, V = 3, TRAIN = 3 + N };
  mr_sim_options o = {.trajectory = MR_SIM_EPI, .matrix = N, .coils = 2, .multiband = M,
                      .caipi = 2, .epi = {.slices = Z, .volumes = V, .ghost = {0.5, 1}}};
  simulate(&o, "epi_series.h5");
  dataset ds;
  read_dataset(o.path, &ds);
  assert_int_equal(ds.nacq, Z * TRAIN + V * G * TRAIN);
  uint64_t calib = MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
  uint64_t last_rep = MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION);
  for (int z = 0; z < Z; z++) {
    const ISMRMRD_AcquisitionHeader *a = &ds.acq[z * TRAIN].head;
    assert_true(a->flags & calib);
    assert_int_equal(a->idx.slice, z);
    assert_int_equal(a->idx.repetition, 0);
    assert_float_equal(a->position[2], z, 0);
  }
  for (int v = 0; v < V; v++)
    for (int g = 0; g < G; g++)
      for (int i = 0; i < TRAIN; i++) {
        size_t at = (size_t)Z * TRAIN + ((size_t)v * G + g) * TRAIN + i;
        const ISMRMRD_Acquisition *a = &ds.acq[at];
        assert_false(a->head.flags & calib);
        assert_int_equal(a->head.idx.slice, g);
        assert_int_equal(a->head.idx.repetition, v);
        assert_float_equal(a->head.position[2], g, 0);
        assert_int_equal(!!(a->head.flags & last_rep), g == G - 1 && i == TRAIN - 1);
        const ISMRMRD_Acquisition *first = &ds.acq[at - (size_t)v * G * TRAIN];
        assert_int_equal(memcmp(a->data, first->data, 2 * N * 2 * sizeof *a->data), 0);
      }
  assert_true(acq_flags(&ds, ds.nacq - 1) & MR_FLAG(ISMRMRD_ACQ_LAST_IN_MEASUREMENT));
  assert_int_equal(ds.phantom.dims[2], Z);
  mr_stream_header h;
  header_of(&ds, &h);
  assert_int_equal(h.encoding[0].limits.slice.maximum, Z - 1);
  assert_true(h.encoding[0].limits.repetition.present);
  assert_int_equal(h.encoding[0].limits.repetition.maximum, V - 1);
  const mr_multiband *mb = &h.encoding[0].parallel.multiband;
  assert_int_equal(mb->factor, M);
  assert_float_equal(mb->spacing_mm[0], G, 0);
  assert_float_equal(mb->delta_kz, 1.0 / (2 * G), 1e-6);
  mr_stream_header_free(&h);
  free_dataset(&ds);
  mr_err err = {0};
  mr_sim_options bad = {.trajectory = MR_SIM_EPI, .matrix = 16, .coils = 1, .multiband = 4,
                        .epi = {.slices = 6}, .path = "/nonexistent/e.h5"};
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--slices 6 is not a multiple of --multiband 4"));
  bad = (mr_sim_options){.trajectory = MR_SIM_EPI, .matrix = 16, .coils = 1,
                         .epi = {.volumes = 10001}, .path = "/nonexistent/e.h5"};
  err = (mr_err){0};
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--volumes is at most 10000"));
  bad = (mr_sim_options){.trajectory = MR_SIM_EPI, .matrix = 512, .coils = 64,
                         .epi = {.slices = 64, .volumes = 2}, .path = "/nonexistent/e.h5"};
  err = (mr_err){0};
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "over the 1024 MiB"));
  bad = (mr_sim_options){.trajectory = MR_SIM_RADIAL, .matrix = 16, .coils = 1,
                         .epi = {.volumes = 2}, .path = "/nonexistent/e.h5"};
  err = (mr_err){0};
  assert_int_equal(mr_simulate(&bad, &err), MR_EINVAL);
  assert_non_null(strstr(err.msg, "--volumes"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(closed_form_2d),    cmocka_unit_test(closed_form_3d),
      cmocka_unit_test(phantom_values),    cmocka_unit_test(radial_dataset),
      cmocka_unit_test(spiral_and_3d_datasets), cmocka_unit_test(cartesian_dataset),
      cmocka_unit_test(noise),
      cmocka_unit_test(same_file_on_any_threads),             cmocka_unit_test(realtime_stream),
      cmocka_unit_test(refusals),          cmocka_unit_test(multiband_dataset),
      cmocka_unit_test(epi_dataset),
      cmocka_unit_test(epi_segmented_ramp), cmocka_unit_test(epi_multiband),
      cmocka_unit_test(epi_series),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
