/* ESPIRiT coil sensitivity maps (Uecker et al., MRM 71:990, 2014), as
 * BART's `ecalib -m1` computes them.
 *
 * From the fully sampled centre of k-space (the calibration region): the
 * calibration matrix of every kernel-sized patch of every coil, its
 * dominant right singular vectors (those whose squared singular value is
 * above threshold times the largest, BART's -t; found without an
 * eigen-decomposition on the GPU: gpu/linalg/spectral.h), and from their
 * projector the per-pixel matrix G(x) of the ESPIRiT operator (the
 * kernels zero-padded to the image grid: a trigonometric polynomial of the
 * kernel's lags, summed directly at every pixel). The map at a pixel is
 * G(x)'s eigenvector of the largest eigenvalue (about 1 inside the object;
 * power iteration warm-started from a neighbour, espirit_impl.h), zeroed where
 * that eigenvalue is below crop (BART's -c), its phase taken relative to
 * the virtual coil of the calibration data's first principal component (so
 * maps are smooth).
 * Where no data constrain the maps (outside the object) and G(x) has
 * several eigenvalues near 1, any vector of their span is an eigenvector:
 * the map there is one of them (BART's -m1 too), not reproducible across
 * devices; inside the object the GPU and the CPU agree to float rounding.
 *
 * 3D: the readout (x) is transformed to image space first and each
 * x-slice gets 2D ESPIRiT on its ky-kz calibration region (as BART's
 * ecaltwo does per slice, here with the calibration per slice too: a 3D
 * kernel's 6^3 x coils Gram matrix is out of reach of a fast path).
 *
 * Memory: the calibration (projector per slice, up to (k^2 coils)^2 values)
 * and G of one x-slice or image (coils (coils + 1) / 2 values per pixel)
 * are device buffers of the call, counted against the budget on the CPU.
 * At most MR_ESPIRIT_MAX_COILS coils (compress first: coil_compress). */
#ifndef MR_GPU_ESPIRIT_H
#define MR_GPU_ESPIRIT_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_ESPIRIT_MAX_COILS 64

/* The stages of a call, for mr_espirit_opts.profile. */
typedef enum mr_espirit_stage {
  MR_ESPIRIT_CALIBRATION, /* the ACS region, readout transform (3D), calibration matrices, Gram */
  MR_ESPIRIT_SUBSPACE,    /* the kept kernels: the Gram's truncated projector (and inverse) */
  MR_ESPIRIT_PROJECTOR,   /* the projector onto them in kernel space */
  MR_ESPIRIT_KERNEL_FFT,  /* its lag sums to image space (a direct DFT): G(x) */
  MR_ESPIRIT_EIGEN,       /* per pixel: the eigenvector, crop, phase */
  MR_ESPIRIT_STAGES
} mr_espirit_stage;

typedef struct mr_espirit_opts {
  int kernel;      /* 6: kernel edge (clipped per axis to what fits) */
  int calib;       /* 24: calibration region edge, clipped to the ACS */
  float threshold; /* 0.001: kernels kept while sigma^2 > threshold * the largest (BART -t) */
  float crop;      /* 0.8: eigenvalue crop (BART -c) */
  double *profile; /* NULL; or MR_ESPIRIT_STAGES entries to which each stage's
                      milliseconds are added (the device is waited for after
                      each stage: for benchmarks) */
} mr_espirit_opts;

void mr_espirit_opts_default(mr_espirit_opts *o);

/* kspace: [coil][z][y][x] on dev (dims[0] = x fastest), centre at dims/2,
 * unsampled points zero; maps out: [coil][z][y][x] on dev, zero where the
 * eigenvalue is below crop. MR_EINVAL for bad options or shapes, MR_EDATA
 * when the fully sampled centre is too small for the kernel (fewer than 3
 * kernel positions along an axis it does not span whole, or fewer patches
 * than half the kernel's points: the maps would be cropped almost
 * everywhere) or holds no signal. Borrows kspace and maps. */
int mr_espirit_maps(mr_device *dev, const mr_cfloat *kspace, const size_t dims[3], size_t ncoils,
                    const mr_espirit_opts *o, mr_cfloat *maps, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
