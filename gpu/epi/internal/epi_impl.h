/* Internal: the two backends of epi.h. */
#ifndef MR_GPU_EPI_IMPL_H
#define MR_GPU_EPI_IMPL_H

#include <stddef.h>

#include "epi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x[i][j] *= factors[i] for the rows i < rows of the column-major matrix x
 * (cols columns, ld apart): the correction of the reversed profiles. */
int mr_epi_cpu_scale_rows(mr_device *dev, int rows, int cols, int ld, const mr_cfloat *factors,
                          mr_cfloat *x);
int mr_epi_cuda_scale_rows(mr_device *dev, int rows, int cols, int ld, const mr_cfloat *factors,
                           mr_cfloat *x, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
