/* Coil compression: fewer virtual coils carrying most of the signal.
 *
 * SVD (Buehrer et al. 2007; BART `cc -S`): one matrix for the whole scan,
 * the dominant eigenvectors of the calibration data's coil covariance.
 * Geometric (GCC, Zhang et al., MRM 69:571, 2013; BART `cc -G`): one matrix
 * per readout position x, from the covariance of the calibration lines
 * transformed to image space along the readout (averaged over
 * MR_COMPRESS_GCC_WINDOW neighbouring positions), aligned from the centre
 * outwards (each x's eigenvectors turned by the unitary closest to the
 * previous x's), so that each virtual coil varies smoothly along x.
 *
 * The matrices are small and come from the calibration lines once per
 * calibration (on the host: covariance and eigenvectors, LAPACKE); applying
 * them is the per-buffer work, on the call's device: one matrix product
 * (gpu/linalg/blas.h) for SVD, the readout transform, a product per x and
 * the transform back for GCC.
 *
 * Layouts: lines [coil][line][nro] (k-space lines, the readout centred at
 * nro / 2); a matrix item is column-major ncoils x nvirtual, element
 * (c, v) = conj(u_v[c]) so that virtual coil v = sum_c m(c, v) coil c; GCC
 * has nro items back to back, SVD one. */
#ifndef MR_GPU_COMPRESS_H
#define MR_GPU_COMPRESS_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_compress_method { MR_COMPRESS_SVD, MR_COMPRESS_GCC } mr_compress_method;

#define MR_COMPRESS_GCC_WINDOW 5

/* The matrices' values: ncoils * ncoils (SVD) or nro * ncoils * ncoils
 * (GCC), the room mr_compress_matrix() needs. */
size_t mr_compress_matrix_size(mr_compress_method method, size_t ncoils, size_t nro);

/* From calibration lines calib [coil][line][nro] (host memory; GCC
 * transforms them along the readout on dev, through the host): the
 * matrix m (host, mr_compress_matrix_size() values; its items hold
 * ncoils x *nvirtual) for `channels` virtual coils, or, channels 0, the
 * fewest that keep `energy` (0 < energy <= 1) of the calibration data's
 * energy; *kept (may be NULL): the share of the energy they keep.
 * MR_EINVAL for bad sizes or options, MR_EDATA for calibration data
 * without signal. */
int mr_compress_matrix(mr_device *dev, mr_compress_method method, const mr_cfloat *calib,
                       size_t ncoils, size_t nlines, size_t nro, size_t channels, double energy,
                       mr_cfloat *m, size_t *nvirtual, double *kept, mr_err *err);

/* out [virtual][line][nro] = the compressed lines of in [coil][line][nro];
 * m from mr_compress_matrix(), in, m and out on dev, out not overlapping
 * in. GCC needs nro * ncoils * nlines values of scratch on dev, taken here
 * (counted against the budget on the CPU). Borrows all. */
int mr_compress_apply(mr_device *dev, mr_compress_method method, const mr_cfloat *m, size_t ncoils,
                      size_t nvirtual, size_t nlines, size_t nro, const mr_cfloat *in,
                      mr_cfloat *out, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
