/* The complex sample type of every gpu/ call.
 *
 * In C it is float _Complex; in C++ (the .cu files, or a C++ caller) a struct
 * of the same size, alignment and layout (real part first), so one header
 * serves both and arrays pass between them unchanged. <complex.h> is not
 * included here: its `I` and `complex` macros would leak into every user. */
#ifndef MR_GPU_CFLOAT_H
#define MR_GPU_CFLOAT_H

#ifdef __cplusplus
typedef struct mr_cfloat {
  float re, im;
} mr_cfloat;
#else
typedef float _Complex mr_cfloat;
#endif

#endif
