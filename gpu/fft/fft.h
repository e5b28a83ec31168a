/* Batched centered FFT in 1, 2 or 3 dimensions (FFTW on the CPU, cuFFT on a
 * GPU), in the cuFINUFFT plan shape: create a plan for a shape on a device,
 * execute it as often as needed, destroy it.
 *
 * Layout: x fastest, then y, then z; `batch` such arrays back to back (e.g.
 * one per coil). "Centered" means the zero frequency and the image origin
 * both sit at index n/2 of each dimension: execute computes
 * fftshift(fft(ifftshift(x))) with fftshift/ifftshift built in, for even and
 * odd sizes. Scaling is unitary, 1/sqrt(nx*ny*nz) both ways, so
 * BACKWARD(FORWARD(x)) == x. A plain plan (mr_fft_opts.plain) does neither:
 * it is the library's transform as it is, for callers that fold both into
 * their own kernels (below).
 *
 * Convention for reconstruction: image = BACKWARD (exp(+i), FFTW_BACKWARD)
 * transform of k-space; FORWARD takes an image to k-space. */
#ifndef MR_GPU_FFT_H
#define MR_GPU_FFT_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_fft_plan mr_fft_plan;

typedef enum mr_fft_direction {
  MR_FFT_FORWARD = -1,  /* exp(-i 2 pi k x / n): image -> k-space */
  MR_FFT_BACKWARD = +1  /* exp(+i 2 pi k x / n): k-space -> image */
} mr_fft_direction;

typedef struct mr_fft_opts {
  int rank;         /* 1, 2 or 3 */
  size_t dims[3];   /* {nx, ny, nz}; dimensions past rank are ignored */
  size_t batch;     /* arrays per execute, >= 1 */
  int plain;        /* 1: the library's own transform, uncentred (origin at
                     * index 0) and unscaled, for a caller that folds the
                     * centering and the scale into its own kernels (below) */
} mr_fft_opts;

/* Folding the centering into neighbouring kernels (plain plans). On a GPU
 * the centred transform is cuFFT plus one pass over the data (two for odd
 * sizes): 1.24-1.34 times cuFFT alone for even sizes, 1.61 for an odd one
 * (mr-bench gpu, centered_over_raw); a plain plan is cuFFT alone (0.96-1.04,
 * plain_over_raw). cuFFT's LTO callbacks cost about as much as that pass
 * or more even when they do nothing (raw_*_callback*_ms). A caller whose
 * own kernels write the transform's input and read its output can do the
 * centering there for free. For a shape whose every dimension is even,
 * with a = n/2 per dimension and N = nx ny nz:
 *   centred(x)[k] = t[k] * plain(s * x)[k] / sqrt(N),
 *   s[m] = (-1)^(mx + my + mz),  t[k] = (-1)^(kx + ky + kz + ax + ay + az),
 * the same in both directions. Between two transforms (e.g. forward, a
 * product with a kernel, backward) t of the first times s of the second is
 * the constant (-1)^(ax + ay + az), so only the first input and the last
 * output take signs. A convolution needs none at all: shift its kernel by
 * a instead, i.e. multiply the kernel's plain spectrum once by
 * (-1)^(kx + ky + kz) (the Toeplitz operator, gpu/iterative/toeplitz.c:
 * its apply is 0.96-1.07 of cuFFT plus its own passes, the centred form
 * 1.21-1.32; mr-bench gpu, toeplitz). Odd sizes
 * need phase ramps instead (fft_impl.h). */

/* Makes a plan for opts on dev (borrowed; it must outlive the plan). Plans
 * come from a per-device cache, so making the same shape again is cheap.
 * MR_EINVAL for a bad shape, MR_EDEVMEM when the GPU is out of memory. The
 * caller takes *out. */
int mr_fft_plan_create(mr_device *dev, const mr_fft_opts *opts, mr_fft_plan **out, mr_err *err);

/* Transforms batch arrays from in to out, both on the plan's device
 * (in == out for in place; otherwise they must not overlap, and in is left
 * unchanged). Borrows in and out. */
int mr_fft_execute(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                   mr_err *err);

/* Same, with in and out in host memory whatever the device: on a GPU the
 * batch goes up, is transformed and comes back in chunks, copies in both
 * directions overlapping the transforms. */
int mr_fft_execute_host(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in,
                        mr_cfloat *out, mr_err *err);

/* For a gadget that keeps one plan for the shape it last saw: leaves *plan
 * as it is when it was made for opts on dev, else destroys it and makes
 * one (*plan is NULL after a failure). */
int mr_fft_plan_keep(mr_device *dev, const mr_fft_opts *opts, mr_fft_plan **plan, mr_err *err);

/* Frees the plan (the cached library plan stays for reuse). NULL ignored. */
void mr_fft_plan_destroy(mr_fft_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
