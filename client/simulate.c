#include "simulate.h"

#include <complex.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ismrmrd/dataset.h>
#include <ismrmrd/version.h>

#include "cpus.h"
#include "h5.h"
#include "phantom.h"
#include "simulate_sampled.h"
#include "simulate_impl.h"
#include "simulate_sms.h"

int mr_sim_trajectory_parse(const char *name) {
  static const char *const names[] = {"radial", "golden", "spiral", "cartesian", "tiny-golden",
                                      "epi"};
  for (int i = 0; i < 6; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

/* How the readouts are laid out. */
typedef struct layout {
  int rank, n;
  size_t readouts, samples; /* samples per readout */
  size_t lines;             /* readouts per kspace_encode_step_2 value */
  size_t arms;              /* spiral interleaves */
  int traj_dims;            /* 0 for Cartesian */
  int center_sample;
  const char *name;         /* the header's trajectory */
  size_t frames;            /* real-time frames of `lines` spokes; 0: none */
} layout;

static int radial_kind(mr_sim_trajectory t) {
  return t == MR_SIM_RADIAL || t == MR_SIM_GOLDEN || t == MR_SIM_TINY_GOLDEN;
}

void mr_sim_motion(int n, int f, double shift[3]) {
  /* along x, where the phantom leaves room (it spans 0.69 of the half
   * field of view there, 0.92 along y) */
  shift[1] = shift[2] = 0;
  shift[0] = n / 16.0 * sin(2 * M_PI * f / 16.0);
}

/* Readouts of 3D radial trajectories fill encode step 1 up to this, then
 * step 2 counts on. */
#define LINES_PER_STEP2 4096

static int make_layout(const mr_sim_options *o, layout *l, mr_err *err) {
  int n = o->matrix;
  memset(l, 0, sizeof *l);
  l->rank = o->three_d ? 3 : 2;
  l->n = n;
  switch (o->trajectory) {
  case MR_SIM_RADIAL:
  case MR_SIM_GOLDEN:
  case MR_SIM_TINY_GOLDEN: {
    double nyquist = o->three_d ? M_PI / 2 * n * n : M_PI / 2 * n;
    l->readouts = o->spokes > 0 ? (size_t)o->spokes : (size_t)ceil(nyquist);
    l->samples = o->samples > 0 ? (size_t)o->samples : 2 * (size_t)n;
    l->lines = o->three_d && l->readouts > LINES_PER_STEP2 ? LINES_PER_STEP2 : l->readouts;
    if (o->frames > 0) {
      l->frames = (size_t)o->frames;
      l->readouts = l->lines * l->frames;
    }
    l->traj_dims = l->rank;
    l->center_sample = (int)(l->samples / 2);
    l->name = o->trajectory == MR_SIM_RADIAL ? "radial" : "goldenangle";
    break;
  }
  case MR_SIM_SPIRAL: {
    l->arms = o->interleaves > 0 ? (size_t)o->interleaves : (size_t)(n / 8 > 0 ? n / 8 : 1);
    /* the arm's speed at the edge is pi * turns per unit of t; samples at
     * most 1/(2n) apart there */
    l->samples = (size_t)ceil(M_PI * n * (double)n / l->arms);
    if (l->samples > UINT16_MAX)
      return mr_err_set(err, MR_EINVAL,
                        "%zu interleaves of a %d matrix need %zu samples each, over %d; use "
                        "more interleaves", l->arms, n, l->samples, UINT16_MAX);
    l->lines = l->arms;
    l->readouts = l->arms * (o->three_d ? (size_t)n : 1);
    l->traj_dims = l->rank;
    l->center_sample = 0;
    l->name = "spiral";
    break;
  }
  case MR_SIM_CARTESIAN:
    l->samples = (size_t)n;
    l->lines = (size_t)n;
    l->readouts = (size_t)n * (o->three_d ? (size_t)n : 1);
    l->traj_dims = 0;
    l->center_sample = n / 2;
    l->name = "cartesian";
    break;
  case MR_SIM_EPI: /* simulate_epi.c lays its scans out */
    break;
  }
  if (l->samples > UINT16_MAX)
    return mr_err_set(err, MR_EINVAL, "--samples %zu is over %d", l->samples, UINT16_MAX);
  if (l->lines > UINT16_MAX + 1u || l->readouts / l->lines > UINT16_MAX + 1u)
    return mr_err_set(err, MR_EINVAL, "%zu readouts do not fit the encoding counters",
                      l->readouts);
  return 0;
}

/* Position of sample i of readout r, cycles per pixel. */
static void position(const mr_sim_options *o, const layout *l, size_t r, size_t i, double k[3]) {
  int n = l->n;
  k[0] = k[1] = k[2] = 0;
  switch (o->trajectory) {
  case MR_SIM_RADIAL:
  case MR_SIM_GOLDEN:
  case MR_SIM_TINY_GOLDEN: {
    double radius = ((double)i - (double)(l->samples / 2)) / (double)l->samples;
    double dir[3] = {0, 0, 0};
    double golden = (3 - sqrt(5)) * M_PI; /* 137.5 degrees, the azimuth step */
    if (!o->three_d) {
      double tiny = M_PI / ((1 + sqrt(5)) / 2 + 6); /* 23.63 degrees */
      double t = o->trajectory == MR_SIM_RADIAL ? M_PI * (double)(r % l->lines) / l->lines
                 : o->trajectory == MR_SIM_GOLDEN ? r * M_PI * (sqrt(5) - 1) / 2
                                                  : r * tiny;
      dir[0] = cos(t);
      dir[1] = sin(t);
    } else {
      double z, phi;
      if (o->trajectory == MR_SIM_RADIAL) {
        z = 1 - (r + 0.5) / l->readouts;
        phi = r * golden;
      } else {
        z = fmod(r * 0.4656, 1.0);
        phi = 2 * M_PI * fmod(r * 0.6823, 1.0);
      }
      double s = sqrt(1 - z * z);
      dir[0] = s * cos(phi);
      dir[1] = s * sin(phi);
      dir[2] = z;
    }
    for (int a = 0; a < 3; a++)
      k[a] = radius * dir[a];
    break;
  }
  case MR_SIM_SPIRAL: {
    size_t arm = r % l->arms, partition = r / l->arms;
    double t = (double)i / l->samples, turns = n / (2.0 * l->arms);
    double angle = 2 * M_PI * (turns * t + (double)arm / l->arms);
    k[0] = 0.5 * t * cos(angle);
    k[1] = 0.5 * t * sin(angle);
    if (o->three_d)
      k[2] = ((double)partition - n / 2) / n;
    break;
  }
  case MR_SIM_CARTESIAN:
    k[0] = ((double)i - n / 2) / n;
    k[1] = ((double)(r % l->lines) - n / 2) / n;
    if (o->three_d)
      k[2] = ((double)(r / l->lines) - n / 2) / n;
    break;
  case MR_SIM_EPI:
    break;
  }
}

static const char *header_xml(const mr_sim_options *o, const layout *l, char *buf, size_t size) {
  int n = l->n, nz = o->three_d ? n : 1;
  size_t steps2 = (l->readouts + l->lines - 1) / l->lines;
  int cart = o->trajectory == MR_SIM_CARTESIAN;
  char step2[256] = "", repetition[160] = "";
  if (l->frames > 0) {
    steps2 = 1;
    snprintf(repetition, sizeof repetition,
             "<repetition><minimum>0</minimum><maximum>%zu</maximum><center>0</center>"
             "</repetition>",
             l->frames - 1);
  }
  if (steps2 > 1)
    snprintf(step2, sizeof step2,
             "<kspace_encoding_step_2><minimum>0</minimum><maximum>%zu</maximum>"
             "<center>%zu</center></kspace_encoding_step_2>",
             steps2 - 1, cart ? steps2 / 2 : 0);
  char protocol[128], encoding[2048];
  snprintf(protocol, sizeof protocol, "%s%s%s",
           o->trajectory == MR_SIM_TINY_GOLDEN ? "tiny golden angle" : l->name,
           o->three_d ? " 3D" : "", l->frames > 0 ? " real-time" : "");
  snprintf(encoding, sizeof encoding,
           "<encoding>"
           "<encodedSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>%zu</maximum>"
           "<center>%zu</center></kspace_encoding_step_1>%s"
           "<slice><minimum>0</minimum><maximum>0</maximum><center>0</center></slice>%s"
           "</encodingLimits>"
           "<trajectory>%s</trajectory></encoding>",
           n, n, nz, n, n, nz, n, n, nz, n, n, nz, l->lines - 1, cart ? l->lines / 2 : 0, step2,
           repetition, l->name);
  mr_sim_header(buf, size, protocol, o->coils, encoding);
  return buf;
}

void mr_sim_header(char *buf, size_t size, const char *protocol, int coils,
                   const char *encodings) {
  snprintf(buf, size,
           "<?xml version=\"1.0\"?>\n"
           "<ismrmrdHeader xmlns=\"http://www.ismrm.org/ISMRMRD\">"
           "<measurementInformation><measurementID>simulated</measurementID>"
           "<patientPosition>HFS</patientPosition>"
           "<protocolName>reconclient simulate %s</protocolName></measurementInformation>"
           "<acquisitionSystemInformation><receiverChannels>%d</receiverChannels>"
           "</acquisitionSystemInformation>"
           "<experimentalConditions><H1resonanceFrequency_Hz>63500000</H1resonanceFrequency_Hz>"
           "</experimentalConditions>%s</ismrmrdHeader>\n",
           protocol, coils, encodings);
}

void mr_sim_noise_init(mr_sim_noise *g, const mr_sim_options *o) {
  g->state = 0x9E3779B97F4A7C15ull ^ ((uint64_t)o->seed * 0xBF58476D1CE4E5B9ull);
  g->sigma = o->noise;
  if (g->state == 0)
    g->state = 1;
}

static double uniform(mr_sim_noise *g) {
  g->state ^= g->state << 13;
  g->state ^= g->state >> 7;
  g->state ^= g->state << 17;
  return ((g->state >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

double complex mr_sim_gaussian(mr_sim_noise *g) {
  double r = sqrt(-2 * log(uniform(g))), t = 2 * M_PI * uniform(g);
  return g->sigma * r * (cos(t) + I * sin(t));
}

void mr_sim_noise_skip(mr_sim_noise *g, size_t count) {
  if (g->sigma > 0)
    for (size_t i = 0; i < 2 * count; i++) /* two uniforms a draw */
      (void)uniform(g);
}

void mr_sim_readout(ISMRMRD_AcquisitionHeader *h, size_t index, int samples, int coils) {
  h->version = ISMRMRD_VERSION_MAJOR;
  h->scan_counter = (uint32_t)index;
  h->acquisition_time_stamp = (uint32_t)index;
  h->number_of_samples = (uint16_t)samples;
  h->available_channels = h->active_channels = (uint16_t)coils;
  for (int c = 0; c < coils; c++)
    h->channel_mask[c / 64] |= 1ull << (c % 64);
  h->center_sample = (uint16_t)(samples / 2);
  h->sample_time_us = 2.0f;
  h->read_dir[0] = 1;
  h->phase_dir[1] = 1;
  h->slice_dir[2] = 1;
}

/* The acquisition header of readout r. */
static void readout_header(const mr_sim_options *o, const layout *l, size_t r,
                           ISMRMRD_AcquisitionHeader *h) {
  mr_sim_readout(h, r, (int)l->samples, o->coils);
  h->center_sample = (uint16_t)l->center_sample;
  h->trajectory_dimensions = (uint16_t)l->traj_dims;
  h->idx.kspace_encode_step_1 = (uint16_t)(r % l->lines);
  if (l->frames > 0) {
    h->idx.repetition = (uint16_t)(r / l->lines);
    if (r % l->lines == 0)
      h->flags |= (1ull << (ISMRMRD_ACQ_FIRST_IN_SLICE - 1)) |
                  (1ull << (ISMRMRD_ACQ_FIRST_IN_REPETITION - 1));
    if (r % l->lines == l->lines - 1)
      h->flags |= (1ull << (ISMRMRD_ACQ_LAST_IN_SLICE - 1)) |
                  (1ull << (ISMRMRD_ACQ_LAST_IN_REPETITION - 1));
  } else {
    h->idx.kspace_encode_step_2 = (uint16_t)(r / l->lines);
    if (r == 0)
      h->flags |= 1ull << (ISMRMRD_ACQ_FIRST_IN_SLICE - 1);
    if (r + 1 == l->readouts)
      h->flags |= (1ull << (ISMRMRD_ACQ_LAST_IN_SLICE - 1)) |
                  (1ull << (ISMRMRD_ACQ_LAST_IN_REPETITION - 1));
  }
  if (r + 1 == l->readouts)
    h->flags |= 1ull << (ISMRMRD_ACQ_LAST_IN_MEASUREMENT - 1);
}

/* Fills readout r's samples (all coils) and trajectory. */
static void fill_readout(const mr_sim_options *o, const layout *l, size_t r, mr_sim_noise *g,
                         ISMRMRD_Acquisition *a, double complex *coil_values) {
  double shift[3] = {0, 0, 0};
  if (o->moving)
    mr_sim_motion(l->n, (int)(r / l->lines), shift);
  for (size_t i = 0; i < l->samples; i++) {
    double k[3];
    position(o, l, r, i, k);
    for (int d = 0; d < l->traj_dims && d < 3; d++)
      a->traj[i * l->traj_dims + d] = (float)k[d];
    mr_phantom_kspace_moved(l->rank, l->n, o->coils, k, shift, coil_values);
    for (int c = 0; c < o->coils; c++) {
      double complex v = coil_values[c];
      if (g->sigma > 0)
        v += mr_sim_gaussian(g);
      a->data[(size_t)c * l->samples + i] = (complex_float_t)v;
    }
  }
}

int mr_sim_write_truth(ISMRMRD_Dataset *d, int rank, int n, size_t count,
                       const double (*shifts)[3], mr_err *err) {
  ISMRMRD_NDArray arr;
  ismrmrd_init_ndarray(&arr);
  arr.data_type = ISMRMRD_CXFLOAT;
  arr.ndim = (uint16_t)rank;
  for (int a = 0; a < rank; a++)
    arr.dims[a] = (size_t)n;
  if (count > 1)
    arr.dims[arr.ndim++] = count;
  if (ismrmrd_make_consistent_ndarray(&arr) != ISMRMRD_NOERROR)
    return mr_err_set(err, MR_ENOMEM, "out of memory for the phantom image");
  complex_float_t *px = arr.data;
  size_t nz = rank == 3 ? (size_t)n : 1, at = 0;
  for (size_t f = 0; f < (count > 0 ? count : 1); f++) {
    const double none[3] = {0, 0, 0}, *shift = shifts != NULL ? shifts[f] : none;
    for (size_t z = 0; z < nz; z++)
      for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
          double r[3] = {x - n / 2 - shift[0], y - n / 2 - shift[1],
                         rank == 3 ? (double)z - n / 2 - shift[2] : 0};
          px[at++] = (float)mr_phantom_value(rank, n, r);
        }
  }
  int rc = ismrmrd_append_array(d, "phantom", &arr) == ISMRMRD_NOERROR && !mr_h5_failed()
               ? 0
               : mr_err_set(err, MR_EIO, "cannot write the phantom array: %s", mr_h5_error());
  ismrmrd_cleanup_ndarray(&arr);
  return rc;
}

/* The object at the pixel centres, as the complex array "phantom" (of
 * every frame when it moves: one more dimension). */
static int write_phantom(const mr_sim_options *o, ISMRMRD_Dataset *d, const layout *l,
                         mr_err *err) {
  if (!o->moving)
    return mr_sim_write_truth(d, l->rank, l->n, 1, NULL, err);
  double(*shifts)[3] = malloc(l->frames * sizeof *shifts);
  if (shifts == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  for (size_t f = 0; f < l->frames; f++)
    mr_sim_motion(l->n, (int)f, shifts[f]);
  int rc = mr_sim_write_truth(d, l->rank, l->n, l->frames, (const double(*)[3])shifts, err);
  free(shifts);
  return rc;
}

static int check_options(const mr_sim_options *o, mr_err *err) {
  if (o->matrix < 8 || o->matrix > 512)
    return mr_err_set(err, MR_EINVAL, "--matrix must be 8 .. 512, got %d", o->matrix);
  if (o->coils < 1 || o->coils > 64)
    return mr_err_set(err, MR_EINVAL, "--coils must be 1 .. 64, got %d", o->coils);
  if (!(o->noise >= 0))
    return mr_err_set(err, MR_EINVAL, "--noise must be >= 0");
  if (o->spokes < 0 || o->interleaves < 0 || o->samples < 0 || o->frames < 0)
    return mr_err_set(err, MR_EINVAL,
                      "--spokes, --interleaves, --samples and --frames must be positive");
  if (o->trajectory == MR_SIM_TINY_GOLDEN && o->three_d)
    return mr_err_set(err, MR_EINVAL, "--trajectory tiny-golden is 2D only");
  if (o->samples > 0 && !radial_kind(o->trajectory))
    return mr_err_set(err, MR_EINVAL, "--samples is for the radial trajectories");
  if (o->frames > 0 && (!radial_kind(o->trajectory) || o->three_d || o->spokes == 0))
    return mr_err_set(err, MR_EINVAL,
                      "--frames is for 2D radial, golden or tiny-golden streams and needs "
                      "--spokes (per frame)");
  if (o->moving && o->frames == 0)
    return mr_err_set(err, MR_EINVAL, "--moving needs --frames");
  const mr_sim_epi *e = &o->epi;
  int epi_option = e->shots > 1 || e->ramp || e->ghost[0] != 0 || e->ghost[1] != 0 ||
                   e->accel > 1 || e->claim_cartesian || e->slices > 1 || e->leak_probe > 0 ||
                   e->volumes > 1;
  if (o->trajectory != MR_SIM_EPI && epi_option)
    return mr_err_set(err, MR_EINVAL, "--shots, --ramp, --ghost, --inplane-accel, "
                                      "--header-trajectory, --slices, --leak-probe and --volumes "
                                      "are for --trajectory epi");
  if (o->trajectory == MR_SIM_EPI && (o->three_d || o->spokes > 0 || o->interleaves > 0))
    return mr_err_set(err, MR_EINVAL, "--trajectory epi is 2D, without --spokes or --interleaves");
  if (access(o->path, F_OK) == 0)
    return mr_err_set(err, MR_EINVAL, "%s exists; not overwriting it", o->path);
  return 0;
}

/* Readouts filled side by side, then appended in order. */
#define BATCH 256
#define MAX_FILLERS 64

/* One batch for the filling threads: readout first + k into a[k] with the
 * noise generator g[k] (where the draws before it left one generator). */
typedef struct batch {
  const mr_sim_scan *scan;
  size_t first, count;
  ISMRMRD_Acquisition *a;
  mr_sim_noise *g;
  int coils;
  atomic_size_t next;
} batch;

static void *fill_batch(void *arg) {
  batch *b = arg;
  double complex *values = malloc((size_t)b->coils * sizeof *values);
  if (values == NULL)
    return (void *)1;
  for (size_t k; (k = atomic_fetch_add(&b->next, 1)) < b->count;)
    b->scan->fill(b->scan->arg, b->first + k, &b->g[k], values, &b->a[k]);
  free(values);
  return NULL;
}

/* Fills b on `threads` threads (the calling one among them); 0, or -1 when
 * one could not get its scratch (the batch then is not whole). */
static int fill_side_by_side(batch *b, int threads) {
  pthread_t t[MAX_FILLERS];
  int started = 0, failed = 0;
  while (started < threads - 1 && pthread_create(&t[started], NULL, fill_batch, b) == 0)
    started++;
  failed |= fill_batch(b) != NULL;
  for (int i = 0; i < started; i++) {
    void *r;
    pthread_join(t[i], &r);
    failed |= r != NULL;
  }
  return failed ? -1 : 0;
}

/* Makes readouts first .. first + count - 1 in a[], their samples filled
 * on `threads` threads; g: the noise generator at the first, left after
 * the last. */
static int make_batch(const mr_sim_options *o, const mr_sim_scan *scan, size_t first, size_t count,
                      int threads, ISMRMRD_Acquisition *a, mr_sim_noise *g, mr_sim_noise *gs,
                      mr_err *err) {
  for (size_t k = 0; k < count; k++) {
    ismrmrd_init_acquisition(&a[k]);
    scan->head(scan->arg, first + k, &a[k].head);
    if (ismrmrd_make_consistent_acquisition(&a[k]) != ISMRMRD_NOERROR) {
      for (size_t j = 0; j <= k; j++)
        ismrmrd_cleanup_acquisition(&a[j]);
      return mr_err_set(err, MR_ENOMEM, "out of memory for a readout");
    }
    /* Each readout's noise begins where the one before left off: one draw
     * per sample of every channel (mr_sim_scan.fill), so the file is the
     * same whichever thread fills it. */
    gs[k] = *g;
    mr_sim_noise_skip(g, (size_t)a[k].head.number_of_samples * a[k].head.active_channels);
  }
  batch b = {.scan = scan, .first = first, .count = count, .a = a, .g = gs, .coils = o->coils};
  atomic_init(&b.next, 0);
  if (fill_side_by_side(&b, threads) < 0) {
    for (size_t k = 0; k < count; k++)
      ismrmrd_cleanup_acquisition(&a[k]);
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  }
  return 0;
}

int mr_sim_write(const mr_sim_options *o, const char *xml, const mr_sim_scan *scan, mr_err *err) {
  ISMRMRD_Acquisition *a = malloc(BATCH * sizeof *a);
  mr_sim_noise *gs = malloc(BATCH * sizeof *gs);
  if (a == NULL || gs == NULL) {
    free(a);
    free(gs);
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  }
  mr_sim_noise g;
  mr_sim_noise_init(&g, o);
  ISMRMRD_Dataset d;
  int rc = 0;
  mr_h5_lock();
  if (ismrmrd_init_dataset(&d, o->path, "dataset") != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&d, true) != ISMRMRD_NOERROR) {
    rc = mr_err_set(err, MR_EIO, "cannot create %s: %s", o->path, mr_h5_error());
    mr_h5_unlock();
    free(a);
    free(gs);
    return rc;
  }
  if (ismrmrd_write_header(&d, xml) != ISMRMRD_NOERROR || mr_h5_failed())
    rc = mr_err_set(err, MR_EIO, "cannot write the header to %s: %s", o->path, mr_h5_error());
  mr_h5_unlock();
  int cpus = mr_cpus_usable();
  int threads = !scan->parallel ? 1 : cpus < MAX_FILLERS ? cpus : MAX_FILLERS;
  for (size_t first = 0; rc == 0 && first < scan->readouts; first += BATCH) {
    size_t count = scan->readouts - first < BATCH ? scan->readouts - first : BATCH;
    if ((rc = make_batch(o, scan, first, count, threads, a, &g, gs, err)) < 0)
      break;
    for (size_t k = 0; k < count; k++) {
      mr_h5_lock();
      if (rc == 0 && (ismrmrd_append_acquisition(&d, &a[k]) != ISMRMRD_NOERROR || mr_h5_failed()))
        rc = mr_err_set(err, MR_EIO, "cannot write readout %zu to %s: %s", first + k, o->path,
                        mr_h5_error());
      mr_h5_unlock();
      ismrmrd_cleanup_acquisition(&a[k]);
    }
  }
  free(a);
  free(gs);
  mr_h5_lock();
  if (rc == 0)
    rc = scan->truth(scan->arg, &d, err);
  if (ismrmrd_close_dataset(&d) != ISMRMRD_NOERROR && rc == 0)
    rc = mr_err_set(err, MR_EIO, "cannot close %s: %s", o->path, mr_h5_error());
  mr_h5_unlock();
  free(d.filename);
  free(d.groupname);
  return rc;
}

/* The callbacks of mr_sim_write for the radial, spiral and Cartesian scans. */
typedef struct scan_ctx {
  const mr_sim_options *o;
  const layout *l;
} scan_ctx;

static void scan_head(void *arg, size_t r, ISMRMRD_AcquisitionHeader *h) {
  const scan_ctx *c = arg;
  readout_header(c->o, c->l, r, h);
}

static void scan_fill(void *arg, size_t r, mr_sim_noise *g, double complex *values,
                      ISMRMRD_Acquisition *a) {
  const scan_ctx *c = arg;
  fill_readout(c->o, c->l, r, g, a, values);
}

static int scan_truth(void *arg, ISMRMRD_Dataset *d, mr_err *err) {
  const scan_ctx *c = arg;
  return write_phantom(c->o, d, c->l, err);
}

int mr_simulate(const mr_sim_options *o, mr_err *err) {
  if (o->sampling != 0 && (o->multiband > 0 || o->caipi > 0))
    return mr_err_set(err, MR_EINVAL, "--multiband and --caipi do not combine with --sampling");
  if (o->sampling != 0)
    return mr_simulate_sampled(o, err);
  layout l;
  int rc = check_options(o, err);
  if (rc == 0 && o->trajectory == MR_SIM_EPI)
    return mr_simulate_epi(o, err);
  if (rc == 0 && (o->multiband > 0 || o->caipi > 0))
    return o->multiband > 0 ? mr_simulate_sms(o, err)
                            : mr_err_set(err, MR_EINVAL, "--caipi needs --multiband");
  if (rc == 0)
    rc = make_layout(o, &l, err);
  if (rc < 0)
    return rc;
  char xml[4096];
  header_xml(o, &l, xml, sizeof xml);
  scan_ctx c = {o, &l};
  mr_sim_scan scan = {.readouts = l.readouts, .head = scan_head, .fill = scan_fill,
                      .truth = scan_truth, .arg = &c, .parallel = 1};
  return mr_sim_write(o, xml, &scan, err);
}
