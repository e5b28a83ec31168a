/* `reconclient simulate --trajectory epi`: echo-planar scans of the
 * analytic phantom (simulate.h describes the layout, the navigators, the
 * odd/even error and the ramp). */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ismrmrd/dataset.h>
#include <ismrmrd/version.h>

#include "epi_trapezoid.h"
#include "message.h"
#include "phantom.h"
#include "simulate_impl.h"

/* Lines of the reference scan of an accelerated scan. */
#define EPI_CALIB_LINES 24
#define EPI_NAVIGATORS 3

typedef struct epi_layout {
  int n;        /* recon matrix (n x n) */
  int nx;       /* encoded readout: 2n (oversampled twice) */
  int ns;       /* samples per readout */
  int shots, accel;
  int echoes;   /* per imaging shot */
  int ramp;
  int slices;    /* objects (slices) of the scan */
  int multiband; /* slices excited together (1: none) */
  int groups;    /* slices / multiband: group g excites slices g, g + groups, ... */
  int volumes;   /* the groups acquired this many times (idx.repetition) */
  int caipi;     /* a group's j-th slice is shifted by j FOV / caipi along y */
  int probe;     /* 1 + the one slice whose signal fills the collapsed data, 0: every slice */
  /* The trapezoid, microseconds (ramp only): */
  long ramp_up, flat_top, ramp_down, acq_delay;
  double dwell;
} epi_layout;

static int make_layout(const mr_sim_options *o, epi_layout *l, mr_err *err) {
  memset(l, 0, sizeof *l);
  l->n = o->matrix;
  l->nx = 2 * o->matrix;
  l->ns = l->nx;
  l->shots = o->epi.shots > 1 ? o->epi.shots : 1;
  l->accel = o->epi.accel > 1 ? o->epi.accel : 1;
  l->ramp = o->epi.ramp;
  l->multiband = o->multiband > 1 ? o->multiband : 1;
  l->slices = o->epi.slices > 1 ? o->epi.slices : l->multiband;
  l->volumes = o->epi.volumes > 1 ? o->epi.volumes : 1;
  l->caipi = o->caipi > 1 ? o->caipi : 1;
  l->probe = o->epi.leak_probe;
  if (l->multiband > 8 || l->slices > 64 || l->caipi > 8)
    return mr_err_set(err, MR_EINVAL, "--multiband and --caipi are at most 8, --slices 64");
  if (l->volumes > 10000)
    return mr_err_set(err, MR_EINVAL, "--volumes is at most 10000, got %d", l->volumes);
  if ((o->caipi > 1 || l->probe > 0) && l->multiband == 1)
    return mr_err_set(err, MR_EINVAL, "--caipi and --leak-probe need --multiband");
  if (l->slices % l->multiband != 0)
    return mr_err_set(err, MR_EINVAL, "--slices %d is not a multiple of --multiband %d",
                      l->slices, l->multiband);
  l->groups = l->slices / l->multiband;
  if (l->probe > l->slices)
    return mr_err_set(err, MR_EINVAL, "--leak-probe %d: the slices are 1 .. %d", l->probe,
                      l->slices);
  if (l->accel > 8 || l->shots > 64)
    return mr_err_set(err, MR_EINVAL, "--inplane-accel is at most 8 and --shots at most 64");
  if (l->n % (l->shots * l->accel) != 0)
    return mr_err_set(err, MR_EINVAL,
                      "--matrix %d is not a multiple of --shots %d times --inplane-accel %d",
                      l->n, l->shots, l->accel);
  if (l->accel > 1 && l->n < EPI_CALIB_LINES)
    return mr_err_set(err, MR_EINVAL, "--inplane-accel needs --matrix of %d or more (its %d "
                      "reference lines)", EPI_CALIB_LINES, EPI_CALIB_LINES);
  l->echoes = l->n / (l->shots * l->accel);
  if (l->ramp) {
    /* Ramps of 0.2 of the readout each: the flat top's samples are 1.25
     * grid steps apart, the ramps' closer (whole microseconds: the
     * description's times are integers). */
    l->dwell = 5;
    l->ramp_up = l->ramp_down = 2L * l->n;
    l->flat_top = 6L * l->n;
    l->acq_delay = 0;
  }
  return 0;
}

/* Where sample q of a forward readout lies, in samples of the encoded
 * grid from its centre: the ConventionalEPI trapezoid (epi_trapezoid.h),
 * on the grid without a ramp. A reversed readout's sample q lies at minus
 * that with a ramp, and at the grid's mirror image of it without. */
static double forward_position(const epi_layout *l, int q) {
  if (!l->ramp)
    return q - l->nx / 2;
  mr_epi_trapezoid t = {.ramp_up = (double)l->ramp_up, .flat_top = (double)l->flat_top,
                        .ramp_down = (double)l->ramp_down, .acq_delay = (double)l->acq_delay,
                        .dwell = l->dwell, .samples = l->ns};
  return mr_epi_trapezoid_position(&t, l->nx, q);
}

static double reversed_position(const epi_layout *l, int q) {
  return l->ramp ? -forward_position(l, q) : (l->ns - 1 - q) - l->nx / 2;
}

/* No slot in the cache of the first volume's samples. */
#define NO_SLOT SIZE_MAX

/* One readout of the scan. */
typedef struct readout {
  int line;      /* kspace_encode_step_1 */
  int shot;      /* idx.segment; a reference train counts as shot 0 */
  int reverse;
  int slice;     /* idx.slice; for collapsed (multiband) data its group */
  int collapsed; /* the group's slices' signal together */
  uint64_t flags;
  int volume;    /* idx.repetition */
  /* Where the first volume's samples of this readout are kept for the
   * later volumes' (NO_SLOT: not repeated) */
  size_t slot;
} readout;

/* Appends (r non-NULL) or counts a train: three navigators, then the
 * echoes at lines[0 .. count). Returns the readouts it takes. */
static size_t add_train(readout *r, const epi_layout *l, int slice, int collapsed, int shot,
                        uint64_t flags, const int *lines, int count) {
  size_t at = 0;
  for (int v = 0; v < EPI_NAVIGATORS; v++, at++)
    if (r != NULL)
      r[at] = (readout){l->n / 2, shot, v == 1, slice, collapsed,
                        MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA) | flags, 0, NO_SLOT};
  for (int e = 0; e < count; e++, at++)
    if (r != NULL)
      r[at] = (readout){lines[e], shot, e % 2 == 0, slice, collapsed, flags, 0, NO_SLOT};
  return at;
}

/* The trains of the scan in acquisition order (r NULL: counted only):
 * with multiband M, a single-band reference train of every slice (all its
 * lines, IS_PARALLEL_CALIBRATION, LAST_IN_SLICE at its end), then per
 * volume the collapsed shots of every group; otherwise per volume and
 * slice the in-plane reference train (with acceleration, first volume
 * only) and the shots. Every volume's imaging readouts share the first
 * volume's slots (the first `*slots` readouts of it). */
static size_t lay_out(const epi_layout *l, readout *r, int *lines, size_t *slots) {
  int calib = l->accel > 1 && l->multiband == 1 ? EPI_CALIB_LINES : 0;
  uint64_t cal = MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION);
  size_t at = 0;
  for (int z = 0; l->multiband > 1 && z < l->slices; z++) {
    for (int e = 0; e < l->n; e++)
      lines[e] = e;
    size_t first = at;
    at += add_train(r != NULL ? r + at : NULL, l, z, 0, 0, cal, lines, l->n);
    if (r != NULL) {
      r[first].flags |= MR_FLAG(ISMRMRD_ACQ_FIRST_IN_SLICE);
      r[at - 1].flags |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
    }
  }
  *slots = 0;
  for (int v = 0; v < l->volumes; v++) {
    size_t slot = 0;
    for (int z = 0; z < l->groups; z++) {
      if (calib > 0 && v == 0) {
        for (int e = 0; e < calib; e++)
          lines[e] = l->n / 2 - calib / 2 + e;
        at += add_train(r != NULL ? r + at : NULL, l, z, 0, 0, cal, lines, calib);
      }
      size_t first = at;
      for (int shot = 0; shot < l->shots; shot++) {
        for (int e = 0; e < l->echoes; e++)
          lines[e] = l->accel * (shot + l->shots * e);
        at += add_train(r != NULL ? r + at : NULL, l, z, l->multiband > 1, shot, 0, lines,
                        l->echoes);
      }
      for (size_t i = first; r != NULL && i < at; i++) {
        r[i].volume = v;
        r[i].slot = l->volumes > 1 ? slot++ : NO_SLOT;
      }
      if (r != NULL) {
        r[first].flags |= MR_FLAG(ISMRMRD_ACQ_FIRST_IN_SLICE);
        r[at - 1].flags |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
      }
      if (v == 0)
        *slots += at - first;
    }
    if (r != NULL)
      r[at - 1].flags |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION);
  }
  if (r != NULL) {
    r[at - 1].flags |= MR_FLAG(ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
    for (size_t i = 0; i < at; i++)
      if (r[i].reverse)
        r[i].flags |= MR_FLAG(ISMRMRD_ACQ_IS_REVERSE);
  }
  if (l->volumes == 1)
    *slots = 0;
  return at;
}

static int make_readouts(const epi_layout *l, readout **out, size_t *count, size_t *slots,
                         mr_err *err) {
  int *lines = malloc((size_t)l->n * sizeof *lines);
  size_t total = lines != NULL ? lay_out(l, NULL, lines, slots) : 0;
  readout *r = lines != NULL ? calloc(total, sizeof *r) : NULL;
  if (r == NULL) {
    free(lines);
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  }
  lay_out(l, r, lines, slots);
  free(lines);
  *out = r;
  *count = total;
  return 0;
}

static void header_xml(const mr_sim_options *o, const epi_layout *l, char *buf, size_t size) {
  int n = l->n;
  char description[1024] = "", parallel[640] = "";
  if (l->ramp)
    snprintf(description, sizeof description,
             "<trajectoryDescription><identifier>ConventionalEPI</identifier>"
             "<userParameterLong><name>etl</name><value>%d</value></userParameterLong>"
             "<userParameterLong><name>numSamples</name><value>%d</value></userParameterLong>"
             "<userParameterLong><name>rampUpTime</name><value>%ld</value></userParameterLong>"
             "<userParameterLong><name>rampDownTime</name><value>%ld</value></userParameterLong>"
             "<userParameterLong><name>flatTopTime</name><value>%ld</value></userParameterLong>"
             "<userParameterLong><name>acqDelayTime</name><value>%ld</value></userParameterLong>"
             "<userParameterDouble><name>dwellTime</name><value>%g</value></userParameterDouble>"
             "</trajectoryDescription>",
             l->echoes, l->ns, l->ramp_up, l->ramp_down, l->flat_top, l->acq_delay, l->dwell);
  char multiband[320] = "";
  if (l->multiband > 1) /* ISMRMRD's multiband section (schema 1.4): slices 1 mm apart */
    snprintf(multiband, sizeof multiband,
             "<multiband><spacing><dZ>%d</dZ></spacing><deltaKz>%g</deltaKz>"
             "<multiband_factor>%d</multiband_factor><calibration>separable2D</calibration>"
             "<calibration_encoding>0</calibration_encoding></multiband>",
             l->groups, 1.0 / (l->caipi * l->groups), l->multiband);
  char repetitions[160] = "";
  if (l->volumes > 1)
    snprintf(repetitions, sizeof repetitions,
             "<repetition><minimum>0</minimum><maximum>%d</maximum><center>0</center>"
             "</repetition>",
             l->volumes - 1);
  if (l->accel > 1 || l->multiband > 1)
    snprintf(parallel, sizeof parallel,
             "<parallelImaging><accelerationFactor><kspace_encoding_step_1>%d"
             "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
             "</accelerationFactor><calibrationMode>separate</calibrationMode>%s"
             "</parallelImaging>",
             l->accel, multiband);
  char protocol[128], encoding[4096];
  snprintf(protocol, sizeof protocol, "epi%s%s", l->shots > 1 ? " segmented" : "",
           l->ramp ? " ramp-sampled" : "");
  snprintf(encoding, sizeof encoding,
           "<encoding>"
           "<encodedSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>1</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>1</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>%d</maximum>"
           "<center>%d</center></kspace_encoding_step_1>"
           "<slice><minimum>0</minimum><maximum>%d</maximum><center>0</center></slice>%s"
           "<segment><minimum>0</minimum><maximum>%d</maximum><center>0</center></segment>"
           "</encodingLimits>"
           "<trajectory>%s</trajectory>%s%s<echoTrainLength>%d</echoTrainLength></encoding>",
           l->nx, n, l->nx, n, n, n, n, n, n - 1, n / 2, l->slices - 1, repetitions, l->shots - 1,
           o->epi.claim_cartesian ? "cartesian" : "epi", description, parallel, l->echoes);
  mr_sim_header(buf, size, protocol, o->coils, encoding);
}

static void readout_header(const mr_sim_options *o, const epi_layout *l, size_t i,
                           const readout *r, ISMRMRD_AcquisitionHeader *h) {
  mr_sim_readout(h, i, (int)l->ns, o->coils);
  if (l->ramp)
    h->sample_time_us = (float)l->dwell;
  h->idx.kspace_encode_step_1 = (uint16_t)r->line;
  h->idx.segment = (uint16_t)r->shot;
  h->idx.slice = (uint16_t)r->slice;
  h->idx.repetition = (uint16_t)r->volume;
  h->position[2] = (float)r->slice; /* slice z (or group z's first) at z mm */
  h->flags = r->flags;
}

/* Where slice z's object sits (pixels): each of 8 neighbours its own
 * place (within the field of view however many slices). */
static void slice_shift(const epi_layout *l, int z, double shift[3]) {
  int places = l->slices < 8 ? l->slices : 8;
  shift[0] = l->slices > 1 ? 3.0 * (z % 8 - (places - 1) / 2.0) : 0;
  shift[1] = l->slices > 1 ? (z % 2 ? 2.0 : -2.0) : 0;
  shift[2] = 0;
}

/* Slice z's k-space at k, every coil, into out: the object moved to its
 * place, and with several slices the coils' sensitivity along z, a
 * complex factor per coil and slice (each coil nearest to some of them):
 * what lets slice-GRAPPA tell collapsed slices apart. */
static void slice_kspace(const mr_sim_options *o, const epi_layout *l, int z, const double k[3],
                         double complex *out) {
  double shift[3];
  slice_shift(l, z, shift);
  mr_phantom_kspace_moved(2, l->n, o->coils, k, shift, out);
  for (int c = 0; l->slices > 1 && c < o->coils; c++) {
    double d = (double)c / o->coils - (double)z / l->slices;
    d -= floor(d + 0.5); /* around the circle, [-0.5, 0.5) */
    out[c] *= exp(-d * d / (2 * 0.09)) * cexp(I * 2.4 * c * z / o->coils);
  }
}

/* Sample q of readout r, every coil, noiseless, into values. A reversed
 * readout of shot s carries the odd/even error: its k-space shifted by
 * ghost[1] / 2 pi samples and its phase turned by ghost[0] (1 + s / 10).
 * Collapsed data of group g is the sum of its slices' (or the probed
 * slice's alone), the j-th (slice g + j G) shifted by j FOV / caipi
 * along y. */
static void sample(const mr_sim_options *o, const epi_layout *l, const readout *r, int q,
                   double complex *values) {
  double shift = r->reverse ? o->epi.ghost[1] / (2 * M_PI) : 0;
  double complex turn = r->reverse ? cexp(I * o->epi.ghost[0] * (1 + r->shot / 10.0)) : 1;
  double complex one[64];
  double p = r->reverse ? reversed_position(l, q) : forward_position(l, q);
  double k[3] = {(p - shift) / l->nx, (double)(r->line - l->n / 2) / l->n, 0};
  if (!r->collapsed) {
    slice_kspace(o, l, r->slice, k, values);
  } else {
    for (int c = 0; c < o->coils; c++)
      values[c] = 0;
    for (int j = 0; j < l->multiband; j++) {
      int z = r->slice + j * l->groups;
      if (l->probe > 0 && z != l->probe - 1)
        continue;
      slice_kspace(o, l, z, k, one);
      double complex caipi = cexp(-2 * M_PI * I * (r->line - l->n / 2) * j / (double)l->caipi);
      for (int c = 0; c < o->coils; c++)
        values[c] += one[c] * caipi;
    }
  }
  for (int c = 0; c < o->coils; c++)
    values[c] *= turn;
}

/* The samples of readout r (every coil), in time order, with noise. With
 * kept (the readout's slot in the first volume's samples) the first
 * volume computes them into it and the later ones take them from it. */
static void fill_readout(const mr_sim_options *o, const epi_layout *l, const readout *r,
                         mr_sim_noise *g, ISMRMRD_Acquisition *a, double complex *values,
                         double complex *kept) {
  for (int q = 0; q < l->ns; q++) {
    double complex *v = kept != NULL ? kept + (size_t)q * (size_t)o->coils : values;
    if (kept == NULL || r->volume == 0)
      sample(o, l, r, q, v);
    for (int c = 0; c < o->coils; c++) {
      double complex s = v[c];
      if (g->sigma > 0)
        s += mr_sim_gaussian(g);
      a->data[(size_t)c * (size_t)l->ns + (size_t)q] = (complex_float_t)s;
    }
  }
}

/* The callbacks of mr_sim_write. */
typedef struct scan_ctx {
  const mr_sim_options *o;
  const epi_layout *l;
  const readout *readouts;
  double complex *kept; /* [slots][ns][coils]: the first volume's samples; NULL: one volume */
} scan_ctx;

static void scan_head(void *arg, size_t i, ISMRMRD_AcquisitionHeader *h) {
  const scan_ctx *c = arg;
  readout_header(c->o, c->l, i, &c->readouts[i], h);
}

static void scan_fill(void *arg, size_t i, mr_sim_noise *g, double complex *values,
                      ISMRMRD_Acquisition *a) {
  const scan_ctx *c = arg;
  const readout *r = &c->readouts[i];
  double complex *kept =
      c->kept != NULL && r->slot != NO_SLOT
          ? c->kept + r->slot * (size_t)c->l->ns * (size_t)c->o->coils
          : NULL;
  fill_readout(c->o, c->l, r, g, a, values, kept);
}

/* The truth of every slice (n x n x slices with several). */
static int scan_truth(void *arg, ISMRMRD_Dataset *d, mr_err *err) {
  const scan_ctx *c = arg;
  double shifts[64][3];
  for (int z = 0; z < c->l->slices; z++)
    slice_shift(c->l, z, shifts[z]);
  return mr_sim_write_truth(d, 2, c->l->n, (size_t)c->l->slices, (const double(*)[3])shifts, err);
}

/* The first volume's samples kept for the later ones: at most this much. */
#define EPI_KEPT_MAX ((size_t)1 << 30)

int mr_simulate_epi(const mr_sim_options *o, mr_err *err) {
  epi_layout l;
  readout *readouts = NULL;
  size_t count = 0, slots = 0;
  int rc = make_layout(o, &l, err);
  if (rc == 0)
    rc = make_readouts(&l, &readouts, &count, &slots, err);
  if (rc < 0)
    return rc;
  size_t kept_bytes = slots * (size_t)l.ns * (size_t)o->coils * sizeof(double complex);
  double complex *kept = NULL;
  if (kept_bytes > EPI_KEPT_MAX)
    rc = mr_err_set(err, MR_EINVAL,
                    "--volumes: a volume of this scan is %zu MiB of samples, over the %zu MiB "
                    "the simulator keeps to repeat it", kept_bytes >> 20, EPI_KEPT_MAX >> 20);
  else if (slots > 0 && (kept = malloc(kept_bytes)) == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory for a volume's samples (%zu MiB)",
                    kept_bytes >> 20);
  if (rc == 0) {
    char xml[4096];
    header_xml(o, &l, xml, sizeof xml);
    scan_ctx c = {o, &l, readouts, kept};
    mr_sim_scan scan = {.readouts = count, .head = scan_head, .fill = scan_fill,
                        .truth = scan_truth, .arg = &c};
    rc = mr_sim_write(o, xml, &scan, err);
  }
  free(kept);
  free(readouts);
  return rc;
}
