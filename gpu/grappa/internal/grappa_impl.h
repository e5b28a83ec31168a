/* Internal: the shape of a GRAPPA calibration, shared by both backends, and
 * the backend functions behind grappa.h (arguments already checked). */
#ifndef MR_GPU_GRAPPA_IMPL_H
#define MR_GPU_GRAPPA_IMPL_H

#include "grappa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything below follows from the options. The kernel sits at PE
 * position i (ACS lines i + p R) and readout position c (samples c + j);
 * its targets are ACS lines i + dpe + m at sample c + dro. */
typedef struct mr_grappa_geom {
  int nc, nro, nacs, accel, kpe, kro, nseg;
  int n_src;    /* kpe kro nc: unknowns per target */
  int n_tgt;    /* (R - 1) nc: targets per position */
  int nb_src;   /* kpe nc: source rows without their taps */
  int npe;      /* PE positions: nacs - (kpe - 1) R */
  int dpe, dro; /* R (kpe/2 - 1) and (kro - 1)/2 */
  int nsh_ro;   /* readout positions: nro - kro + 1 */
  /* Segment s owns readout positions [c0[s], c0[s + 1]); its data window
   * is samples [c0[s], c0[s + 1] + kro - 1). */
  int c0[MR_GRAPPA_MAX_SEGMENTS + 1];
  int ndisc[MR_GRAPPA_MAX_SEGMENTS]; /* equations power clipping drops */
  int nro_max;  /* most readout positions of one segment */
  int ndisc_max;
} mr_grappa_geom;

static inline int mr_grappa_seg_positions(const mr_grappa_geom *g, int s) {
  return g->c0[s + 1] - g->c0[s];
}

/* The first and one-past-last readout sample whose missing values segment
 * s fills (the outer segments reach the k-space edges). */
static inline int mr_grappa_seg_x0(const mr_grappa_geom *g, int s) {
  return s == 0 ? 0 : g->c0[s] + g->dro;
}
static inline int mr_grappa_seg_x1(const mr_grappa_geom *g, int s) {
  return s == g->nseg - 1 ? g->nro : g->c0[s + 1] + g->dro;
}

struct mr_grappa_plan {
  mr_device *dev;
  mr_grappa_opts opts;
  mr_grappa_geom g;
  void *backend; /* the backend's scratch */
};

/* Each backend (prefix mr_grappa_cpu_ / mr_grappa_cuda_):
 *   create/destroy  scratch for one calibration
 *   im2col          source vectors of blocks lines[0..nblk) (a block is a
 *                   sampled line s of the pattern) for samples [x0, x1):
 *                   column (x - x0) * nblk + b of s (n_src x ..., dense)
 *   scatter         target t of column (x - x0) * nblk + b of tv
 *                   (n_tgt x ..., dense) into line lines[b] + m where that
 *                   line exists and sampled[] says it is missing
 * Device arrays (lines, sampled) live on the plan's device. */
int mr_grappa_cpu_create(mr_grappa_plan *p, mr_err *err);
/* The host scratch a CPU plan of geometry g holds once it has filled a
 * k-space of ne1 lines (mr_grappa_host_bytes). */
uint64_t mr_grappa_cpu_bytes(const mr_grappa_geom *g, int ne1);
void mr_grappa_cpu_destroy(mr_grappa_plan *p);
/* The whole calibration in double precision (A, B, M and the factor), the
 * weights rounded to float at the end; build_ms / solve_ms (may be NULL)
 * receive the time of building the normal equations (with prepare) and of
 * solving them. */
int mr_grappa_cpu_calibrate(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                            mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err);
int mr_grappa_cpu_im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1,
                         const int *lines, int nblk, int x0, int x1, mr_cfloat *src);
int mr_grappa_cpu_scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk,
                          int x0, int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace);
/* The whole filling of a one-segment plan on the CPU, in hybrid space (a
 * product per readout frequency; grappa_cpu.c): blocks lines[0..nblk),
 * host memory. Fills what im2col, the GEMM and scatter fill, the same up
 * to rounding. */
int mr_grappa_cpu_fill(mr_grappa_plan *p, const mr_cfloat *weights, const int *lines, int nblk,
                       const uint8_t *sampled, int ne1, mr_cfloat *kspace, mr_err *err);

int mr_grappa_cuda_create(mr_grappa_plan *p, mr_err *err);
void mr_grappa_cuda_destroy(mr_grappa_plan *p);
/* The direct method's pieces: prepare (per segment and PE position the
 * normalisation psi, and which equations power clipping discards, in
 * scratch), then per segment the explicit A (n_src x positions) and B
 * (n_tgt x positions), normalised, the discarded equations zero (column
 * q = i * positions + c), in single precision. */
int mr_grappa_cuda_prepare(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                           mr_err *err);
int mr_grappa_cuda_build(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s,
                         mr_cfloat *a, mr_cfloat *b, mr_err *err);
int mr_grappa_cuda_im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1, const int *lines,
                          int nblk, int x0, int x1, mr_cfloat *src, mr_err *err);
int mr_grappa_cuda_scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk,
                           int x0, int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace,
                           mr_err *err);
/* The whole fused calibration, queued (prepare included). */
int mr_grappa_cuda_fused(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                         mr_cfloat *weights, mr_err *err);
/* The same, not as the graph and waited for; *build_ms and *solve_ms
 * receive the device time of building [M; U] (prepare included) and of
 * solving it (factor, triangular solve, export). */
int mr_grappa_cuda_fused_steps(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                               mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err);
/* MR_ENUMERIC when the last fused calibration met a non-positive pivot. */
int mr_grappa_cuda_status(mr_grappa_plan *p, mr_err *err);

/* Block order of the GPU's blocked Cholesky factorisation. */
enum { MR_GRAPPA_TILE = 64 };

/* phase_us of the hook: the diagonal-tile block's time by phase, measured
 * with clock64() at each boundary by thread 0 (in the warp that factors):
 * [0] loading the tile, then for each of the 4 sub-panels of 16 columns
 * (at 1 + 6 j) the warp's factor, its inverse, the barrier after it,
 * the rows below and the inverse's rows (all warps, to a barrier), their
 * write back (to a barrier), the trailing update (to a barrier); [25]
 * storing L and the inverse. */
#define MR_GRAPPA_TILE_PHASES 26

/* For tests: one tile step of the GPU factorisation on dev. panel (rows x
 * MR_GRAPPA_TILE, column-major, complex doubles as re/im pairs, rows >=
 * MR_GRAPPA_TILE; its top square Hermitian, only the lower triangle read)
 * is overwritten with L (lower triangle; the upper one left as it was)
 * and, below it, the rows times L^-H; inv (MR_GRAPPA_TILE^2 complex)
 * receives L^-1, its upper triangle zero. tile_ms and below_ms (may be
 * NULL) receive the device time of the tile's kernel and of the product of
 * the rows below with the inverse (mr-bench grappa). phase_us (may be
 * NULL; MR_GRAPPA_TILE_PHASES entries) receives the tile kernel's phases,
 * from a stamped build of the kernel (tile_ms then includes the stamps).
 * MR_ENUMERIC for a non-positive pivot, MR_EINVAL on a CPU device. The
 * CUDA twin has the same contract. */
int mr_grappa_chol_tile(mr_device *dev, int rows, double *panel, double *inv, double *tile_ms,
                        double *below_ms, double *phase_us, mr_err *err);
int mr_grappa_cuda_chol_tile(mr_device *dev, int rows, double *panel, double *inv, double *tile_ms,
                             double *below_ms, double *phase_us, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
