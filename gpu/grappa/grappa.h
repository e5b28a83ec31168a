/* GRAPPA: kernel calibration from autocalibration (ACS) lines and the
 * filling of the lines an accelerated acquisition skipped, as a plan on a
 * device (CPU: OpenBLAS + LAPACKE; GPU: own kernels, cuBLAS).
 *
 * Calibration follows the improved autocalibration of Schneider (seed 004,
 * Alg. 4.3): a K_PE x K_RO kernel (K_PE source lines R apart, K_RO readout
 * taps) is slid over the ACS region; every position gives one equation
 * b = W a with a the K_PE K_RO Nc source samples and b the Nc samples
 * of the lines between the middle two source lines. Each PE position's
 * equations are normalised by p^(-eta/2), p their summed power
 * (p_col = |a|^2 (R-1)Nc + |b|^2 K_PE K_RO Nc per equation); the kappa share
 * of equations with the largest p_col is discarded (power clipping); then
 *   W = U (M + lambda I)^-1,  M = A A^H,  U = B A^H,  lambda = chi trace(M)/n
 * per readout segment. The CPU solves the normal equations directly (HERK,
 * GEMM, Cholesky, in double precision); the GPU builds them from lagged products of the ACS data
 * (the readout taps make A block Toeplitz) and solves them without host
 * synchronisation, by cuSOLVER (hybrid) or by one Cholesky of [M; U] shared
 * by all right-hand sides (fused).
 *
 * Index conventions (also the layout of the weights):
 *   source s = (coil * K_PE + p) * K_RO + j   (p: source line, j: tap)
 *   target t = coil * (R - 1) + (m - 1)        (m: lines past a source, 1..R-1)
 * Weights are X = W^H per segment: column-major n_src x n_tgt (target t's
 * conjugated weights are the n_src values at t * n_src), segments back to
 * back. A missing line y = s + m, s a sampled line of the regular pattern,
 * is filled from source lines s + (p - K_PE/2 + 1) R, p = 0..K_PE-1, and
 * readout x - (K_RO-1)/2 + j; samples outside the k-space count as zero. */
#ifndef MR_GPU_GRAPPA_H
#define MR_GPU_GRAPPA_H

#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_GRAPPA_MAX_SEGMENTS 64
#define MR_GRAPPA_MAX_ACCEL 32

typedef enum mr_grappa_method {
  MR_GRAPPA_FUSED,   /* GPU: lagged products, blocked Cholesky of [M; U]
                        shared by all right-hand sides (own diagonal tiles,
                        cuBLAS TRSM/HERK/GEMM), a blocked backward solve
                        with the inverted diagonal tiles; double precision
                        (CPU: direct, double precision) */
  MR_GRAPPA_HYBRID,  /* GPU: lagged products, cuSOLVER potrf, two TRSMs;
                        double precision (CPU: direct, double precision) */
  MR_GRAPPA_DIRECT,  /* explicit A and B, HERK + GEMM, potrf + potrs: the
                        plain library chain, in single precision on a GPU
                        (CPU: double precision) */
} mr_grappa_method;

typedef struct mr_grappa_opts {
  int nc;          /* coils */
  int nro;         /* readout samples, of the ACS and of the k-space alike */
  int nacs;        /* consecutive ACS lines */
  int accel;       /* R, 2..MR_GRAPPA_MAX_ACCEL */
  int kpe, kro;    /* kernel: source lines (>= 2), readout taps (>= 1) */
  int segments;    /* readout segments calibrated apart (>= 1) */
  float eta;       /* normalisation exponent (>= 0) */
  float chi;       /* relative regularisation (>= 0) */
  float kappa;     /* share of equations discarded, [0, 1) */
  mr_grappa_method method;
} mr_grappa_opts;

/* The seed's defaults (Table 5.1 and Sec. 4.1.2): kernel 4 x 5, one
 * segment, eta 1, chi 1e-4, kappa 0; the fused method (on an H100 the
 * fastest of the three: 0.96 / 2.3 / 6.5 ms at 32 / 64 / 128 coils against
 * 1.17 / 2.7 / 7.0 ms hybrid and 1.5 / 3.3 / 8.7 ms for the library chain).
 * The GPU methods but direct run as a CUDA graph, captured at a plan's first
 * calibration and replayed while acs, coil_stride and weights repeat. */
mr_grappa_opts mr_grappa_opts_default(int nc, int nro, int nacs, int accel);

typedef struct mr_grappa_plan mr_grappa_plan;

/* Checks opts and makes a plan on dev (borrowed; it must outlive the plan),
 * with the scratch memory one calibration needs. MR_EINVAL names the first
 * bad option (too few ACS lines for the kernel, too many segments, ...);
 * MR_EDEVMEM when the GPU is out of memory. The caller takes *out. */
int mr_grappa_plan_create(mr_device *dev, const mr_grappa_opts *opts, mr_grappa_plan **out,
                          mr_err *err);
void mr_grappa_plan_destroy(mr_grappa_plan *plan);

const mr_grappa_opts *mr_grappa_plan_opts(const mr_grappa_plan *plan);

/* Bytes of host memory a plan for opts on the CPU holds once it has
 * calibrated and filled a k-space of ne1 lines (its scratch, kept for its
 * next calls): what a caller that keeps several plans counts against the
 * memory budget before making them. */
uint64_t mr_grappa_host_bytes(const mr_grappa_opts *opts, int ne1);

/* Complex values of the weights: segments * n_src * n_tgt. */
size_t mr_grappa_weights_count(const mr_grappa_opts *opts);

/* Calibrates: acs holds line l of coil c at acs[c * coil_stride + l * nro]
 * (so a k-space [coil][line][ro] serves as is, with coil_stride = lines *
 * nro and acs pointing at the first ACS line); weights receives
 * mr_grappa_weights_count() values. Both on the plan's device. On a GPU the
 * work is queued without waiting for it; a non-positive-definite system
 * (e.g. ACS lines without signal) shows in mr_grappa_status(). Borrows all. */
int mr_grappa_calibrate(mr_grappa_plan *plan, const mr_cfloat *acs, size_t coil_stride,
                        mr_cfloat *weights, mr_err *err);

/* mr_grappa_calibrate, waited for, with the time of its two steps: building
 * the normal equations (powers, normalisation, clipping, [M; U]) into
 * *build_ms and solving them (factor, triangular solves, the weights) into
 * *solve_ms. On a GPU device time between CUDA events around the calls
 * issued one by one (not replayed as the graph, so their sum exceeds a
 * replay by the launch gaps; the direct method is not split: MR_EINVAL);
 * on the CPU the monotonic clock. A non-positive-definite system shows in
 * mr_grappa_status(), as after mr_grappa_calibrate(). For benchmarks.
 * Borrows all. */
int mr_grappa_calibrate_steps(mr_grappa_plan *plan, const mr_cfloat *acs, size_t coil_stride,
                              mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err);

/* Waits for the plan's device and returns MR_ENUMERIC (with a line in err)
 * when the last calibration met a non-positive-definite system, else 0. */
int mr_grappa_status(mr_grappa_plan *plan, mr_err *err);

/* Fills, in kspace [coil][line][ro] (ne1 lines, on the plan's device), the
 * lines that sampled[] (host, ne1 flags) marks missing, from the sampled
 * lines of the regular pattern: its phase is the residue modulo R that most
 * sampled lines share. Missing lines of that residue itself stay as they
 * are (no kernel position reaches them). weights: from calibrate, on the
 * device. *filled (may be NULL) receives the number of lines filled.
 * Borrows all. */
int mr_grappa_apply(mr_grappa_plan *plan, const mr_cfloat *weights, const uint8_t *sampled,
                    size_t ne1, mr_cfloat *kspace, size_t *filled, mr_err *err);

/* The same two steps with host memory on any device (uploads and
 * downloads on a GPU; calibrate_host also checks the status). */
int mr_grappa_calibrate_host(mr_grappa_plan *plan, const mr_cfloat *acs, size_t coil_stride,
                             mr_cfloat *weights, mr_err *err);
int mr_grappa_apply_host(mr_grappa_plan *plan, const mr_cfloat *weights, const uint8_t *sampled,
                         size_t ne1, mr_cfloat *kspace, size_t *filled, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
