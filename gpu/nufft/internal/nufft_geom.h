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

/* How many bins beyond its first (*home) a footprint starting at s touches
 * along one dimension: 0 or 1, or 2 where it spans a partial last bin
 * narrower than w - 1 and wraps into bin 0. The same bins as
 * mr_nufft_touched, without a division per grid point. */
MR_NUFFT_FN int mr_nufft_reach(int s, int width, int nf, int bin, int nbins, int *home) {
  int first = s / bin, last = s + width - 1;
  *home = first;
  if (last < nf)
    return last / bin - first;
  return nbins - first + (last - nf) / bin; /* first .. nbins - 1, then 0 .. */
}

/* The most bins a footprint touches along dimension d (one more than the
 * largest mr_nufft_reach): 1 past rank; 3 where the partial last bin is
 * narrower than w - 1, else 2 (every other bin is at least w wide). */
MR_NUFFT_FN int mr_nufft_most_reach(const mr_nufft_geom *g, int d) {
  if (d >= g->rank)
    return 1;
  int last = g->nf[d] - (g->nbins[d] - 1) * g->bin[d];
  return last < g->width - 1 ? 3 : 2;
}

/* The GPU's layout of a trajectory's samples. Each sample is sorted into
 * one group of its home bin (the bin of its footprint's first grid point):
 * its digit t_d along each dimension is how many bins beyond the home its
 * footprint reaches (mr_nufft_reach: 0 .. reach_d - 1), and its group is
 * home * per_bin + t_0 + reach_0 (t_1 + reach_1 t_2). The samples that
 * reach into a bin (its entries, which the host lists one by one:
 * nufft_points.h) are then those of a few whole groups: for each
 * neighbour home h = bin - delta (delta_d in 0 .. reach_d - 1, mod the bins
 * along d), the groups with t_d >= delta_d, taken as runs of adjacent groups
 * (t_0 from delta_0 on, in one run): the bin's "sources". Binning then
 * takes one slot per sample, and spreading reads a bin's entries from its
 * sources, contiguous runs of the sorted samples (nufft_points_cuda.cu,
 * nufft_cuda.cu). */
typedef struct mr_nufft_groups {
  int reach[3]; /* mr_nufft_most_reach per dimension */
  int nbins[3];
  int per_bin; /* groups of one home bin */
  int sources; /* sources of every bin (some may be empty) */
} mr_nufft_groups;

/* Sources a bin has at most: 3 x 6 x 6, each dimension of reach 3. */
#define MR_NUFFT_MAX_SOURCES 108

MR_NUFFT_FN mr_nufft_groups mr_nufft_groups_of(const mr_nufft_geom *g) {
  mr_nufft_groups q;
  q.per_bin = 1;
  q.sources = 1;
  for (int d = 0; d < 3; d++) {
    int r = mr_nufft_most_reach(g, d);
    q.reach[d] = r;
    q.nbins[d] = g->nbins[d];
    q.per_bin *= r;
    /* dimension 0: one run per delta; the others: a (delta, t >= delta)
     * pair each */
    q.sources *= d == 0 ? r : r * (r + 1) / 2;
  }
  return q;
}

/* Sample group of a footprint starting at s[] (per dimension). */
MR_NUFFT_FN int mr_nufft_group(const mr_nufft_geom *g, const mr_nufft_groups *q, const int s[3]) {
  int home = 0, digit = 0, stride = 1, radix = 1;
  for (int d = 0; d < 3; d++) {
    int h, t = mr_nufft_reach(s[d], mr_nufft_width(g, d), g->nf[d], g->bin[d], g->nbins[d], &h);
    home += h * stride;
    stride *= g->nbins[d];
    digit += t * radix;
    radix *= q->reach[d];
  }
  return home * q->per_bin + digit;
}

/* The o-th (delta, t >= delta) pair of a dimension of reach r. */
MR_NUFFT_FN void mr_nufft_pair(int o, int r, int *delta, int *t) {
  int d = 0;
  while (o >= r - d) {
    o -= r - d;
    d++;
  }
  *delta = d;
  *t = d + o;
}

/* Source j of bin b: the groups [*first, *end). */
MR_NUFFT_FN void mr_nufft_source(const mr_nufft_groups *q, int b, int j, int *first, int *end) {
  const int n0 = q->nbins[0], n1 = q->nbins[1];
  const int c0 = b % n0, c1 = b / n0 % n1, c2 = b / (n0 * n1);
  const int k1 = q->reach[1] * (q->reach[1] + 1) / 2;
  int d0 = j % q->reach[0], rest = j / q->reach[0], d1, t1, d2, t2;
  mr_nufft_pair(rest % k1, q->reach[1], &d1, &t1);
  mr_nufft_pair(rest / k1, q->reach[2], &d2, &t2);
  /* a dimension's reach is at most its bins */
  int h0 = c0 - d0 < 0 ? c0 - d0 + n0 : c0 - d0;
  int h1 = c1 - d1 < 0 ? c1 - d1 + n1 : c1 - d1;
  int h2 = c2 - d2 < 0 ? c2 - d2 + q->nbins[2] : c2 - d2;
  int base = ((h2 * n1 + h1) * n0 + h0) * q->per_bin + q->reach[0] * (t1 + q->reach[1] * t2);
  *first = base + d0;
  *end = base + q->reach[0];
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
