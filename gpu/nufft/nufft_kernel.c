#include "nufft_kernel.h"

#include <math.h>

#include "nufft_geom.h"

void mr_nufft_kernel_choose(double tol, double sigma, int *width, double *beta) {
  int w;
  double per_width;
  if (fabs(sigma - 2.0) < 1e-9) {
    /* At sigma = 2 the error measured against the exact transform is about
     * 10^(1 - w) (10^(-0.96 w) in theory, times about 10): two points more
     * than the digits asked for keep it under tol. */
    w = (int)ceil(log10(1.0 / tol)) + 2;
    per_width = w == 3 ? 2.26 : w == 4 ? 2.38 : 2.30;
  } else {
    /* The same error law, exp(-pi w sqrt(1 - 1/sigma)), measured about 1.2
     * times that at sigma = 1.25; 4 leaves a margin. */
    w = (int)ceil(log(4.0 / tol) / (M_PI * sqrt(1.0 - 1.0 / sigma)));
    per_width = 0.97 * M_PI * (1.0 - 0.5 / sigma);
  }
  if (w < 2)
    w = 2;
  if (w > MR_NUFFT_MAX_WIDTH)
    w = MR_NUFFT_MAX_WIDTH;
  *width = w;
  *beta = per_width * w;
}

double mr_nufft_kernel_least_sigma(double tol, int width) {
  /* mr_nufft_kernel_choose's law solved for sigma at half of tol (at the
   * least grid the law's margin is thin: at tol itself 3D trajectories
   * measured 1.0 to 1.4 times tol at 1e-4 and 1e-6; at a quarter, 0.25
   * to 0.6 times, on grids that cost 15% more time), at a width a hair
   * under `width` so that the law's ceiling gives `width` back. At 1e-5
   * and below single precision's own error (3-5e-7 in 3D, measured at
   * upsampling 2) takes a good part of tol: there the law aims at a third
   * (at 1e-6 in 3D, half of tol measured 1.0 to 1.1 times tol on a 216^3
   * grid, a third makes it 224^3; at 1e-5, half measured 1.02 times tol
   * on 3D radial type 1) */
  double aim = tol <= 1e-5 ? tol / 3 : tol / 2;
  double q = log(4.0 / aim) / (M_PI * (width - 0.01));
  return q < 1 ? 1.0 / (1.0 - q * q) : INFINITY;
}

/* Nodes and weights of n-point Gauss-Legendre quadrature on [-1, 1]:
 * Newton's method on the Legendre recurrence from Chebyshev guesses. */
static void gauss_legendre(int n, double *x, double *wt) {
  for (int i = 0; i < n; i++) {
    double z = cos(M_PI * (i + 0.75) / (n + 0.5)), dp = 1;
    for (int it = 0; it < 100; it++) {
      double p0 = 1, p1 = z;
      for (int k = 2; k <= n; k++) {
        double p2 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      dp = n * (z * p1 - p0) / (z * z - 1);
      double step = p1 / dp;
      z -= step;
      if (fabs(step) < 1e-16)
        break;
    }
    x[i] = z;
    wt[i] = 2.0 / ((1 - z * z) * dp * dp);
  }
}

/* Enough nodes for the kernel's few oscillations at |xi| <= 1/2 over a
 * support of at most 16 points, and for its square-root edges. */
#define NODES 96

void mr_nufft_kernel_ft(int width, double beta, const double *xi, size_t n, double *out) {
  double x[NODES], wt[NODES];
  gauss_legendre(NODES, x, wt);
  double half = 0.5 * width;
  for (size_t i = 0; i < n; i++) {
    double sum = 0;
    for (int q = 0; q < NODES; q++) {
      double z = x[q], phi = exp(beta * (sqrt(1 - z * z) - 1));
      sum += wt[q] * phi * cos(2 * M_PI * xi[i] * half * z);
    }
    out[i] = sum * half;
  }
}
