/* The proximal steps of a compressed-sensing solver on complex arrays on a
 * device (host memory for the CPU, mr_buf memory for a GPU), and the
 * reduction it scales its thresholds by. Every call borrows its pointers. */
#ifndef MR_GPU_PROX_H
#define MR_GPU_PROX_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Complex soft thresholding, the proximal operator of t ||x||_1:
 * x <- x max(0, 1 - t / |x|), in place, for every sample of the array of
 * dims (x fastest) outside the box [0, keep) of every axis (a wavelet's
 * coarse band, left as it is; keep {0, 0, 0}: every sample). t >= 0. */
int mr_prox_soft(mr_device *dev, const size_t dims[3], const size_t keep[3], float t, mr_cfloat *x,
                 mr_err *err);

/* FISTA's momentum: z = x + beta (x - prev), then prev = x; n samples. */
int mr_prox_momentum(mr_device *dev, size_t n, float beta, const mr_cfloat *x, mr_cfloat *prev,
                     mr_cfloat *z, mr_err *err);

/* *peak = max |x| over n samples and *finite = whether every sample is
 * finite (a NaN or an infinity makes it 0), into host memory. */
int mr_prox_peak(mr_device *dev, size_t n, const mr_cfloat *x, float *peak, int *finite,
                 mr_err *err);

/* Order statistics of |x| over n (< 2^32) finite samples: values[r] = the
 * ranks[r]-th smallest magnitude (0-based, ranks[r] < n), for count
 * (1 .. MR_PROX_MAX_RANKS) ranks at once, into host memory. Exact: a radix
 * selection over the magnitudes' bits, four passes of one 8-bit digit
 * each (a histogram on the device, the host picking the digit), so no
 * copy or sort of the array. */
#define MR_PROX_MAX_RANKS 4
int mr_prox_select(mr_device *dev, size_t n, const mr_cfloat *x, int count, const size_t *ranks,
                   float *values, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
