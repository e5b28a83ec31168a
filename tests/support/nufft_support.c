#include "nufft_support.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

void nufft_test_random_points(float *k, size_t n, int rank, unsigned seed) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n * (size_t)rank; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    k[i] = (float)((s >> 40) / (double)(1ull << 24) - 0.5);
  }
  static const float edges[][3] = {{-0.5f, -0.5f, -0.5f},
                                   {0.49999997f, -0.5f, 0.49999997f},
                                   {0.0f, 0.49999997f, -0.5f}};
  for (size_t i = 0; i < 3 && i < n; i++)
    for (int d = 0; d < rank; d++)
      k[i * rank + d] = edges[i][d];
}

void nufft_test_radial_points(float *k, size_t spokes, size_t samples) {
  for (size_t s = 0; s < spokes; s++) {
    double angle = M_PI * (double)s / (double)spokes;
    for (size_t i = 0; i < samples; i++) {
      double r = ((double)i - (double)(samples / 2)) / (double)samples;
      k[(s * samples + i) * 2] = (float)(r * cos(angle));
      k[(s * samples + i) * 2 + 1] = (float)(r * sin(angle));
    }
  }
}

/* exp(sign 2 pi i k m) for m = i - n/2, i in [0, n). */
static void phases(double k, size_t n, int sign, double complex *out) {
  for (size_t i = 0; i < n; i++)
    out[i] = cexp(sign * 2.0 * M_PI * I * k * ((double)i - (double)(n / 2)));
}

typedef struct factors {
  double complex *e[3];
} factors;

static void factors_of(factors *f, int rank, const size_t dims[3], const float *kj, int sign) {
  for (int d = 0; d < 3; d++) {
    if (d < rank)
      phases(kj[d], dims[d], sign, f->e[d]);
    else
      f->e[d][0] = 1;
  }
}

static int factors_new(factors *f, const size_t dims[3]) {
  for (int d = 0; d < 3; d++)
    f->e[d] = malloc(dims[d] * sizeof *f->e[d]);
  return f->e[0] != NULL && f->e[1] != NULL && f->e[2] != NULL;
}

static void factors_free(factors *f) {
  for (int d = 0; d < 3; d++)
    free(f->e[d]);
}

void nufft_test_dft_adjoint(int rank, const size_t dims[3], size_t batch, size_t n,
                            const float *k, const float complex *samples, double complex *image) {
  size_t npix = dims[0] * dims[1] * dims[2];
  for (size_t i = 0; i < npix * batch; i++)
    image[i] = 0;
  factors f;
  if (!factors_new(&f, dims))
    abort();
  for (size_t j = 0; j < n; j++) {
    factors_of(&f, rank, dims, k + j * rank, +1);
    for (size_t b = 0; b < batch; b++) {
      double complex s = samples[b * n + j];
      double complex *img = image + b * npix;
      for (size_t z = 0; z < dims[2]; z++)
        for (size_t y = 0; y < dims[1]; y++) {
          double complex szy = s * f.e[2][z] * f.e[1][y];
          double complex *row = img + (z * dims[1] + y) * dims[0];
          for (size_t x = 0; x < dims[0]; x++)
            row[x] += szy * f.e[0][x];
        }
    }
  }
  factors_free(&f);
}

void nufft_test_dft_forward(int rank, const size_t dims[3], size_t batch, size_t n,
                            const float *k, const float complex *image, double complex *samples) {
  size_t npix = dims[0] * dims[1] * dims[2];
  factors f;
  if (!factors_new(&f, dims))
    abort();
  for (size_t j = 0; j < n; j++) {
    factors_of(&f, rank, dims, k + j * rank, -1);
    for (size_t b = 0; b < batch; b++) {
      const float complex *img = image + b * npix;
      double complex sum = 0;
      for (size_t z = 0; z < dims[2]; z++)
        for (size_t y = 0; y < dims[1]; y++) {
          const float complex *row = img + (z * dims[1] + y) * dims[0];
          double complex rs = 0;
          for (size_t x = 0; x < dims[0]; x++)
            rs += row[x] * f.e[0][x];
          sum += rs * f.e[2][z] * f.e[1][y];
        }
      samples[b * n + j] = sum;
    }
  }
  factors_free(&f);
}

double nufft_test_rel_error(const float complex *a, const double complex *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double complex d = a[i] - ref[i];
    num += creal(d) * creal(d) + cimag(d) * cimag(d);
    den += creal(ref[i]) * creal(ref[i]) + cimag(ref[i]) * cimag(ref[i]);
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}
