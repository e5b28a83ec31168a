/* Internal: the two backends of wavelet.h. */
#ifndef MR_GPU_WAVELET_IMPL_H
#define MR_GPU_WAVELET_IMPL_H

#include "wavelet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest filter (db4). */
#define MR_WAVELET_MAX_TAPS 8

/* One filter: the low-pass taps h; the high-pass taps are
 * g[k] = (-1)^k h[taps - 1 - k]. */
typedef struct mr_wavelet_taps {
  float h[MR_WAVELET_MAX_TAPS];
  int taps;
} mr_wavelet_taps;

/* One pass along `axis` over the region [0, len) of arrays of dims: the
 * region of dst gets the analysis (inverse 0: low half then high half) or
 * the synthesis (inverse 1) of src's region along that axis, periodic in
 * len[axis] (even). Samples outside the region are not touched. */
int mr_wavelet_cpu_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                        int inverse, const mr_wavelet_taps *f, const mr_cfloat *src,
                        mr_cfloat *dst);
int mr_wavelet_cuda_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                         int inverse, const mr_wavelet_taps *f, const mr_cfloat *src,
                         mr_cfloat *dst);

/* The GPU does the levels whose region holds at most MR_WAVELET_SMALL
 * samples in one block, in shared memory (one launch instead of one per
 * pass): levels passes on c in place, len[0] the first one's region,
 * len[levels] the coarse band; at most MR_WAVELET_MAX_SMALL_LEVELS. */
#define MR_WAVELET_SMALL 2048
#define MR_WAVELET_MAX_SMALL_LEVELS 12
int mr_wavelet_cuda_small(mr_device *dev, const size_t dims[3], const size_t len[][3], int levels,
                          int inverse, const mr_wavelet_taps *f, mr_cfloat *c);

/* dst[(i + shift) mod len] = src[i] over the region [0, len) of arrays of
 * dims (a nonzero shift only with len == dims). */
int mr_wavelet_cpu_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                        const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst);
int mr_wavelet_cuda_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                         const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst);

/* FISTA's graph (fista_graph.h): sets the shift of the captured copy
 * node that starts mr_wavelet_forward (forward) and of the one that ends
 * mr_wavelet_adjoint (back) on an instantiated graph exec, as the two
 * calls with this shift would launch them. */
int mr_wavelet_cuda_set_shifts(void *exec, void *forward, void *back, const size_t dims[3],
                               const size_t shift[3]);

#ifdef __cplusplus
}
#endif

#endif
