/* The complex sample type of every gpu/ call, and its double-precision
 * twin for the steps that widen (normal equations, spectral filters).
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

#ifdef __cplusplus
typedef struct mr_cdouble {
  double re, im;
} mr_cdouble;
#else
typedef double _Complex mr_cdouble;
#endif

#endif
