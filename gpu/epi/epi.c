#include <cblas.h>
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "blas.h"
#include "buf.h"
#include "budget.h"
#include "epi_impl.h"
#include "error.h"
#include "host_svd.h"

#define MAX_POINTS 4096

struct mr_epi_plan {
  mr_device *dev;
  int samples, nx;
  int rank[2];          /* singular values kept: forward, reversed */
  mr_cfloat *host_p[2]; /* P forward / reversed, nx x samples, host */
  mr_buf *p[2];         /* the same on dev */
  mr_buf *f;            /* the centred DFT, nx x nx */
  mr_buf *factors;      /* nx correction factors */
  mr_buf *work;         /* profiles of a batch, nx x columns */
  size_t work_cols;
};

/* The regularised pseudo-inverse of A[q][j] = exp(-2 pi i k_q x_j / nx)
 * (samples x nx) into p (nx x samples, column-major, float): V S^-1 U^H
 * over the singular values at least rcond times the largest. */
static int pseudo_inverse(int samples, int nx, const double *k, double rcond, mr_cfloat *p,
                          int *rank, mr_err *err) {
  int m = samples, n = nx;
  mr_host_svd *svd = NULL;
  int rc = mr_host_svd_create(m, n, &svd, err);
  if (rc < 0)
    return rc;
  for (int j = 0; j < n; j++)
    for (int q = 0; q < m; q++)
      svd->a[(size_t)j * (size_t)m + (size_t)q] = cexp(-2 * M_PI * I * k[q] * (j - n / 2) / n);
  if ((rc = mr_host_svd_run(svd, err)) == 0) {
    const double *s = svd->s;
    const double complex *u = svd->u, *vt = svd->vt;
    int r = svd->r, kept = 0;
    while (kept < r && s[kept] >= rcond * s[0])
      kept++;
    /* p[j][q] = sum_l V[j][l] / s_l conj(U[q][l]), V[j][l] = conj(vt[l][j]) */
    for (int q = 0; q < m; q++)
      for (int j = 0; j < n; j++) {
        double complex v = 0;
        for (int l = 0; l < kept; l++)
          v += conj(vt[(size_t)j * (size_t)r + (size_t)l]) / s[l] *
               conj(u[(size_t)l * (size_t)m + (size_t)q]);
        p[(size_t)q * (size_t)n + (size_t)j] = (mr_cfloat)v;
      }
    *rank = kept;
  }
  mr_host_svd_destroy(svd);
  return rc;
}

static int upload(mr_device *dev, const mr_cfloat *src, size_t count, mr_buf **out, mr_err *err) {
  int rc = mr_buf_create(dev, count * sizeof *src, out, err);
  if (rc == 0 && (rc = mr_buf_upload(*out, 0, src, count * sizeof *src, err)) < 0) {
    mr_buf_destroy(*out);
    *out = NULL;
  }
  return rc;
}

int mr_epi_plan_create(mr_device *dev, const mr_epi_readout *r, mr_epi_plan **out, mr_err *err) {
  if (r->samples < 1 || r->samples > MAX_POINTS || r->nx < 1 || r->nx > MAX_POINTS ||
      !(r->rcond > 0 && r->rcond < 1))
    return mr_err_set(err, MR_EINVAL, "epi: %d samples onto %d points, rcond %g", r->samples, r->nx,
                      r->rcond);
  for (int q = 0; q < r->samples; q++)
    if (!isfinite(r->forward[q]) || !isfinite(r->reverse[q]))
      return mr_err_set(err, MR_EDATA, "epi: sample %d has no finite position", q);
  /* The host matrices' sizes come from a client's header (up to 4096 x
   * 4096): counted against the server's memory budget. */
  mr_epi_plan *p = calloc(1, sizeof *p);
  size_t np = (size_t)r->nx * (size_t)r->samples, nf = (size_t)r->nx * (size_t)r->nx;
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "epi: out of memory");
  mr_cfloat *f = mr_budget_alloc(nf * sizeof *f, "an EPI regridding plan", err);
  if (f == NULL) {
    free(p);
    return mr_err_code(err, MR_ENOMEM);
  }
  p->dev = dev;
  p->samples = r->samples;
  p->nx = r->nx;
  int rc = 0;
  for (int d = 0; d < 2 && rc == 0; d++) {
    if ((p->host_p[d] = mr_budget_alloc(np * sizeof(mr_cfloat), "an EPI regridding plan",
                                        err)) == NULL)
      rc = mr_err_code(err, MR_ENOMEM);
    else
      rc = pseudo_inverse(r->samples, r->nx, d ? r->reverse : r->forward, r->rcond, p->host_p[d],
                          &p->rank[d], err);
    if (rc == 0)
      rc = upload(dev, p->host_p[d], np, &p->p[d], err);
  }
  int n = r->nx;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++)
      f[(size_t)j * (size_t)n + (size_t)i] =
          (mr_cfloat)cexp(-2 * M_PI * I * (double)((i - n / 2) * (j - n / 2) % n) / n);
  if (rc == 0)
    rc = upload(dev, f, nf, &p->f, err);
  if (rc == 0)
    rc = mr_buf_create(dev, (size_t)n * sizeof(mr_cfloat), &p->factors, err);
  mr_budget_free(f, nf * sizeof *f);
  if (rc < 0) {
    mr_epi_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

void mr_epi_plan_destroy(mr_epi_plan *p) {
  if (p == NULL)
    return;
  for (int d = 0; d < 2; d++) {
    mr_budget_free(p->host_p[d], (size_t)p->nx * (size_t)p->samples * sizeof(mr_cfloat));
    mr_buf_destroy(p->p[d]);
  }
  mr_buf_destroy(p->f);
  mr_buf_destroy(p->factors);
  mr_buf_destroy(p->work);
  free(p);
}

mr_device *mr_epi_plan_device(const mr_epi_plan *p) { return p->dev; }

int mr_epi_plan_rank(const mr_epi_plan *p, int reversed) { return p->rank[reversed != 0]; }

int mr_epi_profiles_host(const mr_epi_plan *p, int reversed, const mr_cfloat *in, int ncols,
                         mr_cfloat *out) {
  /* One product for all columns: the navigators of a 32-coil train are
   * 2 x 32 readouts, and the loops of complex products this replaced cost
   * more than the rest of the EPI step. */
  const mr_cfloat one = 1, zero = 0;
  cblas_cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, p->nx, ncols, p->samples, &one,
              p->host_p[reversed != 0], p->nx, in, p->samples, &zero, out, p->nx);
  return 0;
}

static int scale_rows(mr_device *dev, int rows, int cols, int ld, const mr_cfloat *factors,
                      mr_cfloat *x, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_epi_cuda_scale_rows(dev, rows, cols, ld, factors, x, err);
#endif
  return mr_epi_cpu_scale_rows(dev, rows, cols, ld, factors, x);
}

int mr_epi_regrid(mr_epi_plan *p, const mr_cfloat *in, int nfwd, int nrev,
                  const mr_cfloat *correction, mr_cfloat *out, mr_err *err) {
  if (nfwd < 0 || nrev < 0 || nfwd + nrev < 1 || nfwd > INT32_MAX / 2 - nrev)
    return mr_err_set(err, MR_EINVAL, "epi: regrid %d forward and %d reversed readouts", nfwd,
                      nrev);
  size_t cols = (size_t)nfwd + (size_t)nrev, nx = (size_t)p->nx, ns = (size_t)p->samples;
  int rc = 0;
  if (cols > p->work_cols) {
    mr_buf_destroy(p->work);
    p->work = NULL;
    p->work_cols = 0;
    if ((rc = mr_buf_create(p->dev, nx * cols * sizeof(mr_cfloat), &p->work, err)) < 0)
      return rc;
    p->work_cols = cols;
  }
  mr_cfloat *y = mr_buf_data(p->work);
  const mr_cfloat one = 1, zero = 0;
  int counts[2] = {nfwd, nrev};
  size_t first[2] = {0, (size_t)nfwd};
  for (int d = 0; d < 2 && rc == 0; d++) {
    if (counts[d] == 0)
      continue;
    mr_cmat op = mr_cmat_dense(mr_buf_data(p->p[d]), p->nx, p->samples);
    mr_cmat x = mr_cmat_dense((mr_cfloat *)in + first[d] * ns, p->samples, counts[d]);
    mr_cmat prof = mr_cmat_dense(y + first[d] * nx, p->nx, counts[d]);
    rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, one, op, x, zero, prof, 1, err);
  }
  if (rc == 0 && correction != NULL && nrev > 0) {
    mr_cfloat *factors = mr_buf_data(p->factors);
    rc = mr_buf_upload(p->factors, 0, correction, nx * sizeof *correction, err);
    if (rc == 0)
      rc = scale_rows(p->dev, p->nx, nrev, p->nx, factors, y + (size_t)nfwd * nx, err);
  }
  if (rc == 0) {
    mr_cmat f = mr_cmat_dense(mr_buf_data(p->f), p->nx, p->nx);
    mr_cmat prof = mr_cmat_dense(y, p->nx, (int)cols);
    mr_cmat k = mr_cmat_dense(out, p->nx, (int)cols);
    rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, one, f, prof, zero, k, 1, err);
  }
  return rc;
}
