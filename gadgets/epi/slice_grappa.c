/* slice_grappa: simultaneous multi-slice k-space (M slices excited
 * together, blipped-CAIPI shifted) split into its slices, after accumulate.
 *
 * Calibrated from the single-band reference scan (one calibration-only
 * k-space per slice, as accumulate sends a reference scan's lines): each
 * slice's reference shifted as the collapsed data shifts it (slice m by
 * m FOV / caipi along y), then per slice z a kernel G_z (C x L, L = C
 * kx ky the collapsed neighbourhood) fitted by split-slice GRAPPA with the
 * leak block: minimise sum_m |G_z X_m - [m = z] Y_z|^2 over the references
 * X_m of every slice, so the kernel maps slice z's own signal to itself and
 * every other slice's to zero (Cauley et al. 2014). One HERK of the
 * sources, one GEMM of the targets, one regularised HPD solve for all
 * slices, on the device (gpu/linalg; single precision: a regularisation
 * under 1e-5 of the sources' mean energy leaves the normal matrix not
 * positive definite). Applied: one GEMM of the collapsed
 * neighbourhoods (acquired lines only, R apart along ky when in-plane
 * accelerated) gives every slice's k-space; the CAIPI shift is undone and
 * each slice goes on as a k-space of its own (idx.slice its slice), with
 * its single-band reference as calibration lines for in-plane GRAPPA.
 *
 * The slices of collapsed group g are g + G m (m < M), G = S / M for the
 * header's S slices. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "gadget.h"
#include "gpu.h"
#include "kspace.h"
#include "placement.h"
#include "scratch.h"

#define MAX_SLICES 256

typedef struct group_weights {
  int valid;
  size_t nch, nro, ne1;
  int accel;
  mr_cfloat *g; /* G_z^H of every slice: L x (M C), column-major */
} group_weights;

typedef struct slice_grappa {
  int multiband, caipi;
  int kernel[2]; /* kx, ky: odd */
  double lambda;
  int device, fallback;
  mr_placement place;
  mr_message *refs[MAX_SLICES]; /* each slice's single-band reference */
  group_weights weights[MAX_SLICES];
  mr_scratch src, dst;
} slice_grappa;

static const mr_param params[] = {
    MR_PARAM_INT(slice_grappa, multiband, "multiband", "4", 2, 16,
        "slices excited together (the scan's multiband factor)"),
    MR_PARAM_INT(slice_grappa, caipi, "caipi", "3", 1, 16,
        "blipped CAIPI: slice m of a group shifted by m FOV / caipi along y (1: no shift)"),
    MR_PARAM_INTS(slice_grappa, kernel, "kernel", "[3,3]", 1, 15,
        "the kernel's extent along x and y (odd): the collapsed neighbourhood of a point"),
    MR_PARAM_DOUBLE(slice_grappa, lambda, "lambda", "1e-5", 0, 1,
        "Tikhonov regularisation of the kernel fit, relative to the sources' mean energy"),
    MR_PLACEMENT_PARAMS(slice_grappa),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  slice_grappa *s = state;
  if (s->kernel[0] % 2 == 0 || s->kernel[1] % 2 == 0)
    return mr_gadget_fail(ctx, MR_ECONFIG, "kernel %d x %d: both extents must be odd",
                          s->kernel[0], s->kernel[1]);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

static int any_sampled(const mr_kspace *k) {
  for (size_t i = 0; i < k->ne1 * k->ne2; i++)
    if (k->sampled[i])
      return 1;
  return 0;
}

/* The slices the header declares (its slice limit), at least M. */
static int header_slices(const slice_grappa *s, const mr_gadget_ctx *ctx, int encoding) {
  const mr_limit *l = &ctx->hdr->encoding[encoding].limits.slice;
  int n = l->present ? l->maximum + 1 : s->multiband;
  return n > s->multiband ? n : s->multiband;
}

/* The CAIPI phase of line y of slice m of a group: exp(sign 2 pi i (y -
 * ne1/2) m / caipi). */
static mr_cfloat caipi_phase(const slice_grappa *s, size_t y, size_t ne1, int m, int sign) {
  double a = sign * 2 * M_PI * ((double)y - (double)(ne1 / 2)) * m / s->caipi;
  return (mr_cfloat)cexp(I * a);
}

/* The neighbourhood of (x, y) in k (ch, ne1, nro), each line times its
 * phase (NULL: 1), zero outside, into col (L). */
static void neighbourhood(const slice_grappa *s, const float complex *k, size_t nch,
                          size_t ne1, size_t nro, long x, long y, int step,
                          const mr_cfloat *phase, mr_cfloat *col) {
  int rx = s->kernel[0] / 2, ry = s->kernel[1] / 2;
  size_t at = 0;
  for (size_t c = 0; c < nch; c++)
    for (int dy = -ry; dy <= ry; dy++) {
      long yy = y + (long)dy * step;
      for (int dx = -rx; dx <= rx; dx++, at++) {
        long xx = x + dx;
        if (yy < 0 || yy >= (long)ne1 || xx < 0 || xx >= (long)nro) {
          col[at] = 0;
          continue;
        }
        mr_cfloat v = k[(c * ne1 + (size_t)yy) * nro + (size_t)xx];
        col[at] = phase != NULL ? v * phase[yy] : v;
      }
    }
}

typedef struct calib_job {
  slice_grappa *s;
  const mr_kspace *ref[16]; /* calibration parts, slice m of the group */
  size_t nch, ne1, nro, points;
  int accel;
  mr_cfloat *g; /* out: L x (M C) */
} calib_job;

/* On dev: A = sum_m X_m X_m^H, B = [X_m Y_m^H], (A + lambda I) G^H = B. */
static int calib_task(mr_device *dev, void *arg) {
  calib_job *j = arg;
  slice_grappa *s = j->s;
  int m_count = s->multiband;
  size_t nch = j->nch, L = nch * (size_t)s->kernel[0] * (size_t)s->kernel[1];
  size_t P = j->points, MC = (size_t)m_count * nch;
  mr_buf *x = NULL, *y = NULL, *a = NULL, *b = NULL;
  int rc = mr_buf_create(dev, L * P * sizeof(mr_cfloat), &x);
  if (rc == 0)
    rc = mr_buf_create(dev, nch * P * sizeof(mr_cfloat), &y);
  if (rc == 0)
    rc = mr_buf_create(dev, L * L * sizeof(mr_cfloat), &a);
  if (rc == 0)
    rc = mr_buf_create(dev, L * MC * sizeof(mr_cfloat), &b);
  mr_cfloat *src = s->src.p, *dst = s->dst.p;
  mr_cfloat *phase = malloc(j->ne1 * sizeof *phase);
  if (rc == 0 && phase == NULL)
    rc = MR_ENOMEM;
  double trace = 0;
  int ry = s->kernel[1] / 2, rx = s->kernel[0] / 2;
  for (int m = 0; m < m_count && rc == 0; m++) {
    const mr_kspace *r = j->ref[m];
    for (size_t yy = 0; yy < j->ne1; yy++)
      phase[yy] = caipi_phase(s, yy, j->ne1, m, -1);
    size_t p = 0;
    for (long yy = (long)ry * j->accel; yy + (long)ry * j->accel < (long)j->ne1; yy++)
      for (long xx = rx; xx + rx < (long)j->nro; xx++, p++) {
        neighbourhood(s, r->data, nch, j->ne1, j->nro, xx, yy, j->accel, phase, src + p * L);
        for (size_t c = 0; c < nch; c++)
          dst[p * nch + c] = r->data[(c * j->ne1 + (size_t)yy) * j->nro + (size_t)xx] * phase[yy];
      }
    for (size_t i = 0; i < L * P; i++)
      trace += crealf(src[i] * conjf(src[i]));
    /* X_m is L x P (a column per point); Y_m is C x P */
    rc = mr_buf_upload(x, 0, src, L * P * sizeof(mr_cfloat));
    if (rc == 0)
      rc = mr_buf_upload(y, 0, dst, nch * P * sizeof(mr_cfloat));
    mr_cmat xm = mr_cmat_dense(mr_buf_data(x), (int)L, (int)P);
    mr_cmat ym = mr_cmat_dense(mr_buf_data(y), (int)nch, (int)P);
    mr_cmat am = mr_cmat_dense(mr_buf_data(a), (int)L, (int)L);
    mr_cmat bm = mr_cmat_dense((mr_cfloat *)mr_buf_data(b) + (size_t)m * nch * L, (int)L,
                               (int)nch);
    if (rc == 0)
      rc = mr_blas_herk(dev, MR_BLAS_N, 1.0f, xm, m > 0 ? 1.0f : 0.0f, am, 1);
    if (rc == 0)
      rc = mr_blas_gemm(dev, MR_BLAS_N, MR_BLAS_C, 1, xm, ym, 0, bm, 1);
  }
  if (rc == 0) {
    mr_cmat am = mr_cmat_dense(mr_buf_data(a), (int)L, (int)L);
    mr_cmat bm = mr_cmat_dense(mr_buf_data(b), (int)L, (int)MC);
    rc = mr_solve_hpd(dev, am, (float)(s->lambda * trace / (double)L), bm, 1);
  }
  if (rc == 0)
    rc = mr_buf_download(b, 0, j->g, L * MC * sizeof(mr_cfloat));
  free(phase);
  mr_buf_destroy(x);
  mr_buf_destroy(y);
  mr_buf_destroy(a);
  mr_buf_destroy(b);
  return rc;
}

static int run_calib(mr_device *dev, void *arg) { return mr_device_run(dev, calib_task, arg); }

typedef struct apply_job {
  slice_grappa *s;
  const mr_cfloat *g;
  size_t L, MC, points;
} apply_job;

/* On dev: every slice's k-space at the points, (G^H)^H N. */
static int apply_task(mr_device *dev, void *arg) {
  apply_job *j = arg;
  mr_buf *g = NULL, *n = NULL, *out = NULL;
  int rc = mr_buf_create(dev, j->L * j->MC * sizeof(mr_cfloat), &g);
  if (rc == 0)
    rc = mr_buf_create(dev, j->L * j->points * sizeof(mr_cfloat), &n);
  if (rc == 0)
    rc = mr_buf_create(dev, j->MC * j->points * sizeof(mr_cfloat), &out);
  if (rc == 0)
    rc = mr_buf_upload(g, 0, j->g, j->L * j->MC * sizeof(mr_cfloat));
  if (rc == 0)
    rc = mr_buf_upload(n, 0, j->s->src.p, j->L * j->points * sizeof(mr_cfloat));
  if (rc == 0)
    rc = mr_blas_gemm(dev, MR_BLAS_C, MR_BLAS_N, 1,
                      mr_cmat_dense(mr_buf_data(g), (int)j->L, (int)j->MC),
                      mr_cmat_dense(mr_buf_data(n), (int)j->L, (int)j->points), 0,
                      mr_cmat_dense(mr_buf_data(out), (int)j->MC, (int)j->points), 1);
  if (rc == 0)
    rc = mr_buf_download(out, 0, j->s->dst.p, j->MC * j->points * sizeof(mr_cfloat));
  mr_buf_destroy(g);
  mr_buf_destroy(n);
  mr_buf_destroy(out);
  return rc;
}

static int run_apply(mr_device *dev, void *arg) { return mr_device_run(dev, apply_task, arg); }

/* The group's kernels, fitted on its slices' references when not yet. */
static int calibrate(slice_grappa *s, mr_gadget_ctx *ctx, int group, const int *slices,
                     const mr_kspace *k, int accel) {
  group_weights *w = &s->weights[group];
  if (w->valid && w->nch == k->nch && w->nro == k->nro && w->ne1 == k->ne1 && w->accel == accel)
    return 0;
  calib_job j = {.s = s, .nch = k->nch, .ne1 = k->ne1, .nro = k->nro, .accel = accel};
  for (int m = 0; m < s->multiband; m++) {
    const mr_kspace *r = ((const mr_kspace *)s->refs[slices[m]]->u.object.ptr)->calib;
    if (r->nch != k->nch || r->nro != k->nro || r->ne1 != k->ne1 || r->ne2 != 1)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "the single-band reference of slice %d is %zu x %zu x %zu, the "
                            "multiband k-space %zu x %zu x %zu (channels, lines, samples)",
                            slices[m], r->nch, r->ne1, r->nro, k->nch, k->ne1, k->nro);
    for (size_t yy = 0; yy < r->ne1; yy++)
      if (!r->sampled[yy])
        return mr_gadget_fail(ctx, MR_EDATA,
                              "the single-band reference of slice %d lacks line %zu: "
                              "slice-GRAPPA calibrates on whole references",
                              slices[m], yy);
    j.ref[m] = r;
  }
  int rx = s->kernel[0] / 2, ry = s->kernel[1] / 2;
  long ny = (long)k->ne1 - 2L * ry * accel, nx = (long)k->nro - 2L * rx;
  if (ny < 1 || nx < 1)
    return mr_gadget_fail(ctx, MR_EDATA, "a %zu x %zu k-space is too small for a %d x %d kernel",
                          k->ne1, k->nro, s->kernel[0], s->kernel[1]);
  j.points = (size_t)ny * (size_t)nx;
  size_t L = k->nch * (size_t)s->kernel[0] * (size_t)s->kernel[1];
  size_t MC = (size_t)s->multiband * k->nch;
  mr_err e = {0};
  int rc = mr_scratch_grow(&s->src, L * j.points * sizeof(mr_cfloat), "slice-GRAPPA sources", &e);
  if (rc == 0)
    rc = mr_scratch_grow(&s->dst, k->nch * j.points * sizeof(mr_cfloat),
                         "slice-GRAPPA targets", &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  free(w->g);
  w->valid = 0;
  if ((w->g = malloc(L * MC * sizeof *w->g)) == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  j.g = w->g;
  if ((rc = mr_placement_run(&s->place, ctx, run_calib, &j)) < 0)
    return rc;
  *w = (group_weights){1, k->nch, k->nro, k->ne1, accel, w->g};
  return 0;
}

/* Slice m's k-space from the collapsed one: its lines at the sampled
 * lines of k, the CAIPI shift undone; its reference as calibration. */
static mr_kspace *slice_kspace(slice_grappa *s, const mr_kspace *k, int m, int slice,
                               const size_t *lines, size_t nlines, mr_err *err) {
  const mr_kspace *ref = ((const mr_kspace *)s->refs[slice]->u.object.ptr)->calib;
  mr_kspace *out = mr_kspace_new(k->nro, k->ne1, 1, k->nch, 0, err);
  mr_kspace *calib = out != NULL ? mr_kspace_new(k->nro, k->ne1, 1, k->nch, 0, err) : NULL;
  if (calib == NULL) {
    mr_kspace_free(out);
    return NULL;
  }
  mr_kspace_copy_meta(out, k);
  /* the slice's own place, from its reference's header */
  const ISMRMRD_AcquisitionHeader *own = &((const mr_kspace *)s->refs[slice]->u.object.ptr)->ref;
  memcpy(out->ref.position, own->position, sizeof own->position);
  memcpy(out->ref.slice_dir, own->slice_dir, sizeof own->slice_dir);
  out->ref.idx.slice = (uint16_t)slice;
  mr_kspace_copy_meta(calib, ref);
  memcpy(calib->data, ref->data, k->nch * k->ne1 * k->nro * sizeof *calib->data);
  memcpy(calib->sampled, ref->sampled, k->ne1);
  out->calib = calib;
  size_t nch = k->nch, MC = (size_t)s->multiband * nch;
  const mr_cfloat *all = s->dst.p;
  for (size_t l = 0; l < nlines; l++) {
    size_t y = lines[l];
    mr_cfloat undo = caipi_phase(s, y, k->ne1, m, 1);
    out->sampled[y] = 1;
    for (size_t x = 0; x < k->nro; x++) {
      const mr_cfloat *v = all + (l * k->nro + x) * MC + (size_t)m * nch;
      for (size_t c = 0; c < nch; c++)
        out->data[(c * k->ne1 + y) * k->nro + x] = v[c] * undo;
    }
  }
  return out;
}

static int split(slice_grappa *s, mr_gadget_ctx *ctx, mr_kspace *k, mr_emit *out) {
  int nslices = header_slices(s, ctx, k->encoding), groups = nslices / s->multiband;
  int group = k->ref.idx.slice, slices[16] = {0};
  if (nslices % s->multiband != 0 || group >= groups || nslices > MAX_SLICES)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "multiband k-space of slice group %d: the header's %d slices do not "
                          "make groups of %d",
                          group, nslices, s->multiband);
  for (int m = 0; m < s->multiband; m++) {
    slices[m] = group + groups * m;
    if (s->refs[slices[m]] == NULL)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "multiband k-space of slice group %d came before the single-band "
                            "reference of its slice %d: slice-GRAPPA calibrates on it",
                            group, slices[m]);
  }
  if (k->ne2 != 1 || k->traj != NULL)
    return mr_gadget_fail(ctx, MR_ENOTSUP, "slice-GRAPPA takes 2D Cartesian k-space");
  const mr_parallel_imaging *pi = &ctx->hdr->encoding[k->encoding].parallel;
  int accel = pi->present && pi->accel_e1 > 1 ? pi->accel_e1 : 1;
  int rc = calibrate(s, ctx, group, slices, k, accel);
  if (rc < 0)
    return rc;
  mr_err e = {0};
  if (mr_kspace_host(k, &e) == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", e.msg);
  size_t *lines = malloc(k->ne1 * sizeof *lines), nlines = 0;
  if (lines == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  for (size_t y = 0; y < k->ne1; y++)
    if (k->sampled[y])
      lines[nlines++] = y;
  size_t L = k->nch * (size_t)s->kernel[0] * (size_t)s->kernel[1];
  size_t MC = (size_t)s->multiband * k->nch, points = nlines * k->nro;
  rc = mr_scratch_grow(&s->src, L * points * sizeof(mr_cfloat), "slice-GRAPPA neighbourhoods", &e);
  if (rc == 0)
    rc = mr_scratch_grow(&s->dst, MC * points * sizeof(mr_cfloat), "slice-GRAPPA slices", &e);
  if (rc < 0) {
    free(lines);
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  }
  mr_cfloat *src = s->src.p;
  for (size_t l = 0; l < nlines; l++)
    for (size_t x = 0; x < k->nro; x++)
      neighbourhood(s, k->data, k->nch, k->ne1, k->nro, (long)x, (long)lines[l], accel, NULL,
                    src + (l * k->nro + x) * L);
  apply_job job = {s, s->weights[group].g, L, MC, points};
  if ((rc = mr_placement_run(&s->place, ctx, run_apply, &job)) < 0) {
    free(lines);
    return rc;
  }
  for (int m = 0; m < s->multiband && rc == 0; m++) {
    mr_kspace *one = slice_kspace(s, k, m, slices[m], lines, nlines, &e);
    mr_message *msg = one != NULL ? mr_kspace_message(one) : NULL;
    rc = msg != NULL ? mr_emit_message(out, msg)
                     : mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s",
                                      e.code ? e.msg : "out of memory");
  }
  free(lines);
  return rc;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  slice_grappa *s = state;
  mr_kspace *k = msg->u.object.ptr;
  if (!any_sampled(k)) { /* a single-band reference */
    int slice = k->ref.idx.slice;
    if (k->calib == NULL)
      return 0;
    if (slice >= MAX_SLICES)
      return mr_gadget_fail(ctx, MR_ELIMIT, "slice %d: at most %d slices", slice, MAX_SLICES);
    mr_message_unref(s->refs[slice]);
    s->refs[slice] = mr_message_ref(msg);
    for (int g = 0; g < MAX_SLICES; g++)
      s->weights[g].valid = 0; /* a new reference: its group recalibrates */
    return 0;
  }
  return split(s, ctx, k, out);
}

static void destroy(void *state) {
  slice_grappa *s = state;
  for (int i = 0; i < MAX_SLICES; i++) {
    mr_message_unref(s->refs[i]);
    free(s->weights[i].g);
  }
  mr_scratch_free(&s->src);
  mr_scratch_free(&s->dst);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_slice_grappa = {
    .name = "slice_grappa",
    .summary = "simultaneous multi-slice k-space split into its slices: split-slice GRAPPA "
               "(leak-blocked) with blipped-CAIPI shifts, calibrated on the single-band "
               "reference (after accumulate)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(slice_grappa),
    .handles = MR_HANDLES_MULTIBAND,
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
