/* Image quality against a noiseless reference: the magnitude of an image,
 * scaled by the one real factor that fits it best to the reference (least
 * squares: reconstructions differ in how coil maps are normalised, which
 * says nothing about the image), then
 *   NRMSE = ||a |x| - ref|| / ||ref||,
 *   PSNR  = 20 log10(max ref / RMS(a |x| - ref)) dB,
 * over every pixel. The factor a is reported too: far from 1 means a
 * reconstruction at another scale. */
#ifndef MR_BENCH_IMAGE_QUALITY_H
#define MR_BENCH_IMAGE_QUALITY_H

#include <complex.h>
#include <stddef.h>

#include "bench.h"

typedef struct image_quality {
  double psnr_db, nrmse, scale;
} image_quality;

/* x: n complex pixels (magnitudes taken), or NULL with mag: n magnitudes. */
image_quality image_quality_of(const float complex *x, const float *mag, const float *ref,
                               size_t n);

/* Writes psnr_db, nrmse and scale as members of the open object. */
void image_quality_json(bench_json *j, const image_quality *q);

#endif
