#include "host_svd.h"

#include <lapacke.h>
#include <stdlib.h>

#include "budget.h"

/* Bytes of rows x cols elements and one spare column (host_svd.h says
 * why: OpenBLAS may read an element up to one column past the matrix). */
static size_t with_spare_column(size_t rows, size_t cols) {
  return rows * (cols + 1) * sizeof(double complex);
}

static size_t a_bytes(const mr_host_svd *svd) { return with_spare_column(svd->m, svd->n); }
static size_t u_bytes(const mr_host_svd *svd) { return with_spare_column(svd->m, svd->r); }
static size_t vt_bytes(const mr_host_svd *svd) { return with_spare_column(svd->r, svd->n); }

int mr_host_svd_create(int m, int n, mr_host_svd **out, mr_err *err) {
  if (m < 1 || n < 1)
    return mr_err_set(err, MR_EINVAL, "svd: a %d x %d matrix", m, n);
  mr_host_svd *svd = calloc(1, sizeof *svd);
  if (svd == NULL)
    return mr_err_set(err, MR_ENOMEM, "svd: out of memory for a %d x %d matrix", m, n);
  int r = m < n ? m : n;
  *svd = (mr_host_svd){.m = m, .n = n, .r = r};
  /* A plan's matrices come from a client's header (up to 4096 x 4096:
   * 256 MiB each): counted against the server's memory budget. */
  const char *what = "an SVD's matrices";
  if ((svd->a = mr_budget_alloc(a_bytes(svd), what, err)) == NULL ||
      (svd->u = mr_budget_alloc(u_bytes(svd), what, err)) == NULL ||
      (svd->vt = mr_budget_alloc(vt_bytes(svd), what, err)) == NULL ||
      (svd->s = malloc((size_t)r * sizeof(double))) == NULL) {
    mr_host_svd_destroy(svd);
    /* the budget's line where it refused, else this one */
    return mr_err_set(err, mr_err_code(err, MR_ENOMEM), "svd: out of memory for a %d x %d matrix",
                      m, n);
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
  size_t work_bytes = ((size_t)lwork + spare) * sizeof(double complex);
  double complex *work =
      info == 0 ? mr_budget_alloc(work_bytes, "an SVD's workspace", err) : NULL;
  int rc = 0;
  if (info == 0 && work == NULL)
    rc = mr_err_code(err, MR_ENOMEM);
  else if (info == 0)
    info = LAPACKE_zgesvd_work(LAPACK_COL_MAJOR, 'S', 'S', m, n, svd->a, m, svd->s, svd->u, m,
                               svd->vt, r, work, lwork, rwork);
  if (rc == 0 && info != 0)
    rc = mr_err_set(err, info > 0 ? MR_ENUMERIC : MR_EINVAL,
                    "svd: zgesvd of a %d x %d matrix failed (info %d)", m, n, (int)info);
  mr_budget_free(work, work_bytes);
  free(rwork);
  return rc;
}

void mr_host_svd_destroy(mr_host_svd *svd) {
  if (svd == NULL)
    return;
  mr_budget_free(svd->a, a_bytes(svd));
  mr_budget_free(svd->u, u_bytes(svd));
  mr_budget_free(svd->vt, vt_bytes(svd));
  free(svd->s);
  free(svd);
}
