// Identity cuFFT callbacks for mr-bench's raw reference (raw_cuda.c): what
// a load or store callback costs cuFFT by itself, the least a centering
// folded into cuFFT's loads and stores would cost. Not an object of
// mr-bench: CMakeLists.txt compiles it to LTO-IR and embeds that, and cuFFT
// links it into its kernels at plan time (cufftXtSetJITCallback).
#include <cufftXt.h>

__device__ cufftComplex raw_load(void *in, unsigned long long offset, void *, void *) {
  return static_cast<const cufftComplex *>(in)[offset];
}

__device__ void raw_store(void *out, unsigned long long offset, cufftComplex v, void *,
                          void *) {
  static_cast<cufftComplex *>(out)[offset] = v;
}
