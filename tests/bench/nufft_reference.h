/* The reference GPU NUFFT library (cuFINUFFT), loaded at run time with
 * dlopen for `mr-bench nufft` to time beside ours in the same run, on the
 * same points and data. Nothing of it is linked or shipped: without it the
 * figures are NaN. Built only with CUDA. */
#ifndef MR_BENCH_NUFFT_REFERENCE_H
#define MR_BENCH_NUFFT_REFERENCE_H

#include <stddef.h>

#include "cfloat.h"

/* What one case measured, the best of the library's methods (the one whose
 * execute is fastest; set_points_ms is that method's). */
typedef struct nufft_reference_result {
  int method;            /* gpu_method of the best, -1 when none ran */
  double execute_ms;     /* median, CUDA events */
  double set_points_ms;  /* median, wall clock to the end of its device work */
  double set_points_best_ms; /* fastest set_points over the methods */
  double upsampling;     /* the library's option after its defaults */
  double execute_ms_by_method[3]; /* methods 1, 2, 3; NaN where one did not run */
} nufft_reference_result;

/* 1 when the library loads: MR_BENCH_CUFINUFFT names it, else
 * libcufinufft.so on the library path. */
int nufft_reference_available(void);

/* Times type `type` (1 or 2) on dims (rank of them, x first), batch
 * vectors, positions k[n][rank] in cycles per pixel (host), input `in`
 * (host: samples [batch][n] for type 1, images for type 2), tolerance tol;
 * writes its output to out (host, NULL to skip). Returns 0, or -1 when no
 * method ran (said on stderr). */
int nufft_reference_run(int ordinal, int type, int rank, const size_t *dims, size_t batch,
                        size_t n, const float *k, const mr_cfloat *in, mr_cfloat *out, double tol,
                        int reps, nufft_reference_result *r);

#endif
