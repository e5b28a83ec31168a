/* grappa: fills the lines an accelerated Cartesian scan skipped (acceleration
 * along e1 from the header's parallelImaging section) and hands a full
 * k-space on. The kernel is calibrated (gpu/grappa/grappa.h) on the ACS lines:
 *   - the buffer's calibration part (lines flagged IS_PARALLEL_CALIBRATION
 *     or _AND_IMAGING: embedded and separate modes; calibration-only lines
 *     of an embedded scan are also measured data and join the k-space);
 *   - else, when the header's calibration mode is interleaved, the union of
 *     the last R frames of the slice (repetitions or phases sampled at
 *     shifted positions; contrasts and sets apart): the run of consecutive
 *     lines around the k-space centre they cover, at most
 *     `interleaved_lines` of them, recalibrated with every frame as frames
 *     roll. The frames before the first complete union wait (at most R - 1
 *     of them) and are filled with its weights, in their order;
 *   - else the buffer's own longest run of consecutive sampled lines.
 * Weights are kept per slice and reused for later buffers (repetitions,
 * phases) until new calibration lines arrive. A buffer of calibration lines
 * only (a separate reference scan) is calibrated on and not passed on.
 * A k-space may come on a GPU (from remove_oversampling): calibration lines
 * stay on the host, the lines they add go up, and the filling runs there.
 *
 * On the CPU, in a pipelined chain, buffers that bring their own
 * calibration lines are calibrated and filled several at once (`slices`
 * of them, each on a worker thread of the gadget with a plan of its own,
 * its loops sharing the CPU threads): one slice's work spread over every
 * thread scales to a few of them only. They are passed on in the order
 * they came, and a failure is reported at its place in the stream, as
 * one at a time would: what came before it goes on, nothing after it.
 * Any other buffer first waits for those in flight. */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "buf.h"
#include "gadget.h"
#include "grappa.h"
#include "handoff.h"
#include "kspace.h"
#include "placement.h"
#include "workers.h"

enum { METHOD_FUSED, METHOD_HYBRID, METHOD_DIRECT };

typedef struct slice_state {
  struct slice_state *next;
  int encoding, slice, contrast, set; /* contrast, set: interleaved only, else 0 */
  mr_grappa_opts opts;   /* what the weights were made for */
  mr_cfloat *weights;    /* NULL until calibrated */
  mr_cfloat *frames;     /* interleaved: the latest data of each line */
  uint32_t *frames_stamp;/* [ne1]: the frame that last brought the line (1, 2, ...), 0: none */
  uint32_t nframes;      /* frames merged */
  size_t frames_nro, frames_ne1, frames_nch; /* 0 while frames is NULL */
  /* Interleaved frames that came before the first calibration, oldest
   * first (owned messages; at most R - 1). */
  mr_message *waiting[MR_GRAPPA_MAX_ACCEL];
  int nwaiting;
  uint32_t generation;   /* calibrations made (image_array.h): new ACS lines, a reference
                            scan, or an interleaved frame */
  int in_flight;         /* its buffers with the workers: weights not yet in place */
} slice_state;

typedef struct grappa_gadget {
  int kernel[2]; /* readout taps, source lines */
  double chi, eta, kappa;
  int segments, method;
  int interleaved_lines;
  int slices;           /* at once on the CPU; 0: auto */
  int device, fallback;
  mr_placement place;
  int on_device;        /* the next consumer takes device k-space */
  mr_grappa_plan *plan; /* for the last shape and device used */
  mr_device *plan_dev;
  slice_state *slice_states;
  int at_once;          /* slices at once: 1 runs each on the stage thread */
  mr_workers *workers;  /* made for the first buffer given to them */
  uint64_t workers_bytes; /* of the memory budget, for their plans */
} grappa_gadget;

static const mr_param params[] = {
    MR_PARAM_INTS(grappa_gadget, kernel, "kernel", "[5, 4]", 1, 15,
        "kernel size: readout taps, source lines (the seed's K_RO x K_PE = 5 x 4)"),
    MR_PARAM_DOUBLE(grappa_gadget, chi, "chi", "1e-4", 0, 1,
        "regularisation: lambda = chi * trace(A A^H) / unknowns"),
    MR_PARAM_DOUBLE(grappa_gadget, eta, "eta", "1", 0, 4,
        "normalisation: each PE position's equations scaled by power^(-eta/2)"),
    MR_PARAM_DOUBLE(grappa_gadget, kappa, "kappa", "0", 0, 0.9,
        "power clipping: share of the strongest equations left out"),
    MR_PARAM_INT(grappa_gadget, segments, "segments", "1", 1, MR_GRAPPA_MAX_SEGMENTS,
        "readout segments calibrated apart"),
    MR_PARAM_ENUM(grappa_gadget, method, "method", "\"fused\"", "fused|hybrid|direct",
        "GPU calibration: fused (lagged products, blocked Cholesky of [M; U]), hybrid (lagged "
        "products, cuSOLVER potrf, two TRSMs) or direct (HERK, GEMM, potrf, potrs); the CPU "
        "always solves directly"),
    MR_PARAM_INT(grappa_gadget, interleaved_lines, "interleaved_lines", "48", 0, 65535,
        "interleaved calibration: most lines around the k-space centre the union of the last R "
        "frames calibrates on (at least what the kernel needs; 0: every line it covers). The "
        "outer lines are mostly noise: calibrating on them makes the kernel worse"),
    MR_PARAM_INT(grappa_gadget, slices, "slices", "0", 0, 64,
        "on the CPU: buffers with their own calibration lines calibrated and filled at once, "
        "each on a thread of its own sharing the CPU threads (0: one per two CPU threads, at "
        "most 8; 1: one at a time, its loops spread over every CPU thread)"),
    MR_PLACEMENT_PARAMS(grappa_gadget),
};

/* Slices at once by default: one per two CPU threads, at most this. */
#define AUTO_SLICES_MAX 8

/* Slices at once: on the CPU (not a GPU, not a fake one, which stands in
 * for a GPU and falls back as one), the parameter or one per two of its
 * threads; elsewhere one. */
static int slices_at_once(const grappa_gadget *s) {
  if (mr_device_gpu_index(s->place.dev) >= 0)
    return 1;
  if (s->slices > 0)
    return s->slices;
  mr_device_info info;
  if (mr_device_info_get(s->place.dev, &info, NULL) < 0)
    return 1;
  int n = (info.units + 1) / 2;
  return n < 1 ? 1 : n > AUTO_SLICES_MAX ? AUTO_SLICES_MAX : n;
}

/* The most worker threads it may start (one slice at a time starts none),
 * for the session's thread bound. */
static int threads(const void *state) {
  const grappa_gadget *s = state;
  int most = s->slices > 0 ? s->slices : AUTO_SLICES_MAX;
  return most > 1 ? most : 0;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  grappa_gadget *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  int rc = mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
  if (rc == 0)
    s->at_once = slices_at_once(s);
  return rc;
}

/* The frames kept for the session count against the memory budget. */
static uint64_t frames_bytes(size_t nro, size_t ne1, size_t nch) {
  return (uint64_t)nro * ne1 * nch * sizeof(mr_cfloat) + ne1 * sizeof(uint32_t);
}

static void frames_free(slice_state *sl) {
  if (sl->frames != NULL)
    mr_budget_give(frames_bytes(sl->frames_nro, sl->frames_ne1, sl->frames_nch));
  free(sl->frames);
  free(sl->frames_stamp);
  sl->frames = NULL;
  sl->frames_stamp = NULL;
  sl->nframes = 0;
  sl->frames_nro = sl->frames_ne1 = sl->frames_nch = 0;
}

static void waiting_free(slice_state *sl) {
  for (int i = 0; i < sl->nwaiting; i++)
    mr_message_unref(sl->waiting[i]);
  sl->nwaiting = 0;
}

static void slice_free(slice_state *sl) {
  free(sl->weights);
  frames_free(sl);
  waiting_free(sl);
  free(sl);
}

static slice_state *slice_find(grappa_gadget *s, int encoding, int slice, int contrast,
                               int set) {
  for (slice_state *sl = s->slice_states; sl != NULL; sl = sl->next)
    if (sl->encoding == encoding && sl->slice == slice && sl->contrast == contrast &&
        sl->set == set)
      return sl;
  slice_state *sl = calloc(1, sizeof *sl);
  if (sl == NULL)
    return NULL;
  sl->encoding = encoding;
  sl->slice = slice;
  sl->contrast = contrast;
  sl->set = set;
  sl->next = s->slice_states;
  s->slice_states = sl;
  return sl;
}

/* The longest run of consecutive flagged lines: *start, returns length. */
static size_t longest_run(const uint8_t *flags, size_t n, size_t *start) {
  size_t best = 0, run = 0;
  *start = 0;
  for (size_t y = 0; y < n; y++) {
    run = flags[y] ? run + 1 : 0;
    if (run > best) {
      best = run;
      *start = y + 1 - run;
    }
  }
  return best;
}

static int same_opts(const mr_grappa_opts *a, const mr_grappa_opts *b) {
  return a->nc == b->nc && a->nro == b->nro && a->nacs == b->nacs && a->accel == b->accel &&
         a->kpe == b->kpe && a->kro == b->kro && a->segments == b->segments &&
         a->eta == b->eta && a->chi == b->chi && a->kappa == b->kappa && a->method == b->method;
}

/* *plan for opts on dev (*plan_dev), made anew when either changed. */
static int plan_keep(mr_grappa_plan **plan, mr_device **plan_dev, mr_device *dev,
                     const mr_grappa_opts *o, mr_err *err) {
  if (*plan != NULL && *plan_dev == dev && same_opts(mr_grappa_plan_opts(*plan), o))
    return 0;
  mr_grappa_plan_destroy(*plan);
  *plan = NULL;
  int rc = mr_grappa_plan_create(dev, o, plan, err);
  *plan_dev = rc == 0 ? dev : NULL;
  return rc;
}

static int plan_for(grappa_gadget *s, mr_device *dev, const mr_grappa_opts *o, mr_err *err) {
  return plan_keep(&s->plan, &s->plan_dev, dev, o, err);
}

typedef struct calib_job {
  grappa_gadget *s;
  const mr_grappa_opts *opts;
  const mr_cfloat *acs;
  size_t coil_stride;
  mr_cfloat *weights;
} calib_job;

static int run_calibrate(mr_device *dev, void *arg, mr_err *err) {
  calib_job *j = arg;
  int rc = plan_for(j->s, dev, j->opts, err);
  return rc < 0 ? rc
                : mr_grappa_calibrate_host(j->s->plan, j->acs, j->coil_stride, j->weights, err);
}

typedef struct fill_job {
  grappa_gadget *s;
  const mr_grappa_opts *opts;
  const mr_cfloat *weights;
  mr_kspace *k;
} fill_job;

/* On a GPU, when the k-space is there already or goes on to a gadget that
 * works on the device (fft), it is filled there: at most one upload, no
 * download. */
static int fill_task(mr_device *dev, void *arg, mr_err *err) {
  fill_job *j = arg;
  mr_err e = {0};
  mr_cfloat *k = mr_kspace_on(j->k, dev, &e);
  if (k == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
  size_t bytes = mr_grappa_weights_count(j->opts) * sizeof(mr_cfloat);
  mr_buf *w = NULL;
  int rc = mr_buf_create(dev, bytes, &w, err);
  if (rc == 0)
    rc = mr_buf_upload(w, 0, j->weights, bytes, err);
  if (rc == 0)
    rc = mr_grappa_apply(j->s->plan, mr_buf_data(w), j->k->sampled, j->k->ne1, k, NULL, err);
  mr_buf_destroy(w);
  if (rc == 0)
    mr_kspace_changed_on(j->k, dev);
  return rc;
}

static int run_fill(mr_device *dev, void *arg, mr_err *err) {
  fill_job *j = arg;
  int rc = plan_for(j->s, dev, j->opts, err);
  if (rc < 0)
    return rc;
  mr_kspace *k = j->k;
  if (mr_device_is_gpu(dev) &&
      (j->s->on_device || (k->dev != NULL && mr_buf_device(k->dev) == dev)))
    return mr_device_run(dev, fill_task, j, err);
  /* On the host: the only copy from here on. */
  mr_err e = {0};
  if ((rc = mr_kspace_hand_on(k, 0, &e)) < 0)
    return mr_err_set(err, rc, "%s", mr_err_text(&e, rc));
  return mr_grappa_apply_host(j->s->plan, j->weights, k->sampled, k->ne1, (mr_cfloat *)k->data,
                              NULL, err);
}

/* The calibration of k's shape on nacs lines at R accel, as configured. */
static mr_grappa_opts calibration_opts(const grappa_gadget *s, const mr_kspace *k, size_t nacs,
                                       int accel) {
  mr_grappa_opts o = mr_grappa_opts_default((int)k->nch, (int)k->nro, (int)nacs, accel);
  o.kro = s->kernel[0];
  o.kpe = s->kernel[1];
  o.chi = (float)s->chi;
  o.eta = (float)s->eta;
  o.kappa = (float)s->kappa;
  o.segments = s->segments;
  o.method = s->method == METHOD_DIRECT   ? MR_GRAPPA_DIRECT
             : s->method == METHOD_HYBRID ? MR_GRAPPA_HYBRID
                                          : MR_GRAPPA_FUSED;
  return o;
}

/* Consecutive calibration lines the kernel needs at R accel: its lines
 * span (kernel lines - 1) R + 1. */
static long acs_lines_needed(const grappa_gadget *s, int accel) {
  return (long)(s->kernel[1] - 1) * accel + 1;
}

/* Calibrates slice sl on nacs lines from line a0 of src (same shape as k). */
static int calibrate(grappa_gadget *s, mr_gadget_ctx *ctx, slice_state *sl, const mr_kspace *k,
                     const mr_cfloat *src, size_t a0, size_t nacs, int accel) {
  mr_grappa_opts o = calibration_opts(s, k, nacs, accel);
  long need = acs_lines_needed(s, accel);
  if ((long)nacs < need)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "slice %d: %zu consecutive calibration lines, a %d x %d kernel at R %d "
                          "needs %ld",
                          sl->slice, nacs, o.kpe, o.kro, accel, need);
  mr_cfloat *w = malloc(mr_grappa_weights_count(&o) * sizeof *w);
  if (w == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for GRAPPA weights");
  calib_job job = {s, &o, (const mr_cfloat *)src + a0 * k->nro, k->ne1 * k->nro, w};
  int rc = mr_placement_run(&s->place, ctx, run_calibrate, &job);
  if (rc < 0) {
    free(w);
    return rc;
  }
  free(sl->weights);
  sl->weights = w;
  sl->opts = o;
  return 0;
}

/* Interleaved calibration: merges k's sampled lines into the slice's
 * frames; returns in *a0, *nacs the run of consecutive lines the last
 * accel frames brought that holds the k-space centre line (the longest run
 * when none does), cut to at most max_lines (0: no limit) around the centre
 * (*nacs 0 while there is none). */
static int merge_frames(mr_gadget_ctx *ctx, slice_state *sl, const mr_kspace *k, int accel,
                        int max_lines, size_t *a0, size_t *nacs) {
  size_t per = k->ne1 * k->nro;
  *nacs = 0;
  if (sl->frames == NULL || sl->frames_nro != k->nro || sl->frames_ne1 != k->ne1 ||
      sl->frames_nch != k->nch) {
    /* Frames, stamps and sizes change together, or not at all. */
    frames_free(sl);
    mr_err e = {0};
    if (mr_budget_take(frames_bytes(k->nro, k->ne1, k->nch), "interleaved calibration frames",
                       &e) < 0)
      return mr_gadget_fail(ctx, e.code, "%s", e.msg);
    sl->frames = calloc(per * k->nch, sizeof *sl->frames);
    sl->frames_stamp = calloc(k->ne1, sizeof *sl->frames_stamp);
    if (sl->frames == NULL || sl->frames_stamp == NULL) {
      free(sl->frames);
      free(sl->frames_stamp);
      sl->frames = NULL;
      sl->frames_stamp = NULL;
      mr_budget_give(frames_bytes(k->nro, k->ne1, k->nch));
      return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for interleaved calibration");
    }
    sl->frames_nro = k->nro;
    sl->frames_ne1 = k->ne1;
    sl->frames_nch = k->nch;
  }
  uint32_t frame = ++sl->nframes;
  for (size_t y = 0; y < k->ne1; y++) {
    if (!k->sampled[y])
      continue;
    for (size_t c = 0; c < k->nch; c++)
      memcpy(sl->frames + c * per + y * k->nro, k->data + c * per + y * k->nro,
             k->nro * sizeof *sl->frames);
    sl->frames_stamp[y] = frame;
  }
  /* Lines older than the last accel frames are left out. */
  size_t centre = k->ne1 / 2, best = 0, best0 = 0, run = 0;
  for (size_t y = 0; y <= k->ne1; y++) {
    int recent = y < k->ne1 && sl->frames_stamp[y] != 0 &&
                 frame - sl->frames_stamp[y] < (uint32_t)accel;
    if (recent) {
      run++;
      continue;
    }
    size_t start = y - run;
    int has_centre = centre >= start && centre < y;
    if (has_centre || (run > best && !(best0 <= centre && centre < best0 + best))) {
      best = run;
      best0 = start;
    }
    run = 0;
  }
  if (max_lines > 0 && best > (size_t)max_lines) {
    /* max_lines of the run, as centred on the centre line as it allows. */
    size_t lo = centre >= (size_t)max_lines / 2 ? centre - (size_t)max_lines / 2 : 0;
    if (lo < best0)
      lo = best0;
    if (lo + (size_t)max_lines > best0 + best)
      lo = best0 + best - (size_t)max_lines;
    best0 = lo;
    best = (size_t)max_lines;
  }
  *a0 = best0;
  *nacs = best;
  return 0;
}

/* Embedded calibration-only lines are measured k-space: they join it,
 * in every copy of the samples (host, device). */
static int adopt_calibration_lines(mr_kspace *k, mr_err *err) {
  const mr_kspace *c = k->calib;
  if (c->nro != k->nro || c->ne1 != k->ne1 || c->nch != k->nch || c->ne2 != k->ne2)
    return 0;
  size_t per = k->ne1 * k->nro, row = k->nro * sizeof *k->data;
  int rc = 0, queued = 0;
  /* Run by run of such lines: one copy of every channel's run each, queued
   * on the device without waiting, and one wait at the end. */
  for (size_t y = 0; rc == 0 && y < k->ne1;) {
    if (!c->sampled[y] || k->sampled[y]) {
      y++;
      continue;
    }
    size_t end = y;
    while (end < k->ne1 && c->sampled[end] && !k->sampled[end])
      k->sampled[end++] = 1;
    for (size_t ch = 0; k->data != NULL && ch < k->nch; ch++)
      memcpy(k->data + ch * per + y * k->nro, c->data + ch * per + y * k->nro, (end - y) * row);
    if (k->dev != NULL) {
      rc = mr_buf_upload_rows_async(k->dev, y * row, per * sizeof *k->data, c->data + y * k->nro,
                                    per * sizeof *k->data, (end - y) * row, k->nch, err);
      queued = 1;
    }
    y = end;
  }
  /* The copies read c's samples, which go with c. */
  int wait = queued ? mr_buf_wait_uploads(k->dev, err) : 0;
  return rc < 0 ? rc : wait;
}

/* After the filling: the lines within R - 1 of the acquired ones count as
 * sampled; those further out (what a partial Fourier scan left out) stay
 * unsampled, for a partial_fourier gadget after grappa (the kernel has no
 * source lines there: they hold zeros, or a short extrapolation). */
static void mark_filled(mr_kspace *k, int accel) {
  size_t lo = k->ne1, hi = 0, reach = (size_t)accel - 1;
  for (size_t y = 0; y < k->ne1; y++)
    if (k->sampled[y]) {
      lo = y < lo ? y : lo;
      hi = y;
    }
  if (lo > hi)
    return;
  lo = lo > reach ? lo - reach : 0;
  hi = hi + reach < k->ne1 ? hi + reach : k->ne1 - 1;
  memset(k->sampled + lo, 1, hi - lo + 1);
}

/* Passes on msg's filled k-space (takes msg), of calibration generation
 * `generation`. */
static int pass_on(grappa_gadget *s, mr_gadget_ctx *ctx, uint32_t generation, int accel,
                   mr_message *msg, mr_emit *out) {
  mr_kspace *k = msg->u.object.ptr;
  mark_filled(k, accel);
  k->calib_generation = generation;
  mr_kspace_free(k->calib);
  k->calib = NULL;
  mr_err e = {0};
  int rc = mr_kspace_hand_on(k, s->on_device, &e);
  if (rc < 0) {
    mr_message_unref(msg);
    return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
  }
  return mr_emit_message(out, msg);
}

/* Fills msg's k-space (takes msg) with the slice's weights and passes it
 * on. */
static int fill_and_emit(grappa_gadget *s, mr_gadget_ctx *ctx, slice_state *sl, int accel,
                         mr_message *msg, mr_emit *out) {
  mr_kspace *k = msg->u.object.ptr;
  int rc;
  if (sl->opts.nc != (int)k->nch || sl->opts.nro != (int)k->nro || sl->opts.accel != accel) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "slice %d was calibrated for %d coils x %d samples at R %d, this k-space "
                        "has %zu x %zu at R %d and brings no calibration lines",
                        sl->slice, sl->opts.nc, sl->opts.nro, sl->opts.accel, k->nch, k->nro,
                        accel);
    goto done;
  }
  fill_job job = {s, &sl->opts, sl->weights, k};
  if ((rc = mr_placement_run(&s->place, ctx, run_fill, &job)) < 0)
    goto done;
  return pass_on(s, ctx, sl->generation, accel, msg, out);
done:
  mr_message_unref(msg);
  return rc;
}

/* A buffer with its own calibration lines, calibrated and filled by a
 * worker (the slices at once, see the top). */
typedef struct slice_job {
  slice_state *sl;
  mr_message *msg;       /* its k-space, filled in place */
  mr_device *dev;        /* the CPU */
  mr_grappa_opts opts;
  const mr_cfloat *acs;  /* the first calibration line, in msg's k-space or its calib */
  mr_cfloat *weights;    /* made here; the slice's once taken back */
  int accel;
  uint32_t generation;
} slice_job;

/* A worker's plan, kept for its next buffers. */
typedef struct worker_plan {
  mr_grappa_plan *plan;
  mr_device *dev;
} worker_plan;

static void worker_plan_free(void *own) {
  worker_plan *wp = own;
  mr_grappa_plan_destroy(wp->plan);
  free(wp);
}

static int run_slice_job(void **own, void *arg, mr_err *err) {
  slice_job *j = arg;
  if (*own == NULL && (*own = calloc(1, sizeof(worker_plan))) == NULL)
    return mr_err_set(err, MR_ENOMEM, "grappa: out of memory for a worker's plan");
  worker_plan *wp = *own;
  mr_kspace *k = j->msg->u.object.ptr;
  int rc = plan_keep(&wp->plan, &wp->dev, j->dev, &j->opts, err);
  if (rc == 0)
    rc = mr_grappa_calibrate_host(wp->plan, j->acs, k->ne1 * k->nro, j->weights, err);
  if (rc == 0)
    rc = mr_grappa_apply_host(wp->plan, j->weights, k->sampled, k->ne1, (mr_cfloat *)k->data,
                              NULL, err);
  return rc;
}

static void slice_job_drop(void *arg) {
  slice_job *j = arg;
  j->sl->in_flight--;
  free(j->weights);
  mr_message_unref(j->msg);
  free(j);
}

/* Takes back the workers' buffers in their order and passes them on: the
 * first `wait` of them once done (waiting), then those done; the first
 * failure ends it. */
static int take_slices(grappa_gadget *s, mr_gadget_ctx *ctx, int wait, mr_emit *out) {
  for (int n = 0;; n++) {
    int rc = 0;
    mr_err e = {0};
    slice_job *j = s->workers != NULL ? mr_workers_take(s->workers, n < wait, &rc, &e) : NULL;
    if (j == NULL)
      return 0;
    if (rc < 0) {
      slice_job_drop(j);
      return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    }
    slice_state *sl = j->sl;
    free(sl->weights);
    sl->weights = j->weights;
    sl->opts = j->opts;
    sl->in_flight--;
    mr_message *msg = j->msg;
    int accel = j->accel;
    uint32_t generation = j->generation;
    free(j);
    if ((rc = pass_on(s, ctx, generation, accel, msg, out)) < 0)
      return rc;
  }
}

/* Gives msg (k-space k of slice sl, on the host, calibrated as o on the
 * lines from line a0 of src) to the workers, once there is room (passing
 * on the oldest meanwhile). */
static int give_slice(grappa_gadget *s, mr_gadget_ctx *ctx, slice_state *sl, mr_message *msg,
                      const mr_cfloat *src, size_t a0, const mr_grappa_opts *o, int accel,
                      mr_emit *out) {
  const mr_kspace *k = msg->u.object.ptr;
  mr_err e = {0};
  int rc = 0;
  if (s->workers == NULL &&
      (rc = mr_workers_create(s->at_once, "grappa", run_slice_job, worker_plan_free, ctx,
                              &s->workers, &e)) < 0)
    return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
  if (mr_workers_full(s->workers) && (rc = take_slices(s, ctx, 1, out)) < 0)
    return rc;
  slice_job *j = calloc(1, sizeof *j);
  mr_cfloat *w = malloc(mr_grappa_weights_count(o) * sizeof *w);
  if (j == NULL || w == NULL) {
    free(j);
    free(w);
    /* after those given before it, as one at a time would */
    rc = take_slices(s, ctx, mr_workers_pending(s->workers), out);
    return rc < 0 ? rc : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for GRAPPA weights");
  }
  sl->generation++;
  sl->in_flight++;
  *j = (slice_job){.sl = sl, .msg = mr_message_ref(msg), .dev = s->place.dev, .opts = *o,
                   .acs = src + a0 * k->nro, .weights = w, .accel = accel,
                   .generation = sl->generation};
  mr_workers_give(s->workers, j);
  return take_slices(s, ctx, 0, out);
}

/* The workers' plans for o on k-spaces of ne1 lines, one each, counted
 * against the memory budget before they are made: 0 when they fit (held
 * until destroy), else MR_ELIMIT (one at a time, on the stage thread). */
static int budget_workers(grappa_gadget *s, const mr_grappa_opts *o, size_t ne1) {
  uint64_t need = (uint64_t)s->at_once * mr_grappa_host_bytes(o, (int)ne1);
  if (need <= s->workers_bytes)
    return 0;
  if (mr_budget_take(need - s->workers_bytes, "grappa: the plans of the slices at once", NULL) < 0)
    return MR_ELIMIT;
  s->workers_bytes = need;
  return 0;
}

/* Hands msg to the workers when it brings its own calibration lines, enough
 * of them, needs nothing of the slice's earlier buffers (see the top) and
 * the workers' plans fit the memory budget: 1 when given (*rc its result),
 * 0 to run it on the stage thread. */
static int given_to_workers(grappa_gadget *s, mr_gadget_ctx *ctx, slice_state *sl,
                            mr_message *msg, int accel, int separate, int *rc, mr_emit *out) {
  mr_kspace *k = msg->u.object.ptr;
  const mr_kspace *c = k->calib;
  if (s->at_once < 2 || !mr_gadget_has_thread(ctx) || k->dev != NULL || k->data == NULL)
    return 0;
  if (c != NULL && (c->nro != k->nro || c->nch != k->nch || c->ne1 != k->ne1 || c->ne2 != 1))
    return 0; /* refused there, in its turn */
  if (c == NULL && (sl->weights != NULL || sl->in_flight > 0))
    return 0; /* calibrated on earlier lines */
  size_t a0 = 0, nacs = c != NULL ? longest_run(c->sampled, c->ne1, &a0)
                                  : longest_run(k->sampled, k->ne1, &a0);
  if ((long)nacs < acs_lines_needed(s, accel))
    return 0;
  mr_grappa_opts o = calibration_opts(s, k, nacs, accel);
  if (budget_workers(s, &o, k->ne1) < 0)
    return 0;
  mr_err why = {0};
  if (c != NULL && !separate && adopt_calibration_lines(k, &why) < 0)
    return 0; /* k is on the host: nothing to fail */
  *rc = give_slice(s, ctx, sl, msg, c != NULL ? c->data : k->data, a0, &o, accel, out);
  return 1;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  grappa_gadget *s = state;
  mr_kspace *k = msg->u.object.ptr;
  int rc = 0;
  const mr_parallel_imaging *pi =
      ctx->hdr != NULL && k->encoding < ctx->hdr->nencodings ? &ctx->hdr->encoding[k->encoding].parallel
                                                               : NULL;
  int accel = pi != NULL && pi->present ? pi->accel_e1 : 1;
  mr_err e = {0};
  if (accel <= 1 && (pi == NULL || pi->accel_e2 <= 1)) { /* not accelerated */
    if ((rc = mr_kspace_hand_on(k, s->on_device, &e)) < 0) {
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
      goto done;
    }
    return mr_emit_message(out, mr_message_ref(msg));
  }
  if (k->traj != NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "got non-Cartesian k-space: GRAPPA needs Cartesian lines");
    goto done;
  }
  if (pi->accel_e2 > 1 || k->ne2 > 1) {
    rc = mr_gadget_fail(ctx, MR_ENOTSUP,
                        "acceleration %u x %u on a %zu-partition k-space: only 2D k-spaces "
                        "accelerated along e1 are supported",
                        pi->accel_e1, pi->accel_e2, k->ne2);
    goto done;
  }
  if (accel > MR_GRAPPA_MAX_ACCEL) {
    rc = mr_gadget_fail(ctx, MR_ENOTSUP, "acceleration %d: at most %d is supported", accel,
                        MR_GRAPPA_MAX_ACCEL);
    goto done;
  }
  /* Interleaved frames of other contrasts or sets are other images: they
   * are merged and calibrated apart. */
  int interleaved = k->calib == NULL && pi->calibration == MR_CALIB_INTERLEAVED;
  slice_state *sl = slice_find(s, k->encoding, k->ref.idx.slice,
                               interleaved ? k->ref.idx.contrast : 0,
                               interleaved ? k->ref.idx.set : 0);
  if (sl == NULL) {
    rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    goto done;
  }
  size_t a0 = 0, nacs = 0, imaging = 0;
  for (size_t y = 0; y < k->ne1; y++)
    imaging += k->sampled[y] != 0;
  int separate = pi->calibration == MR_CALIB_SEPARATE || pi->calibration == MR_CALIB_EXTERNAL;
  if (!interleaved && imaging > 0 &&
      given_to_workers(s, ctx, sl, msg, accel, separate, &rc, out))
    return rc;
  /* Any other buffer comes after those with the workers. */
  if ((rc = take_slices(s, ctx, mr_workers_pending(s->workers), out)) < 0)
    goto done;
  int calibrated = 0;
  long need = acs_lines_needed(s, accel);
  mr_err why = {0};
  if (k->calib != NULL && !separate && (rc = adopt_calibration_lines(k, &why)) < 0) {
    rc = mr_gadget_fail(ctx, rc, "calibration lines onto the GPU: %s", mr_err_text(&why, rc));
    goto done;
  }
  /* Calibrating without calibration lines reads the k-space on the host. */
  if (k->calib == NULL && (interleaved || sl->weights == NULL) && mr_kspace_host(k, &e) == NULL) {
    rc = mr_gadget_fail(ctx, e.code, "%s", e.msg);
    goto done;
  }
  if (k->calib != NULL) {
    const mr_kspace *c = k->calib;
    if (c->nro != k->nro || c->nch != k->nch || c->ne1 != k->ne1 || c->ne2 != 1) {
      rc = mr_gadget_fail(ctx, MR_EDATA,
                          "calibration lines (%zu x %zu samples, %zu coils) do not match the "
                          "k-space (%zu x %zu, %zu coils)",
                          c->ne1, c->nro, c->nch, k->ne1, k->nro, k->nch);
      goto done;
    }
    nacs = longest_run(c->sampled, c->ne1, &a0);
    rc = calibrate(s, ctx, sl, k, (const mr_cfloat *)c->data, a0, nacs, accel);
    calibrated = 1;
  } else if (interleaved) {
    int lines = s->interleaved_lines > 0 && s->interleaved_lines < need ? (int)need
                                                                        : s->interleaved_lines;
    if ((rc = merge_frames(ctx, sl, k, accel, lines, &a0, &nacs)) == 0 &&
        (long)nacs >= need) {
      rc = calibrate(s, ctx, sl, k, sl->frames, a0, nacs, accel);
      calibrated = 1;
    }
  } else if (sl->weights == NULL) {
    nacs = longest_run(k->sampled, k->ne1, &a0);
    rc = calibrate(s, ctx, sl, k, (const mr_cfloat *)k->data, a0, nacs, accel);
    calibrated = 1;
  }
  if (rc < 0)
    goto done;
  /* New calibration data (a reference scan, or ACS lines in this buffer):
   * coil maps made from earlier images are stale. */
  sl->generation += (uint32_t)calibrated;
  if (imaging == 0) { /* a reference scan alone */
    return 0;
  }
  if (sl->weights == NULL && interleaved) {
    /* The union of R regularly shifted frames covers every line: a frame
     * waits for the next ones, unless R frames did not do. */
    if (sl->nwaiting < accel - 1) {
      sl->waiting[sl->nwaiting++] = mr_message_ref(msg);
      return 0;
    }
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "slice %d: the last %d interleaved frames cover %zu consecutive lines "
                        "around the centre, a %d x %d kernel at R %d needs %ld (frames sampled "
                        "at the same positions?)",
                        sl->slice, accel, nacs, s->kernel[1], s->kernel[0], accel, need);
    goto done;
  }
  if (sl->weights == NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "slice %d: no calibration data yet (no ACS lines, no earlier weights)",
                        sl->slice);
    goto done;
  }
  /* Frames that waited for this calibration go first, in their order. */
  for (int i = 0; i < sl->nwaiting && rc == 0; i++) {
    mr_message *w = sl->waiting[i];
    sl->waiting[i] = NULL;
    rc = fill_and_emit(s, ctx, sl, accel, w, out);
  }
  waiting_free(sl); /* those left after a failure */
  if (rc < 0)
    goto done;
  return fill_and_emit(s, ctx, sl, accel, mr_message_ref(msg), out);
done:
  return rc;
}

/* Interleaved frames still waiting at the end never got a calibration. */
static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  grappa_gadget *s = state;
  int rc = take_slices(s, ctx, mr_workers_pending(s->workers), out);
  if (rc < 0)
    return rc;
  for (slice_state *sl = s->slice_states; sl != NULL; sl = sl->next)
    if (sl->nwaiting > 0)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "slice %d: the stream ended after %d interleaved frame(s) whose "
                            "lines are too few to calibrate on; the union of R frames "
                            "sampled at shifted positions is needed",
                            sl->slice, sl->nwaiting);
  return 0;
}

/* Passes on what the workers finished meanwhile. */
static int wake(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  return take_slices(state, ctx, 0, out);
}

static void destroy(void *state) {
  grappa_gadget *s = state;
  mr_workers_destroy(s->workers, slice_job_drop); /* their jobs name slice states */
  mr_budget_give(s->workers_bytes);
  mr_grappa_plan_destroy(s->plan);
  while (s->slice_states != NULL) {
    slice_state *sl = s->slice_states;
    s->slice_states = sl->next;
    slice_free(sl);
  }
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_grappa = {
    .name = "grappa",
    .summary = "GRAPPA: calibrates a kernel on the ACS lines (per slice, reused until new "
               "ones come) and fills every missing line of every coil",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(grappa_gadget),
    .handles = MR_HANDLES_ACCELERATION,
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .threads = threads,
    .configure = configure,
    .process = process,
    .flush = flush,
    .wake = wake,
    .destroy = destroy,
};
