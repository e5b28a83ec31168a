/* The Cartesian SENSE operator A = M F S of compressed sensing and its
 * normal operator A^H A: S multiplies an image by each coil's map, F is
 * the centred unitary FFT (fft.h, batched over the coils), M keeps the
 * sampled phase-encode lines (2D) or ky-kz points (3D) and zeroes the rest.
 *
 * Layout: images dims[0] x dims[1] x dims[2] (x the readout, fastest;
 * dims[2] = 1 in 2D); maps and k-space [coil][z][y][x]; the mask
 * [z][y] (1 where the line at (y, z) was acquired, every readout sample
 * of it), k-space's centre at dims / 2. The normal operator is five
 * passes for every coil together (maps, FFT, mask, FFT, combine); for
 * even shapes with plain transforms, the centring folded into the maps
 * and combine passes (fft.h); a GPU's 2D image takes its transforms along
 * y only (sense_impl.h). */
#ifndef MR_GPU_SENSE_H
#define MR_GPU_SENSE_H

#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_sense mr_sense;

/* An operator for dims and ncoils on dev (borrowed), with its transforms
 * and one k-space of scratch. MR_EINVAL for a bad shape. The caller takes
 * *out. */
int mr_sense_create(mr_device *dev, const size_t dims[3], size_t ncoils, mr_sense **out,
                    mr_err *err);
void mr_sense_destroy(mr_sense *s);

/* Sets the maps (on dev, borrowed until the next call or the operator's
 * end) and the mask (host memory, [z][y], copied); *lines (may be NULL)
 * gets the number of sampled lines. */
int mr_sense_set(mr_sense *s, const mr_cfloat *maps, const uint8_t *mask, size_t *lines,
                 mr_err *err);

/* k = A x. */
int mr_sense_forward(mr_sense *s, const mr_cfloat *x, mr_cfloat *k, mr_err *err);
/* x = A^H k (k unchanged). */
int mr_sense_adjoint(mr_sense *s, const mr_cfloat *k, mr_cfloat *x, mr_err *err);
/* y = A^H A x (y may be x). */
int mr_sense_normal(mr_sense *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err);
/* u = z - step (A^H A z - ahb): a gradient step on 1/2 ||A z - b||^2 with
 * ahb = A^H b, in the normal operator's last pass. u may be z. */
int mr_sense_step(mr_sense *s, const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *u,
                  mr_err *err);
/* *peak = max over pixels of sum_c |maps_c|^2: a bound on ||A^H A||
 * (1 for maps of unit root sum of squares), for the solver's step. */
int mr_sense_peak(mr_sense *s, float *peak, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
