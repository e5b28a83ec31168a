#include "host_svd.h"

#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

/* Room for rows x cols elements and one spare column (host_svd.h says
 * why: OpenBLAS may read an element up to one column past the matrix). */
static double complex *with_spare_column(size_t rows, size_t cols) {
  return malloc(rows * (cols + 1) * sizeof(double complex));
}

int mr_host_svd(int m, int n, const double complex *a, double *s, double complex *u,
                double complex *vt, mr_err *err) {
  if (m < 1 || n < 1)
    return mr_err_set(err, MR_EINVAL, "svd: a %d x %d matrix", m, n);
  int r = m < n ? m : n;
  size_t sm = (size_t)m, sn = (size_t)n, sr = (size_t)r;
  double complex *ac = with_spare_column(sm, sn), *uc = with_spare_column(sm, sr);
  double complex *vc = with_spare_column(sr, sn), *work = NULL;
  double *rwork = malloc(5 * sr * sizeof *rwork);
  int rc = 0;
  if (ac == NULL || uc == NULL || vc == NULL || rwork == NULL) {
    rc = mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
    goto done;
  }
  memcpy(ac, a, sm * sn * sizeof *ac);
  double complex query;
  lapack_int info = LAPACKE_zgesvd_work(LAPACK_COL_MAJOR, 'S', 'S', m, n, ac, m, s, uc, m, vc,
                                        r, &query, -1, rwork);
  lapack_int lwork = (lapack_int)creal(query);
  /* zgesvd keeps matrices in its workspace too, with leading dimensions up
   * to max(m, n): the spare column there as well. */
  size_t spare = sm > sn ? sm : sn;
  if (info == 0 && (work = malloc(((size_t)lwork + spare) * sizeof *work)) == NULL) {
    rc = mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
    goto done;
  }
  if (info == 0)
    info = LAPACKE_zgesvd_work(LAPACK_COL_MAJOR, 'S', 'S', m, n, ac, m, s, uc, m, vc, r, work,
                               lwork, rwork);
  if (info != 0) {
    rc = mr_err_set(err, info > 0 ? MR_ENUMERIC : MR_EINVAL,
                    "svd: zgesvd of a %d x %d matrix failed (info %d)", m, n, (int)info);
    goto done;
  }
  memcpy(u, uc, sm * sr * sizeof *u);
  memcpy(vt, vc, sr * sn * sizeof *vt);
done:
  free(ac);
  free(uc);
  free(vc);
  free(work);
  free(rwork);
  return rc;
}
