/* The direct sums on the CPU, spread over the pool's threads by voxel (the
 * adjoint) or by sample (forward): each thread owns its outputs, so no
 * two threads ever add into the same place and the result does not depend
 * on the thread count.
 *
 * Double precision computes every phase, sin/cos and sum in double: the
 * reference. Single precision reduces each phase exactly to [-0.5, 0.5)
 * revolutions (in double, or in fixed point on a grid), then works in
 * float; on a grid it runs the GPU's recurrence (fhd.h, MR_FHD_RECURRENCE)
 * so the CPU tests check that arithmetic too. */
#include <assert.h>
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fhd_impl.h"

/* Voxels (or samples) a thread works on at once, their sums in registers
 * or L1 while every sample (or voxel) streams past. */
#define BLOCK 16

typedef struct job {
  const mr_fhd_plan *p;
  const float complex *in; /* data [batch][m] (NULL: ones), or the image */
  const float *w;          /* [m] or NULL */
  float complex *out;
  /* Single precision on a grid: per sample, k in fixed point and the step
   * exp(2 pi i kx) from one voxel to the next along x. */
  const unsigned *fixed;   /* [m][3] */
  const float complex *step;
  int failed;              /* a thread could not get its scratch memory */
} job;

/* Voxel n's position in pixels. */
static void voxel_at(const mr_fhd_plan *p, size_t n, double x[3]) {
  int r = p->opts.rank;
  if (p->voxels != NULL) {
    for (int d = 0; d < 3; d++)
      x[d] = d < r ? p->voxels[n * r + d] : 0;
    return;
  }
  size_t nx = p->opts.grid[0], ny = p->opts.grid[1], nz = p->opts.grid[2];
  x[0] = (double)mr_fhd_grid_coord(n % nx, nx);
  x[1] = (double)mr_fhd_grid_coord(n / nx % ny, ny);
  x[2] = (double)mr_fhd_grid_coord(n / nx / ny, nz);
}

/* k_m . x in revolutions, reduced to [-0.5, 0.5]. The products of float
 * inputs are exact in double, so only the sum rounds. */
static double phase(const mr_fhd_plan *p, size_t m, const double x[3]) {
  const float *k = p->k + m * (size_t)p->opts.rank;
  double t = 0;
  assert(p->opts.rank >= 1 && p->opts.rank <= 3);
  for (int d = 0; d < p->opts.rank; d++) {
    double q = k[d] * x[d];
    t += q - nearbyint(q);
  }
  return t - nearbyint(t);
}

/* exp(i t), in double or through float sin/cos. */
static double complex unit(double t, int dbl) {
  if (dbl)
    return cos(t) + I * sin(t);
  float s, c;
  sincosf((float)t, &s, &c);
  return c + I * s;
}

static float complex sample_value(const job *j, size_t b, size_t m) {
  float complex v = j->in != NULL ? j->in[b * j->p->m + m] : 1.0f;
  return j->w != NULL ? j->w[m] * v : v;
}

/* Sums into blocks of BLOCK voxels [begin, end) of the adjoint, per pair:
 * double, or single on arbitrary voxels. */
static void adjoint_pairs(void *arg, size_t begin, size_t end) {
  job *j = arg;
  const mr_fhd_plan *p = j->p;
  size_t batch = j->in != NULL ? p->opts.batch : 1;
  int dbl = p->opts.precision == MR_FHD_DOUBLE;
  double complex *acc = malloc(batch * BLOCK * sizeof *acc);
  if (acc == NULL) {
    j->failed = 1;
    return;
  }
  for (size_t blk = begin; blk < end; blk++) {
    size_t v0 = blk * BLOCK, nv = p->nvox - v0 < BLOCK ? p->nvox - v0 : BLOCK;
    double x[BLOCK][3];
    for (size_t v = 0; v < nv; v++)
      voxel_at(p, v0 + v, x[v]);
    memset(acc, 0, batch * BLOCK * sizeof *acc);
    for (size_t m = 0; m < p->m; m++) {
      double complex e[BLOCK];
      for (size_t v = 0; v < nv; v++)
        e[v] = unit(2 * M_PI * phase(p, m, x[v]), dbl);
      for (size_t b = 0; b < batch; b++) {
        double complex mu;
        if (dbl)
          mu = (j->in != NULL ? (double complex)j->in[b * p->m + m] : 1.0) *
               (j->w != NULL ? (double)j->w[m] : 1.0);
        else
          mu = sample_value(j, b, m);
        double complex *a = acc + b * BLOCK;
        if (dbl)
          for (size_t v = 0; v < nv; v++)
            a[v] += mu * e[v];
        else /* float products and sums, as a GPU would */
          for (size_t v = 0; v < nv; v++)
            a[v] = (float complex)a[v] + (float complex)mu * (float complex)e[v];
      }
    }
    for (size_t b = 0; b < batch; b++)
      for (size_t v = 0; v < nv; v++)
        j->out[b * p->nvox + v0 + v] = (float complex)acc[b * BLOCK + v];
  }
  free(acc);
}

/* Single precision on a grid: rows [begin, end) of the grid (each nx
 * voxels at one y, z), in segments of BLOCK voxels along x. Per sample and
 * segment, one sin/cos gives u_0 = mu exp(2 pi i k . x_0), one product
 * u_1 = u_0 step, and the rest follow from u_{j+1} = 2 cos(2 pi kx) u_j -
 * u_{j-1} (both exp(+-2 pi i kx j) satisfy it, so does any combination):
 * two multiply-adds per voxel instead of a sin and a cos. */
static void adjoint_grid_rows(void *arg, size_t begin, size_t end) {
  job *j = arg;
  const mr_fhd_plan *p = j->p;
  size_t nx = p->opts.grid[0], ny = p->opts.grid[1], nz = p->opts.grid[2];
  size_t batch = j->in != NULL ? p->opts.batch : 1;
  for (size_t row = begin; row < end; row++) {
    unsigned y = (unsigned)mr_fhd_grid_coord(row % ny, ny);
    unsigned z = (unsigned)mr_fhd_grid_coord(row / ny, nz);
    for (size_t b = 0; b < batch; b++) {
      float complex *out = j->out + b * p->nvox + row * nx;
      for (size_t x0 = 0; x0 < nx; x0 += BLOCK) {
        size_t nv = nx - x0 < BLOCK ? nx - x0 : BLOCK;
        unsigned x = (unsigned)mr_fhd_grid_coord(x0, nx);
        float complex acc[BLOCK] = {0};
        for (size_t m = 0; m < p->m; m++) {
          const unsigned *f = j->fixed + 3 * m;
          unsigned ph = f[0] * x + f[1] * y + f[2] * z; /* wraps: exact mod 1 */
          float t = (float)((int32_t)ph * (1.0 / MR_FHD_FIXED_ONE));
          float s, c;
          sincosf(2 * (float)M_PI * t, &s, &c);
          float complex u0 = sample_value(j, b, m) * (c + I * s);
          float complex u1 = u0 * j->step[m];
          float c2 = 2 * crealf(j->step[m]);
          acc[0] += u0;
          if (nv > 1)
            acc[1] += u1;
          for (size_t v = 2; v < nv; v++) {
            float complex u2 = c2 * u1 - u0;
            acc[v] += u2;
            u0 = u1;
            u1 = u2;
          }
        }
        memcpy(out + x0, acc, nv * sizeof *acc);
      }
    }
  }
}

int mr_fhd_cpu_adjoint(mr_fhd_plan *p, const mr_cfloat *data, const float *weights, mr_cfloat *out,
                       mr_err *err) {
  job j = {.p = p, .in = data, .w = weights, .out = out};
  mr_cpu_threads *threads = mr_device_threads(p->dev);
  if (p->opts.precision == MR_FHD_DOUBLE || p->voxels != NULL) {
    mr_cpu_parallel_for(threads, (p->nvox + BLOCK - 1) / BLOCK, 1, adjoint_pairs, &j);
  } else {
    unsigned *fixed = malloc(p->m * 3 * sizeof *fixed + 1);
    float complex *step = malloc(p->m * sizeof *step + 1);
    if (fixed == NULL || step == NULL) {
      free(fixed);
      free(step);
      return mr_err_set(err, MR_ENOMEM, "fhd: out of memory for %zu samples", p->m);
    }
    for (size_t m = 0; m < p->m; m++) {
      const float *k = p->k + m * (size_t)p->opts.rank;
      for (int d = 0; d < 3; d++)
        fixed[3 * m + d] = d < p->opts.rank ? mr_fhd_fixed(k[d]) : 0;
      step[m] = (float complex)cexp(2 * M_PI * I * k[0]);
    }
    j.fixed = fixed;
    j.step = step;
    mr_cpu_parallel_for(threads, p->opts.grid[1] * p->opts.grid[2], 1, adjoint_grid_rows, &j);
    free(fixed);
    free(step);
  }
  return j.failed ? mr_err_set(err, MR_ENOMEM, "fhd: out of memory for sums") : 0;
}

/* Forward sums for blocks of BLOCK samples [begin, end), per pair. */
static void forward_pairs(void *arg, size_t begin, size_t end) {
  job *j = arg;
  const mr_fhd_plan *p = j->p;
  size_t batch = p->opts.batch;
  int dbl = p->opts.precision == MR_FHD_DOUBLE;
  double complex *acc = malloc(batch * BLOCK * sizeof *acc);
  if (acc == NULL) {
    j->failed = 1;
    return;
  }
  for (size_t blk = begin; blk < end; blk++) {
    size_t m0 = blk * BLOCK, nm = p->m - m0 < BLOCK ? p->m - m0 : BLOCK;
    memset(acc, 0, batch * BLOCK * sizeof *acc);
    for (size_t n = 0; n < p->nvox; n++) {
      double x[3];
      voxel_at(p, n, x);
      for (size_t i = 0; i < nm; i++) {
        double complex e = unit(-2 * M_PI * phase(p, m0 + i, x), dbl);
        for (size_t b = 0; b < batch; b++) {
          double complex v = j->in[b * p->nvox + n];
          if (dbl)
            acc[b * BLOCK + i] += v * e;
          else
            acc[b * BLOCK + i] = (float complex)acc[b * BLOCK + i] +
                                 (float complex)v * (float complex)e;
        }
      }
    }
    for (size_t b = 0; b < batch; b++)
      for (size_t i = 0; i < nm; i++)
        j->out[b * p->m + m0 + i] = (float complex)acc[b * BLOCK + i];
  }
  free(acc);
}

int mr_fhd_cpu_forward(mr_fhd_plan *p, const mr_cfloat *image, mr_cfloat *out, mr_err *err) {
  job j = {.p = p, .in = image, .out = out};
  mr_cpu_parallel_for(mr_device_threads(p->dev), (p->m + BLOCK - 1) / BLOCK, 1, forward_pairs,
                      &j);
  return j.failed ? mr_err_set(err, MR_ENOMEM, "fhd: out of memory for sums") : 0;
}
