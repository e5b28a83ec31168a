/* Internal: the backend functions behind slice_grappa.h (arguments already
 * checked). */
#ifndef MR_GPU_SLICE_GRAPPA_IMPL_H
#define MR_GPU_SLICE_GRAPPA_IMPL_H

#include "slice_grappa.h"
#include "cfloat.h"

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

/* One kernel class of a plan: the taps it keeps, the positions it serves,
 * its unknowns (i1 - i0)(j1 - j0) nc and where its n x ntgt weights begin
 * (slice_grappa.h). */
typedef struct mr_sg_class {
  int i0, i1, j0, j1;
  int x0, x1, y0, y1;
  int n;
  size_t offset;
} mr_sg_class;

/* The normal equations of a calibration, in double precision on the
 * plan's device: g (n x n, n = kx ky nc; its lower triangle holds the
 * Gram matrix) and rhs (n x ntgt), indexed by the full kernel's taps;
 * class q's equations are their rows and columns of cls[q]'s taps. */
typedef struct mr_sg_system {
  int kx, ky, nc, n, ntgt;
  const mr_sg_class *cls;
  int nclass;
} mr_sg_system;

/* wide = a, the im2col matrix of window w (rows x n: rows its positions,
 * n its taps times coils, dense), in double precision, and the lower
 * triangle of g (n x n) = wide^H wide, plus what g held when accumulate
 * (the CPU may fill the upper triangle too). own (n x nc, leading
 * dimension ldo; NULL: not wanted) receives wide^H wide's columns of the
 * kernel's centre tap (kx/2, ky/2, inside w's taps) of every coil: the
 * right-hand sides of a kernel whose targets are the window's own
 * samples. */
int mr_sg_cpu_gram(mr_device *dev, const mr_sg_window *w, const mr_cfloat *a, int accumulate,
                   mr_cdouble *wide, mr_cdouble *g, mr_cdouble *own, int ldo, mr_err *err);
int mr_sg_cuda_gram(mr_device *dev, const mr_sg_window *w, const mr_cfloat *a, int accumulate,
                    mr_cdouble *wide, mr_cdouble *g, mr_cdouble *own, int ldo, mr_err *err);

/* rhs (n x nb, leading dimension ldr) = wide^H b in double precision; b
 * (rows x nb, dense) is widened into bwide (rows x nb) first. */
int mr_sg_cpu_cross(mr_device *dev, int rows, int n, const mr_cdouble *wide, int nb,
                    const mr_cfloat *b, mr_cdouble *bwide, mr_cdouble *rhs, int ldr);
int mr_sg_cuda_cross(mr_device *dev, int rows, int n, const mr_cdouble *wide, int nb,
                     const mr_cfloat *b, mr_cdouble *bwide, mr_cdouble *rhs, int ldr,
                     mr_err *err);

/* Class q's equations from s's g and rhs: gq (n_q x n_q, at least its
 * lower triangle, lambda added to its diagonal) and rq (n_q x ntgt). */
int mr_sg_cpu_class(mr_device *dev, const mr_sg_system *s, int q, const mr_cdouble *g,
                    const mr_cdouble *rhs, double lambda, mr_cdouble *gq, mr_cdouble *rq);
int mr_sg_cuda_class(mr_device *dev, const mr_sg_system *s, int q, const mr_cdouble *g,
                     const mr_cdouble *rhs, double lambda, mr_cdouble *gq, mr_cdouble *rq,
                     mr_err *err);

/* Every class's (g_q + lambda I) x_q = rhs_q by a double-precision
 * Cholesky factorisation, x_q rounded to float into weights + offset;
 * failed[q] (host, nclass) is 1 where g_q + lambda I was not positive
 * definite (its weights are then undefined), else 0. scratch: `slots`
 * areas of n^2 + n ntgt values (the GPU takes one, the CPU one for each
 * of its threads: they solve classes side by side). */
int mr_sg_cpu_solve(mr_device *dev, const mr_sg_system *s, const mr_cdouble *g,
                    const mr_cdouble *rhs, double lambda, mr_cdouble *scratch, int slots,
                    mr_cfloat *weights, int *failed);
int mr_sg_cuda_solve(mr_device *dev, const mr_sg_system *s, const mr_cdouble *g,
                     const mr_cdouble *rhs, double lambda, mr_cdouble *scratch, int slots,
                     mr_cfloat *weights, int *failed, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
