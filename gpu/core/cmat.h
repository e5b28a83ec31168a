/* A column-major complex matrix, or a batch of equally shaped ones, as the
 * linear-algebra calls (blas.h, solve.h) take them. A view: it borrows the
 * memory, which lives on the device of the call it is passed to. */
#ifndef MR_GPU_CMAT_H
#define MR_GPU_CMAT_H

#include <stddef.h>

#include "cfloat.h"

typedef struct mr_cmat {
  mr_cfloat *data;  /* element (i, j) of item b: data[b * stride + j * ld + i] */
  int rows, cols;
  int ld;           /* leading dimension, >= rows */
  size_t stride;    /* elements from one batch item to the next; 0 reuses
                       the same matrix for every item (inputs only) */
} mr_cmat;

/* A dense matrix (ld = rows), items back to back. */
static inline mr_cmat mr_cmat_dense(mr_cfloat *data, int rows, int cols) {
  mr_cmat m = {data, rows, cols, rows, (size_t)rows * (size_t)cols};
  return m;
}

#endif
