/* The thin SVD of a small matrix in host memory, in double precision, for
 * what a plan computes once on the host: gpu/epi's regridding operators,
 * gpu/coil's alignment of compression matrices.
 *
 * Through LAPACK's zgesvd, on buffers this module allocates, each with one
 * spare column, its workspace too: OpenBLAS 0.3.21 (Debian 12's) reads one
 * element of x past its last in ZGEMV/CGEMV 'N' when m is 2 more than a
 * multiple of 4 (GCC's tree vectorizer in its Haswell kernels: OpenBLAS
 * issue #4013, fixed in 0.3.23). zgesvd's reductions (zgebd2, zungl2,
 * through zlarf from the right) pass the rows of its matrices as x, so
 * that read lands up to one column past a matrix; past an allocation's end
 * it killed the CPU server once (gpu/README.md, "OpenBLAS reads past its
 * operands"). The caller fills a and reads s, u and vt in place: no copies
 * of matrices that may be large. */
#ifndef MR_GPU_HOST_SVD_H
#define MR_GPU_HOST_SVD_H

#include <complex.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a (m x n, column-major, leading dimension m) = U diag(s) V^H, r =
 * min(m, n): s (r, descending), u (m x r, leading dimension m), vt (V^H,
 * r x n, leading dimension r). */
typedef struct mr_host_svd {
  int m, n, r;
  double complex *a; /* the caller's matrix; overwritten by mr_host_svd_run */
  double *s;
  double complex *u, *vt;
} mr_host_svd;

/* The buffers for an m x n matrix. MR_EINVAL for sizes under 1, MR_ENOMEM.
 * The caller takes *out. */
int mr_host_svd_create(int m, int n, mr_host_svd **out, mr_err *err);
/* Factors a into s, u and vt. MR_ENOMEM (the workspace), MR_ENUMERIC where
 * the iteration does not converge. */
int mr_host_svd_run(mr_host_svd *svd, mr_err *err);
void mr_host_svd_destroy(mr_host_svd *svd);

#ifdef __cplusplus
}
#endif

#endif
