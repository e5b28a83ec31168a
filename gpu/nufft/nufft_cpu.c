/* The CPU NUFFT: output-driven spreading one bin at a time on the pool's
 * CPU threads (each bin sums its entries into a private tile, then writes
 * its own grid cells: no locks, and the same bins and clipping the GPU
 * uses), interpolation one sorted sample at a time, and the centered FFT of
 * fft.h on the grid (origin n/2, scale folded into the deapodization). */
#include <assert.h>
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "fft.h"
#include "host.h"
#include "nufft_impl.h"

typedef struct nufft_cpu {
  mr_fft_plan *fft;
  float complex *grid; /* [batch][nf2][nf1][nf0] */
} nufft_cpu;

static size_t grid_size(const mr_nufft_geom *g) {
  return (size_t)g->nf[0] * g->nf[1] * g->nf[2];
}

int mr_nufft_cpu_create(mr_nufft_plan *p, mr_err *err) {
  nufft_cpu *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory");
  const mr_nufft_geom *g = &p->geom;
  size_t total = grid_size(g) * p->batch;
  mr_fft_opts o = {.rank = g->rank,
                   .dims = {(size_t)g->nf[0], (size_t)g->nf[1], (size_t)g->nf[2]},
                   .batch = p->batch};
  /* Host memory: counted against the server's memory budget. */
  int rc = mr_host_alloc(p->dev, total * sizeof *c->grid, (void **)&c->grid, err);
  if (rc == 0)
    rc = mr_fft_plan_create(p->dev, &o, &c->fft, err);
  if (rc < 0) {
    mr_host_free(p->dev, c->grid);
    free(c);
    return rc;
  }
  p->impl = c;
  return 0;
}

void mr_nufft_cpu_destroy(mr_nufft_plan *p) {
  nufft_cpu *c = p->impl;
  if (c == NULL)
    return;
  mr_fft_plan_destroy(c->fft);
  mr_host_free(p->dev, c->grid);
  free(c);
  p->impl = NULL;
}

/* One pass of a transform: the plan, its vectors, how many of them. */
typedef struct pass {
  const mr_nufft_plan *p;
  const float complex *in;
  float complex *out;
  size_t nvec;
  int failed; /* a tile could not be allocated */
} pass;

/* The kernel taps [tap, tap + count) of a sample at offset a. */
static void taps(const mr_nufft_geom *g, float a, int tap, int count, float *k) {
  for (int j = 0; j < count; j++)
    k[j] = mr_nufft_kernel(a - (float)(tap + j), g->inv_half_width, g->beta);
}

/* Spreading, one bin per item: the bin's entries summed into a tile of the
 * bin's size (all vectors), then the tile stored into the grid. */
static void spread_bins(void *arg, size_t begin, size_t end) {
  pass *a = arg;
  const mr_nufft_plan *p = a->p;
  const mr_nufft_geom *g = &p->geom;
  const mr_nufft_points *pts = &p->points;
  nufft_cpu *c = p->impl;
  size_t cells = (size_t)g->bin[0] * g->bin[1] * g->bin[2], G = grid_size(g);
  assert(g->rank == 2 || g->rank == 3);
  float complex *tile = malloc(cells * a->nvec * sizeof *tile);
  if (tile == NULL) {
    a->failed = 1;
    return;
  }
  for (size_t b = begin; b < end; b++) {
    int b0[3], ext[3];
    mr_nufft_bin_box(g, b, b0, ext);
    memset(tile, 0, cells * a->nvec * sizeof *tile);
    for (int32_t e = pts->bin_start[b]; e < pts->bin_start[b + 1]; e++) {
      const int32_t *pos = pts->pos[pts->entries[e]];
      const float *off = pts->offset[pts->entries[e]];
      int lo[3], count[3];
      float k[3][MR_NUFFT_MAX_WIDTH];
      for (int d = 0; d < 3; d++) {
        int tap;
        count[d] = mr_nufft_clip(pos[d], mr_nufft_width(g, d), g->nf[d], b0[d], ext[d], &lo[d],
                                 &tap);
        if (d < g->rank)
          taps(g, off[d], tap, count[d], k[d]);
        else
          k[d][0] = 1.0f;
      }
      for (size_t v = 0; v < a->nvec; v++) {
        float complex value = a->in[v * pts->npoints + (size_t)pos[3]];
        float complex *t = tile + v * cells;
        for (int z = 0; z < count[2]; z++)
          for (int y = 0; y < count[1]; y++) {
            float complex vzy = value * (k[2][z] * k[1][y]);
            float complex *row = t + ((size_t)(lo[2] + z) * g->bin[1] + lo[1] + y) * g->bin[0] + lo[0];
            for (int x = 0; x < count[0]; x++)
              row[x] += vzy * k[0][x];
          }
      }
    }
    for (size_t v = 0; v < a->nvec; v++)
      for (int z = 0; z < ext[2]; z++)
        for (int y = 0; y < ext[1]; y++)
          memcpy(c->grid + v * G + ((size_t)(b0[2] + z) * g->nf[1] + b0[1] + y) * g->nf[0] + b0[0],
                 tile + v * cells + ((size_t)z * g->bin[1] + y) * g->bin[0],
                 (size_t)ext[0] * sizeof *tile);
  }
  free(tile);
}

/* Interpolation, one sorted sample per item: the whole footprint, wrapped
 * around the grid's edges. */
static void interp_points(void *arg, size_t begin, size_t end) {
  pass *a = arg;
  const mr_nufft_plan *p = a->p;
  const mr_nufft_geom *g = &p->geom;
  const mr_nufft_points *pts = &p->points;
  const nufft_cpu *c = p->impl;
  size_t G = grid_size(g);
  for (size_t i = begin; i < end; i++) {
    const int32_t *pos = pts->pos[i];
    float k[3][MR_NUFFT_MAX_WIDTH];
    int idx[3][MR_NUFFT_MAX_WIDTH], width[3];
    for (int d = 0; d < 3; d++) {
      width[d] = mr_nufft_width(g, d);
      for (int j = 0; j < width[d]; j++)
        idx[d][j] = pos[d] + j < g->nf[d] ? pos[d] + j : pos[d] + j - g->nf[d];
      if (d < g->rank)
        taps(g, pts->offset[i][d], 0, width[d], k[d]);
      else
        k[d][0] = 1.0f;
    }
    for (size_t v = 0; v < a->nvec; v++) {
      const float complex *grid = c->grid + v * G;
      float complex sum = 0;
      for (int z = 0; z < width[2]; z++)
        for (int y = 0; y < width[1]; y++) {
          const float complex *row = grid + ((size_t)idx[2][z] * g->nf[1] + idx[1][y]) * g->nf[0];
          float complex rsum = 0;
          for (int x = 0; x < width[0]; x++)
            rsum += row[idx[0][x]] * k[0][x];
          sum += rsum * (k[2][z] * k[1][y]);
        }
      a->out[v * pts->npoints + (size_t)pos[3]] = sum;
    }
  }
}

/* Image rows (vector, z, y) from the grid, deapodized. */
static void crop_rows(void *arg, size_t begin, size_t end) {
  pass *a = arg;
  const mr_nufft_plan *p = a->p;
  const mr_nufft_geom *g = &p->geom;
  const nufft_cpu *c = p->impl;
  const float *dx = p->deapod, *dy = dx + g->n[0], *dz = dy + g->n[1];
  size_t G = grid_size(g);
  for (size_t row = begin; row < end; row++) {
    size_t y = row % (size_t)g->n[1], z = row / g->n[1] % (size_t)g->n[2];
    size_t v = row / ((size_t)g->n[1] * g->n[2]);
    int gy = mr_nufft_grid_index((int)y, g->n[1], g->nf[1], g->origin[1]);
    int gz = mr_nufft_grid_index((int)z, g->n[2], g->nf[2], g->origin[2]);
    const float complex *src = c->grid + v * G + ((size_t)gz * g->nf[1] + gy) * g->nf[0];
    float complex *dst = a->out + row * g->n[0];
    float f = dy[y] * dz[z];
    for (int x = 0; x < g->n[0]; x++)
      dst[x] = src[mr_nufft_grid_index(x, g->n[0], g->nf[0], g->origin[0])] * (f * dx[x]);
  }
}

/* Grid rows (vector, z, y): the deapodized image where it has pixels,
 * zeros in the margin. */
static void pad_rows(void *arg, size_t begin, size_t end) {
  pass *a = arg;
  const mr_nufft_plan *p = a->p;
  const mr_nufft_geom *g = &p->geom;
  nufft_cpu *c = p->impl;
  const float *dx = p->deapod, *dy = dx + g->n[0], *dz = dy + g->n[1];
  size_t npix = (size_t)g->n[0] * g->n[1] * g->n[2];
  for (size_t row = begin; row < end; row++) {
    size_t gy = row % (size_t)g->nf[1], gz = row / g->nf[1] % (size_t)g->nf[2];
    size_t v = row / ((size_t)g->nf[1] * g->nf[2]);
    float complex *dst = c->grid + row * g->nf[0];
    int y = mr_nufft_image_index((int)gy, g->n[1], g->nf[1], g->origin[1]);
    int z = mr_nufft_image_index((int)gz, g->n[2], g->nf[2], g->origin[2]);
    if (y < 0 || z < 0) {
      memset(dst, 0, (size_t)g->nf[0] * sizeof *dst);
      continue;
    }
    const float complex *src = a->in + v * npix + ((size_t)z * g->n[1] + y) * g->n[0];
    float f = dy[y] * dz[z];
    for (int gx = 0; gx < g->nf[0]; gx++) {
      int x = mr_nufft_image_index(gx, g->n[0], g->nf[0], g->origin[0]);
      dst[gx] = x < 0 ? 0 : src[x] * (f * dx[x]);
    }
  }
}

static int spread(const mr_nufft_plan *p, const float complex *in, size_t nvec, mr_err *err) {
  pass a = {.p = p, .in = in, .nvec = nvec};
  mr_cpu_parallel_for(mr_device_threads(p->dev), p->points.nbins, 1, spread_bins, &a);
  return a.failed ? mr_err_set(err, MR_ENOMEM, "nufft: out of memory for spreading tiles") : 0;
}

static void interp(const mr_nufft_plan *p, float complex *out, size_t nvec) {
  pass a = {.p = p, .out = out, .nvec = nvec};
  mr_cpu_parallel_for(mr_device_threads(p->dev), p->points.npoints, 256, interp_points, &a);
}

int mr_nufft_cpu_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                         mr_cfloat *out, mr_err *err) {
  const mr_nufft_geom *g = &p->geom;
  nufft_cpu *c = p->impl;
  mr_cpu_threads *t = mr_device_threads(p->dev);
  pass a = {.p = p, .in = (const float complex *)in, .out = (float complex *)out};
  int rc;
  if (dir == MR_NUFFT_ADJOINT) {
    if ((rc = spread(p, a.in, p->batch, err)) < 0)
      return rc;
    if ((rc = mr_fft_execute(c->fft, MR_FFT_BACKWARD, c->grid, c->grid, err)) < 0)
      return rc;
    size_t rows = p->batch * g->n[1] * g->n[2];
    mr_cpu_parallel_for(t, rows, 16384 / g->n[0] + 1, crop_rows, &a);
    return 0;
  }
  size_t rows = p->batch * g->nf[1] * g->nf[2];
  mr_cpu_parallel_for(t, rows, 16384 / g->nf[0] + 1, pad_rows, &a);
  if ((rc = mr_fft_execute(c->fft, MR_FFT_FORWARD, c->grid, c->grid, err)) < 0)
    return rc;
  interp(p, a.out, p->batch);
  return 0;
}

int mr_nufft_cpu_pipe_menon(mr_nufft_plan *p, int iterations, float *weights, mr_err *err) {
  size_t n = p->points.npoints;
  float complex *w = malloc((n > 0 ? n : 1) * sizeof *w);
  float complex *cw = malloc((n > 0 ? n : 1) * sizeof *cw);
  int rc = 0;
  if (w == NULL || cw == NULL) {
    rc = mr_err_set(err, MR_ENOMEM, "density: out of memory for %zu weights", n);
    goto done;
  }
  for (size_t j = 0; j < n; j++)
    w[j] = 1.0f;
  for (int it = 0; it < iterations; it++) {
    if ((rc = spread(p, w, 1, err)) < 0)
      goto done;
    interp(p, cw, 1);
    for (size_t j = 0; j < n; j++) {
      float mag = cabsf(cw[j]);
      if (mag > 0)
        w[j] /= mag;
    }
  }
  for (size_t j = 0; j < n; j++)
    weights[j] = crealf(w[j]);
done:
  free(w);
  free(cw);
  return rc;
}
