/* Density compensation for gridding: a weight per sample, the share of
 * k-space (in cycles per pixel, squared or cubed) that the sample stands
 * for, so that mr_nufft_execute(ADJOINT) of weight * data reconstructs the
 * image at its own scale. */
#ifndef MR_GPU_DENSITY_H
#define MR_GPU_DENSITY_H

#include <stddef.h>

#include "nufft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pipe and Menon's iteration (Magn. Reson. Med. 1999) on the plan's points,
 * on the plan's device: w <- w / |C w| from w = 1, `iterations` times, where
 * C spreads onto the plan's grid and interpolates back (a convolution with
 * the kernel's autocorrelation psi). At the fixed point sum_i w_i psi(k_j -
 * k_i) = 1, so w times the integral of psi over the grid size is the area
 * per sample. weights: npoints floats of host memory, in the order the
 * points were given (borrowed). MR_EINVAL before mr_nufft_set_points.
 * The weights follow the kernel, hence the plan's upsampling: a plan with
 * automatic upsampling on a GPU may take another than the CPU's (it is
 * timed, nufft.h: 1.25 against 2 changed a 2D spiral's gridded image by
 * 27%), so give the plan an explicit one or MR_NUFFT_UPSAMPLING_RULE
 * wherever the weights must not depend on the machine. */
int mr_density_pipe_menon(mr_nufft_plan *plan, int iterations, float *weights, mr_err *err);

/* Analytic weights of a radial trajectory of `spokes` lines through the
 * centre (2D: full diameters at any angles, evenly covered; 3D: a
 * "kooshball"), samples dk apart along each: the volume of the ring
 * (shell) at radius |k| that belongs to one of the 2 * spokes samples on
 * it, and for a sample at the centre its share of the disc (ball) of radius
 * dk / 2. k[npoints][rank] in cycles per pixel; weights[npoints] out. */
int mr_density_radial(int rank, size_t npoints, const float *k, size_t spokes, double dk,
                      float *weights, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
