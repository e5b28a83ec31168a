/* Internal: the transform shape shared by fft.c and its backends, and how
 * the centering (fftshift/ifftshift) is folded into elementwise passes.
 *
 * With a = floor(n/2) per dimension, fftshift(F(ifftshift(x))) equals
 *   out[k] = post[k] * F(pre * x)[k],
 *   pre[m] = exp(-s 2 pi i a m / n), post[k] = exp(s 2 pi i a (a - k) / n),
 * where s = -1 forward and +1 backward; products over the dimensions. When
 * every dimension is even this collapses to one pass before the transform:
 *   w[m] = (-1)^(mx+my+mz) x[m + n/2 (mod n)],
 * a swap of element pairs with a sign, so even shapes (the usual case) cost
 * one pass over the data besides the library transform and odd shapes two.
 * The 1/sqrt(n) scale rides on the first pass. */
#ifndef MR_GPU_FFT_IMPL_H
#define MR_GPU_FFT_IMPL_H

#include <stddef.h>

#include "fft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_fft_shape {
  int rank;
  size_t n[3];    /* nx, ny, nz; 1 past rank */
  size_t batch;
  size_t len;     /* nx * ny * nz: one array */
  int even;       /* every transformed dimension even: the one-pass form */
  int plain;      /* no centering, no scale (mr_fft_opts.plain) */
  float scale;    /* 1 / sqrt(len); 1 for plain shapes */
  /* Odd centred shapes only (else NULL): the pre and post factors per dimension as
   * interleaved complex floats, laid out [direction][stage][nx + ny + nz]
   * with direction 0 forward, 1 backward and stage 0 pre, 1 post. */
  float *ramp;
  size_t ramp_len; /* nx + ny + nz */
} mr_fft_shape;

int mr_fft_shape_init(mr_fft_shape *shape, const mr_fft_opts *opts, mr_err *err);
void mr_fft_shape_free(mr_fft_shape *shape);

/* The factors of one direction and stage (0 pre, 1 post), dimension x
 * first, then y at offset nx, then z at nx + ny. */
const float *mr_fft_shape_ramp(const mr_fft_shape *shape, mr_fft_direction dir,
                               int stage);

struct mr_fft_plan {
  mr_device *dev;
  mr_fft_shape shape;
  void *impl; /* the backend's plan */
};

int mr_fft_cpu_create(mr_fft_plan *plan, mr_err *err);
int mr_fft_cpu_execute(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                       mr_err *err);
void mr_fft_cpu_destroy(mr_fft_plan *plan);

int mr_fft_cuda_create(mr_fft_plan *plan, mr_err *err);
int mr_fft_cuda_execute(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in,
                        mr_cfloat *out, mr_err *err);
int mr_fft_cuda_execute_host(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in,
                             mr_cfloat *out, mr_err *err);
void mr_fft_cuda_destroy(mr_fft_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
