/* The core of gpu/ in one include (devices, buffers, FFT, BLAS, solvers,
 * vectors, coils): what the tests and benchmarks share. Gadgets include the
 * room headers they use. */
#ifndef MR_GPU_GPU_H
#define MR_GPU_GPU_H

#include "blas.h"
#include "block.h"
#include "buf.h"
#include "cfloat.h"
#include "cmat.h"
#include "coil.h"
#include "device.h"
#include "epi.h"
#include "fft.h"
#include "host.h"
#include "pool.h"
#include "solve.h"
#include "vec.h"

#endif
