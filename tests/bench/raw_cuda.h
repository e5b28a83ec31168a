/* The raw CUDA library calls under mr_gpu's wrappers, timed the same way
 * (CUDA events after warm-up, median), so mr-bench can show what the
 * wrappers add. Each returns milliseconds, or a negative number when a call
 * failed (said on stderr). Built only with CUDA. */
#ifndef MR_BENCH_RAW_CUDA_H
#define MR_BENCH_RAW_CUDA_H

#include <stddef.h>

/* cufftExecC2C, in place, over batch arrays of n[0..rank) (slowest first). */
double raw_cufft_ms(int ordinal, int rank, const int *n, int batch, int reps);

/* cufftExecC2C forward then inverse, in place, `repeat` times back to back
 * in each timing: the time of one round trip with the GPU kept busy (no
 * launch gap between them). The unscaled data grow without bound (to inf
 * in time): on the GPU a transform's time does not depend on its values. */
double raw_cufft_round_trip_ms(int ordinal, int rank, const int *n, int batch, int repeat,
                               int reps);

/* The same with identity LTO callbacks that cuFFT links into its kernels
 * at plan time (raw_cufft_callback.cu): `which` 1 load, 2 store, 3 both. */
double raw_cufft_callback_ms(int ordinal, int rank, const int *n, int batch, int which,
                             int reps);

/* cublasCherk: C (n x n, lower) = A^H A with A k x n. */
double raw_cherk_ms(int ordinal, int n, int k, int reps);

/* cublasCgemm: C (n x n) = A^H B with A and B k x n. */
double raw_cgemm_ms(int ordinal, int n, int k, int reps);

/* Two device copies restoring A (n x n) and B (n x nrhs), then
 * cusolverDnCpotrf and cusolverDnCpotrs. */
double raw_solve_ms(int ordinal, int n, int nrhs, int reps);

/* cudaMemcpy of `bytes` between the device and host memory that is pinned
 * (cudaMallocHost) or pageable (malloc); wall clock, as a host sees it. */
double raw_copy_ms(int ordinal, size_t bytes, int pinned, int to_device, int reps);

#endif
