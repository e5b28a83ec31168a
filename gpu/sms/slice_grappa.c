/* Slice-GRAPPA plans: option checks, the calibration (CAIPI-shifted
 * reference, source and target matrices by im2col, HERK + GEMM into the
 * normal equations, one Cholesky solve for every slice's kernel, and one
 * for each truncated edge kernel from the parts of the same equations) and
 * the separation (im2col of the collapsed k-space in chunks of lines, one
 * GEMM for every slice and coil, the edge frame again with its truncated
 * kernels, the CAIPI shift undone).
 *
 * Edge kernels: where some of a kernel's taps fall outside the k-space,
 * nothing was measured there; treating them as zero (or wrapping around)
 * left 2.5% slice leakage in the outer two lines of an analytic phantom's
 * k-space (MB 4, FOV/3, 32 coils), 0.23% inside. So each class of edge
 * position (taps cut on the left by 1 .. kx/2, on the right, at the top,
 * at the bottom, and their corners) has a kernel of the remaining taps,
 * calibrated on the same equations: the submatrices of the normal
 * equations for those taps. Class (ex, ey), ex in -kx/2 .. kx/2 (negative:
 * taps cut on the left), ey likewise along the phase encode; (0, 0) is the
 * full kernel. */
#include <complex.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "blas.h"
#include "block.h"
#include "budget.h"
#include "buf.h"
#include "error.h"
#include "slice_grappa_impl.h"
#include "vec.h"

/* The source matrix of one separation step stays under this many values (a
 * quarter GiB): bigger k-spaces go in chunks of lines. */
#define IM2COL_MAX_VALUES ((size_t)32 << 20)

/* Kernel classes: (2 (kx/2) + 1) x (2 (ky/2) + 1). */
#define MAX_CLASSES (MR_SLICE_GRAPPA_MAX_KERNEL * MR_SLICE_GRAPPA_MAX_KERNEL)

/* One kernel class: its taps, its positions, its weights' offset. */
typedef struct kernel_class {
  int i0, i1, j0, j1;  /* taps kept */
  int x0, x1, y0, y1;  /* positions it serves */
  int n;               /* unknowns: (i1 - i0)(j1 - j0) nc */
  size_t offset;       /* of its n x mb nc weights */
} kernel_class;

struct mr_slice_grappa_plan {
  mr_device *dev;
  mr_slice_grappa_opts o;
  int n_src;              /* kx ky nc */
  mr_sg_window calib;     /* the calibration box */
  int calib_rows;         /* its positions */
  int nclass;             /* class 0 is the full kernel */
  kernel_class cls[MAX_CLASSES];
};

/* The taps left and the positions served along one axis for cut e (taps
 * cut, negative at the low end): k taps, half = k / 2, step between taps,
 * n positions. */
static void axis_class(int e, int k, int step, int n, int *t0, int *t1, int *p0, int *p1) {
  int half = k / 2, cut = e < 0 ? -e : e;
  *t0 = e < 0 ? cut : 0;
  *t1 = e > 0 ? k - cut : k;
  if (e == 0) {
    *p0 = half * step;
    *p1 = n - half * step;
  } else if (e < 0) {
    *p0 = (half - cut) * step;
    *p1 = (half - cut + 1) * step;
  } else {
    *p0 = n - (half - cut + 1) * step;
    *p1 = n - (half - cut) * step;
  }
}

/* The classes of opts' kernel, the full one first, and the weights they
 * take together (values). */
static size_t make_classes(const mr_slice_grappa_opts *o, kernel_class *cls, int *count) {
  int hx = o->kx / 2, hy = o->ky / 2;
  size_t offset = 0, ntgt = (size_t)o->mb * o->nc;
  *count = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int ey = -hy; ey <= hy; ey++)
      for (int ex = -hx; ex <= hx; ex++) {
        if ((pass == 0) != (ex == 0 && ey == 0))
          continue;
        kernel_class *c = &cls[(*count)++];
        axis_class(ex, o->kx, 1, o->nx, &c->i0, &c->i1, &c->x0, &c->x1);
        axis_class(ey, o->ky, o->ystep, o->ny, &c->j0, &c->j1, &c->y0, &c->y1);
        c->n = (c->i1 - c->i0) * (c->j1 - c->j0) * o->nc;
        c->offset = offset;
        offset += (size_t)c->n * ntgt;
      }
  return offset;
}

mr_slice_grappa_opts mr_slice_grappa_opts_default(int nc, int nx, int ny, int mb, int caipi) {
  mr_slice_grappa_opts o = {.nc = nc, .nx = nx, .ny = ny, .mb = mb, .caipi = caipi,
                            .kx = 5, .ky = 5, .ystep = 1, .cx = nx < 32 ? nx : 32,
                            .cy = ny < 32 ? ny : 32, .lambda = 1e-3f, .leak_block = 1};
  return o;
}

size_t mr_slice_grappa_weights_count(const mr_slice_grappa_opts *o) {
  kernel_class cls[MAX_CLASSES];
  int count;
  if (o->kx < 1 || o->ky < 1 || o->kx > MR_SLICE_GRAPPA_MAX_KERNEL ||
      o->ky > MR_SLICE_GRAPPA_MAX_KERNEL)
    return 0; /* no plan takes such a kernel */
  return make_classes(o, cls, &count);
}

static int check_opts(const mr_slice_grappa_opts *o, mr_err *err) {
  if (o->nc < 1 || o->nx < 1 || o->ny < 1)
    return mr_err_set(err, MR_EINVAL, "slice-GRAPPA: %d coils of %d x %d samples", o->nc, o->nx,
                      o->ny);
  if (o->mb < 2 || o->mb > MR_SLICE_GRAPPA_MAX_MB)
    return mr_err_set(err, MR_EINVAL, "slice-GRAPPA: multiband factor %d is not 2 .. %d", o->mb,
                      MR_SLICE_GRAPPA_MAX_MB);
  if (o->nc < o->mb)
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: %d coils cannot separate %d slices (at least as many coils "
                      "as slices are needed)",
                      o->nc, o->mb);
  if (o->caipi < 1)
    return mr_err_set(err, MR_EINVAL, "slice-GRAPPA: CAIPI shift divisor %d < 1", o->caipi);
  if (o->kx < 1 || o->ky < 1 || o->kx % 2 == 0 || o->ky % 2 == 0 ||
      o->kx > MR_SLICE_GRAPPA_MAX_KERNEL || o->ky > MR_SLICE_GRAPPA_MAX_KERNEL || o->ystep < 1)
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: kernel %d x %d (step %d): need odd sizes up to %d", o->kx,
                      o->ky, o->ystep, MR_SLICE_GRAPPA_MAX_KERNEL);
  if (o->kx > o->nx / 2 || (o->ky - 1) * o->ystep + 1 > o->ny / 2)
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: a %d x %d kernel (%d lines apart) is over half the "
                      "%d x %d k-space",
                      o->kx, o->ky, o->ystep, o->nx, o->ny);
  if (o->cx < o->kx || o->cx > o->nx || o->cy < (o->ky - 1) * o->ystep + 1 || o->cy > o->ny)
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: a %d x %d calibration region does not fit a %d x %d kernel "
                      "(%d lines apart) in a %d x %d k-space",
                      o->cx, o->cy, o->kx, o->ky, o->ystep, o->nx, o->ny);
  if (!(o->lambda >= 0))
    return mr_err_set(err, MR_EINVAL, "slice-GRAPPA: lambda %g < 0", o->lambda);
  long n_src = (long)o->kx * o->ky * o->nc;
  long rows = (long)(o->cx - o->kx + 1) * (o->cy - (o->ky - 1) * o->ystep);
  long equations = o->leak_block ? rows * o->mb : rows;
  if (equations < n_src)
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: the %d x %d calibration region gives %ld equations for %ld "
                      "unknowns (a %d x %d kernel, %d coils): use a larger region or a smaller "
                      "kernel",
                      o->cx, o->cy, equations, n_src, o->kx, o->ky, o->nc);
  if (n_src * n_src > INT32_MAX || n_src * rows > INT32_MAX ||
      (long)o->nx * o->ny * o->nc > INT32_MAX)
    return mr_err_set(err, MR_EINVAL, "slice-GRAPPA: %ld unknowns x %ld equations is too large",
                      n_src, rows);
  return 0;
}

int mr_slice_grappa_plan_create(mr_device *dev, const mr_slice_grappa_opts *opts,
                                mr_slice_grappa_plan **out, mr_err *err) {
  *out = NULL;
  int rc = check_opts(opts, err);
  if (rc < 0)
    return rc;
  mr_slice_grappa_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "slice-GRAPPA: out of memory for a plan");
  p->dev = dev;
  p->o = *opts;
  p->n_src = opts->kx * opts->ky * opts->nc;
  /* The box of kernel centres whose taps all lie in the central region. */
  int hx = opts->kx / 2, hy = opts->ky / 2 * opts->ystep;
  int rx0 = opts->nx / 2 - opts->cx / 2, ry0 = opts->ny / 2 - opts->cy / 2;
  p->calib = (mr_sg_window){.nc = opts->nc, .nx = opts->nx, .ny = opts->ny, .kx = opts->kx,
                            .ky = opts->ky, .ystep = opts->ystep, .i1 = opts->kx,
                            .j1 = opts->ky, .x0 = rx0 + hx,
                            .x1 = rx0 + opts->cx - hx, .y0 = ry0 + hy, .y1 = ry0 + opts->cy - hy};
  p->calib_rows = (p->calib.x1 - p->calib.x0) * (p->calib.y1 - p->calib.y0);
  make_classes(opts, p->cls, &p->nclass);
  *out = p;
  return 0;
}

void mr_slice_grappa_plan_destroy(mr_slice_grappa_plan *plan) {
  free(plan);
}

static int im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *k, mr_cfloat *out,
                  mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_im2col(dev, w, k, out, err);
#endif
  return mr_sg_cpu_im2col(dev, w, k, out);
}

int mr_slice_grappa_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                          int direction, mr_cfloat *kspace, mr_err *err) {
  if (nc < 1 || nx < 1 || ny < 1 || caipi < 1 || count < 0 || (direction != 1 && direction != -1))
    return mr_err_set(err, MR_EINVAL,
                      "slice-GRAPPA: CAIPI shift of %d k-spaces of %d x %d x %d, "
                      "divisor %d, direction %d",
                      count, nc, ny, nx, caipi, direction);
  if (count == 0 || caipi == 1)
    return 0;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_caipi(dev, nc, nx, ny, caipi, first, count, direction, kspace, err);
#endif
  return mr_sg_cpu_caipi(dev, nc, nx, ny, caipi, first, count, direction, kspace);
}

/* Device scratch: one block carved into a call's arrays. */
static int scratch(mr_device *dev, size_t values, mr_buf **buf, mr_err *err) {
  return mr_buf_create(dev, values * sizeof(mr_cfloat), buf, err);
}

/* The normal equations of class c (c > 0) from the full kernel's: g
 * (n x n) and rhs (n x ntgt) restricted to the class's taps, into gc
 * (c->n x c->n, through t of c->n x n) and rhsc (c->n x ntgt). Taps index
 * as (kx, ky, nc) boxes, so two block copies take a submatrix. */
static int class_equations(mr_slice_grappa_plan *p, const kernel_class *c, const mr_cfloat *g,
                           const mr_cfloat *rhs, mr_cfloat *t, mr_cfloat *gc, mr_cfloat *rhsc,
                           mr_err *err) {
  const mr_slice_grappa_opts *o = &p->o;
  size_t wi = (size_t)(c->i1 - c->i0), wj = (size_t)(c->j1 - c->j0), n = (size_t)p->n_src;
  size_t taps[3] = {(size_t)o->kx, (size_t)o->ky, (size_t)o->nc};
  size_t at[3] = {(size_t)c->i0, (size_t)c->j0, 0}, zero[3] = {0, 0, 0};
  size_t kept[3] = {wi, wj, (size_t)o->nc};
  /* rows: every column's kept taps */
  int rc = mr_block_copy(p->dev, n, g, taps, at, t, kept, zero, kept, err);
  if (rc == 0)
    rc = mr_block_copy(p->dev, (size_t)o->mb * o->nc, rhs, taps, at, rhsc, kept, zero, kept, err);
  /* columns: per coil, the kept (i, j) of t's columns */
  size_t cols[3] = {(size_t)c->n, (size_t)o->kx, (size_t)o->ky};
  size_t cat[3] = {0, (size_t)c->i0, (size_t)c->j0}, cext[3] = {(size_t)c->n, wi, wj};
  if (rc == 0)
    rc = mr_block_copy(p->dev, (size_t)o->nc, t, cols, cat, gc, cext, zero, cext, err);
  return rc;
}

/* (a + lambda I) x = b by the eigen-decomposition of a, the eigenvectors
 * whose eigenvalues are under the rounding of its single-precision sums (a
 * float epsilon of the largest) left out: a is a Gram matrix, positive
 * semi-definite but for that rounding. On epi_sms's noiseless calibration
 * (this path forced on the CPU) it gives what the Cholesky gives: slice
 * NRMSE <= 0.009, leakage 0.87% against 0.82%; a cut at n epsilons lost
 * too much (3.8% leakage). ad and bd: a and b in double (ad overwritten by the
 * eigenvectors, bd by x); w: n values and n * nrhs more of scratch. With
 * lambda 0: the least-norm solution. */
static int solve_clamped(size_t n, size_t nrhs, double lambda, double complex *ad,
                         double complex *bd, double *w, double complex *t, mr_err *err) {
  lapack_int info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)n,
                                   (lapack_complex_double *)ad, (lapack_int)n, w);
  if (info != 0)
    return mr_err_set(err, MR_ENUMERIC,
                      "slice-GRAPPA: the eigen-decomposition of the normal equations "
                      "failed (%d)",
                      (int)info);
  /* t = V^H b, scaled by 1 / (w + lambda) where w is data; x = V t */
  const double complex one = 1, zero = 0;
  cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, (int)n, (int)nrhs, (int)n,
              &one, ad, (int)n, bd, (int)n, &zero, t, (int)n);
  double floor = FLT_EPSILON * w[n - 1]; /* the sums' rounding (w ascends) */
  for (size_t k = 0; k < nrhs; k++)
    for (size_t i = 0; i < n; i++) {
      /* under the floor a direction is rounding, not data: left out (a
       * lambda far below the floor must not amplify it) */
      t[k * n + i] = w[i] > floor ? t[k * n + i] / (w[i] + lambda) : 0;
    }
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)nrhs, (int)n,
              &one, ad, (int)n, t, (int)n, &zero, bd, (int)n);
  return 0;
}

/* n values of single precision into double. */
static void widen(size_t n, const mr_cfloat *from, double complex *to) {
  for (size_t i = 0; i < n; i++)
    to[i] = (double complex)from[i];
}

/* Solves (a + lambda I) x = b, a Hermitian n x n and b n x nrhs on dev
 * (dense: ld = rows), in double precision on the host, whatever dev is.
 * The leak-blocked equations at a small lambda are too ill-conditioned
 * for a single-precision Cholesky: on a GPU, cuSOLVER's failed as not
 * positive definite where LAPACK's single precision passed, and the two
 * backends' kernels drifted apart; one double-precision solve of the
 * same matrix serves both. On noiseless calibration data even that can
 * meet a: summed in single precision, its null space's rounding (about
 * 1e-7 of the largest eigenvalue, times the rows' square root) outweighs
 * a lambda of 1e-5 of the mean diagonal, and a Cholesky of a + lambda I
 * fails (the H100's cuBLAS sums gave column 508 of 512); the
 * eigen-decomposition without that rounding then solves the same
 * equations (solve_clamped). The matrix is small (kernel taps x coils). */
static int solve_in_double(mr_device *dev, mr_cmat a, float lambda, mr_cmat b, mr_err *err) {
  size_t n = (size_t)a.rows, nrhs = (size_t)b.cols;
  size_t fa = n * n * sizeof(mr_cfloat), fb = n * nrhs * sizeof(mr_cfloat);
  size_t bytes = fa + fb + (n * n + 2 * n * nrhs) * sizeof(double complex) + n * sizeof(double);
  mr_err e = {0};
  char *host = mr_budget_alloc(bytes, "slice-GRAPPA's normal equations", &e);
  if (host == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "slice-GRAPPA: %s", e.msg);
  mr_cfloat *af = (mr_cfloat *)host, *bf = (mr_cfloat *)(host + fa);
  double complex *ad = (double complex *)(host + fa + fb), *bd = ad + n * n;
  double complex *t = bd + n * nrhs;
  double *w = (double *)(t + n * nrhs);
  int rc = mr_device_download(dev, af, a.data, fa, err);
  if (rc == 0)
    rc = mr_device_download(dev, bf, b.data, fb, err);
  if (rc == 0) {
    widen(n * n, af, ad);
    widen(n * nrhs, bf, bd);
    for (size_t i = 0; i < n; i++)
      ad[i * n + i] += lambda;
    if (LAPACKE_zposv(LAPACK_COL_MAJOR, 'L', (lapack_int)n, (lapack_int)nrhs,
                      (lapack_complex_double *)ad, (lapack_int)n, (lapack_complex_double *)bd,
                      (lapack_int)n) != 0) { /* the factorisation spoilt both: again */
      widen(n * n, af, ad);
      widen(n * nrhs, bf, bd);
      rc = solve_clamped(n, nrhs, lambda, ad, bd, w, t, err);
    }
  }
  if (rc == 0) {
    for (size_t i = 0; i < n * nrhs; i++)
      bf[i] = (mr_cfloat)bd[i];
    rc = mr_device_upload(dev, b.data, bf, fb, err);
  }
  mr_budget_free(host, bytes);
  return rc;
}

int mr_slice_grappa_calibrate(mr_slice_grappa_plan *p, const mr_cfloat *reference,
                              mr_cfloat *weights, mr_err *err) {
  const mr_slice_grappa_opts *o = &p->o;
  size_t plane = (size_t)o->nc * o->ny * o->nx, rows = (size_t)p->calib_rows;
  size_t n = (size_t)p->n_src, ntgt = (size_t)o->mb * o->nc;
  /* shifted reference (mb planes), collapsed (plain: 1 plane), A, B, G,
   * and a class's G and the copy between */
  size_t total = (size_t)o->mb * plane + (o->leak_block ? 0 : plane) + rows * n +
                 rows * o->nc + 3 * n * n;
  mr_buf *buf;
  int rc = scratch(p->dev, total, &buf, err);
  if (rc < 0)
    return rc;
  mr_cfloat *shifted = mr_buf_data(buf), *collapsed = shifted + o->mb * plane;
  mr_cfloat *a = collapsed + (o->leak_block ? 0 : plane), *b = a + rows * n, *g = b + rows * o->nc;
  mr_cfloat *gc = g + n * n, *t = gc + n * n;
  mr_sg_window target = p->calib;
  target.kx = target.ky = target.i1 = target.j1 = 1;
  mr_cmat am = mr_cmat_dense(a, (int)rows, (int)n), bm = mr_cmat_dense(b, (int)rows, o->nc);
  mr_cmat gm = mr_cmat_dense(g, (int)n, (int)n);
  double trace = 0;
  rc = mr_vec_copy(p->dev, o->mb * plane, reference, shifted, err);
  if (rc == 0)
    rc = mr_slice_grappa_caipi(p->dev, o->nc, o->nx, o->ny, o->caipi, 0, o->mb, 1, shifted, err);
  if (rc == 0 && !o->leak_block) {
    /* The collapsed calibration data, its Gram matrix shared by the slices. */
    rc = mr_vec_copy(p->dev, plane, shifted, collapsed, err);
    for (int m = 1; rc == 0 && m < o->mb; m++)
      rc = mr_vec_axpy(p->dev, plane, 1.0f, shifted + m * plane, collapsed, err);
    if (rc == 0)
      rc = im2col(p->dev, &p->calib, collapsed, a, err);
    if (rc == 0)
      rc = mr_vec_sumsq(p->dev, rows * n, a, &trace, err);
    if (rc == 0)
      rc = mr_blas_herk(p->dev, MR_BLAS_C, 1.0f, am, 0.0f, gm, 1, err);
  }
  for (int m = 0; rc == 0 && m < o->mb; m++) {
    const mr_cfloat *slice = shifted + m * plane;
    if (o->leak_block) {
      /* G = sum_j A_j^H A_j: every slice's equations, each with a target of
       * zero but in its own kernel's right-hand side. */
      double part = 0;
      rc = im2col(p->dev, &p->calib, slice, a, err);
      if (rc == 0)
        rc = mr_vec_sumsq(p->dev, rows * n, a, &part, err);
      trace += part;
      if (rc == 0)
        rc = mr_blas_herk(p->dev, MR_BLAS_C, 1.0f, am, m == 0 ? 0.0f : 1.0f, gm, 1, err);
    }
    if (rc == 0)
      rc = im2col(p->dev, &target, slice, b, err);
    mr_cmat rhs = {weights + (size_t)m * o->nc * n, (int)n, o->nc, (int)n, n * ntgt};
    if (rc == 0)
      rc = mr_blas_gemm(p->dev, MR_BLAS_C, MR_BLAS_N, 1.0f, am, bm, 0.0f, rhs, 1, err);
  }
  /* One regularisation for all classes: the full kernel's. */
  float lambda = (float)(o->lambda * trace / (double)n);
  for (int q = 1; rc == 0 && q < p->nclass; q++) {
    const kernel_class *c = &p->cls[q];
    mr_cfloat *wq = weights + c->offset;
    rc = class_equations(p, c, g, weights, t, gc, wq, err);
    mr_cmat gq = mr_cmat_dense(gc, c->n, c->n), xq = mr_cmat_dense(wq, c->n, (int)ntgt);
    if (rc == 0)
      rc = solve_in_double(p->dev, gq, lambda, xq, err);
  }
  if (rc == 0) {
    mr_cmat x = {weights, (int)n, (int)ntgt, (int)n, n * ntgt};
    rc = solve_in_double(p->dev, gm, lambda, x, err);
  }
  mr_buf_destroy(buf);
  return rc;
}

int mr_slice_grappa_apply(mr_slice_grappa_plan *p, const mr_cfloat *weights,
                          const mr_cfloat *collapsed, mr_cfloat *slices, mr_err *err) {
  const mr_slice_grappa_opts *o = &p->o;
  size_t n = (size_t)p->n_src, ntgt = (size_t)o->mb * o->nc;
  size_t lines = IM2COL_MAX_VALUES / (n * (size_t)o->nx);
  if (lines < 1)
    lines = 1;
  if (lines > (size_t)o->ny)
    lines = (size_t)o->ny;
  /* an edge class serves at most a column of lines or ystep rows */
  size_t edge = (size_t)o->ny > (size_t)o->ystep * o->nx ? (size_t)o->ny
                                                          : (size_t)o->ystep * o->nx;
  size_t rows_max = lines * o->nx > edge ? lines * o->nx : edge;
  mr_buf *buf;
  int rc = scratch(p->dev, rows_max * n + edge * ntgt, &buf, err);
  if (rc < 0)
    return rc;
  mr_cfloat *a = mr_buf_data(buf), *tmp = a + rows_max * n;
  mr_cmat w = {(mr_cfloat *)weights, (int)n, (int)ntgt, (int)n, n * ntgt};
  for (size_t y0 = 0; rc == 0 && y0 < (size_t)o->ny; y0 += lines) {
    size_t y1 = y0 + lines < (size_t)o->ny ? y0 + lines : (size_t)o->ny;
    mr_sg_window win = {.nc = o->nc, .nx = o->nx, .ny = o->ny, .kx = o->kx, .ky = o->ky,
                        .ystep = o->ystep, .i1 = o->kx, .j1 = o->ky, .x0 = 0, .x1 = o->nx,
                        .y0 = (int)y0, .y1 = (int)y1};
    int rows = (int)((y1 - y0) * o->nx);
    rc = im2col(p->dev, &win, collapsed, a, err);
    /* Row y nx + x of column m nc + c is slices[m][c][y][x]. */
    mr_cmat am = {a, rows, (int)n, rows, 0};
    mr_cmat out = {slices + y0 * o->nx, rows, (int)ntgt, o->nx * o->ny, 0};
    if (rc == 0)
      rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, 1.0f, am, w, 0.0f, out, 1, err);
  }
  /* The edge frame again, each class with its truncated kernel: the result
   * is a batch of (x1 - x0) x (y1 - y0) boxes, one per slice and coil. */
  for (int q = 1; rc == 0 && q < p->nclass; q++) {
    const kernel_class *c = &p->cls[q];
    mr_sg_window win = {.nc = o->nc, .nx = o->nx, .ny = o->ny, .kx = o->kx, .ky = o->ky,
                        .ystep = o->ystep, .i0 = c->i0, .i1 = c->i1, .j0 = c->j0, .j1 = c->j1,
                        .x0 = c->x0, .x1 = c->x1, .y0 = c->y0, .y1 = c->y1};
    int rows = (c->x1 - c->x0) * (c->y1 - c->y0);
    rc = im2col(p->dev, &win, collapsed, a, err);
    mr_cmat am = mr_cmat_dense(a, rows, c->n), out = mr_cmat_dense(tmp, rows, (int)ntgt);
    mr_cmat wq = mr_cmat_dense((mr_cfloat *)weights + c->offset, c->n, (int)ntgt);
    if (rc == 0)
      rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_N, 1.0f, am, wq, 0.0f, out, 1, err);
    size_t box[3] = {(size_t)(c->x1 - c->x0), (size_t)(c->y1 - c->y0), 1};
    size_t full[3] = {(size_t)o->nx, (size_t)o->ny, 1}, zero[3] = {0, 0, 0};
    size_t at[3] = {(size_t)c->x0, (size_t)c->y0, 0};
    if (rc == 0)
      rc = mr_block_copy(p->dev, ntgt, tmp, box, zero, slices, full, at, box, err);
  }
  mr_buf_destroy(buf);
  if (rc == 0)
    rc = mr_slice_grappa_caipi(p->dev, o->nc, o->nx, o->ny, o->caipi, 0, o->mb, -1, slices, err);
  return rc;
}

/* Host arrays to and from the plan's device (the CPU uses them in place). */
static int on_device(mr_device *dev, const mr_cfloat *host, size_t values, mr_buf **out,
                     mr_err *err) {
  int rc = mr_buf_create(dev, values * sizeof *host, out, err);
  if (rc == 0 && host != NULL)
    rc = mr_buf_upload(*out, 0, host, values * sizeof *host, err);
  if (rc < 0 && *out != NULL) {
    mr_buf_destroy(*out);
    *out = NULL;
  }
  return rc;
}

int mr_slice_grappa_calibrate_host(mr_slice_grappa_plan *p, const mr_cfloat *reference,
                                   mr_cfloat *weights, mr_err *err) {
  if (!mr_device_is_gpu(p->dev))
    return mr_slice_grappa_calibrate(p, reference, weights, err);
  size_t ref = (size_t)p->o.mb * p->o.nc * p->o.ny * p->o.nx;
  size_t nw = mr_slice_grappa_weights_count(&p->o);
  mr_buf *r = NULL, *w = NULL;
  int rc = on_device(p->dev, reference, ref, &r, err);
  if (rc == 0)
    rc = on_device(p->dev, NULL, nw, &w, err);
  if (rc == 0)
    rc = mr_slice_grappa_calibrate(p, mr_buf_data(r), mr_buf_data(w), err);
  if (rc == 0)
    rc = mr_buf_download(w, 0, weights, nw * sizeof *weights, err);
  mr_buf_destroy(w);
  mr_buf_destroy(r);
  return rc;
}

int mr_slice_grappa_apply_host(mr_slice_grappa_plan *p, const mr_cfloat *weights,
                               const mr_cfloat *collapsed, mr_cfloat *slices, mr_err *err) {
  if (!mr_device_is_gpu(p->dev))
    return mr_slice_grappa_apply(p, weights, collapsed, slices, err);
  size_t plane = (size_t)p->o.nc * p->o.ny * p->o.nx;
  mr_buf *w = NULL, *c = NULL, *s = NULL;
  int rc = on_device(p->dev, weights, mr_slice_grappa_weights_count(&p->o), &w, err);
  if (rc == 0)
    rc = on_device(p->dev, collapsed, plane, &c, err);
  if (rc == 0)
    rc = on_device(p->dev, NULL, plane * p->o.mb, &s, err);
  if (rc == 0)
    rc = mr_slice_grappa_apply(p, mr_buf_data(w), mr_buf_data(c), mr_buf_data(s), err);
  if (rc == 0)
    rc = mr_buf_download(s, 0, slices, plane * p->o.mb * sizeof *slices, err);
  mr_buf_destroy(s);
  mr_buf_destroy(c);
  mr_buf_destroy(w);
  return rc;
}
