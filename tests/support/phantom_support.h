/* Shared by the gridding tests: the simulator's phantom as a Cartesian
 * reconstruction would show it, the reference for non-Cartesian images. */
#ifndef MR_TEST_PHANTOM_SUPPORT_H
#define MR_TEST_PHANTOM_SUPPORT_H

/* The 2D phantom of n x n pixels and ncoils coils (client/phantom.h),
 * band-limited to the Cartesian k-space square: each coil's exact k-space
 * samples there, transformed exactly, then the root sum of squares over
 * the coils into out[n * n]. */
void phantom_test_band_limited_rss(int n, int ncoils, float *out);

/* The same with the object moved by shift pixels under the coils
 * (mr_phantom_kspace_moved). */
void phantom_test_band_limited_rss_moved(int n, int ncoils, const double shift[3], float *out);

#endif
