/* slice_grappa: separates simultaneous multi-slice (multiband) k-space into
 * one k-space per slice (gpu/sms/slice_grappa.h), after accumulate.
 *
 * The header's parallelImaging/multiband says the scan is SMS: its factor
 * M, the spacing dZ between the slices excited together, the deltaKz of
 * the CAIPI blips (the shift FOV / S with S = 1 / (deltaKz dZ), or the
 * `caipi` parameter) and the encoding space of the single-band reference
 * scan (calibration_encoding). Its buffers are the calibration, kept per
 * slice and not passed on: with calibration_encoding > 0 every buffer of
 * that encoding (each slice alone, its lines flagged
 * IS_PARALLEL_CALIBRATION, or plain; encoding 0's slice limit counts the
 * collapsed groups G), with calibration_encoding 0 the calibration-only
 * buffers of encoding 0 (the lines flagged IS_PARALLEL_CALIBRATION, idx.slice
 * the slice, as the EPI simulator writes them; encoding 0's slice limit
 * counts the reference's M G slices). A collapsed buffer of slice (group)
 * g of G carries slices
 * g, g + G, ..., g + (M - 1) G of the reference (their number must be M G),
 * the first at the buffer's own position; it leaves as M buffers, slice j
 * with the reference's slice index, its position moved by the multiband
 * spacing along the slice normal, the CAIPI shift undone, so fft,
 * coil_combine and image_out make one image per slice. With in-plane
 * acceleration R the kernel's taps are R lines apart and the separated
 * buffers keep the acquired lines only, the first after a new reference
 * with its slice's reference as calibration lines for the grappa step after
 * (which keeps that kernel for the slice's later buffers). Kernels are calibrated per
 * group at its first collapsed buffer and again after a new reference.
 * Buffers of a header without multiband (or with a factor of 1) pass
 * untouched. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "budget.h"
#include "buf.h"
#include "gadget.h"
#include "handoff.h"
#include "kspace.h"
#include "placement.h"
#include "slice_grappa.h"
#include "vec.h"

typedef struct sms_gadget {
  int device, fallback;
  mr_placement place;
  int kernel[2];    /* readout, phase-encode taps */
  int calibration[2];
  double lambda;
  int leak_block;
  int caipi;        /* 0: from the header */
  size_t nref;      /* reference slices */
  float complex **ref;      /* [nref] host k-space [nc][ny][nx], NULL until it came */
  size_t ref_nc, ref_ny, ref_nx; /* the reference's shape; 0 until one came */
  mr_cfloat **weights;      /* per group, NULL until calibrated */
  size_t weights_bytes;     /* of each group's (the shapes are the reference's) */
  size_t ngroups;
  int on_device;            /* the next k-space consumer reads device data */
} sms_gadget;

static const mr_param params[] = {
    MR_PARAM_INTS(sms_gadget, kernel, "kernel", "[5,5]", 1, 15,
        "slice-GRAPPA kernel: readout taps, phase-encode taps (odd)"),
    MR_PARAM_INTS(sms_gadget, calibration, "calibration", "[32,32]", 1, 1024,
        "calibration region: the central samples x lines of the reference (capped at its size)"),
    MR_PARAM_DOUBLE(sms_gadget, lambda, "lambda", "1e-3", 0, 1,
        "Tikhonov regularisation relative to the normal matrix's mean diagonal"),
    MR_PARAM_BOOL(sms_gadget, leak_block, "leak_block", "true",
        "split-slice (leak-blocked) kernels: hold the other slices out of each slice's image"),
    MR_PARAM_INT(sms_gadget, caipi, "caipi", "0", 0, MR_SLICE_GRAPPA_MAX_MB,
        "CAIPI shift FOV / caipi; 0: from the header's multiband deltaKz and spacing"),
    MR_PLACEMENT_PARAMS(sms_gadget),
};

/* The header's multiband section, or NULL for a single-band scan (none,
 * or a factor of 1). */
static const mr_multiband *multiband_of(const mr_gadget_ctx *ctx) {
  if (ctx->hdr == NULL || ctx->hdr->nencodings < 1 ||
      !ctx->hdr->encoding[0].parallel.multiband.present ||
      ctx->hdr->encoding[0].parallel.multiband.factor < 2)
    return NULL;
  return &ctx->hdr->encoding[0].parallel.multiband;
}

static size_t slices_of(const mr_encoding *e) {
  return e->limits.slice.present ? (size_t)e->limits.slice.maximum + 1 : 1;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  sms_gadget *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  const mr_multiband *mb = multiband_of(ctx);
  if (mb == NULL)
    return 0;
  if (mb->calibration_encoding >= ctx->hdr->nencodings)
    return mr_gadget_fail(ctx, MR_EHEADER,
                          "multiband calibration_encoding %u names no encoding (the header has "
                          "%d)", mb->calibration_encoding, ctx->hdr->nencodings);
  size_t slices = slices_of(&ctx->hdr->encoding[0]);
  if (mb->calibration_encoding == 0) { /* encoding 0 counts the reference's slices */
    s->nref = slices;
    s->ngroups = slices / mb->factor;
  } else {
    s->nref = slices_of(&ctx->hdr->encoding[mb->calibration_encoding]);
    s->ngroups = slices;
  }
  if (s->ngroups == 0 || s->nref != (size_t)mb->factor * s->ngroups)
    return mr_gadget_fail(ctx, MR_EHEADER,
                          "multiband factor %u does not fit the data: the reference has %zu "
                          "slices, the collapsed acquisition %zu groups (factor x groups "
                          "expected)", mb->factor, s->nref, s->ngroups);
  s->ref = calloc(s->nref, sizeof *s->ref);
  s->weights = calloc(s->ngroups, sizeof *s->weights);
  if (s->ref == NULL || s->weights == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* A reference buffer: its calibration part (or, lacking one, its lines)
 * kept as slice idx.slice's calibration; the groups it feeds recalibrate. */
static int keep_reference(sms_gadget *s, mr_gadget_ctx *ctx, mr_kspace *k) {
  mr_err e = {0};
  mr_kspace *src = k->calib != NULL ? k->calib : k;
  size_t slice = k->ref.idx.slice;
  if (slice >= s->nref)
    return mr_gadget_fail(ctx, MR_EDATA, "reference slice %zu is beyond the header's %zu", slice,
                          s->nref);
  if (src->ne2 != 1)
    return mr_gadget_fail(ctx, MR_EDATA, "a 3D reference (%zu partitions): SMS is 2D", src->ne2);
  float complex *data = src == k ? mr_kspace_host(k, &e) : src->data;
  if (data == NULL)
    return mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, e.code));
  if (s->ref_nc != 0 &&
      (src->nch != s->ref_nc || src->ne1 != s->ref_ny || src->nro != s->ref_nx))
    return mr_gadget_fail(ctx, MR_EDATA,
                          "reference slice %zu is %zu coils x %zu x %zu, the others %zu x %zu x "
                          "%zu", slice, src->nch, src->ne1, src->nro, s->ref_nc, s->ref_ny,
                          s->ref_nx);
  size_t plane = src->nch * src->ne1 * src->nro;
  float complex *copy = mr_budget_alloc(plane * sizeof *copy, "an SMS reference slice", &e);
  if (copy == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", mr_err_text(&e, e.code));
  /* Only the sampled lines of a calibration part are defined (kspace.h). */
  for (size_t c = 0; c < src->nch; c++)
    for (size_t y = 0; y < src->ne1; y++) {
      float complex *to = copy + (c * src->ne1 + y) * src->nro;
      if (src->sampled[y])
        memcpy(to, data + (c * src->ne1 + y) * src->nro, src->nro * sizeof *to);
      else
        memset(to, 0, src->nro * sizeof *to);
    }
  mr_budget_free(s->ref[slice], plane * sizeof *copy);
  s->ref[slice] = copy;
  s->ref_nc = src->nch;
  s->ref_ny = src->ne1;
  s->ref_nx = src->nro;
  mr_budget_free(s->weights[slice % s->ngroups], s->weights_bytes);
  s->weights[slice % s->ngroups] = NULL;
  return 0;
}

/* The separation on the acquired lines alone. With in-plane acceleration R
 * the kernel's taps are R lines apart: when the acquired lines are every
 * R-th (from a line first < R, ny a multiple of R), an acquired line's taps
 * are acquired lines and an unacquired line's are not (zero). The acquired
 * lines by themselves, taps one line apart, are then the same equations
 * (the edge kernels' positions map onto each other: a tap leaves the
 * k-space in both or in neither) on 1/R of the positions: R times less
 * work. The CAIPI shift is undone on the full k-space's line numbers when
 * the lines go back (place_slice), so the apply plan has none. Sets *a to
 * the apply's options and returns 1, or 0 (a leaves o): irregular lines, or
 * too few of them for the kernel. */
static int acquired_lines_alone(const mr_kspace *k, const mr_slice_grappa_opts *o,
                                mr_slice_grappa_opts *a, size_t *first) {
  size_t r = (size_t)o->ystep, ny = k->ne1;
  *a = *o;
  if (r < 2 || ny % r != 0)
    return 0;
  for (*first = 0; *first < r && !k->sampled[*first]; (*first)++)
    ;
  if (*first == r)
    return 0; /* no line in the first R */
  for (size_t y = 0; y < ny; y++)
    if ((k->sampled[y] != 0) != (y % r == *first))
      return 0;
  /* the apply plan's calibration region (unused) is o's columns by all the
   * lines: it must pass the plan's checks */
  int lines = (int)(ny / r);
  long taps = (long)o->kx * o->ky * o->nc, rows = (long)(o->cx - o->kx + 1) * (lines - o->ky + 1);
  if (o->ky > lines / 2 || rows * (o->leak_block ? o->mb : 1) < taps || taps * rows > INT32_MAX)
    return 0; /* no plan takes the kernel on these lines */
  a->ny = lines;
  a->ystep = 1;
  a->cy = lines;
  a->caipi = 1;
  return 1;
}

/* Separated slice j of the collapsed buffer k: a new buffer with its
 * samples on dev (contents undefined: the caller writes them all). */
static mr_kspace *slice_buffer(const sms_gadget *s, const mr_gadget_ctx *ctx, const mr_kspace *k,
                               mr_device *dev, size_t j, int in_plane, mr_err *err) {
  const mr_multiband *mb = multiband_of(ctx);
  mr_kspace *out = mr_kspace_new_on(dev, k->nro, k->ne1, 1, k->nch, err);
  if (out == NULL)
    return NULL;
  mr_kspace_copy_meta(out, k);
  memcpy(out->sampled, k->sampled, k->ne1);
  size_t slice = k->ref.idx.slice + j * s->ngroups;
  out->ref.idx.slice = (uint16_t)slice;
  double dz = 0;
  for (size_t i = 0; i < j; i++)
    dz += mb->spacing_mm[mb->nspacing > 1 && (int)i < mb->nspacing ? i : 0];
  for (int a = 0; a < 3; a++)
    out->ref.position[a] += (float)(dz * out->ref.slice_dir[a]);
  if (in_plane) {
    out->calib = mr_kspace_new(k->nro, k->ne1, 1, k->nch, 0, err);
    if (out->calib == NULL) {
      mr_kspace_free(out);
      return NULL;
    }
    mr_kspace_copy_meta(out->calib, out);
    memcpy(out->calib->data, s->ref[slice], k->nch * k->ne1 * k->nro * sizeof *out->data);
    memset(out->calib->sampled, 1, k->ne1);
  }
  return out;
}

typedef struct sms_job {
  const sms_gadget *s;
  const mr_gadget_ctx *ctx;
  const mr_slice_grappa_opts *o;     /* the calibration's: the whole k-space */
  const mr_slice_grappa_opts *apply; /* the separation's: o, or its acquired lines alone */
  const mr_cfloat *reference;        /* host; NULL: calibrated already */
  mr_cfloat *weights;                /* host */
  mr_kspace *k;                      /* the collapsed buffer */
  int alone;                         /* apply on the acquired lines alone ... */
  size_t first;                      /* ... every ystep-th from this one */
  int in_plane;                      /* the slices carry their reference for grappa */
  mr_kspace *slices[MR_SLICE_GRAPPA_MAX_MB]; /* made here, samples on the task's device */
} sms_job;

/* The acquired lines of a k-space (every r-th from line first, ny a
 * multiple of r) as a block of {nx, r, ny / r} arrays, one per coil. */
static void line_blocks(size_t nx, size_t ny, size_t r, size_t first, size_t full[3],
                        size_t lines[3], size_t at[3]) {
  full[0] = lines[0] = nx;
  full[1] = r;
  full[2] = lines[2] = ny / r;
  lines[1] = 1;
  at[0] = at[2] = 0;
  at[1] = first;
}

/* Slice m's separated k-space from sep into to (on dev): the acquired
 * lines put back in place with the CAIPI shift undone on their own line
 * numbers (the apply plan had none), or the whole plane. */
static int place_slice(mr_device *dev, const sms_job *j, const mr_cfloat *sep, size_t m,
                       mr_cfloat *to, mr_err *err) {
  const mr_slice_grappa_opts *o = j->o;
  size_t nc = (size_t)o->nc, nx = (size_t)o->nx, ny = (size_t)o->ny;
  size_t plane = nc * ny * nx;
  if (!j->alone)
    return mr_vec_copy(dev, plane, sep + m * plane, to, err);
  size_t full[3], lines[3], at[3], zero[3] = {0, 0, 0};
  line_blocks(nx, ny, (size_t)o->ystep, j->first, full, lines, at);
  size_t part = nc * lines[2] * nx;
  int rc = mr_vec_zero(dev, plane, to, err);
  if (rc == 0)
    rc = mr_block_copy(dev, nc, sep + m * part, lines, zero, to, full, at, lines, err);
  if (rc == 0)
    rc = mr_slice_grappa_caipi(dev, o->nc, o->nx, o->ny, o->caipi, (int)m, 1, -1, to, err);
  return rc;
}

/* On dev (the worker's, for a GPU): the calibration when one is due, the
 * separation of the collapsed k-space where its samples are (uploaded
 * once when they came on the host), and the separated slices made there:
 * on a GPU they stay on the device for a consumer that works there. */
static int separate_task(mr_device *dev, void *arg, mr_err *err) {
  sms_job *j = arg;
  const mr_slice_grappa_opts *o = j->o, *a = j->apply;
  size_t nc = (size_t)o->nc, nx = (size_t)o->nx, mb = (size_t)o->mb;
  size_t nw = mr_slice_grappa_weights_count(o), part = nc * (size_t)a->ny * nx;
  mr_slice_grappa_plan *plan = NULL;
  int rc = 0;
  if (j->reference != NULL) {
    rc = mr_slice_grappa_plan_create(dev, o, &plan, err);
    if (rc == 0)
      rc = mr_slice_grappa_calibrate_host(plan, j->reference, j->weights, err);
    mr_slice_grappa_plan_destroy(plan);
    plan = NULL;
  }
  /* the weights, the acquired lines (when they go alone), the slices */
  mr_buf *buf = NULL;
  if (rc == 0)
    rc = mr_buf_create(dev, (nw + (j->alone ? part : 0) + mb * part) * sizeof(mr_cfloat), &buf,
                       err);
  mr_cfloat *w = NULL, *lines = NULL, *sep = NULL;
  if (rc == 0) {
    w = mr_buf_data(buf);
    lines = w + nw;
    sep = lines + (j->alone ? part : 0);
    rc = mr_buf_upload(buf, 0, j->weights, nw * sizeof *w, err);
  }
  const mr_cfloat *collapsed = rc == 0 ? mr_kspace_on(j->k, dev, err) : NULL;
  if (rc == 0 && collapsed == NULL)
    rc = mr_err_code(err, MR_ENOMEM);
  if (rc == 0 && j->alone) {
    size_t full[3], block[3], at[3], zero[3] = {0, 0, 0};
    line_blocks(nx, (size_t)o->ny, (size_t)o->ystep, j->first, full, block, at);
    rc = mr_block_copy(dev, nc, collapsed, full, at, lines, block, zero, block, err);
    collapsed = lines;
  }
  if (rc == 0)
    rc = mr_slice_grappa_plan_create(dev, a, &plan, err);
  if (rc == 0)
    rc = mr_slice_grappa_apply(plan, w, collapsed, sep, err);
  mr_slice_grappa_plan_destroy(plan);
  for (size_t m = 0; rc == 0 && m < mb; m++) {
    mr_kspace *sk = j->slices[m] = slice_buffer(j->s, j->ctx, j->k, dev, m, j->in_plane, err);
    mr_cfloat *to = sk != NULL ? mr_kspace_on(sk, dev, err) : NULL;
    rc = to != NULL ? place_slice(dev, j, sep, m, to, err) : mr_err_code(err, MR_ENOMEM);
  }
  mr_buf_destroy(buf);
  for (size_t m = 0; rc < 0 && m < mb; m++) { /* a fallback's run starts anew */
    mr_kspace_free(j->slices[m]);
    j->slices[m] = NULL;
  }
  return rc;
}

/* One hand-off to the device's worker for the whole separation: called
 * from the gadget's thread, each of its operations would be handed over
 * and waited for alone (device.h). */
static int run_separate(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, separate_task, arg, err);
}

static int separate(sms_gadget *s, mr_gadget_ctx *ctx, mr_kspace *k, mr_emit *out) {
  const mr_multiband *mb = multiband_of(ctx);
  const mr_encoding *enc = &ctx->hdr->encoding[0];
  size_t g = k->ref.idx.slice, m = mb->factor;
  if (g >= s->ngroups)
    return mr_gadget_fail(ctx, MR_EDATA, "collapsed slice %zu is beyond the header's %zu", g,
                          s->ngroups);
  for (size_t j = 0; j < m; j++)
    if (s->ref[g + j * s->ngroups] == NULL)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "no single-band reference scan of slice %zu (encoding %u) came "
                            "before the multiband data of slice group %zu: SMS needs one to "
                            "calibrate", g + j * s->ngroups, mb->calibration_encoding, g);
  if (k->ne2 != 1 || k->nch != s->ref_nc || k->ne1 != s->ref_ny || k->nro != s->ref_nx)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "the multiband data are %zu coils x %zu x %zu x %zu, the reference "
                          "%zu x %zu x %zu", k->nch, k->ne2, k->ne1, k->nro, s->ref_nc,
                          s->ref_ny, s->ref_nx);
  int caipi = s->caipi;
  if (caipi == 0)
    caipi = mb->delta_kz > 0 && mb->nspacing > 0 && mb->spacing_mm[0] > 0
                ? (int)lround(1.0 / (mb->delta_kz * mb->spacing_mm[0]))
                : 1;
  mr_slice_grappa_opts o =
      mr_slice_grappa_opts_default((int)k->nch, (int)k->nro, (int)k->ne1, (int)m, caipi);
  o.kx = s->kernel[0];
  o.ky = s->kernel[1];
  o.ystep = enc->parallel.accel_e1 > 1 ? enc->parallel.accel_e1 : 1;
  o.cx = s->calibration[0] < o.nx ? s->calibration[0] : o.nx;
  o.cy = s->calibration[1] < o.ny ? s->calibration[1] : o.ny;
  o.lambda = (float)s->lambda;
  o.leak_block = s->leak_block;
  mr_err e = {0};
  mr_slice_grappa_opts a;
  size_t first = 0, plane = k->nch * k->ne1 * k->nro;
  int alone = acquired_lines_alone(k, &o, &a, &first);
  size_t ref_bytes = plane * m * sizeof(float complex);
  float complex *reference = NULL;
  int calibrate = s->weights[g] == NULL, rc = 0;
  if (calibrate) {
    s->weights_bytes = mr_slice_grappa_weights_count(&o) * sizeof(mr_cfloat);
    reference = mr_budget_alloc(ref_bytes, "SMS reference slices", &e);
    s->weights[g] = reference == NULL ? NULL
                                      : mr_budget_alloc(s->weights_bytes, "slice-GRAPPA kernels", &e);
    if (s->weights[g] == NULL) {
      rc = mr_gadget_fail(ctx, e.code, "%s", mr_err_text(&e, e.code));
      goto done;
    }
  }
  for (size_t j = 0; calibrate && j < m; j++)
    memcpy(reference + j * plane, s->ref[g + j * s->ngroups], plane * sizeof *reference);
  /* grappa keeps a slice's kernel until new calibration lines come: the
   * reference rides along only when it is new to this group */
  sms_job job = {.s = s, .ctx = ctx, .o = &o, .apply = &a, .reference = reference,
                 .weights = s->weights[g], .k = k, .alone = alone, .first = first,
                 .in_plane = o.ystep > 1 && calibrate};
  if ((rc = mr_placement_run(&s->place, ctx, run_separate, &job)) < 0)
    goto done;
  for (size_t j = 0; j < m; j++) {
    mr_kspace *sk = job.slices[j];
    job.slices[j] = NULL;
    if (rc == 0 && (rc = mr_kspace_hand_on(sk, s->on_device, &e)) < 0)
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    if (rc < 0) {
      mr_kspace_free(sk);
      continue;
    }
    mr_message *msg = mr_kspace_message(sk);
    rc = msg != NULL ? mr_emit_message(out, msg) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  }
done:
  if (rc < 0 && calibrate) {
    mr_budget_free(s->weights[g], s->weights_bytes);
    s->weights[g] = NULL;
  }
  mr_budget_free(reference, ref_bytes);
  return rc;
}

/* The reference scan's buffers: those of its own encoding, or in encoding 0
 * itself the calibration-only ones (no imaging line, as accumulate sends
 * lines flagged IS_PARALLEL_CALIBRATION alone). */
static int is_reference(const mr_kspace *k, const mr_multiband *mb) {
  if (k->encoding != (int)mb->calibration_encoding)
    return 0;
  if (mb->calibration_encoding != 0)
    return 1;
  if (k->calib == NULL)
    return 0;
  for (size_t i = 0; i < k->ne1 * k->ne2; i++)
    if (k->sampled[i])
      return 0;
  return 1;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  sms_gadget *s = state;
  mr_kspace *k = msg->u.object.ptr;
  const mr_multiband *mb = multiband_of(ctx);
  if (mb == NULL) {
    mr_err e = {0};
    int rc = mr_kspace_hand_on(k, s->on_device, &e);
    return rc < 0 ? mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc))
                  : mr_emit_message(out, mr_message_ref(msg));
  }
  if (k->traj != NULL)
    return mr_gadget_fail(ctx, MR_EDATA, "got non-Cartesian k-space: slice-GRAPPA needs "
                                         "Cartesian lines");
  if (is_reference(k, mb))
    return keep_reference(s, ctx, k);
  return separate(s, ctx, k, out);
}

static void destroy(void *state) {
  sms_gadget *s = state;
  for (size_t i = 0; s->ref != NULL && i < s->nref; i++)
    mr_budget_free(s->ref[i], s->ref_nc * s->ref_ny * s->ref_nx * sizeof(float complex));
  for (size_t i = 0; s->weights != NULL && i < s->ngroups; i++)
    mr_budget_free(s->weights[i], s->weights_bytes);
  free(s->ref);
  free(s->weights);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_slice_grappa = {
    .name = "slice_grappa",
    .summary = "separates simultaneous multi-slice (multiband, blipped-CAIPI) k-space into one "
               "k-space per slice by slice-GRAPPA calibrated on the single-band reference scan",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(sms_gadget),
    .handles = MR_HANDLES_MULTIBAND,
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
