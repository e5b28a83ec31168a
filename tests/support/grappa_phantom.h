/* Synthetic multi-coil Cartesian data for the GRAPPA tests and benchmark:
 * a phantom of ellipses seen through smooth complex coil sensitivities
 * (coils on a ring around it), as centered k-space [coil][line][ro], with
 * optional white complex Gaussian noise. */
#ifndef MR_TEST_GRAPPA_PHANTOM_H
#define MR_TEST_GRAPPA_PHANTOM_H

#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"

/* Fills kspace (nc * ny * nx values) on the CPU device cpu; noise is the
 * standard deviation of each real and imaginary part relative to the
 * k-space's RMS value. Returns 0 or an MR_E* code. */
int grappa_phantom_kspace(mr_device *cpu, int nx, int ny, int nc, double noise, unsigned seed,
                          mr_cfloat *kspace);

/* The truth behind grappa_phantom_kspace(): the object (nx * ny values;
 * either pointer may be NULL) and the coils' sensitivities [coil][y][x]. */
void grappa_phantom_truth(int nx, int ny, int nc, float *object, mr_cfloat *maps);

/* The sampling of an accelerated scan: every accel-th line from phase,
 * plus nacs lines around the centre line ny / 2 (sampled[ny]). */
void grappa_phantom_pattern(int ny, int accel, int phase, int nacs, uint8_t *sampled);

/* The first ACS line of grappa_phantom_pattern(). */
int grappa_phantom_acs_start(int ny, int nacs);

/* Eq. 5.1 of the seed: the mean over elements of |z - ref| / |ref|
 * (elements where ref is zero are left out). */
double grappa_rel_error_51(const mr_cfloat *z, const mr_cfloat *ref, size_t n);

#endif
