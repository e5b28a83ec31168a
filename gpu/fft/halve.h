/* Halving 2x oversampled readouts in host memory, on the CPU threads:
 * each readout of 2M samples (k-space) becomes the M that a centred
 * inverse FFT, keeping the central M pixels and a centred forward FFT of M
 * would give, by two transforms of M points instead of one of 2M and one
 * of M. With Phi the sign (-1)^i and C the centred unitary transform of M
 * points:
 *   y = (x_even + Phi C(g * C^-1(Phi x_odd))) / sqrt(2),
 *   g_i = e^(2 pi i i / 2M) for i < M/2, -e^(2 pi i i / 2M) after
 * (the odd samples' share, half a sample off; the centring of the three
 * transforms cancels). For remove_oversampling, line by line or a whole
 * k-space buffer's lines at once.
 *
 * A line is its channels' readouts, one after another `stride` samples
 * apart. The lines of a call are spread over the device's CPU threads, a
 * line's channels transformed together on one thread: the same result on
 * any number of threads, and the same as one line at a time. */
#ifndef MR_GPU_FFT_HALVE_H
#define MR_GPU_FFT_HALVE_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_fft_halve mr_fft_halve;

/* For readouts of nro samples (nro / 2 even) on nch channels, with dev's
 * CPU threads (dev: the CPU). MR_EINVAL for another nro, nch 0 or a GPU. */
int mr_fft_halve_create(mr_device *dev, size_t nro, size_t nch, mr_fft_halve **out, mr_err *err);

/* The readout length and channels h was made for. */
size_t mr_fft_halve_nro(const mr_fft_halve *h);
size_t mr_fft_halve_nch(const mr_fft_halve *h);

/* Line b of nlines: from in[b] (channel c at in[b] + c * in_stride, nro
 * samples) into out[b] (channel c at out[b] + c * out_stride, nro / 2); a
 * NULL in[b] zeroes out[b]'s readouts (a line without samples). The
 * outputs must not overlap the inputs or each other. MR_ENOMEM when a
 * thread finds no scratch (then some lines may be done and others not).
 * Borrows the arrays. */
int mr_fft_halve_host(mr_fft_halve *h, const mr_cfloat *const *in, size_t in_stride,
                      mr_cfloat *const *out, size_t out_stride, size_t nlines, mr_err *err);

/* NULL ignored. */
void mr_fft_halve_destroy(mr_fft_halve *h);

#ifdef __cplusplus
}
#endif

#endif
