/* Coil compression (compress.h): the matrices on the host, applied on the
 * call's device. */
#include <complex.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "buf.h"
#include "compress_impl.h"
#include "error.h"
#include "fft.h"
#include "host_svd.h"

size_t mr_compress_matrix_size(mr_compress_method method, size_t ncoils, size_t nro) {
  return (method == MR_COMPRESS_GCC ? nro : 1) * ncoils * ncoils;
}

/* Eigenvectors (columns of vec, in place of the covariance) and their
 * eigenvalues w, descending. */
static int eig_descending(double complex *vec, double *w, size_t nc, mr_err *err) {
  lapack_int info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)nc,
                                   (lapack_complex_double *)vec, (lapack_int)nc, w);
  if (info != 0)
    return mr_err_set(err, MR_ENUMERIC, "coil compression: eigen-decomposition (info %d)",
                      (int)info);
  for (size_t a = 0, b = nc - 1; a < b; a++, b--) {
    double t = w[a];
    w[a] = w[b];
    w[b] = t;
    for (size_t i = 0; i < nc; i++) {
      double complex x = vec[a * nc + i];
      vec[a * nc + i] = vec[b * nc + i];
      vec[b * nc + i] = x;
    }
  }
  return 0;
}

/* Turns each of the first nv columns so that its largest component is real
 * and positive: the same data give the same matrix. */
static void fix_phase(double complex *vec, size_t nc, size_t nv) {
  for (size_t v = 0; v < nv; v++) {
    double complex *u = vec + v * nc;
    size_t big = 0;
    for (size_t i = 1; i < nc; i++)
      if (cabs(u[i]) > cabs(u[big]))
        big = i;
    double a = cabs(u[big]);
    double complex turn = a > 0 ? conj(u[big]) / a : 1;
    for (size_t i = 0; i < nc; i++)
      u[i] *= turn;
  }
}

/* The fewest leading eigenvalues (of the sums over items, descending) that
 * keep `energy`, or `channels` of them. */
static size_t choose(const double *w, size_t nc, size_t channels, double energy, double *kept) {
  double total = 0, sum = 0;
  for (size_t i = 0; i < nc; i++)
    total += fmax(w[i], 0);
  size_t nv = 0;
  while (nv < nc && (channels > 0 ? nv < channels : sum < energy * total * (1 - 1e-12)))
    sum += fmax(w[nv++], 0);
  if (kept != NULL)
    *kept = total > 0 ? sum / total : 0;
  return nv;
}

/* m's item: (c, v) = conj(u_v[c]) for the first nv columns of vec. */
static void store(const double complex *vec, size_t nc, size_t nv, mr_cfloat *m) {
  for (size_t v = 0; v < nv; v++)
    for (size_t c = 0; c < nc; c++)
      m[v * nc + c] = (mr_cfloat)conj(vec[v * nc + c]);
}

/* Accumulates the covariance sum y y^H of n samples per coil (coil c's
 * samples at x[c * stride + i * step]) into cov (lower triangle). */
static void accumulate(const mr_cfloat *x, size_t nc, size_t stride, size_t n, size_t step,
                       double complex *cov) {
  for (size_t j = 0; j < nc; j++)
    for (size_t i = j; i < nc; i++) {
      double complex sum = 0;
      for (size_t t = 0; t < n; t++)
        sum += (double complex)x[i * stride + t * step] * conj(x[j * stride + t * step]);
      cov[j * nc + i] += sum;
    }
}

static int svd_matrix(const mr_cfloat *calib, size_t nc, size_t n, size_t channels, double energy,
                      mr_cfloat *m, size_t *nvirtual, double *kept, mr_err *err) {
  double complex *cov = calloc(nc * nc, sizeof *cov);
  double *w = malloc(nc * sizeof *w);
  int rc =
      cov == NULL || w == NULL ? mr_err_set(err, MR_ENOMEM, "coil compression: out of memory") : 0;
  if (rc == 0) {
    accumulate(calib, nc, n, n, 1, cov);
    rc = eig_descending(cov, w, nc, err);
  }
  if (rc == 0 && !(w[0] > 0))
    rc = mr_err_set(err, MR_EDATA, "coil compression: no signal in the calibration data");
  if (rc == 0) {
    *nvirtual = choose(w, nc, channels, energy, kept);
    fix_phase(cov, nc, *nvirtual);
    store(cov, nc, *nvirtual, m);
  }
  free(cov);
  free(w);
  return rc;
}

/* Turns u (nc x nv) by the unitary Q closest to taking it onto prev:
 * Q = W Z^H from the SVD u^H prev = W S Z^H. */
static int align(double complex *u, const double complex *prev, size_t nc, size_t nv, mr_err *err) {
  double complex *turned = calloc(nc * nv, sizeof *turned);
  mr_host_svd *svd = NULL;
  int rc = turned == NULL ? mr_err_set(err, MR_ENOMEM, "coil compression: out of memory")
                          : mr_host_svd_create((int)nv, (int)nv, &svd, err);
  for (size_t j = 0; rc == 0 && j < nv; j++)
    for (size_t i = 0; i < nv; i++) {
      double complex sum = 0;
      for (size_t c = 0; c < nc; c++)
        sum += conj(u[i * nc + c]) * prev[j * nc + c];
      svd->a[j * nv + i] = sum;
    }
  if (rc == 0)
    rc = mr_host_svd_run(svd, err);
  for (size_t j = 0; rc == 0 && j < nv; j++) /* u (W Z^H) */
    for (size_t l = 0; l < nv; l++) {
      double complex q = 0;
      for (size_t k = 0; k < nv; k++)
        q += svd->u[k * nv + l] * svd->vt[j * nv + k];
      for (size_t c = 0; c < nc; c++)
        turned[j * nc + c] += u[l * nc + c] * q;
    }
  if (rc == 0)
    memcpy(u, turned, nc * nv * sizeof *u);
  mr_host_svd_destroy(svd);
  free(turned);
  return rc;
}

static int gcc_matrix(mr_device *dev, const mr_cfloat *calib, size_t nc, size_t nl, size_t nro,
                      size_t channels, double energy, mr_cfloat *m, size_t *nvirtual, double *kept,
                      mr_err *err) {
  size_t per = nc * nc;
  mr_cfloat *h = malloc(nc * nl * nro * sizeof *h);
  double complex *cov = calloc(nro * per, sizeof *cov), *vec = malloc(nro * per * sizeof *vec);
  double *w = malloc(nro * nc * sizeof *w), *sum = calloc(nc, sizeof *sum);
  int rc = h == NULL || cov == NULL || vec == NULL || w == NULL || sum == NULL
               ? mr_err_set(err, MR_ENOMEM, "coil compression: out of memory")
               : 0;
  mr_fft_opts fo = {.rank = 1, .dims = {nro, 1, 1}, .batch = nc * nl};
  mr_fft_plan *plan = NULL;
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fo, &plan, err);
  if (rc == 0)
    rc = mr_fft_execute_host(plan, MR_FFT_BACKWARD, calib, h, err);
  mr_fft_plan_destroy(plan);
  for (size_t x = 0; rc == 0 && x < nro; x++)
    accumulate(h + x, nc, nl * nro, nl, nro, cov + x * per);
  /* each position's covariance averaged over its window */
  for (size_t x = 0; rc == 0 && x < nro; x++) {
    size_t lo = x >= MR_COMPRESS_GCC_WINDOW / 2 ? x - MR_COMPRESS_GCC_WINDOW / 2 : 0;
    size_t hi = x + MR_COMPRESS_GCC_WINDOW / 2 < nro ? x + MR_COMPRESS_GCC_WINDOW / 2 : nro - 1;
    memset(vec + x * per, 0, per * sizeof *vec);
    for (size_t y = lo; y <= hi; y++)
      for (size_t i = 0; i < per; i++)
        vec[x * per + i] += cov[y * per + i];
    rc = eig_descending(vec + x * per, w + x * nc, nc, err);
    for (size_t i = 0; rc == 0 && i < nc; i++)
      sum[i] += w[x * nc + i];
  }
  if (rc == 0 && !(sum[0] > 0))
    rc = mr_err_set(err, MR_EDATA, "coil compression: no signal in the calibration data");
  size_t nv = rc == 0 ? choose(sum, nc, channels, energy, kept) : 0, a = nro / 2;
  if (rc == 0)
    fix_phase(vec + a * per, nc, nv);
  for (size_t x = a + 1; rc == 0 && x < nro; x++)
    rc = align(vec + x * per, vec + (x - 1) * per, nc, nv, err);
  for (size_t x = a; rc == 0 && x-- > 0;)
    rc = align(vec + x * per, vec + (x + 1) * per, nc, nv, err);
  for (size_t x = 0; rc == 0 && x < nro; x++)
    store(vec + x * per, nc, nv, m + x * per);
  *nvirtual = nv;
  free(h);
  free(cov);
  free(vec);
  free(w);
  free(sum);
  return rc;
}

int mr_compress_matrix(mr_device *dev, mr_compress_method method, const mr_cfloat *calib,
                       size_t ncoils, size_t nlines, size_t nro, size_t channels, double energy,
                       mr_cfloat *m, size_t *nvirtual, double *kept, mr_err *err) {
  if (ncoils < 1 || ncoils > 1024 || nlines < 1 || nro < 1 || nlines > SIZE_MAX / nro / ncoils)
    return mr_err_set(err, MR_EINVAL, "coil compression: %zu coils, %zu lines of %zu samples",
                      ncoils, nlines, nro);
  if (channels > ncoils || (channels == 0 && !(energy > 0 && energy <= 1)))
    return mr_err_set(err, MR_EINVAL, "coil compression: %zu of %zu channels, energy %g", channels,
                      ncoils, energy);
  if (method == MR_COMPRESS_GCC)
    return gcc_matrix(dev, calib, ncoils, nlines, nro, channels, energy, m, nvirtual, kept, err);
  return svd_matrix(calib, ncoils, nlines * nro, channels, energy, m, nvirtual, kept, err);
}

int mr_compress_apply(mr_device *dev, mr_compress_method method, const mr_cfloat *m, size_t ncoils,
                      size_t nvirtual, size_t nlines, size_t nro, const mr_cfloat *in,
                      mr_cfloat *out, mr_err *err) {
  size_t n = nlines * nro;
  if (ncoils < 1 || nvirtual < 1 || nvirtual > ncoils || ncoils > INT_MAX || nlines < 1 ||
      nro < 1 || n / nro != nlines || n > INT_MAX)
    return mr_err_set(err, MR_EINVAL,
                      "coil compression: %zu to %zu coils, %zu lines of %zu samples", ncoils,
                      nvirtual, nlines, nro);
  if (method == MR_COMPRESS_SVD) {
    mr_cmat a = {(mr_cfloat *)in, (int)n, (int)ncoils, (int)n, 0};
    mr_cmat b = {(mr_cfloat *)m, (int)ncoils, (int)nvirtual, (int)ncoils, 0};
    mr_cmat c = {out, (int)n, (int)nvirtual, (int)n, 0};
    return mr_blas_gemm(dev, MR_BLAS_N, MR_BLAS_N, 1.0f, a, b, 0.0f, c, 1, err);
  }
  mr_buf *scratch = NULL;
  mr_fft_plan *to_image = NULL, *to_kspace = NULL;
  mr_fft_opts fi = {.rank = 1, .dims = {nro, 1, 1}, .batch = ncoils * nlines};
  mr_fft_opts fk = {.rank = 1, .dims = {nro, 1, 1}, .batch = nvirtual * nlines};
  int rc = mr_buf_create(dev, ncoils * n * sizeof(mr_cfloat), &scratch, err);
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fi, &to_image, err);
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fk, &to_kspace, err);
  mr_cfloat *h = rc == 0 ? mr_buf_data(scratch) : NULL;
  if (rc == 0)
    rc = mr_fft_execute(to_image, MR_FFT_BACKWARD, in, h, err);
  if (rc == 0) {
#ifdef MR_HAVE_CUDA
    if (mr_device_is_gpu(dev))
      rc = mr_compress_cuda_per_x(dev, m, ncoils, nvirtual, nlines, nro, h, out, err);
    else
#endif
      rc = mr_compress_cpu_per_x(dev, m, ncoils, nvirtual, nlines, nro, h, out);
  }
  if (rc == 0)
    rc = mr_fft_execute(to_kspace, MR_FFT_FORWARD, out, out, err);
  mr_fft_plan_destroy(to_image);
  mr_fft_plan_destroy(to_kspace);
  mr_buf_destroy(scratch);
  return rc;
}
