/* ESPIRiT (espirit.h): the calibration region found on the host (the box
 * it is looked for in is small); its data, the calibration matrices, the
 * virtual coil's covariance, the Gram matrices' truncated spectral
 * functions (no eigen-decomposition: gpu/linalg/spectral.h), the projector
 * and G on the call's device. */
#include <complex.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "blas.h"
#include "buf.h"
#include "clock.h"
#include "error.h"
#include "espirit_impl.h"
#include "fft.h"
#include "spectral.h"

/* The most bytes of calibration (matrices, Gram, projector) in flight at
 * once: 3D slices are calibrated in chunks under it. */
#define CHUNK_BYTES ((size_t)512 << 20)

void mr_espirit_opts_default(mr_espirit_opts *o) {
  o->kernel = 6;
  o->calib = 24;
  o->threshold = 0.001f;
  o->crop = 0.8f;
  o->profile = NULL;
}

static int extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                   const size_t origin[3], const size_t size[3], size_t nc, mr_cfloat *out,
                   mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_extract(dev, src, stride, origin, size, nc, out, err);
#endif
  return mr_espirit_cpu_extract(dev, src, stride, origin, size, nc, out);
}

static int calmat(mr_device *dev, const mr_cfloat *cal, size_t cu, size_t cv,
                  const mr_espirit_geom *g, size_t count, mr_cfloat *a, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_calmat(dev, cal, cu, cv, g, count, a, err);
#endif
  return mr_espirit_cpu_calmat(dev, cal, cu, cv, g, count, a);
}

static int lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g, float scale,
                mr_cfloat *lag, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_lags(dev, p, g, scale, lag, err);
#endif
  return mr_espirit_cpu_lags(dev, p, g, scale, lag);
}

static int image(mr_device *dev, const mr_cfloat *lag, const mr_espirit_geom *g, mr_cfloat *row,
                 mr_cfloat *grid, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_image(dev, lag, g, row, grid, err);
#endif
  return mr_espirit_cpu_image(dev, lag, g, row, grid, err);
}

static int eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                 const mr_cfloat *rot, float crop, const mr_espirit_out *out, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_eigen(dev, grid, g, rot, crop, out, err);
#endif
  return mr_espirit_cpu_eigen(dev, grid, g, rot, crop, out);
}

/* A buffer of n complex values on dev. */
static int make(mr_device *dev, size_t n, mr_buf **b, mr_err *err) {
  return mr_buf_create(dev, n * sizeof(mr_cfloat), b, err);
}

/* Whether sample (u, v) of the compact box [coil][bv][bu] was sampled:
 * any coil non-zero. */
static int sampled(const mr_cfloat *box, size_t bu, size_t bv, size_t nc, size_t u, size_t v) {
  for (size_t c = 0; c < nc; c++)
    if (box[(c * bv + v) * bu + u] != 0)
      return 1;
  return 0;
}

/* The largest fully sampled box around the centre (bu/2, bv/2) of the
 * box: first the sampled runs along the centre row and column, then shrunk
 * along its longer side while any point inside is unsampled. [lo, hi) per
 * axis. */
static void acs_box(const mr_cfloat *box, size_t bu, size_t bv, size_t nc, size_t lo[2],
                    size_t hi[2]) {
  size_t cu = bu / 2, cv = bv / 2;
  lo[0] = hi[0] = cu;
  lo[1] = hi[1] = cv;
  if (!sampled(box, bu, bv, nc, cu, cv))
    return;
  while (lo[0] > 0 && sampled(box, bu, bv, nc, lo[0] - 1, cv))
    lo[0]--;
  while (hi[0] < bu && sampled(box, bu, bv, nc, hi[0], cv))
    hi[0]++;
  while (lo[1] > 0 && sampled(box, bu, bv, nc, cu, lo[1] - 1))
    lo[1]--;
  while (hi[1] < bv && sampled(box, bu, bv, nc, cu, hi[1]))
    hi[1]++;
  for (;;) {
    int full = 1;
    for (size_t v = lo[1]; full && v < hi[1]; v++)
      for (size_t u = lo[0]; full && u < hi[0]; u++)
        full = sampled(box, bu, bv, nc, u, v);
    if (full)
      return;
    int a = hi[0] - lo[0] >= hi[1] - lo[1] ? 0 : 1;
    size_t c = a == 0 ? cu : cv;
    if (hi[a] - c > c - lo[a])
      hi[a]--;
    else
      lo[a]++;
  }
}

/* The calibration of a set of planes (one per 2D image or x-slice):
 * cal [slice][coil][cv][cu] on the call's device. */
typedef struct calib {
  mr_espirit_geom g;
  size_t cu, cv; /* the calibration region */
  size_t slices;
  mr_buf *cal;
  mr_cfloat rot[MR_ESPIRIT_MAX_COILS]; /* the virtual coil */
  float threshold;
} calib;

/* Work for a chunk of slices, on dev. */
typedef struct work {
  mr_buf *a, *f, *b, *p, *lag, *row, *grid, *rot;
} work;

/* The first principal component of the calibration data over the coils:
 * the virtual coil the maps' phase is taken against. data: [coil][rows]
 * on dev, every calibration sample of every slice; its coil covariance
 * on dev (a HERK), the eigenvector on the host. */
static int virtual_coil(mr_device *dev, const mr_cfloat *data, size_t rows, size_t nc,
                        mr_cfloat *rot, mr_err *err) {
  if (rows > INT_MAX)
    return mr_err_set(err, MR_EINVAL, "espirit: %zu calibration samples a coil (at most %d)", rows,
                      INT_MAX);
  size_t nn = nc * nc;
  mr_buf *dcov = NULL;
  mr_cfloat *cov = malloc(nn * sizeof *cov);
  float *w = malloc(nc * sizeof *w);
  int rc = cov == NULL || w == NULL ? mr_err_set(err, MR_ENOMEM, "espirit: out of memory")
                                    : make(dev, nn, &dcov, err);
  /* the data as rows x nc (a column per coil): D^H D, element (i, j) the
   * sum of conj(d_i) d_j, the covariance's conjugate */
  mr_cmat dm = {(mr_cfloat *)data, (int)rows, (int)nc, (int)rows, 0};
  mr_cmat cm = {rc == 0 ? mr_buf_data(dcov) : NULL, (int)nc, (int)nc, (int)nc, nn};
  if (rc == 0)
    rc = mr_blas_herk(dev, MR_BLAS_C, 1.0f, dm, 0.0f, cm, 1, err);
  if (rc == 0)
    rc = mr_buf_download(dcov, 0, cov, nn * sizeof *cov, err);
  for (size_t e = 0; rc == 0 && e < nn; e++)
    cov[e] = conjf(cov[e]);
  lapack_int info = 0;
  if (rc == 0)
    info = LAPACKE_cheevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)nc,
                          (lapack_complex_float *)cov, (lapack_int)nc, w);
  if (rc == 0 && info != 0)
    rc = mr_err_set(err, MR_ENUMERIC, "espirit: coil covariance (info %d)", (int)info);
  if (rc == 0)
    memcpy(rot, cov + (nc - 1) * nc, nc * sizeof *rot);
  mr_buf_destroy(dcov);
  free(cov);
  free(w);
  return rc;
}

static void work_free(work *wk) {
  mr_buf *all[] = {wk->a, wk->f, wk->b, wk->p, wk->lag, wk->row, wk->grid, wk->rot};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    mr_buf_destroy(all[i]);
}

/* The stages' times of one call (mr_espirit_opts.profile). */
typedef struct profile {
  double *ms;              /* NULL: not timed */
  const mr_cfloat *probe;  /* a value on the device, downloaded to wait for it */
  uint64_t mark;           /* the end of the last stage timed (mr_now_ns) */
} profile;

/* When timing: waits for dev's queued work (a download ordered after it)
 * and adds the time since the last mark to the stage's entry. */
static int stage_mark(mr_device *dev, profile *pr, mr_espirit_stage stage, mr_err *err) {
  if (pr->ms == NULL)
    return 0;
  mr_cfloat probe;
  int rc = mr_device_download(dev, &probe, pr->probe, sizeof probe, err);
  uint64_t now = mr_now_ns();
  pr->ms[stage] += (double)(now - pr->mark) / 1e6;
  pr->mark = now;
  return rc;
}

/* The projectors of slices [s0, s0 + count) into wk->p ([count][N][N]):
 * P = V V^H over the calibration matrix's right singular vectors V with
 * sigma^2 > threshold sigma_max^2, from the smaller Gram matrix's truncated
 * spectral functions (gpu/linalg/spectral.h). With G = conj(A)^H conj(A)
 * (m >= N) that is G's projector itself; with G = conj(A) conj(A)^H it is
 * conj(A)^H G^+ conj(A), G^+ the pseudo-inverse on the kept eigenvectors
 * (V = conj(A)^H U / sigma). The rows of conj(A) are conjugated patches,
 * so these are conj(V)'s, the projector's factor as the lags want it. */
static int projectors(mr_device *dev, const calib *k, size_t s0, size_t count, work *wk,
                      profile *pr, mr_err *err) {
  const mr_espirit_geom *g = &k->g;
  size_t m = (k->cu - (size_t)g->ku + 1) * (k->cv - (size_t)g->kv + 1);
  size_t N = (size_t)g->ku * (size_t)g->kv * g->nc, n = m < N ? m : N;
  int batch = (int)count;
  mr_cfloat *a = mr_buf_data(wk->a);
  const mr_cfloat *cal = (const mr_cfloat *)mr_buf_data(k->cal) + s0 * g->nc * k->cu * k->cv;
  int rc = calmat(dev, cal, k->cu, k->cv, g, count, a, err);
  mr_cmat am = {a, (int)m, (int)N, (int)m, m * N};
  if (rc == 0)
    rc = stage_mark(dev, pr, MR_ESPIRIT_CALIBRATION, err);
  float *lmax = malloc(count * sizeof *lmax);
  if (rc == 0 && lmax == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "espirit: out of memory");
  mr_cmat pm = {mr_buf_data(wk->p), (int)N, (int)N, (int)N, N * N};
  mr_cmat fm = {mr_buf_data(wk->f), (int)n, (int)n, (int)n, n * n};
  mr_cmat none = {0};
  if (rc == 0 && m >= N) /* the smaller Gram matrix: conj(A)^H conj(A) */
    rc = mr_spectral_truncate(dev, am, MR_BLAS_C, k->threshold, pm, none, lmax, batch, err);
  if (rc == 0 && m < N) { /* conj(A) conj(A)^H; its projector goes to the spare b */
    mr_cmat sm = {mr_buf_data(wk->b), (int)n, (int)n, (int)n, n * n};
    rc = mr_spectral_truncate(dev, am, MR_BLAS_N, k->threshold, sm, fm, lmax, batch, err);
  }
  for (size_t s = 0; rc == 0 && s < count; s++)
    if (!(lmax[s] > 0))
      rc = mr_err_set(err, MR_EDATA, "espirit: no signal in the calibration region");
  if (rc == 0)
    rc = stage_mark(dev, pr, MR_ESPIRIT_SUBSPACE, err);
  if (rc == 0 && m < N) { /* P = conj(A)^H (G^+ conj(A)) */
    mr_cmat tm = {mr_buf_data(wk->b), (int)m, (int)N, (int)m, m * N};
    rc = mr_blas_gemm(dev, MR_BLAS_N, MR_BLAS_N, 1.0f, fm, am, 0.0f, tm, batch, err);
    if (rc == 0)
      rc = mr_blas_gemm(dev, MR_BLAS_C, MR_BLAS_N, 1.0f, am, tm, 0.0f, pm, batch, err);
  }
  if (rc == 0)
    rc = stage_mark(dev, pr, MR_ESPIRIT_PROJECTOR, err);
  free(lmax);
  return rc;
}

/* Maps of slices: calibration, projectors per chunk, G and the eigenvectors
 * per slice; out0 is slice 0's output and slice_step the offset from one
 * slice's maps to the next. */
static int maps_from(mr_device *dev, const calib *k, float crop, const mr_espirit_out *out0,
                     size_t slice_step, profile *pr, mr_err *err) {
  const mr_espirit_geom *g = &k->g;
  size_t m = (k->cu - (size_t)g->ku + 1) * (k->cv - (size_t)g->kv + 1);
  size_t N = (size_t)g->ku * (size_t)g->kv * g->nc, n = m < N ? m : N;
  size_t pairs = g->nc * (g->nc + 1) / 2, npix = g->nu * g->nv;
  /* a, b (m N or N n), f, P; spectral.h's a, Gram and four n x n in double */
  size_t per_slice = (m * N + n * N + n * n + N * N + 2 * (m * N + 5 * n * n)) *
                     sizeof(mr_cfloat);
  size_t chunk = per_slice > 0 ? CHUNK_BYTES / per_slice : 1; /* per_slice: never 0 */
  chunk = chunk < 1 ? 1 : chunk > k->slices ? k->slices : chunk;
  work wk = {0};
  int rc = make(dev, chunk * m * N, &wk.a, err);
  if (rc == 0)
    rc = make(dev, chunk * n * n, &wk.f, err);
  if (rc == 0)
    rc = make(dev, chunk * N * n, &wk.b, err);
  if (rc == 0)
    rc = make(dev, chunk * N * N, &wk.p, err);
  size_t nlu = 2 * (size_t)g->ku - 1, nlv = 2 * (size_t)g->kv - 1;
  if (rc == 0)
    rc = make(dev, pairs * nlu * nlv, &wk.lag, err);
  if (rc == 0)
    rc = make(dev, pairs * nlv * g->nu, &wk.row, err);
  if (rc == 0)
    rc = make(dev, pairs * npix, &wk.grid, err);
  if (rc == 0)
    rc = make(dev, g->nc, &wk.rot, err);
  if (rc == 0)
    rc = mr_buf_upload(wk.rot, 0, k->rot, g->nc * sizeof *k->rot, err);
  /* G(x) = sum_d g[d] e^{+2 pi i d x / n}; the 1 / (ku kv) makes G's
   * eigenvalues at most 1 */
  float scale = 1.0f / (float)(g->ku * g->kv);
  for (size_t s0 = 0; rc == 0 && s0 < k->slices; s0 += chunk) {
    size_t count = k->slices - s0 < chunk ? k->slices - s0 : chunk;
    rc = projectors(dev, k, s0, count, &wk, pr, err);
    for (size_t s = 0; rc == 0 && s < count; s++) {
      mr_espirit_out o = *out0;
      o.maps += (s0 + s) * slice_step;
      o.prior = s0 + s > 0 ? o.maps - slice_step : NULL;
      mr_cfloat *grid = mr_buf_data(wk.grid), *lag = mr_buf_data(wk.lag);
      rc = lags(dev, (const mr_cfloat *)mr_buf_data(wk.p) + s * N * N, g, scale, lag, err);
      if (rc == 0)
        rc = image(dev, lag, g, mr_buf_data(wk.row), grid, err);
      if (rc == 0)
        rc = stage_mark(dev, pr, MR_ESPIRIT_KERNEL_FFT, err);
      if (rc == 0)
        rc = eigen(dev, grid, g, mr_buf_data(wk.rot), crop, &o, err);
      if (rc == 0)
        rc = stage_mark(dev, pr, MR_ESPIRIT_EIGEN, err);
    }
  }
  work_free(&wk);
  return rc;
}

static int check(const size_t dims[3], size_t nc, const mr_espirit_opts *o, mr_err *err) {
  if (o == NULL || dims == NULL)
    return mr_err_set(err, MR_EINVAL, "espirit: no options or shape");
  if (nc < 1 || nc > MR_ESPIRIT_MAX_COILS)
    return mr_err_set(err, MR_EINVAL, "espirit: %zu coils (1 to %d: compress the coils first)", nc,
                      MR_ESPIRIT_MAX_COILS);
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[0] > 65536 || dims[1] > 65536 ||
      dims[2] > 65536)
    return mr_err_set(err, MR_EINVAL, "espirit: %zu x %zu x %zu samples", dims[0], dims[1],
                      dims[2]);
  if (o->kernel < 1 || o->kernel > 16 || o->calib < o->kernel || o->calib > 256)
    return mr_err_set(err, MR_EINVAL,
                      "espirit: kernel %d, calibration %d (1 <= kernel <= calibration, "
                      "kernel <= 16, calibration <= 256)",
                      o->kernel, o->calib);
  if (!(o->threshold > 0 && o->threshold < 1) || !(o->crop >= 0 && o->crop < 1))
    return mr_err_set(err, MR_EINVAL, "espirit: threshold %g (0 to 1), crop %g (0 to 1)",
                      (double)o->threshold, (double)o->crop);
  return 0;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* A kernel edge that fits a plane axis of n samples: the lags then span at
 * most n (2k - 1 <= n), and an axis of one sample gets one. */
static int kernel_for(int kernel, size_t n) {
  return (int)min_size((size_t)kernel, (n + 1) / 2);
}

/* Whether a calibration region of cu x cv samples is too small for the
 * kernel: fewer than 3 patch positions along an axis it does not span
 * whole, or fewer patches in all than half the kernel's points. Below that
 * the calibration matrix has too few rows for G's eigenvalue to reach the
 * crop: the maps come out zero almost everywhere (measured on the tests'
 * phantoms with the 6 x 6 kernel: 8 x 8 ky-kz samples in 3D, 3 x 3 patches,
 * kept 9% of the object, 10 x 10 99% and 12 x 12 all; 6 lines in 2D, one
 * patch row, 3%, 8 lines 95%). */
static int too_small(size_t cu, size_t cv, const mr_espirit_geom *g) {
  size_t ku = (size_t)g->ku, kv = (size_t)g->kv;
  if (cu < ku || cv < kv)
    return 1;
  size_t pu = cu - ku + 1, pv = cv - kv + 1;
  int thin = (pu < 3 && cu < g->nu) || (pv < 3 && cv < g->nv);
  return thin || 2 * pu * pv < ku * kv;
}

typedef struct job {
  const mr_cfloat *kspace;
  const size_t *dims;
  size_t nc;
  const mr_espirit_opts *o;
  mr_cfloat *maps;
} job;

static int task(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  profile pr = {.ms = j->o->profile, .probe = j->kspace, .mark = mr_now_ns()};
  const size_t *dims = j->dims;
  size_t nc = j->nc;
  int is3d = dims[2] > 1;
  /* the plane: (x, y) in 2D, (y, z) per x-slice in 3D */
  size_t nu = is3d ? dims[1] : dims[0], nv = is3d ? dims[2] : dims[1];
  size_t stride[4] = {1, dims[0], dims[0] * dims[1], dims[0] * dims[1] * dims[2]};
  size_t bu = min_size((size_t)j->o->calib, nu), bv = min_size((size_t)j->o->calib, nv);
  size_t origin[3] = {is3d ? dims[0] / 2 : nu / 2 - bu / 2, is3d ? nu / 2 - bu / 2 : nv / 2 - bv / 2,
                      is3d ? nv / 2 - bv / 2 : 0};
  size_t size[3] = {is3d ? 1 : bu, is3d ? bu : bv, is3d ? bv : 1};
  calib k = {.g = {.nc = nc, .nu = nu, .nv = nv}, .threshold = j->o->threshold};
  k.g.ku = kernel_for(j->o->kernel, nu);
  k.g.kv = kernel_for(j->o->kernel, nv);
  mr_buf *box = NULL;
  mr_cfloat *host = malloc(bu * bv * nc * sizeof *host);
  int rc = host == NULL ? mr_err_set(err, MR_ENOMEM, "espirit: out of memory") : 0;
  if (rc == 0)
    rc = make(dev, bu * bv * nc, &box, err);
  if (rc == 0)
    rc = extract(dev, j->kspace, stride, origin, size, nc, mr_buf_data(box), err);
  if (rc == 0)
    rc = mr_buf_download(box, 0, host, bu * bv * nc * sizeof *host, err);
  mr_buf_destroy(box);
  box = NULL;
  size_t lo[2] = {0, 0}, hi[2] = {0, 0};
  if (rc == 0) {
    acs_box(host, bu, bv, nc, lo, hi);
    k.cu = hi[0] - lo[0];
    k.cv = hi[1] - lo[1];
    if (too_small(k.cu, k.cv, &k.g))
      rc = mr_err_set(err, MR_EDATA,
                      "espirit: the fully sampled centre is %zu x %zu, too small for "
                      "the %d x %d kernel (it needs 3 kernel positions along each axis and %d "
                      "in all: sample a larger centre, or use low-resolution maps)",
                      k.cu, k.cv, k.g.ku, k.g.kv, (k.g.ku * k.g.kv + 1) / 2);
  }
  free(host);
  k.slices = is3d ? dims[0] : 1;
  size_t per = k.cu * k.cv;
  if (rc == 0)
    rc = make(dev, k.slices * nc * per, &k.cal, err);
  if (rc == 0 && !is3d) { /* cal [coil][y][x] */
    size_t o2[3] = {origin[0] + lo[0], origin[1] + lo[1], 0}, s2[3] = {k.cu, k.cv, 1};
    rc = extract(dev, j->kspace, stride, o2, s2, nc, mr_buf_data(k.cal), err);
    if (rc == 0)
      rc = virtual_coil(dev, mr_buf_data(k.cal), per, nc, k.rot, err);
  }
  if (rc == 0 && is3d) {
    /* the calibration rows along the whole readout ([coil][z][y][x]), to
     * image space along x, then regrouped per x-slice: cal [x][coil][z][y] */
    size_t nx = dims[0], o3[3] = {0, origin[1] + lo[0], origin[2] + lo[1]};
    size_t s3[3] = {nx, k.cu, k.cv};
    mr_fft_opts fo = {.rank = 1, .dims = {nx, 1, 1}, .batch = nc * per};
    mr_fft_plan *plan = NULL;
    rc = make(dev, nx * per * nc, &box, err);
    if (rc == 0)
      rc = extract(dev, j->kspace, stride, o3, s3, nc, mr_buf_data(box), err);
    if (rc == 0)
      rc = mr_fft_plan_create(dev, &fo, &plan, err);
    if (rc == 0)
      rc = mr_fft_execute(plan, MR_FFT_BACKWARD, mr_buf_data(box), mr_buf_data(box), err);
    if (rc == 0)
      rc = virtual_coil(dev, mr_buf_data(box), nx * per, nc, k.rot, err);
    /* the regrouping as a box copy: x' = q (stride nx), y' = coil (stride
     * per nx), z' = x (stride 1) */
    size_t rs[4] = {nx, per * nx, 1, 0}, r0[3] = {0, 0, 0}, rn[3] = {per, nc, nx};
    if (rc == 0)
      rc = extract(dev, mr_buf_data(box), rs, r0, rn, 1, mr_buf_data(k.cal), err);
    mr_fft_plan_destroy(plan);
    mr_buf_destroy(box);
  }
  mr_espirit_out out = {.maps = j->maps,
                        .ustride = is3d ? dims[0] : 1,
                        .vstride = is3d ? dims[0] * dims[1] : dims[0],
                        .cstride = stride[3]};
  if (rc == 0)
    rc = maps_from(dev, &k, j->o->crop, &out, is3d ? 1 : 0, &pr, err);
  mr_buf_destroy(k.cal);
  return rc;
}

int mr_espirit_maps(mr_device *dev, const mr_cfloat *kspace, const size_t dims[3], size_t ncoils,
                    const mr_espirit_opts *o, mr_cfloat *maps, mr_err *err) {
  int rc = check(dims, ncoils, o, err);
  if (rc < 0)
    return rc;
  if (kspace == NULL || maps == NULL)
    return mr_err_set(err, MR_EINVAL, "espirit: no k-space or maps");
  job j = {kspace, dims, ncoils, o, maps};
  return mr_device_run(dev, task, &j, err);
}
