/* The analytic multi-coil Shepp-Logan phantom behind `reconclient
 * simulate`: an object made of ellipses (2D) or ellipsoids (3D) and smooth
 * coil sensitivities, both with closed-form Fourier transforms, so k-space is
 * computed exactly at any position (never by an FFT or NUFFT of an image:
 * no inverse crime).
 *
 * Coordinates: a field of view of n pixels per side, positions r in pixels
 * with the origin at the centre (pixel index i sits at r = i - n/2), k in
 * cycles per pixel. The transform is the continuous one,
 *   F(k) = integral f(r) exp(-2 pi i k.r) dr,
 * so a density-compensated gridding reconstruction returns f at its own
 * scale.
 *
 * Object: the modified Shepp-Logan phantom (Toft's intensities), in 3D its
 * usual extension to ellipsoids (rotations about z only). Coil c of C:
 *   S_c(r) = exp(i phi_c) (1 + 0.6 u_c.s(r) + 0.3 i v_c.s(r)),
 *   s(r) = (sin(pi x/n), sin(pi y/n), sin(pi z/n)),
 * u_c pointing at the coil (around the object, alternately above and below
 * the centre in 3D), v_c across it: brighter on the coil's side, a gentle
 * phase. Each sine is two complex exponentials of frequency 1/(2n), so coil
 * c's k-space is a sum of 1 + 2 rank shifted copies of F. */
#ifndef MR_CLIENT_PHANTOM_H
#define MR_CLIENT_PHANTOM_H

#include <complex.h>

/* The object at r (real; 0 outside). */
double mr_phantom_value(int rank, int n, const double r[3]);

/* F at k. */
double complex mr_phantom_ft(int rank, int n, const double k[3]);

/* Sensitivity of coil c of ncoils at r. */
double complex mr_phantom_coil(int rank, int n, int c, int ncoils, const double r[3]);

/* k-space of every coil at k: out[c] = FT of S_c f at k, for c < ncoils. */
void mr_phantom_kspace(int rank, int n, int ncoils, const double k[3], double complex *out);

/* The same with the object moved by shift[rank] pixels under the coils,
 * which stay where they are (f(r - shift) S_c(r)): what a moving object
 * looks like to fixed receive coils. */
void mr_phantom_kspace_moved(int rank, int n, int ncoils, const double k[3],
                             const double shift[3], double complex *out);

#endif
