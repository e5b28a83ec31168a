/* GRAPPA plans: option checks, the shape, the calibration's dispatch (the
 * CPU's in double precision; on a GPU the fused and hybrid methods, or the
 * direct one through blas.h and solve.h in single precision), and the
 * filling of missing lines (im2col, one GEMM per segment, scatter; on the
 * CPU a one-segment plan fills in hybrid space, grappa_cpu.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "buf.h"
#include "error.h"
#include "grappa_impl.h"
#include "solve.h"
#include "vec.h"

/* The source vectors of one fill step stay under this many values (a
 * quarter GiB): bigger k-spaces are filled in readout chunks. On the CPU
 * the steps are smaller (8 MB): a step's buffers then come back from the
 * allocator warm, where a slice's whole 84 MB (32 coils, 256 x 256, R 4)
 * were fresh pages to fault in and zero for every slice. */
#define IM2COL_MAX_VALUES ((size_t)32 << 20)
#define IM2COL_CPU_MAX_VALUES ((size_t)1 << 20)

mr_grappa_opts mr_grappa_opts_default(int nc, int nro, int nacs, int accel) {
  mr_grappa_opts o = {.nc = nc, .nro = nro, .nacs = nacs, .accel = accel, .kpe = 4, .kro = 5,
                      .segments = 1, .eta = 1.0f, .chi = 1e-4f, .kappa = 0.0f,
                      .method = MR_GRAPPA_FUSED};
  return o;
}

size_t mr_grappa_weights_count(const mr_grappa_opts *o) {
  return (size_t)o->segments * ((size_t)o->kpe * o->kro * o->nc) * ((size_t)(o->accel - 1) * o->nc);
}

static int check_opts(const mr_grappa_opts *o, mr_err *err) {
  if (o->nc < 1 || o->nro < 1 || o->accel < 2 || o->accel > MR_GRAPPA_MAX_ACCEL ||
      o->kpe < 2 || o->kro < 1)
    return mr_err_set(err, MR_EINVAL,
                      "grappa: need coils >= 1, readout >= 1, R in 2..%d, kernel >= 2 x 1; got %d "
                      "coils, %d samples, R %d, kernel %d x %d",
                      MR_GRAPPA_MAX_ACCEL, o->nc, o->nro, o->accel, o->kpe, o->kro);
  if (o->kro > o->nro)
    return mr_err_set(err, MR_EINVAL,
                      "grappa: kernel readout size %d exceeds the %d readout samples", o->kro,
                      o->nro);
  long need = (long)(o->kpe - 1) * o->accel + 1;
  if (o->nacs < need)
    return mr_err_set(err, MR_EINVAL,
                      "grappa: a %d x %d kernel at R %d needs at least %ld consecutive ACS lines, "
                      "got %d",
                      o->kpe, o->kro, o->accel, need, o->nacs);
  if (o->segments < 1 || o->segments > MR_GRAPPA_MAX_SEGMENTS ||
      o->segments > o->nro - o->kro + 1)
    return mr_err_set(err, MR_EINVAL, "grappa: %d segments for %d readout positions (at most %d)",
                      o->segments, o->nro - o->kro + 1, MR_GRAPPA_MAX_SEGMENTS);
  if (!(o->eta >= 0) || !(o->chi >= 0) || !(o->kappa >= 0 && o->kappa < 1))
    return mr_err_set(err, MR_EINVAL,
                      "grappa: need eta >= 0, chi >= 0, 0 <= kappa < 1; got %g, %g, %g", o->eta,
                      o->chi, o->kappa);
  if (o->method != MR_GRAPPA_FUSED && o->method != MR_GRAPPA_HYBRID &&
      o->method != MR_GRAPPA_DIRECT)
    return mr_err_set(err, MR_EINVAL, "grappa: unknown method %d", (int)o->method);
  /* Matrix dimensions and leading dimensions are ints in BLAS. */
  long n_src = (long)o->kpe * o->kro * o->nc, n_tgt = (long)(o->accel - 1) * o->nc;
  long positions = (long)(o->nacs - need + 1) * (o->nro - o->kro + 1);
  if (n_src * (n_src + n_tgt) > INT32_MAX || n_src * positions > INT32_MAX)
    return mr_err_set(err, MR_EINVAL, "grappa: %ld unknowns x %ld equations is too large", n_src,
                      positions);
  return 0;
}

static void make_geom(const mr_grappa_opts *o, mr_grappa_geom *g) {
  memset(g, 0, sizeof *g);
  g->nc = o->nc;
  g->nro = o->nro;
  g->nacs = o->nacs;
  g->accel = o->accel;
  g->kpe = o->kpe;
  g->kro = o->kro;
  g->nseg = o->segments;
  g->n_src = o->kpe * o->kro * o->nc;
  g->n_tgt = (o->accel - 1) * o->nc;
  g->nb_src = o->kpe * o->nc;
  g->npe = o->nacs - (o->kpe - 1) * o->accel;
  g->dpe = o->accel * (o->kpe / 2 - 1);
  g->dro = (o->kro - 1) / 2;
  g->nsh_ro = o->nro - o->kro + 1;
  for (int s = 0; s <= g->nseg; s++)
    g->c0[s] = (int)((long)s * g->nsh_ro / g->nseg);
  for (int s = 0; s < g->nseg; s++) {
    int n = mr_grappa_seg_positions(g, s);
    if (n > g->nro_max)
      g->nro_max = n;
    g->ndisc[s] = (int)(o->kappa * (double)g->npe * n);
    if (g->ndisc[s] > g->ndisc_max)
      g->ndisc_max = g->ndisc[s];
  }
}

uint64_t mr_grappa_host_bytes(const mr_grappa_opts *opts, int ne1) {
  mr_grappa_geom g;
  make_geom(opts, &g);
  return mr_grappa_cpu_bytes(&g, ne1);
}

int mr_grappa_plan_create(mr_device *dev, const mr_grappa_opts *opts, mr_grappa_plan **out,
                          mr_err *err) {
  *out = NULL;
  int rc = check_opts(opts, err);
  if (rc < 0)
    return rc;
  mr_grappa_plan *p = calloc(1, sizeof *p);
  if (p == NULL)
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory");
  p->dev = dev;
  p->opts = *opts;
  make_geom(opts, &p->g);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    rc = mr_grappa_cuda_create(p, err);
  else
#endif
    rc = mr_grappa_cpu_create(p, err);
  if (rc < 0) {
    free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void mr_grappa_plan_destroy(mr_grappa_plan *p) {
  if (p == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    mr_grappa_cuda_destroy(p);
  else
#endif
    mr_grappa_cpu_destroy(p);
  free(p);
}

const mr_grappa_opts *mr_grappa_plan_opts(const mr_grappa_plan *p) { return &p->opts; }

/* ---- backend dispatch ------------------------------------------------- */

static int im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1, const int *lines, int nblk,
                  int x0, int x1, mr_cfloat *src, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return mr_grappa_cuda_im2col(p, kspace, ne1, lines, nblk, x0, x1, src, err);
#endif
  return mr_grappa_cpu_im2col(p, kspace, ne1, lines, nblk, x0, x1, src);
}

static int scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk, int x0,
                   int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return mr_grappa_cuda_scatter(p, tv, lines, nblk, x0, x1, sampled, ne1, kspace, err);
#endif
  return mr_grappa_cpu_scatter(p, tv, lines, nblk, x0, x1, sampled, ne1, kspace);
}

/* ---- calibration ------------------------------------------------------ */

#ifdef MR_HAVE_CUDA
typedef struct direct_scratch {
  mr_buf *a, *b, *m;
} direct_scratch;

/* The normal equations as the seed writes them: M = A A^H (HERK),
 * U^H = A B^H (GEMM), then (M + lambda I) X = U^H by Cholesky, X = W^H. */
static int calibrate_segment(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s,
                             const direct_scratch *d, mr_cfloat *x, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  int n = g->npe * mr_grappa_seg_positions(g, s);
  mr_cfloat *a = mr_buf_data(d->a), *b = mr_buf_data(d->b), *m = mr_buf_data(d->m);
  int rc = mr_grappa_cuda_build(p, acs, coil_stride, s, a, b, err);
  mr_cmat am = {a, g->n_src, n, g->n_src, 0}, bm = {b, g->n_tgt, n, g->n_tgt, 0};
  mr_cmat mm = {m, g->n_src, g->n_src, g->n_src, 0}, xm = {x, g->n_src, g->n_tgt, g->n_src, 0};
  if (rc == 0)
    rc = mr_blas_herk(p->dev, MR_BLAS_N, 1.0f, am, 0.0f, mm, 1, err);
  if (rc == 0)
    rc = mr_blas_gemm(p->dev, MR_BLAS_N, MR_BLAS_C, 1.0f, am, bm, 0.0f, xm, 1, err);
  double trace = 0;
  if (rc == 0)
    rc = mr_vec_sumsq(p->dev, (size_t)g->n_src * n, a, &trace, err);
  if (rc < 0)
    return rc;
  if (!(trace > 0))
    return mr_err_set(err, MR_ENUMERIC, "grappa: the ACS lines of segment %d carry no signal", s);
  float lambda = (float)(p->opts.chi * trace / g->n_src);
  return mr_solve_hpd(p->dev, mm, lambda, xm, 1, err);
}

static int calibrate_direct(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                            mr_cfloat *weights, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  size_t most = (size_t)g->npe * g->nro_max;
  direct_scratch d = {0};
  int rc = mr_grappa_cuda_prepare(p, acs, coil_stride, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, (size_t)g->n_src * most * sizeof(mr_cfloat), &d.a, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, (size_t)g->n_tgt * most * sizeof(mr_cfloat), &d.b, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, (size_t)g->n_src * g->n_src * sizeof(mr_cfloat), &d.m, err);
  for (int s = 0; rc == 0 && s < g->nseg; s++)
    rc = calibrate_segment(p, acs, coil_stride, s, &d, weights + (size_t)s * g->n_src * g->n_tgt,
                           err);
  mr_buf_destroy(d.a);
  mr_buf_destroy(d.b);
  mr_buf_destroy(d.m);
  return rc;
}
#endif

int mr_grappa_calibrate(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                        mr_cfloat *weights, mr_err *err) {
  if (coil_stride < (size_t)p->g.nacs * p->g.nro)
    return mr_err_set(err, MR_EINVAL, "grappa: coil stride %zu is less than %d ACS lines of %d",
                      coil_stride, p->g.nacs, p->g.nro);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    return p->opts.method == MR_GRAPPA_DIRECT
               ? calibrate_direct(p, acs, coil_stride, weights, err)
               : mr_grappa_cuda_fused(p, acs, coil_stride, weights, err);
#endif
  return mr_grappa_cpu_calibrate(p, acs, coil_stride, weights, NULL, NULL, err);
}

int mr_grappa_calibrate_steps(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                              mr_cfloat *weights, double *build_ms, double *solve_ms, mr_err *err) {
  *build_ms = *solve_ms = 0;
  if (coil_stride < (size_t)p->g.nacs * p->g.nro)
    return mr_err_set(err, MR_EINVAL, "grappa: coil stride %zu is less than %d ACS lines of %d",
                      coil_stride, p->g.nacs, p->g.nro);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev)) {
    if (p->opts.method == MR_GRAPPA_DIRECT)
      return mr_err_set(err, MR_EINVAL, "grappa: the direct method on a GPU is not timed by steps");
    return mr_grappa_cuda_fused_steps(p, acs, coil_stride, weights, build_ms, solve_ms, err);
  }
#endif
  return mr_grappa_cpu_calibrate(p, acs, coil_stride, weights, build_ms, solve_ms, err);
}

int mr_grappa_chol_tile(mr_device *dev, int rows, double *panel, double *inv, double *tile_ms,
                        double *below_ms, double *phase_us, mr_err *err) {
  if (rows < MR_GRAPPA_TILE)
    return mr_err_set(err, MR_EINVAL, "grappa: a tile step needs %d rows, not %d", MR_GRAPPA_TILE,
                      rows);
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(dev))
    return mr_grappa_cuda_chol_tile(dev, rows, panel, inv, tile_ms, below_ms, phase_us, err);
#endif
  (void)phase_us;
  (void)panel;
  (void)inv;
  (void)dev;
  (void)tile_ms;
  (void)below_ms;
  return mr_err_set(err, MR_EINVAL, "grappa: the tile step is the GPU factorisation's");
}

int mr_grappa_status(mr_grappa_plan *p, mr_err *err) {
  (void)p;
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev) && p->opts.method != MR_GRAPPA_DIRECT)
    return mr_grappa_cuda_status(p, err);
#endif
  return 0; /* the direct path reports failures as they happen */
}

/* ---- filling ---------------------------------------------------------- */

/* The residue modulo R most sampled lines share; -1 when none is sampled. */
static int pattern_phase(const uint8_t *sampled, size_t ne1, int accel) {
  size_t count[MR_GRAPPA_MAX_ACCEL] = {0};
  int best = -1;
  for (size_t y = 0; y < ne1; y++)
    if (sampled[y])
      count[y % (size_t)accel]++;
  for (int r = 0; r < accel; r++)
    if (count[r] > 0 && (best < 0 || count[r] > count[best]))
      best = r;
  return best;
}

/* The sampled lines of the pattern that have a missing line among the
 * R - 1 after them (the blocks to compute); counts those missing lines. */
static int *fill_blocks(const uint8_t *sampled, int ne1, int accel, int phase, int *nblk,
                        size_t *filled) {
  int *lines = malloc(((size_t)ne1 / accel + 2) * sizeof *lines);
  *nblk = 0;
  *filled = 0;
  if (lines == NULL)
    return NULL;
  for (int s = phase - accel; s < ne1 - 1; s += accel) {
    int any = 0;
    for (int m = 1; m < accel; m++) {
      int y = s + m;
      if (y >= 0 && y < ne1 && !sampled[y]) {
        any = 1;
        (*filled)++;
      }
    }
    if (any)
      lines[(*nblk)++] = s;
  }
  return lines;
}

typedef struct fill_scratch {
  mr_buf *lines, *sampled, *src, *tv;
} fill_scratch;

static void fill_scratch_free(fill_scratch *f) {
  mr_buf_destroy(f->lines);
  mr_buf_destroy(f->sampled);
  mr_buf_destroy(f->src);
  mr_buf_destroy(f->tv);
}

static int fill_segment(mr_grappa_plan *p, const mr_cfloat *weights, int s, const fill_scratch *f,
                        int nblk, int width, int ne1, mr_cfloat *kspace, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  const int *lines = mr_buf_data(f->lines);
  const uint8_t *sampled = mr_buf_data(f->sampled);
  mr_cfloat *src = mr_buf_data(f->src), *tv = mr_buf_data(f->tv);
  mr_cmat xm = {(mr_cfloat *)weights + (size_t)s * g->n_src * g->n_tgt, g->n_src, g->n_tgt,
                g->n_src, 0};
  int rc = 0;
  for (int x0 = mr_grappa_seg_x0(g, s), end = mr_grappa_seg_x1(g, s); rc == 0 && x0 < end;
       x0 += width) {
    int x1 = x0 + width < end ? x0 + width : end, cols = (x1 - x0) * nblk;
    mr_cmat sm = {src, g->n_src, cols, g->n_src, 0}, tm = {tv, g->n_tgt, cols, g->n_tgt, 0};
    rc = im2col(p, kspace, ne1, lines, nblk, x0, x1, src, err);
    if (rc == 0)
      rc = mr_blas_gemm(p->dev, MR_BLAS_C, MR_BLAS_N, 1.0f, xm, sm, 0.0f, tm, 1, err);
    if (rc == 0)
      rc = scatter(p, tv, lines, nblk, x0, x1, sampled, ne1, kspace, err);
  }
  return rc;
}

int mr_grappa_apply(mr_grappa_plan *p, const mr_cfloat *weights, const uint8_t *sampled, size_t ne1,
                    mr_cfloat *kspace, size_t *filled, mr_err *err) {
  const mr_grappa_geom *g = &p->g;
  size_t nfilled = 0;
  if (filled != NULL)
    *filled = 0;
  if (ne1 < 1 || ne1 > INT32_MAX)
    return mr_err_set(err, MR_EINVAL, "grappa: %zu lines", ne1);
  int phase = pattern_phase(sampled, ne1, g->accel);
  if (phase < 0)
    return mr_err_set(err, MR_EINVAL, "grappa: no sampled line to fill from");
  int nblk;
  int *lines = fill_blocks(sampled, (int)ne1, g->accel, phase, &nblk, &nfilled);
  if (lines == NULL)
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory");
  if (nblk == 0) {
    free(lines);
    return 0;
  }
  if (!mr_device_is_gpu(p->dev) && g->nseg == 1) {
    int rc = mr_grappa_cpu_fill(p, weights, lines, nblk, sampled, (int)ne1, kspace, err);
    free(lines);
    if (rc == 0 && filled != NULL)
      *filled = nfilled;
    return rc;
  }
  /* Readout samples per step: as many as keep the source vectors small. */
  size_t per_x = (size_t)g->n_src * nblk;
  size_t most = mr_device_is_gpu(p->dev) ? IM2COL_MAX_VALUES : IM2COL_CPU_MAX_VALUES;
  int width = (int)(most / per_x);
  if (width < 1)
    width = 1;
  if (width > g->nro)
    width = g->nro;
  size_t cols = (size_t)width * nblk;
  fill_scratch f = {0};
  int rc = mr_buf_create(p->dev, (size_t)nblk * sizeof(int), &f.lines, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, ne1, &f.sampled, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, (size_t)g->n_src * cols * sizeof(mr_cfloat), &f.src, err);
  if (rc == 0)
    rc = mr_buf_create(p->dev, (size_t)g->n_tgt * cols * sizeof(mr_cfloat), &f.tv, err);
  if (rc == 0)
    rc = mr_buf_upload(f.lines, 0, lines, (size_t)nblk * sizeof(int), err);
  if (rc == 0)
    rc = mr_buf_upload(f.sampled, 0, sampled, ne1, err);
  for (int s = 0; rc == 0 && s < g->nseg; s++)
    rc = fill_segment(p, weights, s, &f, nblk, width, (int)ne1, kspace, err);
  fill_scratch_free(&f);
  free(lines);
  if (rc == 0 && filled != NULL)
    *filled = nfilled;
  return rc;
}

/* ---- host-memory wrappers --------------------------------------------- */

typedef struct host_call {
  mr_grappa_plan *p;
  const mr_cfloat *acs;
  size_t coil_stride;
  const mr_cfloat *weights_in;
  mr_cfloat *weights_out;
  const uint8_t *sampled;
  size_t ne1;
  mr_cfloat *kspace;
  size_t *filled;
} host_call;

/* On a GPU: the ACS lines up (compacted), calibrate, the weights down. */
static int calibrate_task(mr_device *dev, void *arg, mr_err *err) {
  host_call *h = arg;
  const mr_grappa_geom *g = &h->p->g;
  size_t per_coil = (size_t)g->nacs * g->nro, nw = mr_grappa_weights_count(&h->p->opts);
  mr_buf *acs = NULL, *w = NULL;
  int rc = mr_buf_create(dev, per_coil * g->nc * sizeof(mr_cfloat), &acs, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nw * sizeof(mr_cfloat), &w, err);
  for (int c = 0; rc == 0 && c < g->nc; c++)
    rc = mr_buf_upload(acs, c * per_coil * sizeof(mr_cfloat), h->acs + c * h->coil_stride,
                       per_coil * sizeof(mr_cfloat), err);
  if (rc == 0)
    rc = mr_grappa_calibrate(h->p, mr_buf_data(acs), per_coil, mr_buf_data(w), err);
  if (rc == 0)
    rc = mr_buf_download(w, 0, h->weights_out, nw * sizeof(mr_cfloat), err);
  if (rc == 0)
    rc = mr_grappa_status(h->p, err);
  mr_buf_destroy(acs);
  mr_buf_destroy(w);
  return rc;
}

int mr_grappa_calibrate_host(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                             mr_cfloat *weights, mr_err *err) {
  if (!mr_device_is_gpu(p->dev))
    return mr_grappa_calibrate(p, acs, coil_stride, weights, err);
  host_call h = {.p = p, .acs = acs, .coil_stride = coil_stride, .weights_out = weights};
  return mr_device_run(p->dev, calibrate_task, &h, err);
}

static int apply_task(mr_device *dev, void *arg, mr_err *err) {
  host_call *h = arg;
  const mr_grappa_geom *g = &h->p->g;
  size_t nk = (size_t)g->nc * h->ne1 * g->nro, nw = mr_grappa_weights_count(&h->p->opts);
  mr_buf *k = NULL, *w = NULL;
  int rc = mr_buf_create(dev, nk * sizeof(mr_cfloat), &k, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nw * sizeof(mr_cfloat), &w, err);
  if (rc == 0)
    rc = mr_buf_upload(k, 0, h->kspace, nk * sizeof(mr_cfloat), err);
  if (rc == 0)
    rc = mr_buf_upload(w, 0, h->weights_in, nw * sizeof(mr_cfloat), err);
  if (rc == 0)
    rc = mr_grappa_apply(h->p, mr_buf_data(w), h->sampled, h->ne1, mr_buf_data(k), h->filled, err);
  if (rc == 0)
    rc = mr_buf_download(k, 0, h->kspace, nk * sizeof(mr_cfloat), err);
  mr_buf_destroy(k);
  mr_buf_destroy(w);
  return rc;
}

int mr_grappa_apply_host(mr_grappa_plan *p, const mr_cfloat *weights, const uint8_t *sampled,
                         size_t ne1, mr_cfloat *kspace, size_t *filled, mr_err *err) {
  if (!mr_device_is_gpu(p->dev))
    return mr_grappa_apply(p, weights, sampled, ne1, kspace, filled, err);
  host_call h = {.p = p, .weights_in = weights, .sampled = sampled, .ne1 = ne1,
                 .kspace = kspace, .filled = filled};
  return mr_device_run(p->dev, apply_task, &h, err);
}
