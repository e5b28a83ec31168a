/* Slice-GRAPPA plans: option checks, the calibration (CAIPI-shifted
 * reference, source matrices (and the plain kernels' targets) by im2col,
 * widened to double for the Gram matrix and the right-hand sides, one
 * double-precision Cholesky solve on the plan's device for every slice's
 * kernel, and one for each truncated edge kernel from the parts of the
 * same equations) and
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
#include "cpu_threads.h"
#include "device_impl.h"
#include "error.h"
#include "slice_grappa_impl.h"
#include "vec.h"

/* The source matrix of one separation step stays under this many values (a
 * quarter GiB): bigger k-spaces go in chunks of lines. */
#define IM2COL_MAX_VALUES ((size_t)32 << 20)

/* Kernel classes: (2 (kx/2) + 1) x (2 (ky/2) + 1). */
#define MAX_CLASSES (MR_SLICE_GRAPPA_MAX_KERNEL * MR_SLICE_GRAPPA_MAX_KERNEL)

struct mr_slice_grappa_plan {
  mr_device *dev;
  mr_slice_grappa_opts o;
  int n_src;              /* kx ky nc */
  mr_sg_window calib;     /* the calibration box */
  int calib_rows;         /* its positions */
  int nclass;             /* class 0 is the full kernel */
  mr_sg_class cls[MAX_CLASSES];
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
static size_t make_classes(const mr_slice_grappa_opts *o, mr_sg_class *cls, int *count) {
  int hx = o->kx / 2, hy = o->ky / 2;
  size_t offset = 0, ntgt = (size_t)o->mb * o->nc;
  *count = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int ey = -hy; ey <= hy; ey++)
      for (int ex = -hx; ex <= hx; ex++) {
        if ((pass == 0) != (ex == 0 && ey == 0))
          continue;
        mr_sg_class *c = &cls[(*count)++];
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
  mr_sg_class cls[MAX_CLASSES];
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

static int gram(mr_device *dev, const mr_sg_window *w, const mr_cfloat *a, int accumulate,
                mr_cdouble *wide, mr_cdouble *g, mr_cdouble *own, int ldo, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_gram(dev, w, a, accumulate, wide, g, own, ldo, err);
#endif
  return mr_sg_cpu_gram(dev, w, a, accumulate, wide, g, own, ldo, err);
}

static int cross(mr_device *dev, int rows, int n, const mr_cdouble *wide, int nb,
                 const mr_cfloat *b, mr_cdouble *bwide, mr_cdouble *rhs, int ldr, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_cross(dev, rows, n, wide, nb, b, bwide, rhs, ldr, err);
#endif
  (void)err;
  return mr_sg_cpu_cross(dev, rows, n, wide, nb, b, bwide, rhs, ldr);
}

static int class_equations(mr_device *dev, const mr_sg_system *s, int q, const mr_cdouble *g,
                           const mr_cdouble *rhs, double lambda, mr_cdouble *gq,
                           mr_cdouble *rq, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_class(dev, s, q, g, rhs, lambda, gq, rq, err);
#endif
  (void)err;
  return mr_sg_cpu_class(dev, s, q, g, rhs, lambda, gq, rq);
}

static int solve_classes(mr_device *dev, const mr_sg_system *s, const mr_cdouble *g,
                         const mr_cdouble *rhs, double lambda, mr_cdouble *scr, int slots,
                         mr_cfloat *weights, int *failed, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_sg_cuda_solve(dev, s, g, rhs, lambda, scr, slots, weights, failed, err);
#endif
  (void)err;
  return mr_sg_cpu_solve(dev, s, g, rhs, lambda, scr, slots, weights, failed);
}

/* Classes solved side by side: one on a GPU (its solver works through
 * them on one stream), one per thread on the CPU (no more than there are
 * classes). */
static int solve_slots(mr_device *dev, int nclass) {
  if (mr_device_is_gpu(dev))
    return 1;
  int threads = mr_cpu_threads_count(mr_device_threads(dev));
  return threads < nclass ? threads : nclass;
}

/* (a + lambda I) x = b by the eigen-decomposition of a, the eigenvectors
 * whose eigenvalues are under a float epsilon of the largest left out: the
 * fallback for equations the Cholesky factorisation found not positive
 * definite (lambda 0 and data that span fewer directions than the kernel
 * has taps: a repeated coil, no signal). A cut at n epsilons lost too much
 * on noiseless data (3.8% leakage). ad and bd: a and b in double (ad
 * overwritten by the eigenvectors, bd by x); w: n values and n * nrhs more
 * of scratch. With lambda 0: the least-norm solution. */
static int solve_clamped(size_t n, size_t nrhs, double lambda, double complex *ad,
                         double complex *bd, double *w, double complex *t, mr_err *err) {
  lapack_int info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)n,
                                   (lapack_complex_double *)ad, (lapack_int)n, w);
  if (info != 0)
    return mr_err_set(err, MR_ENUMERIC,
                      "slice-GRAPPA: the eigen-decomposition of the normal equations failed (%d)",
                      (int)info);
  /* t = V^H b, scaled by 1 / (w + lambda) where w is data; x = V t */
  const double complex one = 1, zero = 0;
  cblas_zgemm(CblasColMajor, CblasConjTrans, CblasNoTrans, (int)n, (int)nrhs, (int)n,
              &one, ad, (int)n, bd, (int)n, &zero, t, (int)n);
  double floor = FLT_EPSILON * w[n - 1]; /* w ascends */
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

/* The classes whose Cholesky failed, by solve_clamped on the host: each
 * one's equations (without lambda) gathered on the device into gq / rq,
 * downloaded, solved and the weights uploaded. */
static int solve_failed(mr_slice_grappa_plan *p, const mr_sg_system *s, const int *failed,
                        const mr_cdouble *g, const mr_cdouble *rhs, double lambda,
                        mr_cdouble *gq, mr_cdouble *rq, mr_cfloat *weights, mr_err *err) {
  size_t n = (size_t)s->n, nrhs = (size_t)s->ntgt;
  size_t bytes = (n * n + 2 * n * nrhs) * sizeof(double complex) + n * sizeof(double) +
                 n * nrhs * sizeof(mr_cfloat);
  char *host = NULL;
  int rc = 0;
  for (int q = 0; rc == 0 && q < s->nclass; q++) {
    if (!failed[q])
      continue;
    if (host == NULL) {
      mr_err e = {0};
      host = mr_budget_alloc(bytes, "slice-GRAPPA's normal equations", &e);
      if (host == NULL)
        return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "slice-GRAPPA: %s", e.msg);
    }
    size_t nq = (size_t)s->cls[q].n;
    double complex *ad = (double complex *)host, *bd = ad + nq * nq, *t = bd + nq * nrhs;
    double *w = (double *)(t + nq * nrhs);
    mr_cfloat *x = (mr_cfloat *)(w + nq);
    rc = class_equations(p->dev, s, q, g, rhs, 0.0, gq, rq, err);
    if (rc == 0)
      rc = mr_device_download(p->dev, ad, gq, nq * nq * sizeof *ad, err);
    if (rc == 0)
      rc = mr_device_download(p->dev, bd, rq, nq * nrhs * sizeof *bd, err);
    if (rc == 0)
      rc = solve_clamped(nq, nrhs, lambda, ad, bd, w, t, err);
    for (size_t i = 0; rc == 0 && i < nq * nrhs; i++)
      x[i] = (mr_cfloat)bd[i];
    if (rc == 0)
      rc = mr_device_upload(p->dev, weights + s->cls[q].offset, x, nq * nrhs * sizeof *x, err);
  }
  if (host != NULL)
    mr_budget_free(host, bytes);
  return rc;
}

/* The calibration's normal equations are built and solved in double
 * precision on the plan's device: summed in single precision, the Gram
 * matrix of noiseless data carries the rounding of its null space (about
 * 1e-7 of the largest eigenvalue, times the rows' square root), which
 * outweighs a lambda of 1e-5 of the mean diagonal, and a Cholesky
 * factorisation of a + lambda I fails (the H100's cuBLAS sums gave column
 * 508 of 512); single-precision factorisations of the leak-blocked
 * equations at a small lambda failed on the GPU where the CPU's passed.
 * In double every class's Cholesky succeeds there; solve_failed is left
 * for equations without a positive-definite solve. */
int mr_slice_grappa_calibrate(mr_slice_grappa_plan *p, const mr_cfloat *reference,
                              mr_cfloat *weights, mr_err *err) {
  const mr_slice_grappa_opts *o = &p->o;
  size_t plane = (size_t)o->nc * o->ny * o->nx, rows = (size_t)p->calib_rows;
  size_t n = (size_t)p->n_src, ntgt = (size_t)o->mb * o->nc;
  int slots = solve_slots(p->dev, p->nclass);
  /* doubles (two floats each, first: aligned): A and B (plain) widened,
   * G, the right-hand sides, the classes' solve scratch; floats: the
   * shifted reference (mb planes), collapsed (plain: 1 plane), A, B (plain:
   * leak-blocked targets are A's centre tap) */
  size_t targets = o->leak_block ? 0 : rows * o->nc;
  size_t doubles = rows * n + targets + n * n + n * ntgt + slots * (n * n + n * ntgt);
  size_t total = 2 * doubles + (size_t)o->mb * plane + (o->leak_block ? 0 : plane) +
                 rows * n + targets;
  mr_sg_system sys = {.kx = o->kx, .ky = o->ky, .nc = o->nc, .n = (int)n, .ntgt = (int)ntgt,
                      .cls = p->cls, .nclass = p->nclass};
  int failed[MAX_CLASSES] = {0};
  mr_buf *buf;
  int rc = scratch(p->dev, total, &buf, err);
  if (rc < 0)
    return rc;
  mr_cdouble *aw = mr_buf_data(buf), *bw = aw + rows * n, *g = bw + targets;
  mr_cdouble *rhs = g + n * n, *slot = rhs + n * ntgt;
  mr_cfloat *shifted = (mr_cfloat *)(slot + slots * (n * n + n * ntgt));
  mr_cfloat *collapsed = shifted + o->mb * plane;
  mr_cfloat *a = collapsed + (o->leak_block ? 0 : plane), *b = a + rows * n;
  mr_sg_window target = p->calib;
  target.kx = target.ky = target.i1 = target.j1 = 1;
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
      rc = gram(p->dev, &p->calib, a, 0, aw, g, NULL, 0, err);
  }
  for (int m = 0; rc == 0 && m < o->mb; m++) {
    const mr_cfloat *slice = shifted + m * plane;
    mr_cdouble *rhs_m = rhs + (size_t)m * o->nc * n;
    if (o->leak_block) {
      /* G = sum_j A_j^H A_j: every slice's equations, each with a target of
       * zero but in its own kernel's right-hand side, A_m^H B_m: B_m is
       * A_m's centre tap, so those are columns of A_m^H A_m. */
      double part = 0;
      rc = im2col(p->dev, &p->calib, slice, a, err);
      if (rc == 0)
        rc = mr_vec_sumsq(p->dev, rows * n, a, &part, err);
      trace += part;
      if (rc == 0)
        rc = gram(p->dev, &p->calib, a, m > 0, aw, g, rhs_m, (int)n, err);
      continue;
    }
    rc = im2col(p->dev, &target, slice, b, err);
    if (rc == 0)
      rc = cross(p->dev, (int)rows, (int)n, aw, o->nc, b, bw, rhs_m, (int)n, err);
  }
  /* One regularisation for all classes: the full kernel's. */
  double lambda = o->lambda * trace / (double)n;
  if (rc == 0)
    rc = solve_classes(p->dev, &sys, g, rhs, lambda, slot, slots, weights, failed, err);
  if (rc == 0)
    rc = solve_failed(p, &sys, failed, g, rhs, lambda, slot, slot + n * n, weights, err);
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
    const mr_sg_class *c = &p->cls[q];
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
