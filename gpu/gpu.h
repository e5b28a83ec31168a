/* Everything a gadget needs from gpu/, in one include. */
#ifndef MR_GPU_GPU_H
#define MR_GPU_GPU_H

#include "buf.h"
#include "cfloat.h"
#include "coil.h"
#include "device.h"
#include "fft.h"
#include "pool.h"

#endif
