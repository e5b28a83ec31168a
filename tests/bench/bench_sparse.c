/* mr-bench sparse: compressed sensing, ESPIRiT and coil compression, ours
 * against BART in the same run on the same data (issue 24 item 6).
 *
 * Data: `reconclient simulate` (the client library, in process) writes each
 * case's scan to an HDF5 file in a temporary directory: the analytic
 * phantom's k-space, undersampled (variable-density lines in 2D, a Poisson
 * disc over ky-kz in 3D, radial spokes), with noise, and the noiseless
 * fully sampled reference image. The file is read back into memory; BART
 * gets it as .cfl files written here, our server the file itself, our
 * solver the arrays.
 *
 * BART (Debian's `bart`, beside mr-bench first, else on PATH) runs with
 * OMP_NUM_THREADS set to this host's cores (recorded): `ecalib -m1`,
 * `pics -S -l1 -r 0.005` (its default iterations, and 100), `pics -S -R
 * T:3:0:0.005` (total variation), `pics -S -l2`, `cc -p K -S`
 * (SVD to a quarter of the coils: its time and the energy kept), and the
 * zero-filled image (`fft -i -u`, `rss`) as the floor. Non-Cartesian cases
 * get their maps from the gridded centre (`nufft -i`, `fft -u`, `ecalib`)
 * and `pics -t`; the real-time case a temporal TV (`-R T:1024:0:...`) over
 * its frames. In 3D (minutes a step there) BART runs the two L1 solves
 * alone, with our maps, and its memory-saving ESPIRiT on a few slices
 * against ours (bart_maps_3d says why); our CPU path and the CPU server sit
 * it out where a GPU runs.
 *
 * Ours, two ways: the solve alone through the gpu/ API on the GPU and on the
 * CPU (bench_sparse_ours.h; maps and solve timed apart, one device task
 * each), and end to end through a reconserver (`--gpus all` when there is
 * a GPU, and `--gpus none`) with the `cs` config (`cs_radial`,
 * `realtime_cs` for the non-Cartesian cases): `reconclient send` from
 * process start to exit. A config the servers do not have, or a build
 * without the solver, is reported as "missing", never as a number.
 *
 * Every timing is reported as the first run and the best of --rounds
 * (default 3; 1 with --quick); every image with PSNR, NRMSE and the
 * fitted scale against the reference (image_quality.h). The 2D 8-coil case
 * also carries `cpu_vs_bart`: our CPU path against BART with
 * OMP_NUM_THREADS as set, the issue's 2-core target (at our defaults, and
 * at BART's PSNR: `at_equal_psnr`). */
#include <complex.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fftw3.h>
#include <ismrmrd/dataset.h>

#include "bench.h"
#include "bench_sparse_ours.h"
#include "cfl.h"
#include "image_quality.h"
#include "phantom.h"
#include "sampling.h"
#include "simulate.h"
#include "sparse_scan.h"
#include "stream_server.h"
#include "test_support.h"

#define LAMBDA 0.005
#define LAMBDA_TEXT "0.005"

typedef enum case_kind { CARTESIAN, RADIAL, REALTIME } case_kind;

typedef struct sparse_case {
  const char *name;
  case_kind kind;
  int n, nz, coils;  /* nz 1 in 2D */
  double r;          /* Cartesian: acceleration */
  int calibration;   /* Cartesian: centre lines (points per side in 3D) */
  int spokes, frames; /* radial: spokes (per frame) and frames (real time) */
  int cpu_vs_bart;   /* report the 2-core comparison on this case */
  const char *targets; /* the issue's targets for ours, as text (H100) */
} sparse_case;

static const sparse_case full_cases[] = {
    {"cartesian_2d_8", CARTESIAN, 256, 1, 8, 4, 24, 0, 0, 1,
     "CPU (2 cores, OMP_NUM_THREADS=2 for BART): >= 3x faster than BART at equal PSNR"},
    {"cartesian_2d_32", CARTESIAN, 256, 1, 32, 4, 24, 0, 0, 0,
     "GPU: 100 iterations of L1-wavelet <= 10 ms a slice, PSNR >= BART pics -l1 (same lambda and "
     "iterations) - 0.2 dB, defaults >= BART's defaults; ESPIRiT <= 5 ms"},
    {"cartesian_3d", CARTESIAN, 256, 128, 32, 8, 24, 0, 0, 0,
     "GPU: <= 2 s, PSNR >= BART pics -l1 - 0.2 dB; ESPIRiT <= 500 ms"},
    {"radial_2d", RADIAL, 256, 1, 16, 0, 0, 48, 0, 0, NULL},
    {"realtime_radial", REALTIME, 256, 1, 16, 0, 0, 32, 20, 0,
     "realtime_cs >= 200 frames/s paced, p99 latency <= 15 ms (mr-bench stream)"},
};

static const sparse_case quick_cases[] = {
    {"cartesian_2d_8", CARTESIAN, 64, 1, 4, 4, 12, 0, 0, 1, NULL},
    {"cartesian_2d_32", CARTESIAN, 64, 1, 8, 4, 12, 0, 0, 0, NULL},
    {"cartesian_3d", CARTESIAN, 32, 16, 4, 2, 12, 0, 0, 0, NULL},
    {"radial_2d", RADIAL, 64, 1, 4, 0, 0, 24, 0, 0, NULL},
    {"realtime_radial", REALTIME, 64, 1, 4, 0, 0, 16, 4, 0, NULL},
};

enum { NCASES = sizeof full_cases / sizeof *full_cases };

/* A timed command's figures. */
typedef struct timing {
  double first_ms, best_ms;
} timing;

typedef struct sparse_bench {
  const bench_ctx *ctx;
  bench_json *j;
  int rounds;
  char bart[PATH_MAX];   /* "" when there is none */
  char client[PATH_MAX]; /* reconclient */
  char tmp[256];
  stream_server servers[2]; /* GPU, CPU; pid 0 when not running */
  mr_device *gpu, *cpu;
  int failures;
} sparse_bench;

static const char *const server_names[2] = {"server_gpu", "server_cpu"};

/* ---- paths and processes ---- */

static void self_dir(char *out, size_t size) {
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  char *slash = strrchr(exe, '/');
  snprintf(out, size, "%.*s", slash != NULL ? (int)(slash - exe) : 1,
           slash != NULL ? exe : ".");
}

/* Runs argv (NULL-terminated) in the bench's directory `rounds` times (1
 * when rounds is 1 or the first run fails), timing each from process start
 * to exit. Returns 0, or -1 with its first stderr line in why. */
static int timed(sparse_bench *b, const char *const *argv, int rounds, timing *t, char *why,
                 size_t size) {
  static char out[8192], err[8192];
  t->first_ms = t->best_ms = NAN;
  for (int r = 0; r < rounds; r++) {
    double t0 = bench_now_ms();
    int rc = mr_test_run(argv, b->tmp, out, sizeof out, err, sizeof err);
    double ms = bench_now_ms() - t0;
    if (rc != 0) {
      snprintf(why, size, "%s %s exited %d: %.*s", argv[0], argv[1], rc,
               (int)strcspn(err[0] != '\0' ? err : out, "\n"), err[0] != '\0' ? err : out);
      return -1;
    }
    if (r == 0)
      t->first_ms = ms;
    if (!(ms >= t->best_ms))
      t->best_ms = ms;
  }
  return 0;
}

/* What one step gave: its time and, for an image, its quality. */
typedef struct step_result {
  int ok;
  timing t;
  image_quality q; /* psnr_db NaN when there is no image */
} step_result;

static void timing_json(bench_json *j, const timing *t) {
  json_num(j, "first_ms", t->first_ms);
  json_num(j, "best_ms", t->best_ms);
}

/* ---- data ---- */

/* Reads the Cartesian scan back from path into s (kspace, mask,
 * reference). 0 or -1. */
static int read_cartesian(const char *path, sparse_scan *s) {
  ISMRMRD_Dataset d;
  if (ismrmrd_init_dataset(&d, path, "dataset") != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&d, false) != ISMRMRD_NOERROR)
    return -1;
  size_t grid = s->dims[0] * s->dims[1] * s->dims[2], lines = s->dims[1] * s->dims[2];
  s->kspace = calloc(grid * s->coils, sizeof *s->kspace);
  s->mask = calloc(lines, 1);
  s->reference = malloc(grid * sizeof *s->reference);
  int rc = s->kspace != NULL && s->mask != NULL && s->reference != NULL ? 0 : -1;
  uint32_t count = rc == 0 ? ismrmrd_get_number_of_acquisitions(&d) : 0;
  for (uint32_t i = 0; rc == 0 && i < count; i++) {
    ISMRMRD_Acquisition a;
    ismrmrd_init_acquisition(&a);
    rc = ismrmrd_read_acquisition(&d, i, &a) == ISMRMRD_NOERROR ? 0 : -1;
    size_t y = a.head.idx.kspace_encode_step_1, z = a.head.idx.kspace_encode_step_2;
    if (rc == 0 && (y >= s->dims[1] || z >= s->dims[2] || a.head.number_of_samples != s->dims[0]))
      rc = -1;
    for (size_t c = 0; rc == 0 && c < s->coils; c++)
      for (size_t x = 0; x < s->dims[0]; x++)
        s->kspace[c * grid + (z * s->dims[1] + y) * s->dims[0] + x] = a.data[c * s->dims[0] + x];
    if (rc == 0)
      s->mask[z * s->dims[1] + y] = 1;
    ismrmrd_cleanup_acquisition(&a);
  }
  ISMRMRD_NDArray ref;
  ismrmrd_init_ndarray(&ref);
  if (rc == 0 && (ismrmrd_read_array(&d, "reference", 0, &ref) != ISMRMRD_NOERROR ||
                  ref.data_type != ISMRMRD_FLOAT))
    rc = -1;
  if (rc == 0)
    memcpy(s->reference, ref.data, grid * sizeof *s->reference);
  ismrmrd_cleanup_ndarray(&ref);
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return rc;
}

static void scan_free(sparse_scan *s) {
  free(s->kspace);
  free(s->mask);
  free(s->reference);
}

/* The noiseless fully sampled image of the 2D phantom moved by shift (the
 * radial cases' reference, as simulate_sampled.h makes the Cartesian
 * ones'): RSS of the unitary centred inverse FFT of the n x n grid. */
static int band_limited_reference(int n, int coils, const double shift[3], float *out) {
  size_t grid = (size_t)n * n;
  fftwf_complex *k = fftwf_malloc(grid * (size_t)coils * sizeof *k);
  double complex *v = malloc((size_t)coils * sizeof *v);
  if (k == NULL || v == NULL) {
    fftwf_free(k);
    free(v);
    return -1;
  }
  for (size_t i = 0; i < grid; i++) {
    int x = (int)(i % n), y = (int)(i / n);
    double kk[3] = {(double)(x - n / 2) / n, (double)(y - n / 2) / n, 0};
    mr_phantom_kspace_moved(2, n, coils, kk, shift, v);
    for (int c = 0; c < coils; c++) /* (-1)^(x+y) centres the plain FFT (n even) */
      k[(size_t)c * grid + i] = (fftwf_complex)v[c] * ((x + y) % 2 ? -1.0f : 1.0f);
  }
  int dims[2] = {n, n};
  fftwf_plan p = fftwf_plan_many_dft(2, dims, coils, k, NULL, 1, (int)grid, k, NULL, 1,
                                     (int)grid, FFTW_BACKWARD, FFTW_ESTIMATE);
  fftwf_execute(p);
  fftwf_destroy_plan(p);
  for (size_t i = 0; i < grid; i++) {
    double sum = 0;
    for (int c = 0; c < coils; c++)
      sum += pow(cabsf(k[(size_t)c * grid + i]), 2);
    out[i] = (float)sqrt(sum / (double)grid);
  }
  fftwf_free(k);
  free(v);
  return 0;
}

/* Radial data: the trajectory in BART's units (cycles per field of view)
 * [3][samples][spokes][frames] and k-space [samples][spokes][coils][frames],
 * as BART's dims (1, samples, spokes, coils, ..., frames at dim 10). */
typedef struct radial_scan {
  long samples, spokes, frames, coils;
  float complex *traj, *kspace;
  float *reference; /* [frames][n][n] */
} radial_scan;

static int read_radial(const char *path, int n, radial_scan *s) {
  ISMRMRD_Dataset d;
  if (ismrmrd_init_dataset(&d, path, "dataset") != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&d, false) != ISMRMRD_NOERROR)
    return -1;
  uint32_t count = ismrmrd_get_number_of_acquisitions(&d);
  int rc = count == (uint32_t)(s->spokes * s->frames) ? 0 : -1;
  s->traj = calloc((size_t)(3 * s->samples * count), sizeof *s->traj);
  s->kspace = calloc((size_t)(s->samples * count * s->coils), sizeof *s->kspace);
  if (s->traj == NULL || s->kspace == NULL)
    rc = -1;
  for (uint32_t i = 0; rc == 0 && i < count; i++) {
    ISMRMRD_Acquisition a;
    ismrmrd_init_acquisition(&a);
    rc = ismrmrd_read_acquisition(&d, i, &a) == ISMRMRD_NOERROR &&
                 a.head.number_of_samples == s->samples && a.head.trajectory_dimensions == 2
             ? 0
             : -1;
    long spoke = i % s->spokes, frame = i / s->spokes;
    for (long m = 0; rc == 0 && m < s->samples; m++) {
      float complex *t = s->traj + 3 * ((long)i * s->samples + m);
      t[0] = a.traj[2 * m] * n;
      t[1] = a.traj[2 * m + 1] * n;
      for (long c = 0; c < s->coils; c++)
        s->kspace[((frame * s->coils + c) * s->spokes + spoke) * s->samples + m] =
            a.data[c * s->samples + m];
    }
    ismrmrd_cleanup_acquisition(&a);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return rc;
}

static void radial_free(radial_scan *s) {
  free(s->traj);
  free(s->kspace);
  free(s->reference);
}

/* The noise of every case: 1 % of the object's unit intensity in the
 * unitary image (whose pixels are f sqrt(N) times the voxel volume). */
static double noise_of(const sparse_case *c) {
  double grid = (double)c->n * c->n * c->nz;
  return 0.01 * sqrt(grid) * (c->nz > 1 ? (double)c->n / c->nz : 1.0);
}

/* The mean over the object (reference above a tenth of its peak) of the
 * per-pixel projection |<a, b>| / (|a| |b|) of two coil-map sets, and the
 * share of each set's energy outside the object. */
static void maps_agreement(bench_json *j, const float *reference, size_t grid, size_t coils,
                           const float complex *ours, const float complex *bart) {
  float peak = 0;
  for (size_t i = 0; i < grid; i++)
    peak = reference[i] > peak ? reference[i] : peak;
  double projection = 0, outside[2] = {0, 0}, total[2] = {0, 0};
  size_t inside = 0;
  for (size_t i = 0; i < grid; i++) {
    double complex dot = 0;
    double aa = 0, bb = 0;
    for (size_t c = 0; c < coils; c++) {
      float complex a = ours[c * grid + i], b = bart[c * grid + i];
      dot += conjf(a) * b;
      aa += pow(cabsf(a), 2);
      bb += pow(cabsf(b), 2);
    }
    int in = reference[i] > 0.1f * peak;
    total[0] += aa;
    total[1] += bb;
    if (!in) {
      outside[0] += aa;
      outside[1] += bb;
    } else {
      inside++;
      projection += aa > 0 && bb > 0 ? cabs(dot) / sqrt(aa * bb) : 0;
    }
  }
  json_open(j, "maps_agreement", '{');
  json_str(j, "what", "inside the object (reference > 0.1 of its peak): mean per-pixel "
                      "|<ours, BART's>| / (|ours| |BART's|); outside: each set's share of its "
                      "energy outside the object");
  json_num(j, "projection_inside", inside > 0 ? projection / (double)inside : NAN);
  json_num(j, "ours_energy_outside", total[0] > 0 ? outside[0] / total[0] : NAN);
  json_num(j, "bart_energy_outside", total[1] > 0 ? outside[1] / total[1] : NAN);
  json_close(j, '}');
}

/* ---- BART ---- */

/* Runs one BART command (argv after "bart"), timed, and, when out is not
 * NULL, reads its output image (n pixels [x frames]) and writes its
 * quality against ref. The JSON object `key` gets the figures or the
 * error. */
static step_result bart_step(sparse_bench *b, const char *key, const char *const *args,
                             const char *out, const float *ref, size_t n, size_t frames) {
  step_result res = {.q = {.psnr_db = NAN}};
  const char *argv[40] = {b->bart};
  int a = 1;
  for (; args[a - 1] != NULL && a < 39; a++)
    argv[a] = args[a - 1];
  argv[a] = NULL;
  bench_json *j = b->j;
  json_open(j, key, '{');
  char cmd[600] = "bart", why[700];
  for (int i = 1; argv[i] != NULL; i++)
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %s", argv[i]);
  json_str(j, "command", cmd);
  timing t;
  if (timed(b, argv, b->rounds, &t, why, sizeof why) < 0) {
    json_str(j, "error", why);
    b->failures++;
  } else {
    res = (step_result){.ok = 1, .t = t, .q = {.psnr_db = NAN}};
    timing_json(j, &t);
    if (out != NULL) {
      char path[PATH_MAX];
      long dims[CFL_MAX_DIMS];
      snprintf(path, sizeof path, "%s/%s", b->tmp, out);
      float complex *img = cfl_read(path, dims);
      if (img == NULL || (size_t)cfl_size(dims) != n * frames) {
        json_str(j, "error", "its output is missing or of another size");
        b->failures++;
      } else if (frames == 1) {
        res.q = image_quality_of(img, NULL, ref, n);
        image_quality_json(j, &res.q);
      } else {
        json_open(j, "frames", '[');
        for (size_t f = 0; f < frames; f++) {
          json_open(j, NULL, '{');
          image_quality q = image_quality_of(img + f * n, NULL, ref + f * n, n);
          image_quality_json(j, &q);
          json_close(j, '}');
        }
        json_close(j, ']');
      }
      free(img);
    }
  }
  json_close(j, '}');
  fflush(j->f); /* a run cut short by a time limit keeps what it measured */
  return res;
}

/* The share of the k-space energy that BART's compressed k-space keeps. */
static void cc_energy(sparse_bench *b, const char *in, const char *out) {
  char path[PATH_MAX];
  long dims[CFL_MAX_DIMS];
  double e[2] = {0, 0};
  const char *names[2] = {in, out};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", b->tmp, names[i]);
    float complex *k = cfl_read(path, dims);
    for (long p = 0; k != NULL && p < cfl_size(dims); p++)
      e[i] += pow(cabsf(k[p]), 2);
    free(k);
  }
  json_num(b->j, "cc_energy_kept", e[0] > 0 ? e[1] / e[0] : NAN);
}

/* BART's figures the 2-core comparison takes: its maps and its default
 * L1-wavelet solve. */
typedef struct bart_figures {
  step_result ecalib, l1;
} bart_figures;

/* BART 0.8's `ecalib -m1` ends in a segmentation fault on the 3D case's
 * volume (256 x 256 x 128, 32 coils: inside OpenBLAS, on the H100's host
 * and on a 2-core machine alike; 96 x 96 x 48 runs), and so does its
 * first part alone (`ecalib -1`). BART's own memory-saving route (its
 * scripts/espirit_econ.sh) calibrates once (`ecalib -1`, here on the
 * calibration region alone), pads that along z to the volume and takes
 * the maps slice by slice (`ecaltwo`): seconds a slice, many minutes a
 * volume. Here it runs on ECON_SLICES slices spread over the volume, each
 * timed, and those slices' maps are compared with ours; BART's solver runs
 * with our maps (in 2D swapping the two sets moves either solver by 0.02
 * dB at most: maps_versus_solver). */
#define ECON_SLICES 4
/* BART's default kernel (ecalib -k 6), and the largest calibration matrix
 * (columns: kernel^3 x coils) its first part is asked to take: 32 coils'
 * 6,912 columns ran over 8 minutes on the H100's 16-thread host without
 * finishing (device run 6); the quick case's 4 coils take a second. */
#define ECON_KERNEL 6
#define ECON_MAX_COLUMNS 2048

/* One BART command (argv after "bart") without a JSON object of its own;
 * its time added to *ms. 0, or -1 with the reason in why. */
static int bart_quiet(sparse_bench *b, const char *const *args, double *ms, char *why,
                      size_t size) {
  const char *argv[16] = {b->bart};
  for (int a = 1; a < 15 && args[a - 1] != NULL; a++)
    argv[a] = args[a - 1];
  timing t;
  int rc = timed(b, argv, 1, &t, why, size);
  *ms += t.first_ms;
  return rc;
}

static void bart_maps_3d(sparse_bench *b, const sparse_scan *s, const float complex *our_maps) {
  bench_json *j = b->j;
  size_t plane = s->dims[0] * s->dims[1], grid = plane * s->dims[2], nz = s->dims[2];
  json_open(j, "ecalib_econ", '{');
  if (ECON_KERNEL * ECON_KERNEL * ECON_KERNEL * s->coils > ECON_MAX_COLUMNS) {
    json_str(j, "skipped", "BART's calibration (ecalib -1) of a 6^3 kernel over this many coils "
                           "(the SVD of a matrix of 6^3 x coils columns, cubic in them) ran over "
                           "8 minutes on 16 threads without finishing (32 coils: 6,912 columns)");
    json_close(j, '}');
    return;
  }
  json_str(j, "what", "BART's memory-saving ESPIRiT (scripts/espirit_econ.sh): ecalib -1 on the "
                      "calibration region (resize -c), padded along z (fft, resize -c, fft -i), "
                      "ecaltwo -m 1 on slices spread over the volume; ecalib -m1 and ecalib -1 "
                      "on the whole volume end in a segmentation fault in BART 0.8");
  char nx[24], ny[24], zs[24], why[700] = "";
  snprintf(nx, sizeof nx, "%zu", s->dims[0]);
  snprintf(ny, sizeof ny, "%zu", s->dims[1]);
  snprintf(zs, sizeof zs, "%zu", nz);
  /* ecalib -1 reads only the calibration region, yet on the whole volume
   * (2 GiB of k-space) it too ends in a segmentation fault: it gets the
   * region alone (cropped as its -r 24 would take it) */
  char cal[24];
  snprintf(cal, sizeof cal, "%d", s->calibration < 24 ? s->calibration : 24);
  double calib_ms = 0, pad_ms = 0, slices_ms = 0;
  int rc = bart_quiet(b, (const char *[]){"resize", "-c", "0", cal, "1", cal, "2", cal, "ksp",
                                          "ksp_cal", NULL},
                      &calib_ms, why, sizeof why);
  if (rc == 0)
    rc = bart_quiet(b, (const char *[]){"ecalib", "-1", "ksp_cal", "eon", NULL}, &calib_ms, why,
                    sizeof why);
  if (rc == 0)
    rc = bart_quiet(b, (const char *[]){"fft", "4", "eon", "eon_k", NULL}, &pad_ms, why,
                    sizeof why);
  if (rc == 0)
    rc = bart_quiet(b, (const char *[]){"resize", "-c", "2", zs, "eon_k", "eon_kz", NULL},
                    &pad_ms, why, sizeof why);
  if (rc == 0)
    rc = bart_quiet(b, (const char *[]){"fft", "-i", "4", "eon_kz", "eon_z", NULL}, &pad_ms,
                    why, sizeof why);
  size_t sub = ECON_SLICES * plane;
  float complex *ours = malloc(sub * s->coils * sizeof *ours);
  float complex *theirs = malloc(sub * s->coils * sizeof *theirs);
  float *ref = malloc(sub * sizeof *ref);
  if (ours == NULL || theirs == NULL || ref == NULL) {
    rc = -1;
    snprintf(why, sizeof why, "out of memory");
  }
  for (int k = 0; rc == 0 && k < ECON_SLICES; k++) {
    size_t z = (size_t)(2 * k + 1) * nz / (2 * ECON_SLICES);
    char zi[24], path[PATH_MAX];
    snprintf(zi, sizeof zi, "%zu", z);
    rc = bart_quiet(b, (const char *[]){"slice", "2", zi, "eon_z", "eon_slice", NULL}, &pad_ms,
                    why, sizeof why);
    if (rc == 0)
      rc = bart_quiet(b, (const char *[]){"ecaltwo", "-m", "1", nx, ny, "1", "eon_slice",
                                          "sens_slice", NULL},
                      &slices_ms, why, sizeof why);
    long dims[CFL_MAX_DIMS];
    snprintf(path, sizeof path, "%s/sens_slice", b->tmp);
    float complex *m = rc == 0 ? cfl_read(path, dims) : NULL;
    if (rc == 0 && (m == NULL || (size_t)cfl_size(dims) != plane * s->coils)) {
      rc = -1;
      snprintf(why, sizeof why, "ecaltwo's maps are missing or of another size");
    }
    for (size_t c = 0; rc == 0 && c < s->coils; c++) {
      memcpy(theirs + c * sub + k * plane, m + c * plane, plane * sizeof *m);
      memcpy(ours + c * sub + k * plane, our_maps + c * grid + z * plane, plane * sizeof *ours);
    }
    if (rc == 0)
      memcpy(ref + k * plane, s->reference + z * plane, plane * sizeof *ref);
    free(m);
  }
  if (rc < 0) {
    json_str(j, "error", why);
    b->failures++;
  } else {
    json_num(j, "calibration_ms", calib_ms);
    json_num(j, "padding_and_slicing_ms", pad_ms);
    json_int(j, "slices", ECON_SLICES);
    json_num(j, "ecaltwo_ms_per_slice", slices_ms / ECON_SLICES);
    json_num(j, "volume_estimate_ms", calib_ms + pad_ms + slices_ms / ECON_SLICES * (double)nz);
    maps_agreement(j, ref, sub, s->coils, ours, theirs);
  }
  free(ours);
  free(theirs);
  free(ref);
  json_close(j, '}');
}

/* our_maps: 3D, the maps BART's solver takes (bart_maps_3d); NULL in 2D. */
static void bart_cartesian(sparse_bench *b, const sparse_case *c, const sparse_scan *s,
                           const float complex *our_maps, bart_figures *fig) {
  size_t grid = s->dims[0] * s->dims[1] * s->dims[2];
  long dims[4] = {(long)s->dims[0], (long)s->dims[1], (long)s->dims[2], (long)s->coils};
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/ksp", b->tmp);
  if (cfl_write(path, 4, dims, s->kspace) < 0) {
    json_str(b->j, "error", "cannot write ksp.cfl");
    b->failures++;
    return;
  }
  const char *spatial = c->nz > 1 ? "7" : "3", *tv = "T:3:0:" LAMBDA_TEXT;
  char keep[16];
  snprintf(keep, sizeof keep, "%d", c->coils / 4 > 2 ? c->coils / 4 : 2);
  sparse_bench one = *b; /* the floor: one run */
  one.rounds = 1;
  bart_step(&one, "zero_filled_fft", (const char *[]){"fft", "-i", "-u", spatial, "ksp", "zfc", NULL},
            NULL, NULL, 0, 1);
  bart_step(&one, "zero_filled", (const char *[]){"rss", "8", "zfc", "zf", NULL}, "zf",
            s->reference, grid, 1);
  const char *sens = "sens";
  if (c->nz > 1) {
    sens = "our_sens";
    snprintf(path, sizeof path, "%s/our_sens", b->tmp);
    if (our_maps == NULL || cfl_write(path, 4, dims, our_maps) < 0) {
      json_str(b->j, "error", "no maps of ours to give BART's solver");
      b->failures++;
      return;
    }
    json_str(b->j, "pics_maps", "ours (this run's ESPIRiT): BART's ecalib -m1 cannot make them");
  } else {
    fig->ecalib = bart_step(b, "ecalib", (const char *[]){"ecalib", "-m1", "ksp", "sens", NULL},
                            NULL, NULL, 0, 1);
  }
  bart_step(b, "pics_l1_100", (const char *[]){"pics", "-S", "-l1", "-r", LAMBDA_TEXT, "-i", "100",
                                               "ksp", sens, "l1_100", NULL}, "l1_100",
            s->reference, grid, 1);
  fig->l1 = bart_step(b, "pics_l1", (const char *[]){"pics", "-S", "-l1", "-r", LAMBDA_TEXT, "ksp",
                                                     sens, "l1", NULL}, "l1", s->reference,
                      grid, 1);
  if (c->nz > 1) { /* minutes each in 3D: the L1 solves above are the targets' */
    json_str(b->j, "left_out", "pics -l2, pics -R T and cc: minutes each in 3D");
    bart_maps_3d(b, s, our_maps);
    return;
  }
  bart_step(b, "pics_l2", (const char *[]){"pics", "-S", "-l2", "ksp", "sens", "l2", NULL}, "l2",
            s->reference, grid, 1);
  bart_step(b, "pics_tv", (const char *[]){"pics", "-S", "-R", tv, "ksp", "sens", "tv", NULL}, "tv",
            s->reference, grid, 1);
  bart_step(b, "cc", (const char *[]){"cc", "-p", keep, "-S", "ksp", "ksp_cc", NULL}, NULL, NULL,
            0, 1);
  cc_energy(b, "ksp", "ksp_cc");
}

static void bart_radial(sparse_bench *b, const sparse_case *c, const radial_scan *s) {
  size_t grid = (size_t)c->n * c->n;
  long traj_dims[11] = {3, s->samples, s->spokes, 1, 1, 1, 1, 1, 1, 1, s->frames};
  long ksp_dims[11] = {1, s->samples, s->spokes, s->coils, 1, 1, 1, 1, 1, 1, s->frames};
  /* every frame's spokes together, for the maps */
  long all_traj[3] = {3, s->samples, s->spokes * s->frames};
  long all_ksp[4] = {1, s->samples, s->spokes * s->frames, s->coils};
  float complex *joined = malloc((size_t)(s->samples * s->spokes * s->frames * s->coils) *
                                 sizeof *joined);
  char path[4][PATH_MAX];
  const char *names[4] = {"traj", "ksp", "traj_all", "ksp_all"};
  for (int i = 0; i < 4; i++)
    snprintf(path[i], sizeof path[i], "%s/%s", b->tmp, names[i]);
  long per_frame = s->samples * s->spokes;
  for (long f = 0; joined != NULL && f < s->frames; f++)
    for (long cc = 0; cc < s->coils; cc++)
      memcpy(joined + (cc * s->frames + f) * per_frame,
             s->kspace + (f * s->coils + cc) * per_frame, (size_t)per_frame * sizeof *joined);
  int ok = joined != NULL && cfl_write(path[0], 11, traj_dims, s->traj) == 0 &&
           cfl_write(path[1], 11, ksp_dims, s->kspace) == 0 &&
           cfl_write(path[2], 3, all_traj, s->traj) == 0 &&
           cfl_write(path[3], 4, all_ksp, joined) == 0;
  free(joined);
  if (!ok) {
    json_str(b->j, "error", "cannot write the .cfl files");
    b->failures++;
    return;
  }
  char size[64];
  snprintf(size, sizeof size, "%d:%d:1", c->n, c->n);
  size_t frames = (size_t)s->frames;
  bart_step(b, "maps_nufft", (const char *[]){"nufft", "-i", "-d", size, "traj_all", "ksp_all",
                                              "grid_img", NULL}, NULL, NULL, 0, 1);
  bart_step(b, "maps_fft", (const char *[]){"fft", "-u", "3", "grid_img", "grid_k", NULL}, NULL,
            NULL, 0, 1);
  bart_step(b, "ecalib", (const char *[]){"ecalib", "-m1", "grid_k", "sens", NULL}, NULL, NULL, 0,
            1);
  if (c->kind == REALTIME) {
    bart_step(b, "pics_tv_temporal", (const char *[]){"pics", "-S", "-R", "T:1024:0:" LAMBDA_TEXT,
                                                      "-t", "traj", "ksp", "sens", "tt", NULL},
              "tt", s->reference, grid, frames);
    bart_step(b, "pics_l2", (const char *[]){"pics", "-S", "-l2", "-t", "traj", "ksp", "sens", "l2",
                                             NULL}, "l2", s->reference, grid, frames);
    return;
  }
  bart_step(b, "pics_l1", (const char *[]){"pics", "-S", "-e", "-l1", "-r", LAMBDA_TEXT, "-t",
                                           "traj", "ksp", "sens", "l1", NULL}, "l1", s->reference,
            grid, 1);
  bart_step(b, "pics_tv", (const char *[]){"pics", "-S", "-R", "T:3:0:" LAMBDA_TEXT, "-t", "traj",
                                           "ksp", "sens", "tv", NULL}, "tv", s->reference, grid, 1);
  bart_step(b, "pics_l2", (const char *[]){"pics", "-S", "-l2", "-t", "traj", "ksp", "sens", "l2",
                                           NULL}, "l2", s->reference, grid, 1);
}

/* ---- ours ---- */

/* The images of an output file's group `config`: magnitudes of every
 * image in order, (n pixels each) into out (frames of them). 0 or -1. */
static int read_images(const char *path, const char *config, size_t n, size_t frames, float *out) {
  ISMRMRD_Dataset d;
  if (ismrmrd_init_dataset(&d, path, config) != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&d, false) != ISMRMRD_NOERROR)
    return -1;
  int rc = ismrmrd_get_number_of_images(&d, "image_1") == frames ? 0 : -1;
  for (size_t f = 0; rc == 0 && f < frames; f++) {
    ISMRMRD_Image im;
    ismrmrd_init_image(&im);
    rc = ismrmrd_read_image(&d, "image_1", (uint32_t)f, &im) == ISMRMRD_NOERROR &&
                 (size_t)im.head.matrix_size[0] * im.head.matrix_size[1] *
                         im.head.matrix_size[2] * im.head.channels == n
             ? 0
             : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
      switch (im.head.data_type) {
      case ISMRMRD_FLOAT:
        out[f * n + i] = fabsf(((const float *)im.data)[i]);
        break;
      case ISMRMRD_CXFLOAT:
        out[f * n + i] = cabsf(((const float complex *)im.data)[i]);
        break;
      default:
        rc = -1;
      }
    }
    ismrmrd_cleanup_image(&im);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return rc;
}

/* End to end: `reconclient send` of the case's file through each server
 * with config (the CPU server only when with_cpu), its images against the
 * reference. */
static step_result ours_servers(sparse_bench *b, const char *config, const char *file,
                                const float *ref, size_t n, size_t frames, int with_cpu) {
  bench_json *j = b->j;
  step_result cpu = {.q = {.psnr_db = NAN}};
  for (int k = 0; k < 2; k++) {
    stream_server *s = &b->servers[k];
    json_open(j, server_names[k], '{');
    int has = s->pid > 0 ? stream_server_has_config(s, config) : -1;
    if (k == 1 && !with_cpu) {
      json_str(j, "skipped", "3D: the CPU solve above gives the CPU figure");
    } else if (s->pid <= 0) {
      json_str(j, "skipped", k == 0 ? "no GPU" : "no server");
    } else if (has != 1) {
      json_str(j, "missing", has == 0 ? "the server has no such config" : "cannot ask the server");
    } else {
      char port[16], out[PATH_MAX], why[700];
      snprintf(port, sizeof port, "%d", s->port);
      snprintf(out, sizeof out, "%s/%s-out.h5", b->tmp, config);
      const char *argv[] = {b->client, "send", file, "-c", config, "-a", "127.0.0.1", "-p", port,
                            "-o", out, NULL};
      timing t = {NAN, NAN};
      int rc = 0;
      for (int r = 0; rc == 0 && r < b->rounds; r++) { /* a fresh output file each round */
        remove(out);
        timing one;
        rc = timed(b, argv, 1, &one, why, sizeof why);
        t.first_ms = r == 0 ? one.first_ms : t.first_ms;
        t.best_ms = one.best_ms >= t.best_ms ? t.best_ms : one.best_ms;
      }
      char line[2048];
      stream_server_session_line(s, 1000, line, sizeof line);
      float *img = malloc(n * frames * sizeof *img);
      if (rc < 0 || img == NULL || read_images(out, config, n, frames, img) < 0) {
        json_str(j, "error", rc < 0 ? why : "its images are missing or of another size");
        b->failures++;
      } else {
        json_str(j, "what", "reconclient send, process start to exit");
        timing_json(j, &t);
        image_quality worst = {.psnr_db = INFINITY};
        for (size_t f = 0; f < frames; f++) {
          image_quality q = image_quality_of(NULL, img + f * n, ref + f * n, n);
          if (q.psnr_db < worst.psnr_db)
            worst = q;
        }
        if (frames > 1)
          json_str(j, "quality_of", "the worst frame");
        image_quality_json(j, &worst);
        json_str(j, "log", line);
        if (k == 1)
          cpu = (step_result){.ok = 1, .t = t, .q = worst};
      }
      free(img);
      remove(out);
    }
    json_close(j, '}');
  }
  return cpu;
}

/* The solve alone, each regularizer on each device, through the adapter.
 * maps_out (3D; else NULL): where the first wavelet run that succeeds
 * leaves its maps, for BART's solver; *maps_written says whether one did. */
static step_result ours_solve(sparse_bench *b, const sparse_scan *s, float complex *maps_out,
                              int *maps_written) {
  bench_json *j = b->j;
  step_result cpu = {.q = {.psnr_db = NAN}};
  const sparse_ours_run runs[] = {{"wavelet", LAMBDA, 100, NULL, NULL},
                                  {"tv", LAMBDA, 100, NULL, NULL},
                                  {"l2", 0, 30, NULL, NULL}};
  mr_device *devices[2] = {b->gpu, b->cpu};
  int exported = 0;
  const char *names[2] = {"solve_gpu", "solve_cpu"};
  size_t grid = s->dims[0] * s->dims[1] * s->dims[2];
  for (int k = 0; k < 2; k++) {
    json_open(j, names[k], '{');
    if (!bench_sparse_ours_available()) {
      json_str(j, "missing", "this build has no gpu/sparse solver (bench_sparse_ours.h)");
    } else if (k == 1 && s->dims[2] > 1 && b->gpu != NULL) {
      /* 3.5 minutes on 16 threads (maps 124 s, wavelet solve 85 s, run of
       * a8e9a22): left out so that BART's steps fit the same device call */
      json_str(j, "skipped", "3D: minutes on the CPU (docs/benchmarks.md has a run's figures)");
    } else if (devices[k] == NULL) {
      json_str(j, "skipped", "no GPU");
    } else {
      float complex *img = malloc(grid * sizeof *img);
      for (size_t r = 0; img != NULL && r < sizeof runs / sizeof *runs; r++) {
        sparse_ours_run run = runs[r];
        run.maps_out = r == 0 && !exported ? maps_out : NULL; /* NULL: none asked */
        json_open(j, runs[r].regularizer, '{');
        json_num(j, "lambda", runs[r].lambda);
        json_int(j, "iterations", runs[r].iterations);
        timing maps = {NAN, NAN}, solve = {NAN, NAN};
        mr_err err = {0};
        int rc = 0, done = 0;
        for (int round = 0; rc == 0 && round < b->rounds; round++) {
          sparse_ours_result res;
          rc = bench_sparse_ours_solve(devices[k], s, &run, img, &res, &err);
          if (rc < 0)
            break;
          maps.first_ms = round == 0 ? res.maps_ms : maps.first_ms;
          solve.first_ms = round == 0 ? res.solve_ms : solve.first_ms;
          maps.best_ms = res.maps_ms >= maps.best_ms ? maps.best_ms : res.maps_ms;
          solve.best_ms = res.solve_ms >= solve.best_ms ? solve.best_ms : res.solve_ms;
          done = res.iterations;
        }
        if (rc < 0) {
          json_str(j, "error", err.msg);
          b->failures++;
        } else {
          json_int(j, "iterations_done", done);
          json_open(j, "maps", '{');
          timing_json(j, &maps);
          json_close(j, '}');
          json_open(j, "solve", '{');
          timing_json(j, &solve);
          json_close(j, '}');
          image_quality q = image_quality_of(img, NULL, s->reference, grid);
          image_quality_json(j, &q);
          exported |= run.maps_out != NULL;
          if (k == 1 && r == 0) /* maps and wavelet solve, each at its best */
            cpu = (step_result){.ok = 1,
                                .t = {maps.first_ms + solve.first_ms, maps.best_ms + solve.best_ms},
                                .q = q};
        }
        json_close(j, '}');
      }
      free(img);
    }
    json_close(j, '}');
  }
  *maps_written = exported;
  return cpu;
}

/* ---- maps against solver ---- */

/* Which of the two - the coil maps or the solver - makes our L1-wavelet
 * image differ from BART's (same lambda, 100 iterations, the CPU device):
 * our solve with BART's maps (`sens` of bart_cartesian), with our own maps
 * in the same run, and BART's pics with our maps. 2D cases only. */
static void maps_versus_solver(sparse_bench *b, const sparse_scan *s) {
  bench_json *j = b->j;
  size_t grid = s->dims[0] * s->dims[1] * s->dims[2], kn = grid * s->coils;
  json_open(j, "maps_versus_solver", '{');
  json_str(j, "what", "L1-wavelet, lambda " LAMBDA_TEXT ", 100 iterations, our solve on the CPU "
                      "device: each solver with each set of maps (BART's ecalib -m1, our "
                      "ESPIRiT)");
  char path[PATH_MAX];
  long dims[CFL_MAX_DIMS];
  snprintf(path, sizeof path, "%s/sens", b->tmp);
  float complex *bart_maps = cfl_read(path, dims), *our_maps = malloc(kn * sizeof *our_maps);
  float complex *img = malloc(grid * sizeof *img);
  mr_err err = {0};
  sparse_ours_result res;
  sparse_ours_run run = {"wavelet", LAMBDA, 100, NULL, our_maps};
  int rc = bart_maps != NULL && (size_t)cfl_size(dims) == kn && our_maps != NULL && img != NULL &&
                   bench_sparse_ours_available() && b->cpu != NULL
               ? 0
               : -1;
  if (rc < 0)
    json_str(j, "missing", "BART's maps, our solver or memory");
  const char *keys[2] = {"ours_with_our_maps", "ours_with_bart_maps"};
  for (int k = 0; k < 2 && rc == 0; k++) {
    run.maps = k == 0 ? NULL : bart_maps;
    run.maps_out = k == 0 ? our_maps : NULL;
    rc = bench_sparse_ours_solve(b->cpu, s, &run, img, &res, &err);
    json_open(j, keys[k], '{');
    if (rc < 0) {
      json_str(j, "error", err.msg);
      b->failures++;
    } else {
      image_quality q = image_quality_of(img, NULL, s->reference, grid);
      image_quality_json(j, &q);
    }
    json_close(j, '}');
  }
  long cdims[4] = {(long)s->dims[0], (long)s->dims[1], (long)s->dims[2], (long)s->coils};
  snprintf(path, sizeof path, "%s/our_sens", b->tmp);
  if (rc == 0 && cfl_write(path, 4, cdims, our_maps) == 0) {
    sparse_bench one = *b;
    one.rounds = 1;
    bart_step(&one, "bart_with_our_maps",
              (const char *[]){"pics", "-S", "-l1", "-r", LAMBDA_TEXT, "-i", "100", "ksp",
                               "our_sens", "l1_our_maps", NULL},
              "l1_our_maps", s->reference, grid, 1);
    maps_agreement(j, s->reference, grid, s->coils, our_maps, bart_maps);
  }
  free(bart_maps);
  free(our_maps);
  free(img);
  json_close(j, '}');
}

/* ---- cases ---- */

/* Writes the case's file with the client's simulator. */
static int simulate(const sparse_case *c, const char *path, char *why, size_t size) {
  mr_sim_options o = {.trajectory = c->kind == CARTESIAN ? MR_SIM_CARTESIAN
                                    : c->kind == REALTIME ? MR_SIM_GOLDEN
                                                          : MR_SIM_RADIAL,
                      .matrix = c->n, .three_d = c->nz > 1, .coils = c->coils,
                      .noise = noise_of(c), .seed = 1, .path = path};
  if (c->kind == CARTESIAN) {
    o.sampling = c->nz > 1 ? MR_SAMPLING_POISSON : MR_SAMPLING_VD;
    o.acceleration = c->r;
    o.calibration = c->calibration;
    o.partitions = c->nz > 1 ? c->nz : 0;
  } else {
    o.spokes = c->spokes;
    o.frames = c->frames;
    o.moving = c->frames > 0;
  }
  mr_err err = {0};
  remove(path);
  if (mr_simulate(&o, &err) < 0) {
    snprintf(why, size, "simulate: %s", err.msg);
    return -1;
  }
  return 0;
}

/* One comparison of cpu_vs_bart: BART's maps and default L1-wavelet solve
 * against ours at their best times. */
static void versus(bench_json *j, const char *key, const char *what, const bart_figures *bart,
                   const step_result *ours) {
  json_open(j, key, '{');
  json_str(j, "ours", what);
  if (!ours->ok || !bart->ecalib.ok || !bart->l1.ok) {
    json_str(j, "missing", !ours->ok ? "ours did not run (see ours)" : "BART did not run");
  } else {
    double bart_ms = bart->ecalib.t.best_ms + bart->l1.t.best_ms;
    json_num(j, "bart_ms", bart_ms);
    json_num(j, "ours_ms", ours->t.best_ms);
    json_num(j, "speedup", bart_ms / ours->t.best_ms);
    json_num(j, "bart_psnr_db", bart->l1.q.psnr_db);
    json_num(j, "ours_psnr_db", ours->q.psnr_db);
    json_num(j, "psnr_difference_db", ours->q.psnr_db - bart->l1.q.psnr_db);
  }
  json_close(j, '}');
}

/* Our CPU path at BART's quality: maps + the fewest wavelet iterations (of
 * a short ladder) whose image reaches the PSNR of BART's default pics -l1,
 * best of the rounds; not ok when none does or BART did not run. */
static step_result ours_at_psnr(sparse_bench *b, const sparse_scan *s, double psnr_db,
                                int *iterations) {
  static const int ladder[] = {10, 15, 20, 30, 50, 100};
  step_result r = {.q = {.psnr_db = NAN}};
  size_t grid = s->dims[0] * s->dims[1] * s->dims[2];
  float complex *img = malloc(grid * sizeof *img);
  *iterations = 0;
  for (size_t l = 0; img != NULL && b->cpu != NULL && !isnan(psnr_db) && !r.ok &&
                     l < sizeof ladder / sizeof *ladder;
       l++) {
    sparse_ours_run run = {"wavelet", LAMBDA, ladder[l], NULL, NULL};
    double best = INFINITY;
    mr_err err = {0};
    int rc = 0;
    for (int round = 0; rc == 0 && round < b->rounds; round++) {
      sparse_ours_result res;
      rc = bench_sparse_ours_solve(b->cpu, s, &run, img, &res, &err);
      best = rc == 0 && res.maps_ms + res.solve_ms < best ? res.maps_ms + res.solve_ms : best;
    }
    image_quality q = image_quality_of(img, NULL, s->reference, grid);
    if (rc == 0 && q.psnr_db >= psnr_db) {
      r = (step_result){.ok = 1, .t = {best, best}, .q = q};
      *iterations = ladder[l];
    }
  }
  free(img);
  return r;
}

static void run_cartesian(sparse_bench *b, const sparse_case *c, const char *file) {
  bench_json *j = b->j;
  sparse_scan s = {.dims = {(size_t)c->n, (size_t)c->n, (size_t)c->nz},
                   .coils = (size_t)c->coils, .calibration = c->calibration};
  if (read_cartesian(file, &s) < 0) {
    json_str(j, "error", "cannot read the simulated scan back");
    b->failures++;
    scan_free(&s);
    return;
  }
  long acquired = 0;
  for (size_t i = 0; i < s.dims[1] * s.dims[2]; i++)
    acquired += s.mask[i];
  json_num(j, "acceleration", (double)(s.dims[1] * s.dims[2]) / (double)acquired);
  /* ours first: a run cut short by a time limit in BART's slow 3D steps
   * still has our figures */
  json_open(j, "ours", '{');
  float complex *our_maps = c->nz > 1 ? malloc(s.dims[0] * s.dims[1] * s.dims[2] * s.coils *
                                               sizeof *our_maps)
                                      : NULL;
  int maps_written;
  step_result solve_cpu = ours_solve(b, &s, our_maps, &maps_written);
  if (!maps_written) {
    free(our_maps);
    our_maps = NULL;
  }
  step_result server_cpu = ours_servers(b, "cs", file, s.reference,
                                        s.dims[0] * s.dims[1] * s.dims[2], 1,
                                        c->nz == 1 || b->gpu == NULL);
  json_close(j, '}');
  fflush(j->f);
  bart_figures bart = {.ecalib = {.ok = 0}, .l1 = {.ok = 0}};
  json_open(j, "bart", '{');
  bart_cartesian(b, c, &s, our_maps, &bart);
  free(our_maps);
  json_close(j, '}');
  if (c->nz == 1)
    maps_versus_solver(b, &s);
  if (c->cpu_vs_bart) {
    json_open(j, "cpu_vs_bart", '{');
    json_str(j, "what", "BART ecalib -m1 + pics -l1 (its defaults, OMP_NUM_THREADS as recorded) "
                        "against our CPU path, best times; equal PSNR when psnr_difference_db "
                        ">= 0");
    json_str(j, "target", ">= 3x faster than BART at equal PSNR (2-core machine)");
    versus(j, "solve", "maps + 100-iteration wavelet solve on the CPU device", &bart, &solve_cpu);
    versus(j, "server", "reconclient send through the CPU server, cs config", &bart, &server_cpu);
    int iterations;
    step_result equal = ours_at_psnr(b, &s, bart.l1.ok ? bart.l1.q.psnr_db : NAN, &iterations);
    char what[160];
    snprintf(what, sizeof what, "maps + the fewest wavelet iterations (of 10, 15, 20, 30, 50, "
                                "100) reaching BART's PSNR, on the CPU device: %d", iterations);
    versus(j, "at_equal_psnr", what, &bart, &equal);
    json_close(j, '}');
  }
  scan_free(&s);
}

static void run_radial(sparse_bench *b, const sparse_case *c, const char *file) {
  bench_json *j = b->j;
  radial_scan s = {.samples = 2L * c->n, .spokes = c->spokes,
                   .frames = c->frames > 0 ? c->frames : 1, .coils = c->coils};
  size_t grid = (size_t)c->n * c->n;
  s.reference = malloc(grid * (size_t)s.frames * sizeof *s.reference);
  int rc = s.reference != NULL ? read_radial(file, c->n, &s) : -1;
  for (long f = 0; rc == 0 && f < s.frames; f++) {
    double shift[3] = {0, 0, 0};
    if (c->frames > 0)
      mr_sim_motion(c->n, (int)f, shift);
    rc = band_limited_reference(c->n, c->coils, shift, s.reference + (size_t)f * grid);
  }
  if (rc < 0) {
    json_str(j, "error", "cannot read the simulated scan back");
    b->failures++;
  } else {
    json_open(j, "ours", '{');
    ours_servers(b, c->kind == REALTIME ? "realtime_cs" : "cs_radial", file, s.reference, grid,
                 (size_t)s.frames, 1);
    json_close(j, '}');
    fflush(j->f);
    json_open(j, "bart", '{');
    bart_radial(b, c, &s);
    json_close(j, '}');
  }
  radial_free(&s);
}

static void run_case(sparse_bench *b, const sparse_case *c) {
  bench_json *j = b->j;
  json_open(j, c->name, '{');
  char file[PATH_MAX], why[600];
  snprintf(file, sizeof file, "%s/%s.h5", b->tmp, c->name);
  json_int(j, "matrix", c->n);
  json_int(j, "partitions", c->nz);
  json_int(j, "coils", c->coils);
  if (c->kind == CARTESIAN) {
    json_str(j, "sampling", c->nz > 1 ? "variable-density Poisson disc" : "variable-density lines");
    json_num(j, "acceleration_asked", c->r);
    json_int(j, "calibration", c->calibration);
  } else {
    json_int(j, "spokes", c->spokes);
    if (c->frames > 0)
      json_int(j, "frames", c->frames);
  }
  json_num(j, "noise", noise_of(c));
  if (c->targets != NULL)
    json_str(j, "target", c->targets);
  fprintf(stderr, "mr-bench: sparse: %s: simulating\n", c->name);
  double t0 = bench_now_ms();
  if (simulate(c, file, why, sizeof why) < 0) {
    json_str(j, "error", why);
    b->failures++;
  } else {
    json_num(j, "simulate_ms", bench_now_ms() - t0);
    fprintf(stderr, "mr-bench: sparse: %s: BART and ours\n", c->name);
    if (c->kind == CARTESIAN)
      run_cartesian(b, c, file);
    else
      run_radial(b, c, file);
  }
  remove(file);
  json_close(j, '}');
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* reconserver: --server or beside mr-bench; reconclient beside it, else
 * beside mr-bench; configs: --configs, ./configs, the source tree's. */
static int start_servers(sparse_bench *b, const char *here) {
  const bench_ctx *ctx = b->ctx;
  char server[1100], dir[1100], why[600], log[512];
  char given[PATH_MAX]; /* absolute: the bench changes directory */
  if (ctx->server != NULL && realpath(ctx->server, given) != NULL)
    snprintf(server, sizeof server, "%.1000s", given);
  else
    snprintf(server, sizeof server, "%s/reconserver", here);
  snprintf(dir, sizeof dir, "%s", server);
  char *slash = strrchr(dir, '/');
  snprintf(b->client, sizeof b->client, "%s/reconclient", slash != NULL ? (*slash = '\0', dir) : ".");
  if (access(b->client, X_OK) != 0)
    snprintf(b->client, sizeof b->client, "%s/reconclient", here);
  struct stat st;
  const char *chosen = ctx->configs != NULL                              ? ctx->configs
                       : stat("configs", &st) == 0 && S_ISDIR(st.st_mode) ? "configs"
                                                                          : MR_BENCH_SOURCE_CONFIGS;
  char configs[PATH_MAX]; /* absolute: the bench changes directory */
  if (realpath(chosen, configs) == NULL) {
    fprintf(stderr, "mr-bench: sparse: no configs directory %s\n", chosen);
    return -1;
  }
  bench_json *j = b->j;
  json_open(j, "servers", '{');
  json_str(j, "configs", configs);
  for (int k = 0; k < 2; k++) {
    json_open(j, server_names[k], '{');
    if (k == 0 && b->gpu == NULL) {
      json_str(j, "skipped", "no GPU");
    } else if (access(server, X_OK) != 0 || access(b->client, X_OK) != 0) {
      json_str(j, "skipped", "no reconserver or reconclient beside mr-bench (or --server)");
    } else {
      snprintf(log, sizeof log, "%s/%s.log", b->tmp, server_names[k]);
      if (stream_server_start(&b->servers[k], server, configs, k == 0 ? ctx->gpus : "none", NULL,
                              log, why, sizeof why) < 0) {
        json_str(j, "error", why);
        b->failures++;
      } else {
        json_int(j, "port", b->servers[k].port);
      }
    }
    json_close(j, '}');
  }
  json_close(j, '}');
  return 0;
}

int bench_sparse(const bench_ctx *ctx) {
  sparse_bench b = {.ctx = ctx, .j = ctx->json};
  bench_json *j = ctx->json;
  char name[64];
  const char *names[NCASES];
  for (int i = 0; i < NCASES; i++)
    names[i] = full_cases[i].name;
  if (bench_unknown_case(ctx->cases, names, NCASES, name, sizeof name)) {
    fprintf(stderr, "mr-bench: sparse: no case '%s'\n", name);
    return -1;
  }
  b.rounds = ctx->rounds > 0 ? ctx->rounds : ctx->quick ? 1 : 3;
  json_int(j, "rounds", b.rounds);
  const sparse_case *cases = ctx->quick ? quick_cases : full_cases;
  char here[1024], threads[24];
  self_dir(here, sizeof here);
  snprintf(b.bart, sizeof b.bart, "%s/bart", here);
  if (access(b.bart, X_OK) != 0)
    snprintf(b.bart, sizeof b.bart, "%s", mr_test_have_tool("bart") ? "bart" : "");
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(threads, sizeof threads, "%ld", cores > 0 ? cores : 1);
  setenv("OMP_NUM_THREADS", threads, 1); /* BART's threads: this host's cores */
  /* A smoke run on a shared CI machine: OpenMP threads that spin while
   * waiting make BART up to 10x slower when other processes hold the cores.
   * A measurement keeps the library's default (or the caller's setting). */
  if (ctx->quick)
    setenv("OMP_WAIT_POLICY", "passive", 0);
  const char *wait_policy = getenv("OMP_WAIT_POLICY");
  json_open(j, "bart", '{');
  if (b.bart[0] == '\0') {
    json_str(j, "skipped", "no bart beside mr-bench or on PATH");
  } else {
    static char version[256], err[256];
    const char *argv[] = {b.bart, "version", NULL};
    snprintf(b.tmp, sizeof b.tmp, "/tmp/mr-bench-sparse-XXXXXX");
    if (mkdtemp(b.tmp) == NULL) {
      json_str(j, "error", "cannot make a temporary directory");
      json_close(j, '}');
      return -1;
    }
    mr_test_run(argv, b.tmp, version, sizeof version, err, sizeof err);
    version[strcspn(version, "\n")] = '\0';
    json_str(j, "path", b.bart);
    json_str(j, "version", version);
    json_str(j, "omp_num_threads", threads);
    json_str(j, "omp_wait_policy", wait_policy != NULL ? wait_policy : "unset (the default)");
  }
  json_close(j, '}');
  if (b.bart[0] == '\0') { /* nothing to compare with: the JSON says why */
    fprintf(stderr, "mr-bench: sparse: no bart\n");
    return 0;
  }
  if (bench_devices(ctx, &b.cpu, &b.gpu) < 0)
    return -1;
  char cwd[1024];
  if (getcwd(cwd, sizeof cwd) == NULL || start_servers(&b, here) < 0 || chdir(b.tmp) != 0) {
    bench_devices_release(ctx, b.cpu, b.gpu);
    return -1;
  }
  /* BART's files by their names, as in the JSON's commands: the bench
   * works in its directory */
  json_open(j, "cases", '{');
  for (int i = 0; i < NCASES; i++)
    if (bench_listed(ctx->cases, cases[i].name))
      run_case(&b, &cases[i]);
  json_close(j, '}');
  for (int k = 0; k < 2; k++)
    if (b.servers[k].pid > 0)
      stream_server_stop(&b.servers[k]);
  bench_devices_release(ctx, b.cpu, b.gpu);
  if (chdir(cwd) != 0)
    b.failures++;
  if (b.failures > 0) {
    fprintf(stderr, "mr-bench: sparse: %d step(s) failed; files kept in %s\n", b.failures, b.tmp);
    json_str(j, "kept_for_inspection", b.tmp);
  } else {
    nftw(b.tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  return b.failures > 0 ? -1 : 0;
}
