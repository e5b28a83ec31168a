/* Compressed-sensing reconstruction of Cartesian 2D/3D k-space (any set of
 * sampled phase-encode lines or ky-kz points): the SENSE data term
 * 1/2 ||M F S x - b||^2 (sense.h) with
 *   - wavelet: lambda' ||W x||_1, W a multi-level Daubechies wavelet
 *     (wavelet.h; its coarse band unpenalised) shifted by a new random
 *     amount every iteration, solved by FISTA;
 *   - tv: lambda' TV(x) (tv.h; isotropic, spatial), FISTA with the TV
 *     proximal step computed on a warm-started dual;
 *   - l2: lambda ||x||^2 (Tikhonov-regularised SENSE), solved by
 *     conjugate gradient on (A^H A + lambda I) x = A^H b (cg.h).
 * lambda is relative: lambda' = lambda s, s the data's scale by BART's
 * rule (pics' automatic scaling) over a set of magnitudes: its 90th
 * percentile p90, or its maximum when (max - p90) >= 2 (p90 - median) (a
 * few bright pixels far above the rest), so that one value fits scans of
 * any intensity and `-r` of BART means the same here. mr_sparse_solve
 * takes BART's set: the root sum of squares over the coils of the
 * low-resolution image of the calibration box (the readout's centre, at
 * most 32 samples, by the largest fully sampled box of lines around the
 * k-space centre, at most 32 a side; the box's own unitary inverse
 * transform), the statistics divided by sqrt(pixels / box samples); with
 * no sampled lines at the centre, and in mr_sparse_solve_normal, the
 * zero-filled combined image |A^H b|. The percentiles are exact order
 * statistics, selected on the device (prox.h's mr_prox_select); l2's term
 * is scale-free already.
 *
 * The whole solve is one device task (mr_device_run): on a GPU every
 * iteration is queued without a host round trip (the tolerance test reads
 * two sums every 10 iterations when asked for); the cancellation flag is
 * read between iterations.
 *
 * Layout as sense.h: k-space and maps [coil][z][y][x] on the plan's
 * device, the image [z][y][x] there, the mask [z][y] in host memory. */
#ifndef MR_GPU_SPARSE_H
#define MR_GPU_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "cancel.h"
#include "cfloat.h"
#include "cg.h"
#include "device.h"
#include "tv.h"
#include "wavelet.h"

typedef enum mr_sparse_regularizer {
  MR_SPARSE_WAVELET,
  MR_SPARSE_TV,
  MR_SPARSE_L2
} mr_sparse_regularizer;

typedef struct mr_sparse_opts {
  size_t dims[3];     /* image = k-space: readout x, phase y, partition z (1 in 2D) */
  size_t ncoils;       /* 0: no Cartesian operator (mr_sparse_solve_normal only) */
  mr_sparse_regularizer regularizer;
  double lambda;      /* wavelet, tv: > 0, relative (above); l2: >= 0 */
  int iterations;     /* FISTA (wavelet, tv) or CG (l2) iterations, >= 1 */
  double tolerance;   /* FISTA: stop once ||x_k - x_k-1|| <= tolerance ||x_k||
                         (tested every 10 iterations); CG: relative residual.
                         0: run every iteration */
  mr_wavelet_filter filter;
  int tv_steps;       /* dual steps of the TV proximal operator per iteration */
  unsigned seed;      /* of the wavelet's random shifts */
  /* tv only: a temporal term (tv.h) beside the spatial one, weighted
   * temporal_lambda (relative as lambda; 0: none): MR_TV_FRAMES, dims[2]
   * counts the frames of a series (each 2D); MR_TV_REFERENCE, a real-time
   * frame against the image mr_sparse_set_reference gives (the last
   * frame's: causal). */
  mr_tv_time time;
  double temporal_lambda;
  int warm_start;     /* FISTA: start from the image passed in (0: from zero) */
} mr_sparse_opts;

typedef struct mr_sparse_report {
  int iterations;     /* done */
  float scale;        /* s: the scale lambda is relative to (above) */
  double change;      /* FISTA: the last relative change tested (0: none);
                         CG: the relative residual */
  float bound;        /* the bound of ||A^H A|| used (given, estimated or the maps') */
} mr_sparse_report;

typedef struct mr_sparse_plan mr_sparse_plan;

/* wavelet, lambda 0.005, 100 iterations, tolerance 0, db2, 10 TV steps,
 * seed 1, no temporal term, no warm start; dims and ncoils 0 (the
 * caller's to set). */
void mr_sparse_opts_default(mr_sparse_opts *o);

/* A solver for opts on dev (borrowed): its operator, transforms and
 * images. MR_EINVAL (with its line in err) for bad options: a lambda of
 * 0 with wavelet or tv, no iterations, a bad shape. The caller takes *out. */
int mr_sparse_plan_create(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **out,
                          mr_err *err);
/* Leaves *plan as it is when it was made for opts on dev, else destroys
 * it and makes one (*plan is NULL after a failure). */
int mr_sparse_plan_keep(mr_device *dev, const mr_sparse_opts *opts, mr_sparse_plan **plan,
                        mr_err *err);
void mr_sparse_plan_destroy(mr_sparse_plan *plan);

/* MR_TV_REFERENCE: the image (on the plan's device, borrowed until the
 * next call) the next solves' temporal term compares with; NULL (the first
 * frame) leaves the term out. MR_EINVAL for a plan without it. */
int mr_sparse_set_reference(mr_sparse_plan *plan, const mr_cfloat *reference, mr_err *err);

/* Reconstructs image from kspace (b: its sampled lines are read), mask
 * and maps, in one task on the plan's device. MR_EDATA with a line in err
 * for data that cannot give an image: fewer than two sampled lines,
 * non-finite samples or maps, maps that are zero everywhere, a zero-filled
 * image with no signal. MR_ECANCELED when *cancel (may be NULL) turned
 * non-zero between iterations. report may be NULL. Borrows everything. */
int mr_sparse_solve(mr_sparse_plan *plan, const mr_cfloat *kspace, const uint8_t *mask,
                    const mr_cfloat *maps, mr_cfloat *image, const mr_cancel *cancel,
                    mr_sparse_report *report, mr_err *err);

/* The same regularisers and solvers on any data term 1/2 ||A x - b||^2
 * given by its normal operator (normal(op, x, y): y = A^H A x on the
 * plan's device; the Toeplitz operator's mr_toeplitz_apply_op for a
 * non-Cartesian scan, gpu/iterative/toeplitz.h) and ahb = A^H b there.
 * bound: an upper bound of ||A^H A|| (FISTA's step is 1 / bound), or 0 to
 * estimate it before the iterations (20 steps of the power method from
 * A^H b, plus 5%). lambda scales by |A^H b| as in mr_sparse_solve.
 * The plan may have 0 coils (no Cartesian operator made). One device task;
 * the same errors for A^H b (MR_EDATA when it has no signal or NaN). */
int mr_sparse_solve_normal(mr_sparse_plan *plan, mr_cg_operator normal, void *op, float bound,
                           const mr_cfloat *ahb, mr_cfloat *image, const mr_cancel *cancel,
                           mr_sparse_report *report, mr_err *err);

#endif
