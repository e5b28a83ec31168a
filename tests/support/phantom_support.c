#include "phantom_support.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "phantom.h"
#include "test_support.h"

void phantom_test_band_limited_rss(int n, int ncoils, float *out) {
  const double still[3] = {0, 0, 0};
  phantom_test_band_limited_rss_moved(n, ncoils, still, out);
}

void phantom_test_band_limited_rss_moved(int n, int ncoils, const double shift[3], float *out) {
  size_t npix = (size_t)n * n;
  double complex *ks = malloc(npix * ncoils * sizeof *ks), *img = malloc(npix * ncoils * sizeof *img);
  double complex *v = malloc(ncoils * sizeof *v);
  if (ks == NULL || img == NULL || v == NULL)
    abort();
  for (int y = 0; y < n; y++)
    for (int x = 0; x < n; x++) {
      double k[3] = {(double)(x - n / 2) / n, (double)(y - n / 2) / n, 0};
      mr_phantom_kspace_moved(2, n, ncoils, k, shift, v);
      for (int c = 0; c < ncoils; c++)
        ks[c * npix + (size_t)y * n + x] = v[c];
    }
  for (int c = 0; c < ncoils; c++)
    mr_test_centered_dft(ks + c * npix, img + c * npix, n, n, 1, +1);
  for (size_t i = 0; i < npix; i++) {
    double rss = 0;
    for (int c = 0; c < ncoils; c++)
      rss += creal(img[c * npix + i] * conj(img[c * npix + i]));
    out[i] = (float)sqrt(rss);
  }
  free(ks);
  free(img);
  free(v);
}
