#include "simulate_sampled.h"

#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fftw3.h>
#include <ismrmrd/dataset.h>
#include <ismrmrd/version.h>

#include "h5.h"
#include "phantom.h"
#include "sampling.h"
#include "simulate_impl.h"

/* The scan being written. */
typedef struct scan {
  const mr_sim_options *o;
  int rank, n, nz, coils;
  int frames;               /* 1, or a dynamic series' frames (2D) */
  size_t grid;              /* n * n * nz */
  uint8_t *masks;           /* frames x nz x n (y fastest) */
  long *acquired;           /* per frame */
  long index;               /* readouts written so far */
  int frame;                /* being written: its mask, shift, reference */
  const uint8_t *mask;
  double shift[3];          /* the object's, moving: mr_sim_motion */
  fftwf_complex *kspace;    /* coils x nz x n x n (x fastest), then each coil's image */
  fftwf_plan inverse;       /* in place, one coil */
  float *reference;         /* frames x n x n x nz */
} scan;

/* ---- a parallel loop over [0, count) on every core ---- */

typedef void (*range_fn)(scan *s, size_t first, size_t end);

typedef struct part {
  pthread_t thread;
  scan *s;
  range_fn fn;
  size_t first, end;
} part;

static void *run_part(void *arg) {
  part *p = arg;
  p->fn(p->s, p->first, p->end);
  return NULL;
}

static void parallel(scan *s, size_t count, range_fn fn) {
  enum { MAX_THREADS = 64 };
  part parts[MAX_THREADS];
  int running[MAX_THREADS] = {0};
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t threads = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (size_t)cores;
  if (threads > count)
    threads = count > 0 ? count : 1;
  for (size_t t = 0; t < threads; t++) {
    parts[t] = (part){.s = s, .fn = fn, .first = count * t / threads,
                      .end = count * (t + 1) / threads};
    running[t] = t > 0 && pthread_create(&parts[t].thread, NULL, run_part, &parts[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++) /* a part without a thread runs here */
    if (!running[t])
      fn(s, parts[t].first, parts[t].end);
  for (size_t t = 1; t < threads; t++)
    if (running[t])
      pthread_join(parts[t].thread, NULL);
}

/* ---- the grid ---- */

/* k-space rows [first, end) of nz * n (z, y): every coil. */
static void fill_rows(scan *s, size_t first, size_t end) {
  double complex values[64];
  for (size_t row = first; row < end; row++) {
    int z = (int)(row / (size_t)s->n), y = (int)(row % (size_t)s->n);
    for (int x = 0; x < s->n; x++) {
      double k[3] = {(double)(x - s->n / 2) / s->n, (double)(y - s->n / 2) / s->n,
                     (double)(z - s->nz / 2) / s->n};
      mr_phantom_kspace_moved(s->rank, s->n, s->coils, k, s->shift, values);
      for (int c = 0; c < s->coils; c++)
        s->kspace[(size_t)c * s->grid + row * s->n + x] = (fftwf_complex)values[c];
    }
  }
}

/* (-1)^(x + y + z): with even sizes, what centres a plain FFT on both
 * sides (up to a global sign, which the magnitude drops). */
static float checker(const scan *s, size_t i) {
  size_t x = i % s->n, y = (i / s->n) % s->n, z = i / ((size_t)s->n * s->n);
  return (x + y + z) % 2 ? -1.0f : 1.0f;
}

/* Coils [first, end) to images, in place. */
static void invert_coils(scan *s, size_t first, size_t end) {
  float scale = 1.0f / sqrtf((float)s->grid); /* unitary, as gpu/fft is */
  for (size_t c = first; c < end; c++) {
    fftwf_complex *v = s->kspace + c * s->grid;
    for (size_t i = 0; i < s->grid; i++)
      v[i] *= checker(s, i);
    fftwf_execute_dft(s->inverse, v, v);
    for (size_t i = 0; i < s->grid; i++)
      v[i] *= checker(s, i) * scale;
  }
}

static void combine(scan *s, size_t first, size_t end) {
  float *reference = s->reference + (size_t)s->frame * s->grid;
  for (size_t i = first; i < end; i++) {
    double sum = 0;
    for (int c = 0; c < s->coils; c++) {
      fftwf_complex v = s->kspace[(size_t)c * s->grid + i];
      sum += crealf(v) * crealf(v) + cimagf(v) * cimagf(v);
    }
    reference[i] = (float)sqrt(sum);
  }
}

/* ---- the file ---- */

/* The integer acceleration factors (step 1, step 2) nearest r. */
static void factors(const scan *s, int out[2]) {
  double r = s->o->acceleration;
  out[0] = (int)lround(r);
  out[1] = 1;
  if (s->rank == 2)
    return;
  double best = INFINITY;
  for (int a = 1; a <= (int)ceil(r); a++) {
    int b = (int)lround(r / a);
    if (b < 1 || b > a)
      continue;
    double miss = fabs(a * (double)b - r) + 1e-3 * (a - b); /* then the most even pair */
    if (miss < best) {
      best = miss;
      out[0] = a;
      out[1] = b;
    }
  }
}

static void header_xml(const scan *s, char *buf, size_t size) {
  const mr_sim_options *o = s->o;
  int n = s->n, nz = s->nz, fz = s->rank == 3 ? n : 1, f[2];
  char step2[256] = "", parallel_imaging[400] = "", repetitions[160] = "";
  if (s->frames > 1)
    snprintf(repetitions, sizeof repetitions,
             "<repetition><minimum>0</minimum><maximum>%d</maximum><center>0</center>"
             "</repetition>", s->frames - 1);
  if (s->rank == 3)
    snprintf(step2, sizeof step2,
             "<kspace_encoding_step_2><minimum>0</minimum><maximum>%d</maximum>"
             "<center>%d</center></kspace_encoding_step_2>", nz - 1, nz / 2);
  if (s->acquired[0] < (long)n * nz) {
    factors(s, f);
    snprintf(parallel_imaging, sizeof parallel_imaging,
             "<parallelImaging><accelerationFactor><kspace_encoding_step_1>%d"
             "</kspace_encoding_step_1><kspace_encoding_step_2>%d</kspace_encoding_step_2>"
             "</accelerationFactor><calibrationMode>%s</calibrationMode></parallelImaging>",
             f[0], f[1], o->calibration > 0 ? "embedded" : "other");
  }
  char protocol[160], encoding[2200];
  snprintf(protocol, sizeof protocol, "cartesian %s, %s R %g%s", s->rank == 3 ? "3D" : "2D",
           o->sampling == MR_SAMPLING_POISSON ? "Poisson-disc" : "variable-density",
           o->acceleration, s->frames > 1 ? ", a dynamic series (a mask per frame)" : "");
  snprintf(encoding, sizeof encoding,
           "<encoding>"
           "<encodedSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>%d</maximum>"
           "<center>%d</center></kspace_encoding_step_1>%s"
           "<slice><minimum>0</minimum><maximum>0</maximum><center>0</center></slice>%s"
           "</encodingLimits>"
           "<trajectory>cartesian</trajectory>%s</encoding>",
           n, n, nz, n, n, fz, n, n, nz, n, n, fz, n - 1, n / 2, step2, repetitions,
           parallel_imaging);
  mr_sim_header(buf, size, protocol, s->coils, encoding);
}

/* Readout `index` of the frame being written (its `in_frame`-th). */
static void acquisition_header(const scan *s, int y, int z, long index, long in_frame,
                               ISMRMRD_AcquisitionHeader *h) {
  mr_sim_readout(h, (size_t)index, s->n, s->coils);
  h->idx.kspace_encode_step_1 = (uint16_t)y;
  h->idx.kspace_encode_step_2 = (uint16_t)z;
  h->idx.repetition = (uint16_t)s->frame;
  long acquired = s->acquired[s->frame];
  mr_sampling pattern = {.ny = s->n, .nz = s->nz, .calibration = s->o->calibration};
  if (acquired < (long)s->n * s->nz && mr_sampling_in_calibration(&pattern, y, z))
    h->flags |= 1ull << (ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING - 1);
  if (in_frame == 0)
    h->flags |= (1ull << (ISMRMRD_ACQ_FIRST_IN_SLICE - 1)) |
                (s->frames > 1 ? 1ull << (ISMRMRD_ACQ_FIRST_IN_REPETITION - 1) : 0);
  if (in_frame + 1 == acquired)
    h->flags |= (1ull << (ISMRMRD_ACQ_LAST_IN_SLICE - 1)) |
                (1ull << (ISMRMRD_ACQ_LAST_IN_REPETITION - 1)) |
                (s->frame + 1 == s->frames ? 1ull << (ISMRMRD_ACQ_LAST_IN_MEASUREMENT - 1) : 0);
}

/* The frame's readouts (its noise drawn on from the last frame's). */
static int write_acquisitions(scan *s, ISMRMRD_Dataset *d, mr_sim_noise *noise, mr_err *err) {
  long index = 0;
  int rc = 0;
  for (int z = 0; rc == 0 && z < s->nz; z++)
    for (int y = 0; rc == 0 && y < s->n; y++) {
      if (!s->mask[(size_t)z * s->n + y])
        continue;
      ISMRMRD_Acquisition a;
      ismrmrd_init_acquisition(&a);
      acquisition_header(s, y, z, s->index, index, &a.head);
      if (ismrmrd_make_consistent_acquisition(&a) != ISMRMRD_NOERROR)
        return mr_err_set(err, MR_ENOMEM, "out of memory for a readout");
      size_t row = ((size_t)z * s->n + y) * s->n;
      for (int c = 0; c < s->coils; c++)
        for (int x = 0; x < s->n; x++) {
          fftwf_complex v = s->kspace[(size_t)c * s->grid + row + x];
          if (s->o->noise > 0)
            v += (fftwf_complex)mr_sim_gaussian(noise);
          a.data[(size_t)c * s->n + x] = v;
        }
      mr_h5_lock();
      if (ismrmrd_append_acquisition(d, &a) != ISMRMRD_NOERROR || mr_h5_failed())
        rc = mr_err_set(err, MR_EIO, "cannot write readout %ld to %s: %s", s->index,
                        s->o->path, mr_h5_error());
      mr_h5_unlock();
      ismrmrd_cleanup_acquisition(&a);
      index++;
      s->index++;
    }
  return rc;
}

/* Appends an array of the grid's shape: the reference (ISMRMRD_FLOAT) or
 * the phantom (ISMRMRD_CXFLOAT). Call under the h5 lock. */
static int write_array(const scan *s, ISMRMRD_Dataset *d, const char *name, uint16_t type,
                       mr_err *err) {
  ISMRMRD_NDArray arr;
  ismrmrd_init_ndarray(&arr);
  arr.data_type = type;
  arr.ndim = (uint16_t)s->rank;
  arr.dims[0] = arr.dims[1] = (size_t)s->n;
  arr.dims[2] = (size_t)s->nz;
  if (s->frames > 1) { /* 2D: n x n x frames */
    arr.ndim = 3;
    arr.dims[2] = (size_t)s->frames;
  }
  if (ismrmrd_make_consistent_ndarray(&arr) != ISMRMRD_NOERROR)
    return mr_err_set(err, MR_ENOMEM, "out of memory for the %s array", name);
  if (type == ISMRMRD_FLOAT) {
    memcpy(arr.data, s->reference, s->grid * (size_t)s->frames * sizeof *s->reference);
  } else {
    complex_float_t *px = arr.data;
    for (int f = 0; f < s->frames; f++) {
      double shift[3] = {0, 0, 0};
      if (s->o->moving)
        mr_sim_motion(s->n, f, shift);
      for (size_t i = 0; i < s->grid; i++) {
        size_t x = i % s->n, y = (i / s->n) % s->n, z = i / ((size_t)s->n * s->n);
        double r[3] = {(double)x - s->n / 2 - shift[0], (double)y - s->n / 2 - shift[1],
                       ((double)z - s->nz / 2) * s->n / s->nz - shift[2]};
        px[(size_t)f * s->grid + i] = (float)mr_phantom_value(s->rank, s->n, r);
      }
    }
  }
  int rc = ismrmrd_append_array(d, name, &arr) == ISMRMRD_NOERROR && !mr_h5_failed()
               ? 0
               : mr_err_set(err, MR_EIO, "cannot write the %s array: %s", name, mr_h5_error());
  ismrmrd_cleanup_ndarray(&arr);
  return rc;
}

static int check(const mr_sim_options *o, mr_err *err) {
  if (o->trajectory != MR_SIM_CARTESIAN)
    return mr_err_set(err, MR_EINVAL, "--sampling is for --trajectory cartesian");
  if (o->matrix < 8 || o->matrix > 512 || o->matrix % 2)
    return mr_err_set(err, MR_EINVAL, "--matrix must be even, 8 .. 512, got %d", o->matrix);
  if (o->coils < 1 || o->coils > 64)
    return mr_err_set(err, MR_EINVAL, "--coils must be 1 .. 64, got %d", o->coils);
  if (!(o->noise >= 0))
    return mr_err_set(err, MR_EINVAL, "--noise must be >= 0");
  if (o->partitions != 0 && (!o->three_d || o->partitions < 2 || o->partitions > 512 ||
                             o->partitions % 2))
    return mr_err_set(err, MR_EINVAL, "--partitions is for --3d, even, 2 .. 512; got %d",
                      o->partitions);
  if (o->spokes > 0 || o->interleaves > 0 || o->samples > 0)
    return mr_err_set(err, MR_EINVAL, "--sampling takes none of --spokes, --interleaves, "
                                      "--samples");
  if (o->frames < 0 || o->frames > 1024 || (o->frames > 1 && o->three_d))
    return mr_err_set(err, MR_EINVAL, "--frames with --sampling: 2D, 1 .. 1024; got %d%s",
                      o->frames, o->three_d ? " in 3D" : "");
  if (o->moving && o->frames < 2)
    return mr_err_set(err, MR_EINVAL, "--moving needs --frames (2 or more)");
  if (access(o->path, F_OK) == 0)
    return mr_err_set(err, MR_EINVAL, "%s exists; not overwriting it", o->path);
  return 0;
}

/* Takes the grid to images and their root sum of squares (the frame's
 * reference). */
static int reconstruct_reference(scan *s, mr_err *err) {
  s->inverse = s->rank == 3 ? fftwf_plan_dft_3d(s->nz, s->n, s->n, s->kspace, s->kspace,
                                                FFTW_BACKWARD, FFTW_ESTIMATE)
                            : fftwf_plan_dft_2d(s->n, s->n, s->kspace, s->kspace, FFTW_BACKWARD,
                                                FFTW_ESTIMATE);
  if (s->inverse == NULL)
    return mr_err_set(err, MR_ENOMEM, "cannot plan the reference's FFT");
  parallel(s, (size_t)s->coils, invert_coils);
  parallel(s, s->grid, combine);
  fftwf_destroy_plan(s->inverse);
  return 0;
}

static int write_file(scan *s, mr_err *err) {
  char xml[4096];
  header_xml(s, xml, sizeof xml);
  ISMRMRD_Dataset d;
  int rc = 0;
  mr_h5_lock();
  if (ismrmrd_init_dataset(&d, s->o->path, "dataset") != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&d, true) != ISMRMRD_NOERROR) {
    rc = mr_err_set(err, MR_EIO, "cannot create %s: %s", s->o->path, mr_h5_error());
    mr_h5_unlock();
    return rc;
  }
  if (ismrmrd_write_header(&d, xml) != ISMRMRD_NOERROR || mr_h5_failed())
    rc = mr_err_set(err, MR_EIO, "cannot write the header to %s: %s", s->o->path,
                    mr_h5_error());
  mr_h5_unlock();
  mr_sim_noise noise;
  mr_sim_noise_init(&noise, s->o);
  for (s->frame = 0; rc == 0 && s->frame < s->frames; s->frame++) {
    s->mask = s->masks + (size_t)s->frame * s->n * s->nz;
    s->shift[0] = s->shift[1] = s->shift[2] = 0;
    if (s->o->moving)
      mr_sim_motion(s->n, s->frame, s->shift);
    parallel(s, (size_t)s->n * s->nz, fill_rows);
    rc = write_acquisitions(s, &d, &noise, err);
    if (rc == 0)
      rc = reconstruct_reference(s, err); /* the grid is no longer needed as k-space */
  }
  mr_h5_lock();
  if (rc == 0)
    rc = write_array(s, &d, "phantom", ISMRMRD_CXFLOAT, err);
  if (rc == 0)
    rc = write_array(s, &d, "reference", ISMRMRD_FLOAT, err);
  if (ismrmrd_close_dataset(&d) != ISMRMRD_NOERROR && rc == 0)
    rc = mr_err_set(err, MR_EIO, "cannot close %s: %s", s->o->path, mr_h5_error());
  mr_h5_unlock();
  free(d.filename);
  free(d.groupname);
  return rc;
}

int mr_simulate_sampled(const mr_sim_options *o, mr_err *err) {
  int rc = check(o, err);
  if (rc < 0)
    return rc;
  scan s = {.o = o, .rank = o->three_d ? 3 : 2, .n = o->matrix, .coils = o->coils,
            .frames = o->frames > 1 ? o->frames : 1};
  s.nz = o->three_d ? (o->partitions > 0 ? o->partitions : o->matrix) : 1;
  s.grid = (size_t)s.n * s.n * s.nz;
  s.masks = malloc((size_t)s.n * s.nz * s.frames);
  s.acquired = malloc((size_t)s.frames * sizeof *s.acquired);
  s.kspace = fftwf_malloc(s.grid * (size_t)s.coils * sizeof *s.kspace);
  s.reference = malloc(s.grid * (size_t)s.frames * sizeof *s.reference);
  if (s.masks == NULL || s.acquired == NULL || s.kspace == NULL || s.reference == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory for %d frame%s of %d coils' k-space of %zu "
                    "points", s.frames, s.frames == 1 ? "" : "s", s.coils, s.grid);
  /* each frame its own pattern: the seed counts on from frame to frame */
  for (int f = 0; rc == 0 && f < s.frames; f++) {
    mr_sampling pattern = {.kind = (mr_sampling_kind)o->sampling, .ny = s.n, .nz = s.nz,
                           .r = o->acceleration, .calibration = o->calibration,
                           .seed = o->seed + (unsigned)f};
    s.acquired[f] = mr_sampling_mask(&pattern, s.masks + (size_t)f * s.n * s.nz, NULL, err);
    rc = s.acquired[f] < 0 ? (int)s.acquired[f] : 0;
  }
  if (rc == 0)
    rc = write_file(&s, err);
  fftwf_free(s.kspace);
  free(s.reference);
  free(s.masks);
  free(s.acquired);
  return rc;
}
