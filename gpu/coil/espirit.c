/* ESPIRiT (espirit.h): the calibration on the host where it is small (the
 * calibration region, its matrix, the virtual coil), the Gram matrices,
 * their eigen-decomposition, the projector and G on the call's device. */
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "budget.h"
#include "buf.h"
#include "error.h"
#include "espirit_impl.h"
#include "fail.h"
#include "fft.h"
#include "solve.h"
#include "vec.h"

/* The most bytes of calibration (matrices, Gram, projector) in flight at
 * once: 3D slices are calibrated in chunks under it. */
#define CHUNK_BYTES ((size_t)512 << 20)

void mr_espirit_opts_default(mr_espirit_opts *o) {
  o->kernel = 6;
  o->calib = 24;
  o->threshold = 0.001f;
  o->crop = 0.8f;
}

static int extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                   const size_t origin[3], const size_t size[3], size_t nc, mr_cfloat *out) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_extract(dev, src, stride, origin, size, nc, out);
#endif
  return mr_espirit_cpu_extract(dev, src, stride, origin, size, nc, out);
}

static int lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g, float scale,
                mr_cfloat *grid) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_lags(dev, p, g, scale, grid);
#endif
  return mr_espirit_cpu_lags(dev, p, g, scale, grid);
}

static int eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                 const mr_cfloat *rot, float crop, const mr_espirit_out *out) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_espirit_cuda_eigen(dev, grid, g, rot, crop, out);
#endif
  return mr_espirit_cpu_eigen(dev, grid, g, rot, crop, out);
}

/* A buffer of n complex values on dev. */
static int make(mr_device *dev, size_t n, mr_buf **b) {
  return mr_buf_create(dev, n * sizeof(mr_cfloat), b);
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
 * cal [slice][coil][cv][cu] on the host. */
typedef struct calib {
  mr_espirit_geom g;
  size_t cu, cv;  /* the calibration region */
  size_t slices;
  mr_cfloat *cal; /* host */
  float threshold;
} calib;

/* The first principal component of the calibration data over the coils:
 * the virtual coil the maps' phase is taken against. */
static int virtual_coil(const calib *k, mr_cfloat *rot) {
  size_t nc = k->g.nc, per = k->cu * k->cv;
  mr_cfloat *cov = calloc(nc * nc, sizeof *cov);
  float *w = malloc(nc * sizeof *w);
  if (cov == NULL || w == NULL) {
    free(cov);
    free(w);
    return mr_fail(MR_ENOMEM, "espirit: out of memory");
  }
  for (size_t s = 0; s < k->slices; s++) {
    const mr_cfloat *d = k->cal + s * nc * per;
    for (size_t j = 0; j < nc; j++)
      for (size_t i = j; i < nc; i++) {
        double complex sum = 0;
        for (size_t q = 0; q < per; q++)
          sum += d[i * per + q] * conjf(d[j * per + q]);
        cov[j * nc + i] += (mr_cfloat)sum;
      }
  }
  lapack_int info = LAPACKE_cheevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)nc,
                                   (lapack_complex_float *)cov, (lapack_int)nc, w);
  if (info == 0)
    memcpy(rot, cov + (nc - 1) * nc, nc * sizeof *rot);
  free(cov);
  free(w);
  return info == 0 ? 0 : mr_fail(MR_ENUMERIC, "espirit: coil covariance (info %d)", (int)info);
}

/* Work for a chunk of slices, on dev. */
typedef struct work {
  mr_buf *a, *gram, *w, *sel, *scale, *b, *p, *grid, *rot;
  mr_fft_plan *plan;
} work;

static void work_free(work *wk) {
  mr_buf *all[] = {wk->a, wk->gram, wk->w, wk->sel, wk->scale, wk->b, wk->p, wk->grid, wk->rot};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    mr_buf_destroy(all[i]);
  mr_fft_plan_destroy(wk->plan);
}

/* Fills the conjugated calibration matrix of slice s, a[q + col * M] =
 * conj(cal[c][qv + pv][qu + pu]) for patch q = qv (cu - ku + 1) + qu and
 * col = (c kv + pv) ku + pu (the rows of conj(A) are conjugated patches,
 * so the Gram eigenvectors below are conj(V), the projector's factor). */
static void calibration_matrix(const calib *k, size_t s, mr_cfloat *a) {
  const mr_espirit_geom *g = &k->g;
  size_t ru = k->cu - (size_t)g->ku + 1, rv = k->cv - (size_t)g->kv + 1, m = ru * rv;
  const mr_cfloat *d = k->cal + s * g->nc * k->cu * k->cv;
  for (size_t c = 0; c < g->nc; c++)
    for (int pv = 0; pv < g->kv; pv++)
      for (int pu = 0; pu < g->ku; pu++) {
        size_t col = (c * (size_t)g->kv + (size_t)pv) * (size_t)g->ku + (size_t)pu;
        for (size_t qv = 0; qv < rv; qv++)
          for (size_t qu = 0; qu < ru; qu++)
            a[qv * ru + qu + col * m] =
                conjf(d[(c * k->cv + qv + (size_t)pv) * k->cu + qu + (size_t)pu]);
      }
}

/* The projectors of slices [s0, s0 + count) into wk->p ([count][N][N]). */
static int projectors(mr_device *dev, const calib *k, size_t s0, size_t count, work *wk,
                      mr_cfloat *host_a) {
  const mr_espirit_geom *g = &k->g;
  size_t m = (k->cu - (size_t)g->ku + 1) * (k->cv - (size_t)g->kv + 1);
  size_t N = (size_t)g->ku * (size_t)g->kv * g->nc, n = m < N ? m : N;
  int rc = 0, batch = (int)count;
  for (size_t s = 0; s < count; s++)
    calibration_matrix(k, s0 + s, host_a + s * m * N);
  mr_cfloat *a = mr_buf_data(wk->a), *gram = mr_buf_data(wk->gram);
  rc = mr_buf_upload(wk->a, 0, host_a, count * m * N * sizeof *a);
  mr_cmat am = {a, (int)m, (int)N, (int)m, m * N};
  mr_cmat gm = {gram, (int)n, (int)n, (int)n, n * n};
  if (rc == 0) /* the smaller Gram matrix: conj(A)^H conj(A) or conj(A) conj(A)^H */
    rc = mr_blas_herk(dev, m >= N ? MR_BLAS_C : MR_BLAS_N, 1.0f, am, 0.0f, gm, batch);
  if (rc == 0)
    rc = mr_solve_eigh(dev, gm, mr_buf_data(wk->w), batch);
  float *w = malloc(count * n * sizeof *w);
  if (rc == 0 && w == NULL)
    rc = mr_fail(MR_ENOMEM, "espirit: out of memory");
  if (rc == 0)
    rc = mr_buf_download(wk->w, 0, w, count * n * sizeof *w);
  /* kept per slice: sigma^2 > threshold sigma_max^2 (BART's sqrt(t) on sigma) */
  size_t keep = 0, *kept = rc == 0 ? calloc(count, sizeof *kept) : NULL;
  if (rc == 0 && kept == NULL)
    rc = mr_fail(MR_ENOMEM, "espirit: out of memory");
  for (size_t s = 0; rc == 0 && s < count; s++) {
    const float *ws = w + s * n;
    if (!(ws[n - 1] > 0))
      rc = mr_fail(MR_EDATA, "espirit: no signal in the calibration region");
    for (size_t i = 0; rc == 0 && i < n; i++)
      kept[s] += ws[i] > k->threshold * ws[n - 1];
    keep = kept[s] > keep ? kept[s] : keep;
  }
  /* the kept eigenvectors, the last `keep` columns, scaled: 1 (or, for the
   * row-side Gram, sigma^-1 to make conj(A)^H u / sigma orthonormal); 0 for
   * a slice's columns past what it keeps */
  mr_cfloat *f = rc == 0 ? malloc(count * n * keep * sizeof *f) : NULL;
  if (rc == 0 && f == NULL)
    rc = mr_fail(MR_ENOMEM, "espirit: out of memory");
  for (size_t s = 0; rc == 0 && s < count; s++)
    for (size_t j = 0; j < keep; j++) {
      float lambda = w[s * n + n - keep + j];
      float v = j + kept[s] < keep ? 0 : m >= N ? 1 : 1 / sqrtf(lambda);
      for (size_t i = 0; i < n; i++)
        f[(s * keep + j) * n + i] = v;
    }
  if (rc == 0)
    rc = mr_buf_upload(wk->scale, 0, f, count * n * keep * sizeof *f);
  mr_cfloat *sel = mr_buf_data(wk->sel), *b = mr_buf_data(wk->b);
  for (size_t s = 0; rc == 0 && s < count; s++)
    rc = mr_vec_mul(dev, n * keep, gram + s * n * n + n * (n - keep),
                    (mr_cfloat *)mr_buf_data(wk->scale) + s * n * keep, sel + s * n * keep);
  mr_cmat bm = {m >= N ? sel : b, (int)N, (int)keep, (int)N, N * keep};
  if (rc == 0 && m < N) {
    mr_cmat um = {sel, (int)m, (int)keep, (int)m, m * keep};
    rc = mr_blas_gemm(dev, MR_BLAS_C, MR_BLAS_N, 1.0f, am, um, 0.0f, bm, batch);
  }
  mr_cmat pm = {mr_buf_data(wk->p), (int)N, (int)N, (int)N, N * N};
  if (rc == 0) /* P = B B^H */
    rc = mr_blas_herk(dev, MR_BLAS_N, 1.0f, bm, 0.0f, pm, batch);
  free(w);
  free(kept);
  free(f);
  return rc;
}

/* Maps of slices: calibration, projectors per chunk, G and the eigenvectors
 * per slice; out0 is slice 0's output and slice_step the offset from one
 * slice's maps to the next. */
static int maps_from(mr_device *dev, const calib *k, float crop, const mr_espirit_out *out0,
                     size_t slice_step) {
  const mr_espirit_geom *g = &k->g;
  size_t m = (k->cu - (size_t)g->ku + 1) * (k->cv - (size_t)g->kv + 1);
  size_t N = (size_t)g->ku * (size_t)g->kv * g->nc, n = m < N ? m : N;
  size_t pairs = g->nc * (g->nc + 1) / 2, npix = g->nu * g->nv;
  size_t per_slice = (m * N + n * n + n + 3 * n * N + N * N) * sizeof(mr_cfloat);
  size_t chunk = per_slice > 0 ? CHUNK_BYTES / per_slice : 1; /* per_slice: never 0 */
  chunk = chunk < 1 ? 1 : chunk > k->slices ? k->slices : chunk;
  work wk = {0};
  mr_cfloat rot[MR_ESPIRIT_MAX_COILS];
  /* the chunk's calibration matrices on the host: up to CHUNK_BYTES, counted */
  size_t a_bytes = chunk * m * N * sizeof(mr_cfloat);
  mr_err e = {0};
  mr_cfloat *host_a = mr_budget_alloc(a_bytes, "ESPIRiT's calibration matrices", &e);
  int rc = host_a == NULL ? mr_fail(e.code, "espirit: %s", e.msg) : 0;
  if (rc == 0)
    rc = virtual_coil(k, rot);
  if (rc == 0)
    rc = make(dev, chunk * m * N, &wk.a);
  if (rc == 0)
    rc = make(dev, chunk * n * n, &wk.gram);
  if (rc == 0)
    rc = mr_buf_create(dev, chunk * n * sizeof(float), &wk.w);
  if (rc == 0) /* sel, scale and b hold n x keep or N x keep, keep <= n */
    rc = make(dev, chunk * n * n, &wk.sel);
  if (rc == 0)
    rc = make(dev, chunk * n * n, &wk.scale);
  if (rc == 0)
    rc = make(dev, chunk * N * n, &wk.b);
  if (rc == 0)
    rc = make(dev, chunk * N * N, &wk.p);
  if (rc == 0)
    rc = make(dev, pairs * npix, &wk.grid);
  if (rc == 0)
    rc = make(dev, g->nc, &wk.rot);
  if (rc == 0)
    rc = mr_buf_upload(wk.rot, 0, rot, g->nc * sizeof *rot);
  mr_fft_opts fo = {.rank = 2, .dims = {g->nu, g->nv, 1}, .batch = pairs};
  if (rc == 0)
    rc = mr_fft_plan_create(dev, &fo, &wk.plan);
  /* G(x) = sum_d g[d] e^{+2 pi i d x / n}: the unitary backward transform
   * times sqrt(npix); the 1 / (ku kv) makes G's eigenvalues at most 1 */
  float scale = (float)(sqrt((double)npix) / (g->ku * g->kv));
  for (size_t s0 = 0; rc == 0 && s0 < k->slices; s0 += chunk) {
    size_t count = k->slices - s0 < chunk ? k->slices - s0 : chunk;
    rc = projectors(dev, k, s0, count, &wk, host_a);
    for (size_t s = 0; rc == 0 && s < count; s++) {
      mr_espirit_out o = *out0;
      o.maps += (s0 + s) * slice_step;
      mr_cfloat *grid = mr_buf_data(wk.grid);
      rc = lags(dev, (const mr_cfloat *)mr_buf_data(wk.p) + s * N * N, g, scale, grid);
      if (rc == 0)
        rc = mr_fft_execute(wk.plan, MR_FFT_BACKWARD, grid, grid);
      if (rc == 0)
        rc = eigen(dev, grid, g, mr_buf_data(wk.rot), crop, &o);
    }
  }
  mr_budget_free(host_a, a_bytes);
  work_free(&wk);
  return rc;
}

static int check(const size_t dims[3], size_t nc, const mr_espirit_opts *o) {
  if (o == NULL || dims == NULL)
    return mr_fail(MR_EINVAL, "espirit: no options or shape");
  if (nc < 1 || nc > MR_ESPIRIT_MAX_COILS)
    return mr_fail(MR_EINVAL, "espirit: %zu coils (1 to %d: compress the coils first)", nc,
                   MR_ESPIRIT_MAX_COILS);
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[0] > 65536 || dims[1] > 65536 ||
      dims[2] > 65536)
    return mr_fail(MR_EINVAL, "espirit: %zu x %zu x %zu samples", dims[0], dims[1], dims[2]);
  if (o->kernel < 1 || o->kernel > 16 || o->calib < o->kernel || o->calib > 256)
    return mr_fail(MR_EINVAL, "espirit: kernel %d, calibration %d (1 <= kernel <= calibration, "
                   "kernel <= 16, calibration <= 256)", o->kernel, o->calib);
  if (!(o->threshold > 0 && o->threshold < 1) || !(o->crop >= 0 && o->crop < 1))
    return mr_fail(MR_EINVAL, "espirit: threshold %g (0 to 1), crop %g (0 to 1)",
                   (double)o->threshold, (double)o->crop);
  return 0;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* A kernel edge that fits a plane axis of n samples: the lags then span at
 * most n (2k - 1 <= n), and an axis of one sample gets one. */
static int kernel_for(int kernel, size_t n) {
  return (int)min_size((size_t)kernel, (n + 1) / 2);
}

typedef struct job {
  const mr_cfloat *kspace;
  const size_t *dims;
  size_t nc;
  const mr_espirit_opts *o;
  mr_cfloat *maps;
} job;

static int task(mr_device *dev, void *arg) {
  job *j = arg;
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
  int rc = host == NULL ? mr_fail(MR_ENOMEM, "espirit: out of memory") : 0;
  if (rc == 0)
    rc = make(dev, bu * bv * nc, &box);
  if (rc == 0)
    rc = extract(dev, j->kspace, stride, origin, size, nc, mr_buf_data(box));
  if (rc == 0)
    rc = mr_buf_download(box, 0, host, bu * bv * nc * sizeof *host);
  mr_buf_destroy(box);
  box = NULL;
  size_t lo[2] = {0, 0}, hi[2] = {0, 0};
  if (rc == 0) {
    acs_box(host, bu, bv, nc, lo, hi);
    k.cu = hi[0] - lo[0];
    k.cv = hi[1] - lo[1];
    if (k.cu < (size_t)k.g.ku || k.cv < (size_t)k.g.kv)
      rc = mr_fail(MR_EDATA, "espirit: the fully sampled centre is %zu x %zu, less than the "
                   "kernel's %d x %d", k.cu, k.cv, k.g.ku, k.g.kv);
  }
  if (rc == 0 && !is3d) {
    k.slices = 1;
    k.cal = malloc(k.cu * k.cv * nc * sizeof *k.cal);
    if (k.cal == NULL)
      rc = mr_fail(MR_ENOMEM, "espirit: out of memory");
    for (size_t c = 0; rc == 0 && c < nc; c++)
      for (size_t v = 0; v < k.cv; v++)
        memcpy(k.cal + (c * k.cv + v) * k.cu, host + (c * bv + lo[1] + v) * bu + lo[0],
               k.cu * sizeof *host);
  }
  if (rc == 0 && is3d) {
    /* the calibration rows along the whole readout, to image space along x,
     * then regrouped per x-slice: cal [x][coil][z][y] */
    size_t nx = dims[0], per = k.cu * k.cv, o3[3] = {0, origin[1] + lo[0], origin[2] + lo[1]};
    size_t s3[3] = {nx, k.cu, k.cv};
    mr_fft_opts fo = {.rank = 1, .dims = {nx, 1, 1}, .batch = nc * per};
    mr_fft_plan *plan = NULL;
    mr_cfloat *rows = malloc(nx * per * nc * sizeof *rows);
    k.slices = nx;
    k.cal = malloc(nx * per * nc * sizeof *k.cal);
    if (rows == NULL || k.cal == NULL)
      rc = mr_fail(MR_ENOMEM, "espirit: out of memory");
    if (rc == 0)
      rc = make(dev, nx * per * nc, &box);
    if (rc == 0)
      rc = extract(dev, j->kspace, stride, o3, s3, nc, mr_buf_data(box));
    if (rc == 0)
      rc = mr_fft_plan_create(dev, &fo, &plan);
    if (rc == 0)
      rc = mr_fft_execute(plan, MR_FFT_BACKWARD, mr_buf_data(box), mr_buf_data(box));
    if (rc == 0)
      rc = mr_buf_download(box, 0, rows, nx * per * nc * sizeof *rows);
    for (size_t c = 0; rc == 0 && c < nc; c++)
      for (size_t q = 0; q < per; q++)
        for (size_t x = 0; x < nx; x++)
          k.cal[(x * nc + c) * per + q] = rows[(c * per + q) * nx + x];
    mr_fft_plan_destroy(plan);
    mr_buf_destroy(box);
    free(rows);
  }
  free(host);
  mr_espirit_out out = {.maps = j->maps,
                        .ustride = is3d ? dims[0] : 1,
                        .vstride = is3d ? dims[0] * dims[1] : dims[0],
                        .cstride = stride[3]};
  if (rc == 0)
    rc = maps_from(dev, &k, j->o->crop, &out, is3d ? 1 : 0);
  free(k.cal);
  return rc;
}

int mr_espirit_maps(mr_device *dev, const mr_cfloat *kspace, const size_t dims[3],
                    size_t ncoils, const mr_espirit_opts *o, mr_cfloat *maps) {
  int rc = check(dims, ncoils, o);
  if (rc < 0)
    return rc;
  if (kspace == NULL || maps == NULL)
    return mr_fail(MR_EINVAL, "espirit: no k-space or maps");
  job j = {kspace, dims, ncoils, o, maps};
  return mr_device_run(dev, task, &j);
}
