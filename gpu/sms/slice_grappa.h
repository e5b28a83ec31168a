/* Slice-GRAPPA for simultaneous multi-slice (SMS, multiband) acquisitions:
 * separates the k-space of `mb` slices excited together (blipped CAIPI:
 * slice m shifted by m/caipi of the field of view along the phase encode)
 * into one k-space per slice, with kernels calibrated on a single-band
 * reference scan of each slice (Setsompop et al. 2012).
 *
 * Per slice m a kernel maps the collapsed neighbourhood (kx readout taps x
 * ky phase-encode taps `ystep` lines apart, every coil) to the slice's own
 * (CAIPI-shifted) k-space at the neighbourhood's centre, every coil. The
 * calibration synthesises the collapsed data from the reference (each
 * slice shifted by its CAIPI phase ramp) and solves, with A_j the source
 * matrix of slice j's shifted reference alone and B_m the targets of
 * slice m:
 *   leak-blocked (split-slice, Cauley et al. 2014):
 *     min sum_j |A_j w_m - delta_jm B_m|^2,  (sum_j A_j^H A_j + l I) w_m = A_m^H B_m
 *   plain: min |(sum_j A_j) w_m - B_m|^2
 * with l = lambda trace(G) / n_src (Tikhonov). The leak-blocked kernels
 * also hold every other slice's signal out of slice m's image (leakage),
 * at the price of a little more noise. The unaliased k-space is shifted
 * back (the CAIPI ramp undone), so slice m comes out where it lies.
 *
 * CAIPI convention: slice m of a collapsed acquisition carries on line y
 * (of ny, centre ny/2) the phase exp(-2 pi i (y - ny/2) m / caipi), i.e.
 * its image is moved by m ny / caipi lines; the reference scan carries no
 * shift. ystep > 1 (in-plane acceleration R) takes taps R lines apart: on
 * a regularly undersampled acquisition the lines not sampled stay zero,
 * for GRAPPA (grappa.h) to fill afterwards per slice.
 *
 * Layouts (on the plan's device): k-spaces are [coil][line][sample]
 * (nc x ny x nx), a set of slices [slice][coil][line][sample]. Weights:
 * column-major n_src x (mb nc), n_src = kx ky nc with source index
 * s = (coil * ky + j) * kx + i (tap j along the phase encode, i along the
 * readout); column m nc + c predicts coil c of slice m. After them come
 * the edge kernels: where taps fall outside the k-space (nothing was
 * measured there), a kernel of the remaining taps, solved from the same
 * normal equations, serves each class of edge position (taps cut at the
 * left by 1 .. kx/2 or at the right, at the top or the bottom, and the
 * corners), each n_taps x (mb nc) with its taps in the same order. */
#ifndef MR_GPU_SLICE_GRAPPA_H
#define MR_GPU_SLICE_GRAPPA_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_SLICE_GRAPPA_MAX_MB 16
#define MR_SLICE_GRAPPA_MAX_KERNEL 15 /* taps along either axis */

typedef struct mr_slice_grappa_opts {
  int nc, nx, ny; /* coils, readout samples, phase-encode lines */
  int mb;         /* slices excited together, 2 .. MR_SLICE_GRAPPA_MAX_MB */
  int caipi;      /* FOV shift divisor (>= 1; 1: no shift) */
  int kx, ky;     /* kernel taps along the readout and the phase encode (odd) */
  int ystep;      /* lines between phase-encode taps: the in-plane R (>= 1) */
  int cx, cy;     /* calibration region: the central cx samples x cy lines */
  float lambda;   /* relative Tikhonov regularisation (>= 0) */
  int leak_block; /* 1: split-slice objective, 0: plain slice-GRAPPA */
} mr_slice_grappa_opts;

/* Defaults: a 5 x 5 kernel (ystep 1), calibration on the central 32 x 32
 * (or the whole k-space when smaller), lambda 1e-3, leak-blocked. lambda
 * 1e-3 was chosen while the normal equations were single precision (at
 * 1e-4 their rounding moved the separated k-space by up to 2e-4, and the
 * backends apart); they are double precision now, where a smaller lambda
 * separates better on clean data (1e-4: leakage 0.25% instead of 0.58% for
 * multiband 4, FOV/3, 32 coils, noiseless; configs/epi_sms.json takes
 * 1e-5) at the price of more noise in the kernels. */
mr_slice_grappa_opts mr_slice_grappa_opts_default(int nc, int nx, int ny, int mb, int caipi);

typedef struct mr_slice_grappa_plan mr_slice_grappa_plan;

/* Checks opts and makes a plan on dev (borrowed). MR_EINVAL names the first
 * bad option: fewer coils than slices (nothing to separate them with),
 * a calibration region too small for the kernel (fewer equations than
 * unknowns), an even kernel, ... The caller takes *out. */
int mr_slice_grappa_plan_create(mr_device *dev, const mr_slice_grappa_opts *opts,
                                mr_slice_grappa_plan **out, mr_err *err);
void mr_slice_grappa_plan_destroy(mr_slice_grappa_plan *plan);

/* Complex values of the weights: the full kernel's kx ky nc x mb nc, then
 * each edge kernel's (its taps x mb nc); 0 for a kernel no plan takes. */
size_t mr_slice_grappa_weights_count(const mr_slice_grappa_opts *opts);

/* Calibrates from reference ([mb][nc][ny][nx], each slice alone, no CAIPI
 * shift) into weights: the normal equations in double precision on the
 * plan's device, each kernel by a Cholesky factorisation there; equations
 * that are not positive definite (lambda 0 on data that span fewer
 * directions than the kernel has taps) take the least-norm solution of an
 * eigen-decomposition on the host instead. MR_ENUMERIC when that does not
 * converge. Borrows all; device memory. */
int mr_slice_grappa_calibrate(mr_slice_grappa_plan *plan, const mr_cfloat *reference,
                              mr_cfloat *weights, mr_err *err);

/* Separates collapsed ([nc][ny][nx]) into slices ([mb][nc][ny][nx]), the
 * CAIPI shift undone. Borrows all; device memory. */
int mr_slice_grappa_apply(mr_slice_grappa_plan *plan, const mr_cfloat *weights,
                          const mr_cfloat *collapsed, mr_cfloat *slices, mr_err *err);

/* Multiplies each of `count` k-spaces of kspace ([count][nc][ny][nx]) by
 * the CAIPI phase of slice first + b (direction +1: the shift a collapsed
 * acquisition gives it; -1: undone). For simulators and tests. */
int mr_slice_grappa_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                          int direction, mr_cfloat *kspace, mr_err *err);

/* The same two steps on host memory on any device. */
int mr_slice_grappa_calibrate_host(mr_slice_grappa_plan *plan, const mr_cfloat *reference,
                                   mr_cfloat *weights, mr_err *err);
int mr_slice_grappa_apply_host(mr_slice_grappa_plan *plan, const mr_cfloat *weights,
                               const mr_cfloat *collapsed, mr_cfloat *slices, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
