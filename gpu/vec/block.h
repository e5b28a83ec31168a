/* Copies of sub-blocks between batches of 3-D complex arrays (x fastest,
 * then y, then z; `batch` arrays back to back), as gadgets crop readout
 * oversampling, zero-pad k-space or cut calibration regions. Dimensions are
 * {nx, ny, nz}; use 1 for the ones an array lacks. Pointers live on dev;
 * src and dst must not overlap. */
#ifndef MR_GPU_BLOCK_H
#define MR_GPU_BLOCK_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For each of the batch arrays, copies the extent-sized block at src_at of
 * src (of src_dims) to dst_at of dst (of dst_dims); the rest of dst is left
 * as it is. MR_EINVAL when a block does not fit. Borrows src and dst. */
int mr_block_copy(mr_device *dev, size_t batch, const mr_cfloat *src, const size_t src_dims[3],
                  const size_t src_at[3], mr_cfloat *dst, const size_t dst_dims[3],
                  const size_t dst_at[3], const size_t extent[3], mr_err *err);

/* The centre of src, dst_dims large (each <= src_dims), into dst. Centres
 * align at index n/2, the origin of the centered FFT. */
int mr_block_crop_center(mr_device *dev, size_t batch, const mr_cfloat *src,
                         const size_t src_dims[3], mr_cfloat *dst, const size_t dst_dims[3],
                         mr_err *err);

/* src in the centre of dst (each dst_dims >= src_dims), zeros around. */
int mr_block_pad_center(mr_device *dev, size_t batch, const mr_cfloat *src,
                        const size_t src_dims[3], mr_cfloat *dst, const size_t dst_dims[3],
                        mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
