/* The coil-map normal operator of toeplitz.h split across devices by
 * coils, for one large (3D) scan on several GPUs:
 *   A x = sum_d [ sum_{c in coils of d} S_c^H F^H W F S_c x ] + lambda R x.
 * Device d holds an mr_toeplitz for its share of the coils (the first
 * device also the lambda R term); an apply copies x to every device
 * device to device (mr_device_copy_to: over NVLink where the GPUs have it;
 * through host memory it cost a fifth of an apply on two H200s), each
 * applies its part at the same time as the others, and the partial sums
 * come back the same way and are added on the first device, where x and y
 * live: a drop-in operator for mr_cg_solve on it
 * (mr_toeplitz_split_apply_op). The same result as one device's operator,
 * up to the order of the float sums.
 *
 * The devices may be real GPUs, fake ones (pool.h) or logical devices of
 * one GPU (share_gpus); each device other than the first gets a helper
 * thread that drives it, on the GPU's helpers' lane (device_impl.h): a
 * solve on the first device waits for its helpers inside its task, and a
 * helper queued behind another scan's waiting task, split the other way
 * round, would wait for ever. */
#ifndef MR_GPU_TOEPLITZ_SPLIT_H
#define MR_GPU_TOEPLITZ_SPLIT_H

#include <stddef.h>

#include "cfloat.h"
#include "device.h"
#include "toeplitz.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_toeplitz_split mr_toeplitz_split;

/* Builds the operator on devs[0..ndev) (borrowed; at most 16, and no more
 * are used than there are coils) for opts (opts->coils >= 1) from q (host
 * memory, as mr_toeplitz_create takes it; borrowed). The caller takes *out. */
int mr_toeplitz_split_create(mr_device *const *devs, size_t ndev, const mr_toeplitz_opts *opts,
                             const mr_cfloat *q, mr_toeplitz_split **out, mr_err *err);

/* Sets the maps[coils][voxels] (host memory, copied): each device its
 * coils', and the first device all of them (for the combination). Needed
 * before the first apply. */
int mr_toeplitz_split_set_maps(mr_toeplitz_split *s, const mr_cfloat *maps, mr_err *err);

/* out = sum_c S_c^H x_c for coil images x [coils][voxels] on the first
 * device (the right-hand side of SENSE, as mr_toeplitz_combine makes it),
 * out there too, not overlapping x; borrows both. */
int mr_toeplitz_split_combine(mr_toeplitz_split *s, const mr_cfloat *x, mr_cfloat *out,
                              mr_err *err);

/* y = A x for one image, x and y on the first device, not overlapping;
 * borrows both. May be called inside a task on the first device. */
int mr_toeplitz_split_apply(mr_toeplitz_split *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err);

/* The adapter mr_cg_solve_batch takes (count must be 1). */
int mr_toeplitz_split_apply_op(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                               mr_err *err);

/* Devices the operator runs on (<= the ndev it was made with). */
size_t mr_toeplitz_split_devices(const mr_toeplitz_split *s);

void mr_toeplitz_split_destroy(mr_toeplitz_split *s);

#ifdef __cplusplus
}
#endif

#endif
