/* GRAPPA on the CPU: equation powers, normalisation and power clipping,
 * the calibration in double precision (explicit A and B, ZHERK, ZGEMM,
 * ZPOSV), and the gather/scatter of filling. The powers are summed in
 * double in a fixed order that the GPU backend repeats exactly, so both
 * clip the same equations. */
#include <cblas.h>
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "device_impl.h"
#include "error.h"
#include "fail.h"
#include "grappa_impl.h"

typedef struct ranked {
  double power;
  int q;
} ranked;

typedef struct cpu_scratch {
  double *line_power; /* [nacs][nro]: sum over coils of |acs|^2 */
  double *col_power;  /* [npe][nro_max] of the segment at hand */
  double *psi;        /* [nseg][npe] */
  uint8_t *discard;   /* [nseg][npe * nro_max] */
  ranked *order;      /* [npe * nro_max] */
} cpu_scratch;

int mr_grappa_cpu_create(mr_grappa_plan *p) {
  const mr_grappa_geom *g = &p->g;
  size_t per_seg = (size_t)g->npe * g->nro_max;
  cpu_scratch *c = calloc(1, sizeof *c);
  if (c == NULL)
    return mr_fail(MR_ENOMEM, "grappa: out of memory");
  c->line_power = malloc((size_t)g->nacs * g->nro * sizeof *c->line_power);
  c->col_power = malloc(per_seg * sizeof *c->col_power);
  c->psi = malloc((size_t)g->nseg * g->npe * sizeof *c->psi);
  c->discard = malloc((size_t)g->nseg * per_seg);
  c->order = malloc(per_seg * sizeof *c->order);
  p->backend = c;
  if (c->line_power == NULL || c->col_power == NULL || c->psi == NULL || c->discard == NULL ||
      c->order == NULL) {
    mr_grappa_cpu_destroy(p);
    return mr_fail(MR_ENOMEM, "grappa: out of memory for calibration scratch");
  }
  return 0;
}

void mr_grappa_cpu_destroy(mr_grappa_plan *p) {
  cpu_scratch *c = p->backend;
  if (c == NULL)
    return;
  free(c->line_power);
  free(c->col_power);
  free(c->psi);
  free(c->discard);
  free(c->order);
  free(c);
  p->backend = NULL;
}

/* Larger power first; among equals the earlier equation. */
static int by_power(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->power != y->power)
    return x->power > y->power ? -1 : 1;
  return (x->q > y->q) - (x->q < y->q);
}

/* Per segment and PE position the normalisation psi, and which equations
 * power clipping discards. */
static int prepare(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride) {
  const mr_grappa_geom *g = &p->g;
  cpu_scratch *c = p->backend;
  for (int l = 0; l < g->nacs; l++)
    for (int x = 0; x < g->nro; x++) {
      double sum = 0;
      for (int k = 0; k < g->nc; k++) {
        mr_cfloat v = acs[k * coil_stride + (size_t)l * g->nro + x];
        double re = crealf(v), im = cimagf(v);
        sum += re * re + im * im;
      }
      c->line_power[(size_t)l * g->nro + x] = sum;
    }
  size_t per_seg = (size_t)g->npe * g->nro_max;
  for (int s = 0; s < g->nseg; s++) {
    int c0 = g->c0[s], n = mr_grappa_seg_positions(g, s);
    uint8_t *discard = c->discard + s * per_seg;
    for (int i = 0; i < g->npe; i++) {
      double row = 0;
      for (int cc = 0; cc < n; cc++) {
        double pa = 0, pb = 0;
        for (int pl = 0; pl < g->kpe; pl++)
          for (int j = 0; j < g->kro; j++)
            pa += c->line_power[(size_t)(i + pl * g->accel) * g->nro + c0 + cc + j];
        for (int m = 1; m < g->accel; m++)
          pb += c->line_power[(size_t)(i + g->dpe + m) * g->nro + c0 + cc + g->dro];
        double pcol = pa * g->n_tgt + pb * g->n_src;
        c->col_power[(size_t)i * n + cc] = pcol;
        row += pcol;
        discard[(size_t)i * n + cc] = 0;
      }
      c->psi[s * g->npe + i] = row > 0 ? pow(row, -0.5 * p->opts.eta) : 0.0;
    }
    int total = g->npe * n;
    if (g->ndisc[s] == 0)
      continue;
    for (int q = 0; q < total; q++)
      c->order[q] = (ranked){c->col_power[q], q};
    qsort(c->order, (size_t)total, sizeof *c->order, by_power);
    for (int r = 0; r < g->ndisc[s]; r++)
      discard[c->order[r].q] = 1;
  }
  return 0;
}

/* A (n_src x positions) and B (n_tgt x positions) of segment s, normalised,
 * the discarded equations zero (column q = i * positions + c). */
static void build_segment(const mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                          int s, double complex *a, double complex *b) {
  const mr_grappa_geom *g = &p->g;
  const cpu_scratch *c = p->backend;
  int c0 = g->c0[s], n = mr_grappa_seg_positions(g, s);
  const uint8_t *discard = c->discard + (size_t)s * g->npe * g->nro_max;
  for (int i = 0; i < g->npe; i++) {
    double psi = c->psi[s * g->npe + i];
    for (int cc = 0; cc < n; cc++) {
      size_t q = (size_t)i * n + cc;
      double w = discard[q] ? 0.0 : psi;
      double complex *acol = a + q * g->n_src, *bcol = b + q * g->n_tgt;
      for (int k = 0; k < g->nc; k++) {
        const mr_cfloat *coil = acs + k * coil_stride;
        for (int pl = 0; pl < g->kpe; pl++) {
          const mr_cfloat *line = coil + (size_t)(i + pl * g->accel) * g->nro + c0 + cc;
          for (int j = 0; j < g->kro; j++)
            acol[(k * g->kpe + pl) * g->kro + j] = w * (double complex)line[j];
        }
        for (int m = 1; m < g->accel; m++)
          bcol[k * (g->accel - 1) + m - 1] =
              w * (double complex)coil[(size_t)(i + g->dpe + m) * g->nro + c0 + cc + g->dro];
      }
    }
  }
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* One segment: M = A A^H (ZHERK), X = A B^H (ZGEMM; X = U^H), then
 * (M + lambda I) X = U^H by ZPOSV; the times of both steps add to *t. */
static int calibrate_segment(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride, int s,
                             double complex *a, double complex *b, double complex *m,
                             double complex *x, mr_cfloat *weights, double t[2]) {
  const mr_grappa_geom *g = &p->g;
  int n = g->npe * mr_grappa_seg_positions(g, s), ns = g->n_src, nt = g->n_tgt;
  const double complex one = 1, zero = 0;
  double t0 = now_ms();
  build_segment(p, acs, coil_stride, s, a, b);
  cblas_zherk(CblasColMajor, CblasLower, CblasNoTrans, ns, n, 1.0, a, ns, 0.0, m, ns);
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasConjTrans, ns, nt, n, &one, a, ns, b, nt, &zero,
              x, ns);
  double trace = 0;
  for (int r = 0; r < ns; r++)
    trace += creal(m[(size_t)r * ns + r]);
  double t1 = now_ms();
  t[0] += t1 - t0;
  if (!(trace > 0))
    return mr_fail(MR_ENUMERIC, "grappa: the ACS lines of segment %d carry no signal", s);
  double lambda = p->opts.chi * trace / ns;
  for (int r = 0; r < ns; r++)
    m[(size_t)r * ns + r] += lambda;
  lapack_int info = LAPACKE_zposv(LAPACK_COL_MAJOR, 'L', ns, nt, (lapack_complex_double *)m, ns,
                                  (lapack_complex_double *)x, ns);
  if (info != 0)
    return mr_fail(MR_ENUMERIC,
                   "grappa: the calibration system of segment %d is not positive definite "
                   "(LAPACKE_zposv info %d; raise chi)",
                   s, (int)info);
  mr_cfloat *out = weights + (size_t)s * ns * nt;
  for (size_t e = 0; e < (size_t)ns * nt; e++)
    out[e] = (mr_cfloat)x[e];
  t[1] += now_ms() - t1;
  return 0;
}

int mr_grappa_cpu_calibrate(mr_grappa_plan *p, const mr_cfloat *acs, size_t coil_stride,
                            mr_cfloat *weights, double *build_ms, double *solve_ms) {
  const mr_grappa_geom *g = &p->g;
  size_t most = (size_t)g->npe * g->nro_max, ns = g->n_src, nt = g->n_tgt;
  double t[2] = {0, 0}, t0 = now_ms();
  int rc = prepare(p, acs, coil_stride);
  t[0] = now_ms() - t0;
  double complex *a = malloc(ns * most * sizeof *a), *b = malloc(nt * most * sizeof *b);
  double complex *m = malloc(ns * ns * sizeof *m), *x = malloc(ns * nt * sizeof *x);
  if (rc == 0 && (a == NULL || b == NULL || m == NULL || x == NULL))
    rc = mr_fail(MR_ENOMEM, "grappa: out of memory for the calibration matrices");
  for (int s = 0; rc == 0 && s < g->nseg; s++)
    rc = calibrate_segment(p, acs, coil_stride, s, a, b, m, x, weights, t);
  free(a);
  free(b);
  free(m);
  free(x);
  if (build_ms != NULL)
    *build_ms = t[0];
  if (solve_ms != NULL)
    *solve_ms = t[1];
  return rc;
}

typedef struct fill_job {
  const mr_grappa_geom *g;
  const mr_cfloat *kspace_in;
  mr_cfloat *kspace;
  const int *lines;
  int nblk, x0, ne1;
  mr_cfloat *src;
  const mr_cfloat *tv;
  const uint8_t *sampled;
} fill_job;

static void gather_columns(void *arg, size_t begin, size_t end) {
  const fill_job *f = arg;
  const mr_grappa_geom *g = f->g;
  size_t per_coil = (size_t)f->ne1 * g->nro;
  for (size_t col = begin; col < end; col++) {
    int x = f->x0 + (int)(col / f->nblk), s = f->lines[col % f->nblk];
    mr_cfloat *out = f->src + col * g->n_src;
    for (int k = 0; k < g->nc; k++)
      for (int pl = 0; pl < g->kpe; pl++) {
        int y = s + (pl - g->kpe / 2 + 1) * g->accel;
        for (int j = 0; j < g->kro; j++) {
          int xx = x + j - g->dro;
          out[(k * g->kpe + pl) * g->kro + j] =
              y >= 0 && y < f->ne1 && xx >= 0 && xx < g->nro
                  ? f->kspace_in[k * per_coil + (size_t)y * g->nro + xx]
                  : 0.0f;
        }
      }
  }
}

int mr_grappa_cpu_im2col(mr_grappa_plan *p, const mr_cfloat *kspace, int ne1, const int *lines,
                         int nblk, int x0, int x1, mr_cfloat *src) {
  fill_job f = {.g = &p->g, .kspace_in = kspace, .lines = lines, .nblk = nblk, .x0 = x0,
                .ne1 = ne1, .src = src};
  mr_cpu_parallel_for(mr_device_threads(p->dev), (size_t)(x1 - x0) * nblk, 64, gather_columns,
                      &f);
  return 0;
}

static void scatter_columns(void *arg, size_t begin, size_t end) {
  const fill_job *f = arg;
  const mr_grappa_geom *g = f->g;
  size_t per_coil = (size_t)f->ne1 * g->nro;
  for (size_t col = begin; col < end; col++) {
    int x = f->x0 + (int)(col / f->nblk), s = f->lines[col % f->nblk];
    const mr_cfloat *in = f->tv + col * g->n_tgt;
    for (int m = 1; m < g->accel; m++) {
      int y = s + m;
      if (y < 0 || y >= f->ne1 || f->sampled[y])
        continue;
      for (int k = 0; k < g->nc; k++)
        f->kspace[k * per_coil + (size_t)y * g->nro + x] = in[k * (g->accel - 1) + m - 1];
    }
  }
}

int mr_grappa_cpu_scatter(mr_grappa_plan *p, const mr_cfloat *tv, const int *lines, int nblk,
                          int x0, int x1, const uint8_t *sampled, int ne1, mr_cfloat *kspace) {
  fill_job f = {.g = &p->g, .kspace = kspace, .lines = lines, .nblk = nblk, .x0 = x0,
                .ne1 = ne1, .tv = tv, .sampled = sampled};
  mr_cpu_parallel_for(mr_device_threads(p->dev), (size_t)(x1 - x0) * nblk, 64,
                      scatter_columns, &f);
  return 0;
}
