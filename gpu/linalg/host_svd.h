/* The thin SVD of a small matrix in host memory, in double precision, for
 * what a plan computes once on the host: gpu/epi's regridding operators,
 * gpu/coil's alignment of compression matrices.
 *
 * Through LAPACK's zgesvd, on copies of the operands that each have one
 * spare column: OpenBLAS 0.3.21 (Debian 12's) reads one element of x past
 * its last in ZGEMV/CGEMV 'N' when m is 2 more than a multiple of 4
 * (GCC's tree vectorizer in its Haswell kernels: OpenBLAS issue #4013,
 * fixed in 0.3.23). zgesvd's reductions (zgebd2, zungl2, through zlarf
 * from the right) pass the rows of its matrices as x, so that read lands
 * up to one column past a matrix; past an allocation's end it killed the
 * CPU server once (gpu/README.md, "OpenBLAS reads past its operands"). */
#ifndef MR_GPU_HOST_SVD_H
#define MR_GPU_HOST_SVD_H

#include <complex.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a (m x n, column-major, leading dimension m) = U diag(s) V^H with
 * r = min(m, n): s (r, descending), u (m x r, leading dimension m), vt
 * (V^H, r x n, leading dimension r). a is left as it is. MR_EINVAL for
 * sizes under 1, MR_ENOMEM, MR_ENUMERIC where the iteration does not
 * converge. Borrows every pointer. */
int mr_host_svd(int m, int n, const double complex *a, double *s, double complex *u,
                double complex *vt, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
