#include "host_svd.h"

#include <lapacke.h>
#include <stdlib.h>

/* Room for rows x cols elements and one spare column (host_svd.h says
 * why: OpenBLAS may read an element up to one column past the matrix). */
static double complex *with_spare_column(size_t rows, size_t cols) {
  return malloc(rows * (cols + 1) * sizeof(double complex));
}

int mr_host_svd_create(int m, int n, mr_host_svd **out, mr_err *err) {
  if (m < 1 || n < 1)
    return mr_err_set(err, MR_EINVAL, "svd: a %d x %d matrix", m, n);
  mr_host_svd *svd = calloc(1, sizeof *svd);
  if (svd == NULL)
    return mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
  int r = m < n ? m : n;
  size_t sm = (size_t)m, sn = (size_t)n, sr = (size_t)r;
  *svd = (mr_host_svd){.m = m, .n = n, .r = r,
                       .a = with_spare_column(sm, sn),
                       .s = malloc(sr * sizeof(double)),
                       .u = with_spare_column(sm, sr),
                       .vt = with_spare_column(sr, sn)};
  if (svd->a == NULL || svd->s == NULL || svd->u == NULL || svd->vt == NULL) {
    mr_host_svd_destroy(svd);
    return mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
  }
  *out = svd;
  return 0;
}

int mr_host_svd_run(mr_host_svd *svd, mr_err *err) {
  int m = svd->m, n = svd->n, r = svd->r;
  double complex query;
  double *rwork = malloc(5 * (size_t)r * sizeof *rwork);
  if (rwork == NULL)
    return mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
  lapack_int info = LAPACKE_zgesvd_work(LAPACK_COL_MAJOR, 'S', 'S', m, n, svd->a, m, svd->s,
                                        svd->u, m, svd->vt, r, &query, -1, rwork);
  lapack_int lwork = (lapack_int)creal(query);
  /* zgesvd keeps matrices in its workspace too, with leading dimensions up
   * to max(m, n): the spare column there as well. */
  size_t spare = (size_t)(m > n ? m : n);
  double complex *work = info == 0 ? malloc(((size_t)lwork + spare) * sizeof *work) : NULL;
  int rc = 0;
  if (info == 0 && work == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
  else if (info == 0)
    info = LAPACKE_zgesvd_work(LAPACK_COL_MAJOR, 'S', 'S', m, n, svd->a, m, svd->s, svd->u, m,
                               svd->vt, r, work, lwork, rwork);
  if (rc == 0 && info != 0)
    rc = mr_err_set(err, info > 0 ? MR_ENUMERIC : MR_EINVAL,
                    "svd: zgesvd of a %d x %d matrix failed (info %d)", m, n, (int)info);
  free(work);
  free(rwork);
  return rc;
}

void mr_host_svd_destroy(mr_host_svd *svd) {
  if (svd == NULL)
    return;
  free(svd->a);
  free(svd->s);
  free(svd->u);
  free(svd->vt);
  free(svd);
}
