/* Truncated spectral projector and pseudo-inverse of a Gram matrix
 * (spectral.h), in double precision through spectral_impl.h's steps on the
 * call's device. */
#include <math.h>
#include <stdlib.h>

#include "blas_impl.h"
#include "buf.h"
#include "error.h"
#include "spectral_impl.h"

enum {
  SQUARINGS = 6, /* lambda_max from g^64 */
  QUINTIC = 7,   /* steps raising small eigenvalues of the sign iteration */
  NEWTON = 5,    /* Newton-Schulz steps settling them at +-1 */
  WORK = 4       /* n x n work matrices */
};

/* The quintic x (QA + QB x^2 + QC x^4): slope 3.4445 at 0, maps (0, 1.2]
 * into about [0.68, 1.13] (the coefficients of Jordan et al.'s Muon
 * optimiser, 2024), where Newton-Schulz then converges fast. */
static const double QA = 3.4445, QB = -4.7750, QC = 2.0315;

/* lambda_max's estimate is low by at most 0.6%: dividing by this much more
 * keeps every eigenvalue of (g - tau) / c within [-1, 1]. */
static const double HEADROOM = 1.05;

/* The iteration's polynomials on one value. */
static double sign_scalar(double x) {
  for (int i = 0; i < QUINTIC; i++) {
    double y = x * x;
    x = x * (QA + QB * y + QC * y * y);
  }
  for (int i = 0; i < NEWTON; i++)
    x = x * (3 - x * x) / 2;
  return x;
}

double mr_spectral_lmax(const double *w, int n) {
  double top = 0;
  for (int i = 0; i < n; i++)
    top = w[i] > top ? w[i] : top;
  if (!(top > 0))
    return 0;
  double num = 0, den = 0; /* sum of (w / top)^65 and ^64 */
  for (int i = 0; i < n; i++) {
    double r = w[i] / top, p = r;
    for (int k = 0; k < SQUARINGS; k++)
      p *= p;
    den += p;
    num += p * r;
  }
  return top * num / den;
}

void mr_spectral_weights(double lambda, double lmax, double threshold, double *proj,
                         double *pinv) {
  if (!(lmax > 0)) {
    *proj = *pinv = 0;
    return;
  }
  double tau = threshold * lmax, x = sign_scalar((lambda - tau) / (HEADROOM * lmax));
  *proj = (1 + x) / 2;
  *pinv = *proj / (lambda + tau * (1 - x) / 2);
}

static const mr_spectral_ops *ops_for(mr_device *dev) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return &mr_spectral_cuda_ops;
#endif
  (void)dev;
  return &mr_spectral_cpu_ops;
}

typedef struct state {
  const mr_spectral_ops *op;
  mr_device *dev;
  int n, batch;
  mr_cdouble *g, *t[WORK]; /* the Gram matrices, work */
  double *p, *q, *r, *d;   /* host, batch each */
  double *lmax;
} state;

static void fill(double *v, int batch, double x) {
  for (int b = 0; b < batch; b++)
    v[b] = x;
}

/* lambda_max per item: trace(g), then g / trace squared SQUARINGS times,
 * each square scaled to trace 1 (s, the normalised g^(2^k), whose
 * eigenvalues weigh g's by their 2^k-th power), and trace(s g) / trace(g)
 * times trace(g). */
static int largest(state *s, mr_err *err) {
  int n = s->n, batch = s->batch;
  double *tr = malloc((size_t)batch * sizeof *tr);
  int rc = tr == NULL ? mr_err_set(err, MR_ENOMEM, "spectral: out of memory") : 0;
  if (rc == 0)
    rc = s->op->dot(s->dev, n, batch, s->g, NULL, tr, err);
  for (int b = 0; rc == 0 && b < batch; b++)
    s->p[b] = tr[b] > 0 && isfinite(tr[b]) ? 1 / tr[b] : 0;
  fill(s->r, batch, 0);
  if (rc == 0) /* t0 = g / trace(g) */
    rc = s->op->combine(s->dev, n, batch, s->p, s->g, NULL, NULL, s->r, s->t[0], err);
  mr_cdouble *pow = s->t[0];
  for (int i = 0; rc == 0 && i < SQUARINGS; i++) {
    rc = s->op->gemm(s->dev, MR_BLAS_N, MR_BLAS_N, n, n, n, 1, pow, pow, 0, s->t[1], batch, err);
    if (rc == 0)
      rc = s->op->dot(s->dev, n, batch, s->t[1], NULL, s->d, err);
    for (int b = 0; rc == 0 && b < batch; b++)
      s->p[b] = s->d[b] > 0 ? 1 / s->d[b] : 0;
    pow = s->t[2]; /* t0 stays g / trace(g), for the last step */
    if (rc == 0)
      rc = s->op->combine(s->dev, n, batch, s->p, s->t[1], NULL, NULL, s->r, pow, err);
  }
  if (rc == 0)
    rc = s->op->dot(s->dev, n, batch, pow, s->t[0], s->d, err);
  for (int b = 0; rc == 0 && b < batch; b++) {
    double l = s->d[b] * tr[b];
    s->lmax[b] = tr[b] > 0 && isfinite(l) && l > 0 ? l : 0;
  }
  free(tr);
  return rc;
}

/* t[0] <- sign(t[0]) for eigenvalues in [-1, 1]: QUINTIC steps of
 * x (QA + QB x^2 + QC x^4), then NEWTON of x (3 - x^2) / 2; t[1..3]
 * scratch (their order changes). */
static int sign(state *s, mr_err *err) {
  int n = s->n, batch = s->batch, rc = 0;
  fill(s->r, batch, 0);
  for (int i = 0; rc == 0 && i < QUINTIC + NEWTON; i++) {
    int quintic = i < QUINTIC;
    mr_cdouble *x = s->t[0], *y = s->t[1], *z = s->t[2], *nx = s->t[3];
    rc = s->op->gemm(s->dev, MR_BLAS_N, MR_BLAS_N, n, n, n, 1, x, x, 0, y, batch, err); /* x^2 */
    mr_cdouble *poly = y; /* what multiplies x, less the constant */
    if (rc == 0 && quintic) { /* z = QB y + QC y^2 */
      fill(s->p, batch, QB);
      rc = s->op->combine(s->dev, n, batch, s->p, y, NULL, NULL, s->r, z, err);
      if (rc == 0)
        rc = s->op->gemm(s->dev, MR_BLAS_N, MR_BLAS_N, n, n, n, QC, y, y, 1, z, batch, err);
      poly = z;
    }
    /* nx = QA x + x z, or 1.5 x - 0.5 x y */
    fill(s->p, batch, quintic ? QA : 1.5);
    if (rc == 0)
      rc = s->op->combine(s->dev, n, batch, s->p, x, NULL, NULL, s->r, nx, err);
    if (rc == 0)
      rc = s->op->gemm(s->dev, MR_BLAS_N, MR_BLAS_N, n, n, n, quintic ? 1 : -0.5, x, poly, 1, nx,
                       batch, err);
    s->t[0] = nx;
    s->t[3] = x;
  }
  return rc;
}

static int check(mr_cmat a, mr_blas_op side, float threshold, mr_cmat proj, mr_cmat pinv, int batch,
                 mr_err *err) {
  int rc;
  if (batch < 1 || batch > 65535)
    return mr_err_set(err, MR_EINVAL, "spectral: batch %d (1 to 65535)", batch);
  if (side != MR_BLAS_N && side != MR_BLAS_C)
    return mr_err_set(err, MR_EINVAL, "spectral: side %d (MR_BLAS_N or MR_BLAS_C)", (int)side);
  if ((rc = mr_cmat_check(&a, batch, 0, "spectral a", err)) < 0 ||
      (rc = mr_cmat_check(&proj, batch, 1, "spectral proj", err)) < 0)
    return rc;
  if (pinv.data != NULL && (rc = mr_cmat_check(&pinv, batch, 1, "spectral pinv", err)) < 0)
    return rc;
  int n = side == MR_BLAS_C ? a.cols : a.rows;
  if (proj.rows != n || proj.cols != n || (pinv.data != NULL && (pinv.rows != n || pinv.cols != n)))
    return mr_err_set(err, MR_EINVAL, "spectral: a %d x %d, proj %d x %d, pinv %d x %d", a.rows,
                      a.cols, proj.rows, proj.cols, pinv.rows, pinv.cols);
  if (!(threshold > 0 && threshold < 1))
    return mr_err_set(err, MR_EINVAL, "spectral: threshold %g (0 to 1)", (double)threshold);
  return 0;
}

/* The buffers of the call (device), freed by release. */
typedef struct bufs {
  mr_buf *a, *g, *t[WORK];
} bufs;

static void release(bufs *bf, state *s) {
  mr_buf_destroy(bf->a);
  mr_buf_destroy(bf->g);
  for (int i = 0; i < WORK; i++)
    mr_buf_destroy(bf->t[i]);
  free(s->p);
  free(s->q);
  free(s->r);
  free(s->d);
  free(s->lmax);
}

int mr_spectral_truncate(mr_device *dev, mr_cmat a, mr_blas_op side, float threshold, mr_cmat proj,
                         mr_cmat pinv, float *lambda_max, int batch, mr_err *err) {
  return mr_spectral_truncate_by(ops_for(dev), dev, a, side, threshold, proj, pinv, lambda_max,
                                 batch, err);
}

int mr_spectral_truncate_by(const mr_spectral_ops *ops, mr_device *dev, mr_cmat a, mr_blas_op side,
                            float threshold, mr_cmat proj, mr_cmat pinv, float *lambda_max,
                            int batch, mr_err *err) {
  int rc = check(a, side, threshold, proj, pinv, batch, err);
  if (rc < 0)
    return rc;
  int n = side == MR_BLAS_C ? a.cols : a.rows, k = side == MR_BLAS_C ? a.rows : a.cols;
  if (n == 0)
    return 0;
  size_t nn = (size_t)n * (size_t)n * (size_t)batch, an = (size_t)n * (size_t)k * (size_t)batch;
  bufs bf = {0};
  state s = {.op = ops, .dev = dev, .n = n, .batch = batch};
  rc = mr_buf_create(dev, (an > 0 ? an : 1) * sizeof(mr_cdouble), &bf.a, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nn * sizeof(mr_cdouble), &bf.g, err);
  for (int i = 0; rc == 0 && i < WORK; i++) {
    rc = mr_buf_create(dev, nn * sizeof(mr_cdouble), &bf.t[i], err);
    s.t[i] = rc == 0 ? mr_buf_data(bf.t[i]) : NULL;
  }
  s.p = malloc((size_t)batch * sizeof *s.p);
  s.q = malloc((size_t)batch * sizeof *s.q);
  s.r = malloc((size_t)batch * sizeof *s.r);
  s.d = malloc((size_t)batch * sizeof *s.d);
  s.lmax = malloc((size_t)batch * sizeof *s.lmax);
  if (rc == 0 && (s.p == NULL || s.q == NULL || s.r == NULL || s.d == NULL || s.lmax == NULL))
    rc = mr_err_set(err, MR_ENOMEM, "spectral: out of memory");
  mr_cdouble *ad = rc == 0 ? mr_buf_data(bf.a) : NULL;
  s.g = rc == 0 ? mr_buf_data(bf.g) : NULL;
  if (rc == 0)
    rc = s.op->widen(dev, a, batch, ad, err);
  if (rc == 0) /* g = a^H a or a a^H */
    rc = side == MR_BLAS_C
             ? s.op->gemm(dev, MR_BLAS_C, MR_BLAS_N, n, n, k, 1, ad, ad, 0, s.g, batch, err)
             : s.op->gemm(dev, MR_BLAS_N, MR_BLAS_C, n, n, k, 1, ad, ad, 0, s.g, batch, err);
  mr_cdouble *pd = s.t[1];
  if (rc == 0 && s.op->by_eigen != NULL) {
    rc = s.op->by_eigen(dev, n, batch, s.g, threshold, s.lmax, pd,
                        pinv.data != NULL ? s.t[2] : NULL, err);
    if (rc == 0)
      rc = s.op->narrow(dev, pd, n, batch, proj, err);
    if (rc == 0 && pinv.data != NULL)
      rc = s.op->narrow(dev, s.t[2], n, batch, pinv, err);
    for (int b = 0; rc == 0 && lambda_max != NULL && b < batch; b++)
      lambda_max[b] = (float)s.lmax[b];
    release(&bf, &s);
    return rc;
  }
  if (rc == 0)
    rc = largest(&s, err);
  /* t0 = (g - tau I) / c: eigenvalues in [-1, 1], tau at 0; a zero item
   * gets 0 and so zero outputs */
  for (int b = 0; rc == 0 && b < batch; b++) {
    double c = HEADROOM * s.lmax[b];
    s.p[b] = s.lmax[b] > 0 ? 1 / c : 0;
    s.r[b] = s.lmax[b] > 0 ? -threshold * s.lmax[b] / c : 0;
  }
  if (rc == 0)
    rc = s.op->combine(dev, n, batch, s.p, s.g, NULL, NULL, s.r, s.t[0], err);
  if (rc == 0)
    rc = sign(&s, err);
  mr_cdouble *x = s.t[0], *m = s.t[2];
  pd = s.t[1]; /* sign() reordered the work matrices */
  for (int b = 0; rc == 0 && b < batch; b++) { /* (I + x) / 2; a zero item's x is 0 */
    s.p[b] = 0.5;
    s.r[b] = s.lmax[b] > 0 ? 0.5 : 0;
  }
  if (rc == 0)
    rc = s.op->combine(dev, n, batch, s.p, x, NULL, NULL, s.r, pd, err);
  if (rc == 0)
    rc = s.op->narrow(dev, pd, n, batch, proj, err);
  if (rc == 0 && pinv.data != NULL) {
    /* pinv = (g + tau (I - x) / 2)^-1 proj: on the kept eigenvectors g's
     * inverse, on the others 0; the matrix is positive definite (kept
     * eigenvalues are above tau, the others are raised by tau; a zero
     * item's is I) */
    for (int b = 0; b < batch; b++) {
      double tau = threshold * s.lmax[b];
      s.p[b] = 1;
      s.q[b] = -tau / 2;
      s.r[b] = s.lmax[b] > 0 ? tau / 2 : 1;
    }
    rc = s.op->combine(dev, n, batch, s.p, s.g, s.q, x, s.r, m, err);
    if (rc == 0)
      rc = s.op->posv(dev, n, batch, m, pd, err);
    if (rc == 0)
      rc = s.op->narrow(dev, pd, n, batch, pinv, err);
  }
  for (int b = 0; rc == 0 && lambda_max != NULL && b < batch; b++)
    lambda_max[b] = (float)s.lmax[b];
  release(&bf, &s);
  return rc;
}
