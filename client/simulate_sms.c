/* `reconclient simulate --multiband M [--caipi S]`: a Cartesian
 * simultaneous multi-slice scan of M slices excited together, with a
 * single-band reference scan of every slice for the calibration.
 *
 * Slice s (0 .. M-1) lies at z = (s - (M-1)/2) dZ (dZ = matrix / 4 mm,
 * the header's multiband spacing). Its object is the Shepp-Logan phantom
 * scaled by 1 - 0.06 s, moved along x by 0.03 s of the matrix and, for odd
 * s, mirrored along y: no two slices alike, so that leakage shows. Coil c
 * sits on a cylinder around the object (rings of 8 at heights spread over
 * the slab), with a Gaussian profile in 3D and a smooth phase; each
 * slice's sensitivity is that profile in its plane, expanded in a Fourier
 * series of period 2 matrix (9 x 9 terms), so k-space stays exact: the
 * object's analytic transform at shifted positions, summed.
 *
 * Readouts, in this order:
 * - the reference: every line of each slice alone (no CAIPI shift),
 *   encoding space 1, slice s, flagged IS_PARALLEL_CALIBRATION,
 *   FIRST_IN_SLICE / LAST_IN_SLICE on a slice's first and last line;
 * - the collapsed acquisition: encoding space 0, slice 0, line y the sum
 *   over the slices of their k-space times the blipped-CAIPI phase
 *   exp(-2 pi i (y - n/2) s / S) (slice s moved by s n / S lines), its
 *   position that of slice 0; LAST_IN_SLICE and LAST_IN_MEASUREMENT on the
 *   last line.
 * The header's encoding 0 carries parallelImaging/multiband (spacing dZ,
 * deltaKz = 1/(S dZ) cycles per mm, the kz blip behind the shift,
 * multiband_factor M, calibration separable2D, calibration_encoding 1);
 * the array "phantom" holds every slice's object (n x n x M), what the
 * reference reconstructs up to the coil combination. */
#include "simulate_sms.h"

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ismrmrd/dataset.h>
#include <ismrmrd/version.h>

#include "h5.h"
#include "phantom.h"
#include "simulate_impl.h"

#define TERMS 4   /* Fourier terms -TERMS .. TERMS per axis of a coil map */
#define GRID 32   /* samples per axis of a map for its coefficients */
#define SIDE (2 * TERMS + 1)

typedef struct sms_scan {
  int n, mb, caipi, coils;
  double dz_mm;
  double complex *map;    /* [slice][coil][SIDE][SIDE] Fourier coefficients */
  double complex *kspace; /* [slice][coil][line][sample] */
} sms_scan;

static double slice_z(const sms_scan *s, int slice) {
  return (slice - (s->mb - 1) / 2.0) * s->dz_mm;
}

/* The transform of slice s's object at k (cycles per pixel). */
static double complex object_ft(const sms_scan *s, int slice, double kx, double ky) {
  double scale = 1 - 0.06 * slice, shift = 0.03 * slice * s->n;
  double k[3] = {scale * kx, scale * (slice % 2 ? -ky : ky), 0};
  return scale * scale * mr_phantom_ft(2, s->n, k) * cexp(-2 * M_PI * I * kx * shift);
}

static double object_value(const sms_scan *s, int slice, double x, double y) {
  double scale = 1 - 0.06 * slice, shift = 0.03 * slice * s->n;
  double r[3] = {(x - shift) / scale, (slice % 2 ? -y : y) / scale, 0};
  return mr_phantom_value(2, s->n, r);
}

/* Coil c's sensitivity at (x, y, z) in pixels and mm (1 mm pixels). */
static double complex sensitivity(const sms_scan *s, int c, double x, double y, double z) {
  int rings = (s->coils + 7) / 8, ring = c / 8;
  double half = s->n / 2.0, a = 2 * M_PI * (c % 8) / 8 + 0.4 * ring;
  double cz = rings > 1 ? (-0.6 + 1.2 * ring / (rings - 1)) * half : 0.0;
  double dx = x / half - 1.3 * cos(a), dy = y / half - 1.3 * sin(a), dz = (z - cz) / half;
  return exp(-(dx * dx + dy * dy + dz * dz) / 1.2) *
         cexp(I * (0.7 * c + 0.6 * (x * sin(a) - y * cos(a)) / half + 0.5 * z / half));
}

/* Fourier coefficients over the period 2n of every slice's coil maps. */
static void make_maps(sms_scan *s) {
  double period = 2.0 * s->n;
  for (int sl = 0; sl < s->mb; sl++)
    for (int c = 0; c < s->coils; c++) {
      double complex *a = s->map + ((size_t)sl * s->coils + c) * SIDE * SIDE;
      for (int gy = 0; gy < GRID; gy++)
        for (int gx = 0; gx < GRID; gx++) {
          double x = -s->n + period * gx / GRID, y = -s->n + period * gy / GRID;
          double complex v = sensitivity(s, c, x, y, slice_z(s, sl)) / (GRID * GRID);
          for (int jy = -TERMS; jy <= TERMS; jy++)
            for (int jx = -TERMS; jx <= TERMS; jx++)
              a[(jy + TERMS) * SIDE + jx + TERMS] +=
                  v * cexp(-2 * M_PI * I * (jx * x + jy * y) / period);
        }
    }
}

/* k-space of every slice and coil: sum_j a_j F(k - j / 2n). */
static void make_kspace(sms_scan *s) {
  int n = s->n;
  double complex *f = malloc(SIDE * SIDE * sizeof *f);
  if (f == NULL)
    return;
  for (int sl = 0; sl < s->mb; sl++)
    for (int y = 0; y < n; y++)
      for (int x = 0; x < n; x++) {
        double kx = (double)(x - n / 2) / n, ky = (double)(y - n / 2) / n;
        for (int jy = -TERMS; jy <= TERMS; jy++)
          for (int jx = -TERMS; jx <= TERMS; jx++)
            f[(jy + TERMS) * SIDE + jx + TERMS] =
                object_ft(s, sl, kx - jx / (2.0 * n), ky - jy / (2.0 * n));
        for (int c = 0; c < s->coils; c++) {
          const double complex *a = s->map + ((size_t)sl * s->coils + c) * SIDE * SIDE;
          double complex v = 0;
          for (int j = 0; j < SIDE * SIDE; j++)
            v += a[j] * f[j];
          s->kspace[(((size_t)sl * s->coils + c) * n + y) * n + x] = v;
        }
      }
  free(f);
}

static void header_xml(const mr_sim_options *o, const sms_scan *s, char *buf, size_t size) {
  int n = s->n;
  char enc[2][2048];
  for (int e = 0; e < 2; e++) {
    char multiband[512] = "";
    if (e == 0)
      snprintf(multiband, sizeof multiband,
               "<parallelImaging><accelerationFactor><kspace_encoding_step_1>1"
               "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
               "</accelerationFactor><calibrationMode>separate</calibrationMode>"
               "<multiband><spacing><dZ>%g</dZ></spacing><deltaKz>%g</deltaKz>"
               "<multiband_factor>%d</multiband_factor><calibration>separable2D</calibration>"
               "<calibration_encoding>1</calibration_encoding></multiband></parallelImaging>",
               s->dz_mm, 1.0 / (s->caipi * s->dz_mm), s->mb);
    snprintf(enc[e], sizeof enc[e],
             "<encoding><encodedSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
             "<fieldOfView_mm><x>%d</x><y>%d</y><z>1</z></fieldOfView_mm></encodedSpace>"
             "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>1</z></matrixSize>"
             "<fieldOfView_mm><x>%d</x><y>%d</y><z>1</z></fieldOfView_mm></reconSpace>"
             "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>%d</maximum>"
             "<center>%d</center></kspace_encoding_step_1><slice><minimum>0</minimum>"
             "<maximum>%d</maximum><center>0</center></slice></encodingLimits>"
             "<trajectory>cartesian</trajectory>%s</encoding>",
             n, n, n, n, n, n, n, n, n - 1, n / 2, e == 0 ? 0 : s->mb - 1, multiband);
  }
  char protocol[64], encodings[sizeof enc];
  snprintf(protocol, sizeof protocol, "multiband %d CAIPI FOV/%d", s->mb, s->caipi);
  snprintf(encodings, sizeof encodings, "%s%s", enc[0], enc[1]);
  mr_sim_header(buf, size, protocol, o->coils, encodings);
}

/* Readout r's header: the reference's lines (slice r / n), then the
 * collapsed ones. */
static void head(void *arg, size_t r, ISMRMRD_AcquisitionHeader *h) {
  const sms_scan *s = arg;
  int n = s->n, reference = r < (size_t)s->mb * n;
  int slice = reference ? (int)(r / n) : 0, y = (int)(r % n);
  mr_sim_readout(h, r, n, s->coils);
  h->position[2] = (float)slice_z(s, slice);
  h->encoding_space_ref = reference ? 1 : 0;
  h->idx.kspace_encode_step_1 = (uint16_t)y;
  h->idx.slice = (uint16_t)slice;
  if (reference)
    h->flags |= 1ull << (ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION - 1);
  if (y == 0)
    h->flags |= 1ull << (ISMRMRD_ACQ_FIRST_IN_SLICE - 1);
  if (y == n - 1)
    h->flags |= (1ull << (ISMRMRD_ACQ_LAST_IN_SLICE - 1)) |
                (reference ? 0 : (1ull << (ISMRMRD_ACQ_LAST_IN_REPETITION - 1)) |
                                     (1ull << (ISMRMRD_ACQ_LAST_IN_MEASUREMENT - 1)));
}

/* Readout r's samples: one slice's line, or the collapsed sum. */
static void fill(void *arg, size_t r, mr_sim_noise *g, double complex *values,
                 ISMRMRD_Acquisition *a) {
  (void)values;
  const sms_scan *s = arg;
  int n = s->n, reference = r < (size_t)s->mb * n;
  int slice = reference ? (int)(r / n) : 0, y = (int)(r % n);
  for (int c = 0; c < s->coils; c++)
    for (int x = 0; x < n; x++) {
      double complex v = 0;
      for (int sl = reference ? slice : 0; sl < (reference ? slice + 1 : s->mb); sl++) {
        double complex k = s->kspace[(((size_t)sl * s->coils + c) * n + y) * n + x];
        if (!reference) /* the residue first: exact for any line */
          k *= cexp(-2 * M_PI * I * (double)(((long)(y - n / 2) * sl) % s->caipi) / s->caipi);
        v += k;
      }
      if (g->sigma > 0)
        v += mr_sim_gaussian(g);
      a->data[(size_t)c * n + x] = (complex_float_t)v;
    }
}

static int write_phantom(void *arg, ISMRMRD_Dataset *d, mr_err *err) {
  const sms_scan *s = arg;
  ISMRMRD_NDArray arr;
  ismrmrd_init_ndarray(&arr);
  arr.data_type = ISMRMRD_CXFLOAT;
  arr.ndim = 3;
  arr.dims[0] = arr.dims[1] = (size_t)s->n;
  arr.dims[2] = (size_t)s->mb;
  if (ismrmrd_make_consistent_ndarray(&arr) != ISMRMRD_NOERROR)
    return mr_err_set(err, MR_ENOMEM, "out of memory for the phantom image");
  complex_float_t *px = arr.data;
  for (int sl = 0; sl < s->mb; sl++)
    for (int y = 0; y < s->n; y++)
      for (int x = 0; x < s->n; x++)
        *px++ = (float)object_value(s, sl, x - s->n / 2, y - s->n / 2);
  int rc = ismrmrd_append_array(d, "phantom", &arr) == ISMRMRD_NOERROR && !mr_h5_failed()
               ? 0
               : mr_err_set(err, MR_EIO, "cannot write the phantom array: %s", mr_h5_error());
  ismrmrd_cleanup_ndarray(&arr);
  return rc;
}

int mr_simulate_sms(const mr_sim_options *o, mr_err *err) {
  if (o->trajectory != MR_SIM_CARTESIAN || o->three_d || o->frames > 0)
    return mr_err_set(err, MR_EINVAL, "--multiband is for 2D Cartesian scans");
  if (o->multiband < 2 || o->multiband > 16)
    return mr_err_set(err, MR_EINVAL, "--multiband must be 2 .. 16, got %d", o->multiband);
  if (o->caipi < 0 || o->caipi > o->multiband)
    return mr_err_set(err, MR_EINVAL, "--caipi must be 1 .. the multiband factor %d, got %d",
                      o->multiband, o->caipi);
  if (o->matrix > 256)
    return mr_err_set(err, MR_EINVAL, "--multiband takes matrices up to 256, got %d", o->matrix);
  sms_scan s = {.n = o->matrix, .mb = o->multiband, .caipi = o->caipi > 0 ? o->caipi : 1,
                .coils = o->coils, .dz_mm = o->matrix / 4.0};
  size_t values = (size_t)s.mb * s.coils * s.n * s.n;
  s.map = calloc((size_t)s.mb * s.coils * SIDE * SIDE, sizeof *s.map);
  s.kspace = malloc(values * sizeof *s.kspace);
  if (s.map == NULL || s.kspace == NULL) {
    free(s.map);
    free(s.kspace);
    return mr_err_set(err, MR_ENOMEM, "out of memory for %zu k-space values", values);
  }
  make_maps(&s);
  make_kspace(&s);
  char xml[8192];
  header_xml(o, &s, xml, sizeof xml);
  mr_sim_scan scan = {.readouts = (size_t)(s.mb + 1) * s.n, .head = head, .fill = fill,
                      .truth = write_phantom, .arg = &s, .parallel = 1};
  int rc = mr_sim_write(o, xml, &scan, err);
  free(s.map);
  free(s.kspace);
  return rc;
}
