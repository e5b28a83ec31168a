#include "fft.h"
#include "iterative_support.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fhd.h"
#include "test_gpu_common.h"

void iter_radial(int rank, int spokes, int samples, float *k) {
  const double golden = M_PI * (3 - sqrt(5.0));
  for (int s = 0; s < spokes; s++) {
    double dir[3];
    if (rank == 2) {
      double a = M_PI * s / spokes;
      dir[0] = cos(a);
      dir[1] = sin(a);
      dir[2] = 0;
    } else { /* half of a Fibonacci sphere: each spoke covers +-dir */
      double zc = 1 - (s + 0.5) / spokes, r = sqrt(1 - zc * zc), a = golden * s;
      dir[0] = r * cos(a);
      dir[1] = r * sin(a);
      dir[2] = zc;
    }
    for (int i = 0; i < samples; i++) {
      double t = (i - samples / 2) / (double)samples; /* [-0.5, 0.5) */
      for (int d = 0; d < rank; d++)
        k[((size_t)s * samples + i) * rank + d] = (float)(t * dir[d]);
    }
  }
}

void iter_spiral(int rank, int interleaves, int samples, double turns, int partitions, float *k) {
  int planes = rank == 3 ? partitions : 1;
  size_t at = 0;
  for (int p = 0; p < planes; p++)
    for (int l = 0; l < interleaves; l++)
      for (int i = 0; i < samples; i++) {
        double u = (double)i / samples, r = 0.5 * u;
        double a = 2 * M_PI * (turns * u + (double)l / interleaves);
        k[at++] = (float)(r * cos(a));
        k[at++] = (float)(r * sin(a));
        if (rank == 3)
          k[at++] = (float)((p - planes / 2) / (double)planes);
      }
}

/* (R x)(r) in double: x itself, or sum_d 2 x(r) - x(r + e_d) - x(r - e_d)
 * with zeros outside. */
static double complex regularizer_at(const mr_cfloat *x, const size_t n[3], int rank,
                                     mr_regularizer reg, size_t i) {
  if (reg == MR_REG_IDENTITY)
    return x[i];
  size_t pos[3] = {i % n[0], i / n[0] % n[1], i / n[0] / n[1]};
  size_t step[3] = {1, n[0], n[0] * n[1]};
  double complex s = 0;
  for (int d = 0; d < rank; d++) {
    s += 2.0 * x[i];
    if (pos[d] + 1 < n[d])
      s -= x[i + step[d]];
    if (pos[d] > 0)
      s -= x[i - step[d]];
  }
  return s;
}

void iter_exact_normal(mr_device *cpu, int rank, const size_t n[3], size_t m, const float *k,
                       const float *w, double lambda, mr_regularizer reg, size_t coils,
                       const mr_cfloat *maps, const mr_cfloat *x, mr_cfloat *y) {
  size_t nvox = n[0] * n[1] * (rank == 3 ? n[2] : 1), batch = coils > 0 ? coils : 1;
  mr_fhd_opts o = {.rank = rank, .grid = {n[0], n[1], n[2]}, .batch = batch,
                   .precision = MR_FHD_DOUBLE};
  mr_fhd_plan *plan = NULL;
  GPU_OK(mr_fhd_plan_create(cpu, &o, &plan, TERR));
  GPU_OK(mr_fhd_set_points(plan, m, k, TERR));
  mr_cfloat *u = malloc(batch * nvox * sizeof *u), *d = malloc(batch * m * sizeof *d);
  for (size_t c = 0; c < batch; c++)
    for (size_t i = 0; i < nvox; i++)
      u[c * nvox + i] = coils > 0 ? maps[c * nvox + i] * x[i] : x[i];
  GPU_OK(mr_fhd_forward(plan, u, d, TERR));
  GPU_OK(mr_fhd_adjoint(plan, d, w, u, TERR));
  size_t dims[3] = {n[0], n[1], rank == 3 ? n[2] : 1};
  for (size_t i = 0; i < nvox; i++) {
    double complex s = 0;
    for (size_t c = 0; c < batch; c++)
      s += coils > 0 ? conj((double complex)maps[c * nvox + i]) * u[c * nvox + i]
                     : (double complex)u[i];
    if (lambda > 0)
      s += lambda * regularizer_at(x, dims, rank, reg, i);
    y[i] = (mr_cfloat)s;
  }
  free(u);
  free(d);
  mr_fhd_plan_destroy(plan);
}

void iter_bilinear_gridding(mr_device *dev, int rank, const size_t n[3], size_t batch, size_t m,
                            const float *k, const mr_cfloat *data, mr_cfloat *out) {
  size_t dims[3] = {n[0], n[1], rank == 3 ? n[2] : 1}, nvox = dims[0] * dims[1] * dims[2];
  double complex *sum = calloc(batch * nvox, sizeof *sum);
  double *weight = calloc(nvox, sizeof *weight);
  for (size_t j = 0; j < m; j++) {
    long base[3] = {0, 0, 0};
    double frac[3] = {0, 0, 0};
    for (int d = 0; d < rank; d++) { /* grid index of k: n/2 is the centre */
      double g = k[j * rank + d] * (double)dims[d] + (double)(dims[d] / 2);
      base[d] = (long)floor(g);
      frac[d] = g - (double)base[d];
    }
    for (int corner = 0; corner < (1 << rank); corner++) {
      double w = 1;
      size_t at = 0, stride = 1;
      for (int d = 0; d < rank; d++) {
        int up = (corner >> d) & 1;
        w *= up ? frac[d] : 1 - frac[d];
        long i = (base[d] + up) % (long)dims[d]; /* k-space is periodic */
        at += (size_t)(i < 0 ? i + (long)dims[d] : i) * stride;
        stride *= dims[d];
      }
      weight[at] += w;
      for (size_t b = 0; b < batch; b++)
        sum[b * nvox + at] += w * (double complex)data[b * m + j];
    }
  }
  for (size_t b = 0; b < batch; b++)
    for (size_t i = 0; i < nvox; i++)
      out[b * nvox + i] = (mr_cfloat)sum[b * nvox + i];
  mr_fft_opts fo = {.rank = rank, .dims = {dims[0], dims[1], dims[2]}, .batch = batch};
  mr_fft_plan *plan = NULL;
  GPU_OK(mr_fft_plan_create(dev, &fo, &plan, TERR));
  GPU_OK(mr_fft_execute_host(plan, MR_FFT_BACKWARD, out, out, TERR));
  mr_fft_plan_destroy(plan);
  free(sum);
  free(weight);
}

void iter_shepp_logan(size_t nx, size_t ny, float *img) {
  /* intensity, semi-axes a b, centre x0 y0, angle (degrees) */
  static const double e[10][6] = {
      {1.0, 0.69, 0.92, 0, 0, 0},          {-0.8, 0.6624, 0.874, 0, -0.0184, 0},
      {-0.2, 0.11, 0.31, 0.22, 0, -18},    {-0.2, 0.16, 0.41, -0.22, 0, 18},
      {0.1, 0.21, 0.25, 0, 0.35, 0},       {0.1, 0.046, 0.046, 0, 0.1, 0},
      {0.1, 0.046, 0.046, 0, -0.1, 0},     {0.1, 0.046, 0.023, -0.08, -0.605, 0},
      {0.1, 0.023, 0.023, 0, -0.606, 0},   {0.1, 0.023, 0.046, 0.06, -0.605, 0}};
  for (size_t iy = 0; iy < ny; iy++)
    for (size_t ix = 0; ix < nx; ix++) {
      double x = ((double)ix - (double)(nx / 2)) / (nx / 2.0);
      double y = ((double)iy - (double)(ny / 2)) / (ny / 2.0);
      double v = 0;
      for (int i = 0; i < 10; i++) {
        double c = cos(e[i][5] * M_PI / 180), s = sin(e[i][5] * M_PI / 180);
        double u = (x - e[i][3]) * c + (y - e[i][4]) * s, w = -(x - e[i][3]) * s + (y - e[i][4]) * c;
        if (u * u / (e[i][1] * e[i][1]) + w * w / (e[i][2] * e[i][2]) <= 1)
          v += e[i][0];
      }
      img[iy * nx + ix] = (float)v;
    }
}

/* The modified Shepp-Logan ellipsoids in coordinates of half the image
 * width: intensity, semi-axes a b c, centre x y z, rotation about z (deg).
 * Their z = 0 sections are the 2D phantom's ellipses. */
static const double shepp_logan[10][8] = {
    {1.0, 0.69, 0.92, 0.81, 0, 0, 0, 0},          {-0.8, 0.6624, 0.874, 0.78, 0, -0.0184, 0, 0},
    {-0.2, 0.11, 0.31, 0.22, 0.22, 0, 0, -18},    {-0.2, 0.16, 0.41, 0.28, -0.22, 0, 0, 18},
    {0.1, 0.21, 0.25, 0.41, 0, 0.35, -0.15, 0},   {0.1, 0.046, 0.046, 0.05, 0, 0.1, 0.25, 0},
    {0.1, 0.046, 0.046, 0.05, 0, -0.1, 0.25, 0},  {0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0, 0},
    {0.1, 0.023, 0.023, 0.02, 0, -0.606, 0, 0},   {0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0, 0}};

/* Fourier transform of the phantom at k (cycles per pixel), the image
 * n voxels wide, exp(-2 pi i k . x) with x in pixels. */
static double complex phantom_ft(int rank, const size_t n[3], const double k[3]) {
  double complex sum = 0;
  for (int e = 0; e < 10; e++) {
    const double *p = shepp_logan[e];
    double h[3] = {n[0] / 2.0, n[1] / 2.0, rank == 3 ? n[2] / 2.0 : 1}; /* pixels per unit */
    double c = cos(p[7] * M_PI / 180), s = sin(p[7] * M_PI / 180);
    double ax[3] = {p[1] * h[0], p[2] * h[1], p[3] * h[2]}; /* semi-axes in pixels (roughly:
                                                              square images) */
    double ku = k[0] * c + k[1] * s, kv = -k[0] * s + k[1] * c;
    double q2 = pow(ax[0] * ku, 2) + pow(ax[1] * kv, 2);
    if (rank == 3)
      q2 += pow(ax[2] * k[2], 2);
    double q = sqrt(q2), shape;
    if (rank == 2) {
      shape = q < 1e-9 ? M_PI : j1(2 * M_PI * q) / q;
      shape *= ax[0] * ax[1];
    } else {
      double x = 2 * M_PI * q;
      shape = x < 1e-4 ? 4 * M_PI / 3 : (sin(x) - x * cos(x)) / (2 * M_PI * M_PI * q * q * q);
      shape *= ax[0] * ax[1] * ax[2];
    }
    double phase = k[0] * p[4] * h[0] + k[1] * p[5] * h[1] + (rank == 3 ? k[2] * p[6] * h[2] : 0);
    sum += p[0] * shape * cexp(-2 * M_PI * I * phase);
  }
  return sum;
}

/* Coil c's sensitivity as plane waves, S_c(x) = sum_t amp[t] exp(2 pi i
 * freq[t] . x): the three lowest harmonics per axis of a period 1.5 n,
 * Gaussian-tapered and shifted to put the coil's bump at a point on a ring
 * around the object (in 3D alternately above and below the centre), times
 * a phase of its own. 3^rank terms. */
enum { COIL_TERMS = 27 };

static int coil_terms(int rank, const size_t n[3], size_t c, size_t coils,
                      double complex amp[COIL_TERMS], double freq[COIL_TERMS][3]) {
  double angle = 2 * M_PI * (double)c / (double)coils;
  double centre[3] = {0.45 * n[0] * cos(angle), 0.45 * n[1] * sin(angle),
                      rank == 3 ? (c % 2 ? 0.25 : -0.25) * n[2] : 0};
  double complex phase = cexp(I * M_PI * (double)c / (double)coils);
  int count = 0;
  for (int pz = rank == 3 ? -1 : 0; pz <= (rank == 3 ? 1 : 0); pz++)
    for (int py = -1; py <= 1; py++)
      for (int px = -1; px <= 1; px++) {
        int p[3] = {px, py, pz};
        double arg = 0, taper = 1;
        for (int d = 0; d < 3; d++) {
          double period = 1.5 * (double)(d < rank ? n[d] : 1);
          freq[count][d] = p[d] / period;
          arg -= freq[count][d] * centre[d];
          taper *= exp(-0.5 * p[d] * p[d]);
        }
        amp[count++] = phase * taper * cexp(2 * M_PI * I * arg);
      }
  return count;
}

void iter_analytic_kspace(int rank, const size_t n[3], size_t coils, size_t m, const float *k,
                          mr_cfloat *data) {
  for (size_t c = 0; c < coils; c++) {
    double complex amp[COIL_TERMS];
    double freq[COIL_TERMS][3];
    int terms = coil_terms(rank, n, c, coils, amp, freq);
    for (size_t j = 0; j < m; j++) {
      double complex v = 0;
      for (int t = 0; t < terms; t++) { /* FT(S rho)(k) = sum_t amp_t FT(rho)(k - f_t) */
        double kk[3] = {0, 0, 0};
        for (int d = 0; d < rank; d++)
          kk[d] = k[j * rank + d] - freq[t][d];
        v += amp[t] * phantom_ft(rank, n, kk);
      }
      data[c * m + j] = (mr_cfloat)v;
    }
  }
}

void iter_analytic_rss(int rank, const size_t n[3], size_t coils, float *img) {
  size_t nz = rank == 3 ? n[2] : 1;
  for (size_t i = 0; i < n[0] * n[1] * nz; i++) {
    double x[3] = {(double)(i % n[0]) - (double)(n[0] / 2),
                   (double)(i / n[0] % n[1]) - (double)(n[1] / 2),
                   (double)(i / n[0] / n[1]) - (double)(nz / 2)};
    double v = 0;
    for (int e = 0; e < 10; e++) {
      const double *p = shepp_logan[e];
      double h[3] = {n[0] / 2.0, n[1] / 2.0, rank == 3 ? n[2] / 2.0 : 1};
      double u0 = x[0] / h[0] - p[4], v0 = x[1] / h[1] - p[5], w0 = x[2] / h[2] - p[6];
      double c = cos(p[7] * M_PI / 180), s = sin(p[7] * M_PI / 180);
      double u = u0 * c + v0 * s, w = -u0 * s + v0 * c;
      double r = u * u / (p[1] * p[1]) + w * w / (p[2] * p[2]);
      if (rank == 3)
        r += w0 * w0 / (p[3] * p[3]);
      if (r <= 1)
        v += p[0];
    }
    double ss = 0;
    for (size_t c = 0; c < coils; c++) {
      double complex amp[COIL_TERMS], sens = 0;
      double freq[COIL_TERMS][3];
      int terms = coil_terms(rank, n, c, coils, amp, freq);
      for (int t = 0; t < terms; t++)
        sens += amp[t] * cexp(2 * M_PI * I * (freq[t][0] * x[0] + freq[t][1] * x[1] + freq[t][2] * x[2]));
      ss += pow(cabs(sens), 2);
    }
    img[i] = (float)(fabs(v) * sqrt(ss));
  }
}

double iter_psnr(const float *img, const float *ref, size_t n) {
  double peak = 0, se = 0;
  for (size_t i = 0; i < n; i++) {
    peak = fmax(peak, fabs(ref[i]));
    se += ((double)img[i] - ref[i]) * ((double)img[i] - ref[i]);
  }
  return 20 * log10(peak / sqrt(se / n));
}
