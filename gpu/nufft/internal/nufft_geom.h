/* Internal: the grid geometry of a NUFFT plan and the small functions both
 * backends use on it: where a sample lands, which bins its footprint
 * touches, which part of it falls inside one bin, the kernel itself. They
 * compile as host code and as CUDA device code, so the CPU path exercises
 * the very placement, binning and clipping the GPU kernels run. */
#ifndef MR_GPU_NUFFT_GEOM_H
#define MR_GPU_NUFFT_GEOM_H

#include <math.h>

#ifdef __CUDACC__
#define MR_NUFFT_FN __host__ __device__ inline
#else
#define MR_NUFFT_FN static inline
#endif

#define MR_NUFFT_MAX_WIDTH 16

typedef struct mr_nufft_geom {
  int rank;
  int width;            /* kernel width w in grid points, 2 .. MR_NUFFT_MAX_WIDTH */
  float beta;           /* kernel shape */
  float inv_half_width; /* 2 / w */
  int n[3];             /* image dims; 1 past rank */
  int nf[3];            /* grid dims, each >= 2 w within rank; 1 past rank */
  /* Grid index of k = 0, which is also the grid index holding image
   * position 0 after the FFT: 0 for a plain FFT, nf/2 for the centered one
   * of fft.h. */
  int origin[3];
  int bin[3];   /* bin edge, w <= bin <= nf/2 within rank (so a footprint
                   touches a bin at most once); 1 past rank */
  int nbins[3]; /* ceil(nf / bin); the last bin of a dimension may be partial */
} mr_nufft_geom;

/* Kernel width along dimension d (1 past rank: nothing to spread there). */
MR_NUFFT_FN int mr_nufft_width(const mr_nufft_geom *g, int d) { return d < g->rank ? g->width : 1; }

/* Where a sample at k (cycles per pixel) lands along a dimension with grid
 * size nf: its footprint covers the w grid indices s, s+1, ... (mod nf),
 * and a = u - s lies in (w/2 - 1, w/2] with u = k nf, so tap j sits at
 * kernel argument a - j. In double, k nf and u - s are exact, so a is
 * rounded once (to float); in float, u - s would lose up to 1e-5 of a grid
 * step on large grids. s is returned wrapped to [0, nf) with origin added. */
MR_NUFFT_FN void mr_nufft_place(double k, int nf, int width, int origin, int *s, float *a) {
  double u = k * nf;
  double first = ceil(u - 0.5 * width);
  *a = (float)(u - first);
  if (fabs(first) < 1e9) { /* every position in a few periods: one integer remainder */
    int wrapped = ((int)first + origin) % nf;
    *s = wrapped < 0 ? wrapped + nf : wrapped;
    return;
  }
  double wrapped = fmod(first + origin, (double)nf); /* a loop on a GPU */
  if (wrapped < 0)
    wrapped += nf;
  *s = (int)wrapped;
}

/* The kernel at x grid steps from the sample: exp(beta (sqrt(1 - z^2) - 1))
 * with z = 2x/w. Taps always lie within |z| <= 1 (up to rounding). The
 * exponent is evaluated as -beta z^2 / (1 + sqrt(1 - z^2)), the same value
 * without the cancellation of sqrt(...) - 1 near the centre: in single
 * precision that cancellation cost 3.3e-7 (w = 8) of relative error on
 * every kernel value, which in 3D was most of the error at tol 1e-6; this
 * form costs 3e-8. */
MR_NUFFT_FN float mr_nufft_kernel(float x, float inv_half_width, float beta) {
  float z = x * inv_half_width;
  float z2 = z * z;
  float s = fmaxf(1.0f - z2, 0.0f);
#ifdef __CUDA_ARCH__
  return expf(-beta * __fdividef(z2, 1.0f + sqrtf(s))); /* 2 ulp, without IEEE division's cost */
#else
  return expf(-beta * z2 / (1.0f + sqrtf(s)));
#endif
}

/* The bins along one dimension that a footprint starting at s touches, in
 * order, into out[]; returns how many (at most 3: a partial last bin can lie
 * between two others). */
MR_NUFFT_FN int mr_nufft_touched(int s, int width, int nf, int bin, int out[3]) {
  int count = 0, last = -1;
  for (int j = 0; j < width; j++) {
    int cell = s + j < nf ? s + j : s + j - nf;
    int b = cell / bin;
    if (b != last) {
      out[count++] = b;
      last = b;
    }
  }
  return count;
}

/* The part of a footprint starting at s that falls in the bin [b0, b0 +
 * ext): bin cells [*lo, *lo + returned count), which are kernel taps
 * [*tap, *tap + count). Only for a bin the footprint touches. */
MR_NUFFT_FN int mr_nufft_clip(int s, int width, int nf, int b0, int ext, int *lo, int *tap) {
  int r = s - b0; /* the footprint's start relative to the bin */
  if (r >= ext)   /* it wraps around the grid's end into this bin */
    r -= nf;
  int l = r > 0 ? r : 0;
  int h = r + width < ext ? r + width : ext;
  *lo = l;
  *tap = l - r;
  return h - l;
}

/* Grid index that holds image index i (0 .. n-1) along one dimension. */
MR_NUFFT_FN int mr_nufft_grid_index(int i, int n, int nf, int origin) {
  int cell = i - n / 2 + origin;
  if (cell < 0)
    cell += nf;
  else if (cell >= nf)
    cell -= nf;
  return cell;
}

/* Image index held at grid index cell, or -1 when it holds none (the
 * oversampled margin). */
MR_NUFFT_FN int mr_nufft_image_index(int cell, int n, int nf, int origin) {
  int d = cell - origin;
  if (d < 0)
    d += nf;
  if (d < n - n / 2)
    return d + n / 2;
  if (d >= nf - n / 2)
    return d - nf + n / 2;
  return -1;
}

#endif
