/* Slice-GRAPPA on the CPU: im2col and the CAIPI phase ramp, spread over
 * the CPU threads (the products are blas.h's; the normal equations are solved
 * in double precision on the host for both backends: slice_grappa.c). */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "slice_grappa_impl.h"

/* Columns (source taps) per thread hand-out. */
#define GRAIN 4

typedef struct im2col_job {
  const mr_sg_window *w;
  const mr_cfloat *k;
  mr_cfloat *out;
} im2col_job;

/* Column s: tap (i, j) of coil c, over every position of the box: per
 * row, the positions whose tap lies inside the line copied at once, the
 * rest zero. */
static void im2col_columns(void *arg, size_t begin, size_t end) {
  const im2col_job *job = arg;
  const mr_sg_window *w = job->w;
  size_t bx = (size_t)(w->x1 - w->x0), rows = bx * (size_t)(w->y1 - w->y0);
  size_t wi = (size_t)(w->i1 - w->i0), wj = (size_t)(w->j1 - w->j0);
  for (size_t s = begin; s < end; s++) {
    int i = w->i0 + (int)(s % wi), j = w->j0 + (int)(s / wi % wj), c = (int)(s / (wi * wj));
    int dx = i - w->kx / 2, dy = (j - w->ky / 2) * w->ystep;
    /* positions [xa, xb) have their tap x + dx in [0, nx) */
    int xa = -dx > w->x0 ? -dx : w->x0, xb = w->nx - dx < w->x1 ? w->nx - dx : w->x1;
    xa = xa < w->x1 ? xa : w->x1;
    xb = xb > xa ? xb : xa;
    size_t before = (size_t)(xa - w->x0), inside = (size_t)(xb - xa), after = bx - before - inside;
    mr_cfloat *col = job->out + s * rows;
    for (int y = w->y0; y < w->y1; y++) {
      mr_cfloat *row = col + (size_t)(y - w->y0) * bx;
      int ys = y + dy;
      if (ys < 0 || ys >= w->ny) {
        memset(row, 0, bx * sizeof *row);
        continue;
      }
      const mr_cfloat *line = job->k + ((size_t)c * w->ny + (size_t)ys) * w->nx;
      memset(row, 0, before * sizeof *row);
      memcpy(row + before, line + xa + dx, inside * sizeof *row);
      memset(row + before + inside, 0, after * sizeof *row);
    }
  }
}

int mr_sg_cpu_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                     mr_cfloat *out) {
  im2col_job job = {w, kspace, out};
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)(w->i1 - w->i0) * (w->j1 - w->j0) * w->nc,
                      GRAIN,
                      im2col_columns, &job);
  return 0;
}

typedef struct caipi_job {
  int nc, nx, ny, caipi, first, direction;
  mr_cfloat *k;
} caipi_job;

/* Row r = (b nc + c) ny + y of the k-spaces. */
static void caipi_rows(void *arg, size_t begin, size_t end) {
  const caipi_job *job = arg;
  for (size_t r = begin; r < end; r++) {
    int y = (int)(r % (size_t)job->ny);
    int slice = job->first + (int)(r / ((size_t)job->ny * job->nc));
    /* the phase's argument reduced modulo caipi first: exact for any y */
    long turns = ((long)(y - job->ny / 2) * slice) % job->caipi;
    double t = -job->direction * 2 * M_PI * (double)turns / job->caipi;
    mr_cfloat ph = (float)cos(t) + I * (float)sin(t);
    mr_cfloat *line = job->k + r * job->nx;
    for (int x = 0; x < job->nx; x++)
      line[x] *= ph;
  }
}

int mr_sg_cpu_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                    int direction, mr_cfloat *kspace) {
  caipi_job job = {nc, nx, ny, caipi, first, direction, kspace};
  mr_cpu_parallel_for(mr_device_threads(dev), (size_t)count * nc * ny, 64, caipi_rows, &job);
  return 0;
}
