/* EPI readouts onto a uniform grid: the regridding of ramp-sampled echoes
 * (and the reversal of reversed ones) as matrix products, with the
 * Nyquist-ghost correction of the reversed echoes on the way.
 *
 * A plan is made once per scan from where each sample of a forward and of a
 * reversed readout lies in k (grid steps from the grid's centre, index
 * nx / 2): on the host, in double precision, the operator P that turns a
 * readout's samples into its profile along x (nx pixels, x = j - nx / 2 at
 * index j) is the pseudo-inverse of the non-uniform Fourier matrix
 * A[q][j] = exp(-2 pi i k_q x_j / nx), REGULARISED by a truncated SVD:
 * singular values under rcond times the largest are dropped. Ramp-sampled
 * readouts whose flat top steps more than one grid unit leave A
 * ill-conditioned (the edges of an oversampled field of view are barely
 * determined); its pseudo-inverse at machine precision would amplify noise
 * by some 1e13. Readouts on the grid give the unitary DFT: nothing is
 * dropped, and the regridding is the identity (a reversal for reversed
 * ones). The profiles go back to uniform k with the centred DFT
 * F[p][j] = exp(-2 pi i (p - nx/2) x_j / nx).
 *
 * The plan keeps P (forward and reversed) and F on its device; regridding a
 * batch of readouts is two GEMMs (gpu/linalg) and a row scaling. */
#ifndef MR_GPU_EPI_H
#define MR_GPU_EPI_H

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_epi_plan mr_epi_plan;

typedef struct mr_epi_readout {
  int samples;           /* per readout, 1 .. 4096 */
  int nx;                /* the uniform grid (the encoded readout), 1 .. 4096 */
  const double *forward; /* [samples]: a forward readout's sample positions */
  const double *reverse; /* [samples]: a reversed readout's, in time order */
  double rcond;          /* relative cut of the truncated SVD, (0, 1) */
} mr_epi_readout;

/* Makes the operators and puts them on dev. MR_EINVAL for sizes out of
 * range, MR_EDATA for a position that is not finite. The caller takes *out. */
int mr_epi_plan_create(mr_device *dev, const mr_epi_readout *r, mr_epi_plan **out, mr_err *err);
void mr_epi_plan_destroy(mr_epi_plan *p);

mr_device *mr_epi_plan_device(const mr_epi_plan *p);
/* Singular values kept by the forward (reversed 0) or reversed operator. */
int mr_epi_plan_rank(const mr_epi_plan *p, int reversed);

/* Profiles of readouts in host memory, on the host: out (nx x ncols,
 * column-major) = P in (samples x ncols), P the forward or reversed
 * operator (the navigators' use). Borrows in, out. */
int mr_epi_profiles_host(const mr_epi_plan *p, int reversed, const mr_cfloat *in, int ncols,
                         mr_cfloat *out);

/* Regrids nfwd forward readouts and then nrev reversed ones, columns of in
 * (samples x (nfwd + nrev), the plan's device), to uniform k-space in out
 * (nx x (nfwd + nrev)), multiplying the reversed readouts' profiles by
 * correction (nx factors in host memory; NULL: none) on the way. Borrows
 * in, correction, out (which must not overlap). */
int mr_epi_regrid(mr_epi_plan *p, const mr_cfloat *in, int nfwd, int nrev,
                  const mr_cfloat *correction, mr_cfloat *out, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
