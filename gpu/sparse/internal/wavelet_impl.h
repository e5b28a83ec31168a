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
                        int inverse, const mr_wavelet_taps *f, const mr_cfloat *src, mr_cfloat *dst,
                        mr_err *err);
int mr_wavelet_cuda_pass(mr_device *dev, const size_t dims[3], const size_t len[3], int axis,
                         int inverse, const mr_wavelet_taps *f, const mr_cfloat *src,
                         mr_cfloat *dst, mr_err *err);

/* The GPU does the levels whose region holds at most MR_WAVELET_SMALL
 * samples in one block, in shared memory (one launch instead of one per
 * pass): levels passes on c in place, len[0] the first one's region,
 * len[levels] the coarse band; at most MR_WAVELET_MAX_SMALL_LEVELS. The
 * inverse soft-thresholds every coefficient it reads outside the coarse
 * band by thresh first (0: none). */
#define MR_WAVELET_SMALL 2048
#define MR_WAVELET_MAX_SMALL_LEVELS 12
int mr_wavelet_cuda_small(mr_device *dev, const size_t dims[3], const size_t len[][3], int levels,
                          int inverse, const mr_wavelet_taps *f, float thresh, mr_cfloat *c,
                          mr_err *err);

/* One level of a 2D image whose x and y both halve, in one launch on a
 * GPU (both passes, through shared memory), on the region len of arrays of
 * dims (Mallat's layout: low halves first). Analysis (inverse 0): the
 * region of lo_in gives the three detail bands, written into c, and the
 * low band, written into lo_out (region len / 2). Synthesis: the low band
 * of lo_in (region len / 2) and the detail bands of c, each soft-
 * thresholded by thresh as it is read (0: none), give the region of
 * lo_out. shift (NULL: none; the whole image only): analysis reads, and
 * synthesis writes, the image as if shifted by it (wavelet.h), in place of
 * a copy. lo_in, c and lo_out must not overlap, but lo_out may be c in an
 * analysis (the low band's region holds no detail). */
typedef struct mr_wavelet_momentum {
  float beta;
  mr_cfloat *prev, *z;
} mr_wavelet_momentum;
/* m (NULL: none; a synthesis into the image only): lo_out is not written,
 * FISTA's momentum takes the image x instead: z = x + m->beta (x -
 * m->prev), then m->prev = x (prox.h's mr_prox_momentum). */
int mr_wavelet_cuda_level2d(mr_device *dev, const size_t dims[3], const size_t len[3], int inverse,
                            const mr_wavelet_taps *f, const size_t *shift, float thresh,
                            const mr_wavelet_momentum *m, const mr_cfloat *lo_in, mr_cfloat *c,
                            mr_cfloat *lo_out, mr_err *err);

/* dst[(i + shift) mod len] = src[i] over the region [0, len) of arrays of
 * dims (a nonzero shift only with len == dims). */
int mr_wavelet_cpu_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                        const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst);
int mr_wavelet_cuda_copy(mr_device *dev, const size_t dims[3], const size_t len[3],
                         const size_t shift[3], const mr_cfloat *src, mr_cfloat *dst, mr_err *err);

/* FISTA's graph (core's graph.h): sets the shift of the captured node
 * that starts mr_wavelet_forward (forward: the copy, or the first 2D
 * level) and of the one that ends mr_wavelet_adjoint,
 * mr_wavelet_adjoint_soft or mr_wavelet_adjoint_soft_momentum (back: the
 * copy, or the last 2D level, with the momentum's beta) on an
 * instantiated graph exec, as the calls with this shift and beta would
 * launch them. */
int mr_wavelet_cuda_set_shifts(void *exec, void *forward, void *back, const size_t dims[3],
                               const size_t shift[3], float beta, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
