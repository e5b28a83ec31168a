/* Internal: the backend functions behind slice_grappa.h (arguments already
 * checked). */
#ifndef MR_GPU_SLICE_GRAPPA_IMPL_H
#define MR_GPU_SLICE_GRAPPA_IMPL_H

#include "slice_grappa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel's window over a k-space [nc][ny][nx]: the taps [i0, i1) x
 * [j0, j1) of a kx x ky kernel (phase-encode taps ystep lines apart),
 * centred on each position of the box [x0, x1) x [y0, y1). */
typedef struct mr_sg_window {
  int nc, nx, ny;
  int kx, ky, ystep;
  int i0, i1, j0, j1;
  int x0, x1, y0, y1;
} mr_sg_window;

/* im2col: out (column-major, (x1 - x0)(y1 - y0) rows, (i1 - i0)(j1 - j0) nc
 * columns): row (y - y0)(x1 - x0) + x - x0, column
 * (c (j1 - j0) + j - j0)(i1 - i0) + i - i0 holds
 * kspace[c][y + (j - ky/2) ystep][x + i - kx/2] (0 outside the k-space). */
int mr_sg_cpu_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                     mr_cfloat *out);
int mr_sg_cuda_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                      mr_cfloat *out, mr_err *err);

/* Line y of k-space b of kspace ([count][nc][ny][nx]) times
 * exp(-direction 2 pi i (y - ny/2) (first + b) / caipi). */
int mr_sg_cpu_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                    int direction, mr_cfloat *kspace);
int mr_sg_cuda_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                     int direction, mr_cfloat *kspace, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
