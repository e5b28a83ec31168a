/* Everything a gadget needs from gpu/, in one include. */
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
