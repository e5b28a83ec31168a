/* epi: EPI echo trains to plain Cartesian readouts, before accumulate.
 *
 * Each echo train starts with its navigators (IS_PHASECORR_DATA: forward,
 * reversed, forward); from them the odd/even phase error of the slice's
 * reversed readouts is fitted (ghost_fit.h), per slice and per segment
 * (shot), optionally filtered over repetitions. The echoes are gathered
 * while they belong to one slice and one correction, then regridded
 * together on the device (gpu/epi: ramp-sampled readouts onto the uniform
 * grid of the encoded readout from the encoding's trajectoryDescription,
 * reversed ones reversed, their profiles corrected) and sent on in their
 * order as readouts of nx samples, not reversed. Navigators stop here;
 * noise and other non-imaging lines pass as they are.
 *
 * What the scan lacks is an error, never a ghosted image: an echo of a
 * slice no navigators came for (unless "ghost": "none"), readouts whose
 * sample count the header does not explain (ramp sampling without a
 * trajectoryDescription). */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "epi.h"
#include "epi_trajectory.h"
#include "error.h"
#include "gadget.h"
#include "ghost_fit.h"
#include "kspace.h"
#include "placement.h"
#include "scratch.h"

/* Readouts regridded together at most (bounds the batch's memory with the
 * sample budget below). */
#define BATCH_READOUTS 1024
#define BATCH_SAMPLES ((size_t)1 << 22)
/* Navigator sets (slice, segment, calibration) a scan may have. */
#define MAX_SETS 4096

enum ghost_mode { GHOST_NAVIGATORS, GHOST_NONE };

/* The navigators of one slice, segment and kind of train (calibration or
 * imaging), and the fits made from them. */
typedef struct nav_set {
  uint16_t slice, segment;
  int calib;
  mr_cfloat *fwd, *rev; /* sums of the readouts, samples x channels */
  int nfwd, nrev;
  mr_ghost_history history;
} nav_set;

/* The correction in force for a slice: from its latest navigators. */
typedef struct slice_state {
  uint16_t slice;
  int latest;      /* nav_set index, -1: none yet */
  int have;        /* factors hold a correction */
  mr_cfloat *factors;
} slice_state;

typedef struct epi_gadget {
  int device, fallback;
  int ghost;  /* enum ghost_mode */
  int filter; /* fits averaged over repetitions */
  double rcond;
  mr_placement place;
  int nx;                   /* encoded readout */
  const mr_trajectory_description *description; /* the header's, encoding 0 */
  int samples, channels;    /* of the scan's readouts, from the first */
  double *fwd_pos, *rev_pos;
  mr_epi_plan *plan;        /* on the device of the last batch */
  nav_set *sets;
  int nsets;
  slice_state *slices;
  int nslices;
  mr_message **batch;       /* echoes waiting, in order (references) */
  int nbatch;
  mr_scratch packed, regridded;
  mr_cfloat *profiles;      /* the mean forward and reversed navigators' profiles */
} epi_gadget;

static const mr_param params[] = {
    MR_PARAM_ENUM(epi_gadget, ghost, "ghost", "\"navigators\"", "navigators|none",
        "navigators: the odd/even phase error fitted (constant + linear across the readout) from "
        "each echo train's navigators (IS_PHASECORR_DATA) corrects its reversed echoes; none: "
        "no correction (a scan without navigators)"),
    MR_PARAM_INT(epi_gadget, filter, "filter", "1", 1, MR_GHOST_FILTER_MAX,
        "the correction of a slice and segment is the mean of its last `filter` fits "
        "(repetitions); 1: each train's own"),
    MR_PARAM_DOUBLE(epi_gadget, rcond, "rcond", "1e-2", 1e-12, 0.5,
        "the ramp-sampling regridding's truncated SVD drops singular values under rcond x the "
        "largest (regularisation: the plain pseudo-inverse amplifies noise ~1e11 times)"),
    MR_PLACEMENT_PARAMS(epi_gadget),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  epi_gadget *s = state;
  s->nx = ctx->hdr->encoding[0].encoded.matrix.x;
  s->description = &ctx->hdr->encoding[0].description;
  if (s->description->present && !mr_trajectory_description_is_epi(s->description))
    return mr_gadget_fail(ctx, MR_EHEADER,
                          "the encoding's trajectoryDescription is '%s', not ConventionalEPI: "
                          "no EPI readout to regrid",
                          s->description->identifier);
  if (s->nx < 1)
    return mr_gadget_fail(ctx, MR_EHEADER, "the encoded readout has %d samples", s->nx);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* The scan's readout shape, from its first readout: positions and the
 * navigators' host plan. */
static int readout_shape(epi_gadget *s, mr_gadget_ctx *ctx, const mr_acquisition *a) {
  int ns = a->head.number_of_samples, nch = a->head.active_channels;
  if (s->samples != 0) {
    if (ns != s->samples || nch != s->channels)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "acquisition %u has %d samples x %d channels, the scan's first "
                            "%d x %d: EPI readouts of one scan share their shape",
                            a->head.scan_counter, ns, nch, s->samples, s->channels);
    return 0;
  }
  if (nch < 1 || ns < 1)
    return mr_gadget_fail(ctx, MR_EDATA, "acquisition %u has %d samples x %d channels",
                          a->head.scan_counter, ns, nch);
  s->fwd_pos = malloc((size_t)ns * sizeof *s->fwd_pos);
  s->rev_pos = malloc((size_t)ns * sizeof *s->rev_pos);
  s->profiles = malloc(2 * (size_t)s->nx * (size_t)nch * sizeof *s->profiles);
  if (s->fwd_pos == NULL || s->rev_pos == NULL || s->profiles == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  mr_err e = {0};
  int rc = mr_epi_positions(s->description->present ? s->description : NULL, s->nx, ns,
                            s->fwd_pos, s->rev_pos, &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  s->samples = ns;
  s->channels = nch;
  return 0;
}

static int plan_on(epi_gadget *s, mr_device *dev, mr_err *err) {
  if (s->plan != NULL && mr_epi_plan_device(s->plan) == dev)
    return 0;
  mr_epi_plan_destroy(s->plan);
  s->plan = NULL;
  mr_epi_readout r = {.samples = s->samples, .nx = s->nx, .forward = s->fwd_pos,
                      .reverse = s->rev_pos, .rcond = s->rcond};
  return mr_epi_plan_create(dev, &r, &s->plan, err);
}

/* The host plan for the navigators: the session's device's plan keeps its
 * operators on the host too. */
static int host_plan(epi_gadget *s, mr_gadget_ctx *ctx, mr_err *err) {
  if (s->plan != NULL)
    return 0;
  int rc = plan_on(s, s->place.dev, err);
  return rc < 0 ? mr_gadget_fail(ctx, rc, "the EPI regridding plan: %s", mr_err_text(err, rc)) : 0;
}

static nav_set *find_set(epi_gadget *s, mr_gadget_ctx *ctx, const ISMRMRD_AcquisitionHeader *h,
                         int *index) {
  int calib = (h->flags & MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION)) != 0;
  for (int i = 0; i < s->nsets; i++) {
    nav_set *n = &s->sets[i];
    if (n->slice == h->idx.slice && n->segment == h->idx.segment && n->calib == calib) {
      *index = i;
      return n;
    }
  }
  if (s->nsets == MAX_SETS) {
    mr_gadget_fail(ctx, MR_ELIMIT, "more than %d slices and segments with navigators", MAX_SETS);
    return NULL;
  }
  nav_set *grown = realloc(s->sets, (size_t)(s->nsets + 1) * sizeof *grown);
  if (grown == NULL) {
    mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    return NULL;
  }
  s->sets = grown;
  nav_set *n = &s->sets[s->nsets];
  memset(n, 0, sizeof *n);
  n->slice = h->idx.slice;
  n->segment = h->idx.segment;
  n->calib = calib;
  size_t count = (size_t)s->samples * (size_t)s->channels;
  n->fwd = calloc(count, sizeof *n->fwd);
  n->rev = calloc(count, sizeof *n->rev);
  if (n->fwd == NULL || n->rev == NULL) {
    free(n->fwd);
    free(n->rev);
    mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    return NULL;
  }
  *index = s->nsets++;
  return n;
}

static slice_state *find_slice(epi_gadget *s, mr_gadget_ctx *ctx, uint16_t slice) {
  for (int i = 0; i < s->nslices; i++)
    if (s->slices[i].slice == slice)
      return &s->slices[i];
  slice_state *grown = realloc(s->slices, (size_t)(s->nslices + 1) * sizeof *grown);
  mr_cfloat *factors = malloc((size_t)s->nx * sizeof *factors);
  if (grown != NULL)
    s->slices = grown;
  if (grown == NULL || factors == NULL) {
    free(factors);
    mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    return NULL;
  }
  slice_state *st = &s->slices[s->nslices++];
  *st = (slice_state){.slice = slice, .latest = -1, .factors = factors};
  return st;
}

typedef struct regrid_job {
  epi_gadget *s;
  int nfwd, nrev;
  const mr_cfloat *correction; /* NULL: none */
} regrid_job;

/* On dev: the packed batch up, regridded, down. */
static int regrid_task(mr_device *dev, void *arg, mr_err *err) {
  regrid_job *j = arg;
  epi_gadget *s = j->s;
  size_t cols = (size_t)(j->nfwd + j->nrev);
  size_t in_bytes = cols * (size_t)s->samples * sizeof(mr_cfloat);
  size_t out_bytes = cols * (size_t)s->nx * sizeof(mr_cfloat);
  mr_buf *in = NULL, *out = NULL;
  int rc = plan_on(s, dev, err);
  if (rc == 0)
    rc = mr_buf_create(dev, in_bytes, &in, err);
  if (rc == 0)
    rc = mr_buf_create(dev, out_bytes, &out, err);
  if (rc == 0)
    rc = mr_buf_upload(in, 0, s->packed.p, in_bytes, err);
  if (rc == 0)
    rc = mr_epi_regrid(s->plan, mr_buf_data(in), j->nfwd, j->nrev, j->correction, mr_buf_data(out),
                       err);
  if (rc == 0)
    rc = mr_buf_download(out, 0, s->regridded.p, out_bytes, err);
  mr_buf_destroy(in);
  mr_buf_destroy(out);
  return rc;
}

static int run_regrid(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, regrid_task, arg, err);
}

/* Regrids the waiting echoes together and sends them on in order. */
static int send_batch(epi_gadget *s, mr_gadget_ctx *ctx, mr_emit *out) {
  if (s->nbatch == 0)
    return 0;
  int n = s->nbatch, nch = s->channels, rc = 0;
  size_t ns = (size_t)s->samples, nx = (size_t)s->nx, per = (size_t)nch;
  mr_err e = {0};
  if ((rc = mr_scratch_grow(&s->packed, (size_t)n * per * ns * sizeof(mr_cfloat),
                            "EPI readouts", &e)) < 0 ||
      (rc = mr_scratch_grow(&s->regridded, (size_t)n * per * nx * sizeof(mr_cfloat),
                            "EPI readouts", &e)) < 0) {
    rc = mr_gadget_fail(ctx, rc, "%s", e.msg);
    goto done;
  }
  /* forward readouts' channels first, then the reversed ones' */
  int nrev = 0;
  for (int i = 0; i < n; i++)
    nrev += mr_acq_flag(&s->batch[i]->u.acq, ISMRMRD_ACQ_IS_REVERSE);
  int nfwd = n - nrev, at[2] = {0, nfwd};
  int *column = malloc((size_t)n * sizeof *column);
  if (column == NULL) {
    rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    goto done;
  }
  mr_cfloat *packed = s->packed.p;
  for (int i = 0; i < n; i++) {
    const mr_acquisition *a = &s->batch[i]->u.acq;
    int r = mr_acq_flag(a, ISMRMRD_ACQ_IS_REVERSE);
    column[i] = at[r]++;
    memcpy(packed + (size_t)column[i] * per * ns, a->data, per * ns * sizeof(mr_cfloat));
  }
  const slice_state *st = find_slice(s, ctx, s->batch[0]->u.acq.head.idx.slice);
  if (st == NULL) {
    free(column);
    rc = MR_ENOMEM;
    goto done;
  }
  regrid_job job = {s, nfwd * nch, nrev * nch, st->have ? st->factors : NULL};
  if ((rc = mr_placement_run(&s->place, ctx, run_regrid, &job)) < 0) {
    free(column);
    goto done;
  }
  const mr_cfloat *regridded = s->regridded.p;
  for (int i = 0; i < n && rc == 0; i++) {
    ISMRMRD_AcquisitionHeader h = s->batch[i]->u.acq.head;
    h.flags &= ~MR_FLAG(ISMRMRD_ACQ_IS_REVERSE);
    h.number_of_samples = (uint16_t)nx;
    h.center_sample = (uint16_t)(nx / 2);
    h.discard_pre = h.discard_post = 0;
    h.trajectory_dimensions = 0;
    mr_message *m = mr_message_new_acquisition(&h);
    if (m == NULL) {
      rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
      break;
    }
    memcpy(m->u.acq.data, regridded + (size_t)column[i] * per * nx, per * nx * sizeof(mr_cfloat));
    rc = mr_emit_message(out, m);
  }
  free(column);
done:
  for (int i = 0; i < n; i++)
    mr_message_unref(s->batch[i]);
  s->nbatch = 0;
  return rc;
}

/* A navigator: added to its set's forward or reversed sum (the profiles
 * are linear in the samples: those of the mean are made once per train,
 * update_correction). */
static int add_navigator(epi_gadget *s, mr_gadget_ctx *ctx, const mr_acquisition *a) {
  int index;
  nav_set *n = find_set(s, ctx, &a->head, &index);
  slice_state *st = n != NULL ? find_slice(s, ctx, a->head.idx.slice) : NULL;
  if (st == NULL)
    return MR_ENOMEM;
  if (st->latest != index && st->latest >= 0) { /* a new train: the last one's leftovers go */
    nav_set *old = &s->sets[st->latest];
    old->nfwd = old->nrev = 0;
  }
  st->latest = index;
  int reversed = mr_acq_flag(a, ISMRMRD_ACQ_IS_REVERSE);
  mr_cfloat *sum = reversed ? n->rev : n->fwd;
  int *count = reversed ? &n->nrev : &n->nfwd;
  size_t total = (size_t)s->samples * (size_t)s->channels;
  for (size_t i = 0; i < total; i++)
    sum[i] = (*count == 0 ? 0 : sum[i]) + a->data[i];
  (*count)++;
  return 0;
}

/* An echo of slice st: the fit of its navigators first, when new ones came. */
static int update_correction(epi_gadget *s, mr_gadget_ctx *ctx, slice_state *st,
                             const mr_acquisition *a, mr_err *err) {
  if (s->ghost == GHOST_NONE)
    return 0;
  if (st->latest < 0)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "EPI echo %u (slice %u) came before any navigator of its slice "
                          "(IS_PHASECORR_DATA): Nyquist-ghost correction needs them; without "
                          "navigators set \"ghost\": \"none\"",
                          a->head.scan_counter, (unsigned)a->head.idx.slice);
  nav_set *n = &s->sets[st->latest];
  if (n->nfwd == 0 && n->nrev == 0)
    return 0; /* the train's correction is made */
  if (n->nfwd == 0 || n->nrev == 0)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "the navigators before EPI echo %u (slice %u, segment %u) are all %s: "
                          "the odd/even correction needs both polarities",
                          a->head.scan_counter, (unsigned)n->slice, (unsigned)n->segment,
                          n->nfwd == 0 ? "reversed" : "forward");
  int rc = host_plan(s, ctx, err);
  if (rc < 0)
    return rc;
  size_t total = (size_t)s->samples * (size_t)s->channels;
  for (size_t i = 0; i < total; i++) {
    n->fwd[i] /= (float)n->nfwd;
    n->rev[i] /= (float)n->nrev;
  }
  mr_cfloat *fwd = s->profiles, *rev = s->profiles + (size_t)s->nx * (size_t)s->channels;
  mr_epi_profiles_host(s->plan, 0, n->fwd, s->channels, fwd);
  mr_epi_profiles_host(s->plan, 1, n->rev, s->channels, rev);
  mr_ghost_fit fit = mr_ghost_fit_profiles(fwd, rev, s->nx, s->channels);
  fit = mr_ghost_history_add(&n->history, fit, s->filter);
  mr_ghost_correction(fit, s->nx, st->factors);
  st->have = 1;
  n->nfwd = n->nrev = 0;
  return 0;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  epi_gadget *s = state;
  const mr_acquisition *a = &msg->u.acq;
  uint64_t f = a->head.flags;
  if ((f & MR_KSPACE_KEPT_OUT) && !(f & MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA)))
    return mr_emit_message(out, mr_message_ref(msg)); /* noise and the like */
  if (a->data == NULL)
    return mr_gadget_fail(ctx, MR_EDATA, "acquisition %u has no samples", a->head.scan_counter);
  int rc = readout_shape(s, ctx, a);
  if (rc < 0)
    return rc;
  /* a batch is one slice under one correction: a navigator or another
   * slice's echo sends the waiting echoes first */
  int other_slice = s->nbatch > 0 && s->batch[0]->u.acq.head.idx.slice != a->head.idx.slice;
  if ((f & MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA)) || other_slice) {
    if ((rc = send_batch(s, ctx, out)) < 0)
      return rc;
  }
  if (f & MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA))
    return s->ghost == GHOST_NONE ? 0 : add_navigator(s, ctx, a);
  slice_state *st = find_slice(s, ctx, a->head.idx.slice);
  if (st == NULL)
    return MR_ENOMEM;
  mr_err why = {0};
  if ((rc = update_correction(s, ctx, st, a, &why)) < 0)
    return rc;
  if (s->batch == NULL && (s->batch = malloc(BATCH_READOUTS * sizeof *s->batch)) == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  s->batch[s->nbatch++] = mr_message_ref(msg);
  size_t samples = (size_t)s->nbatch * (size_t)s->channels * (size_t)s->samples;
  if (s->nbatch == BATCH_READOUTS || samples >= BATCH_SAMPLES ||
      (f & MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE)))
    return send_batch(s, ctx, out);
  return 0;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  return send_batch(state, ctx, out);
}

static void destroy(void *state) {
  epi_gadget *s = state;
  for (int i = 0; i < s->nbatch; i++)
    mr_message_unref(s->batch[i]);
  free(s->batch);
  for (int i = 0; i < s->nsets; i++) {
    free(s->sets[i].fwd);
    free(s->sets[i].rev);
  }
  free(s->sets);
  for (int i = 0; i < s->nslices; i++)
    free(s->slices[i].factors);
  free(s->slices);
  free(s->fwd_pos);
  free(s->rev_pos);
  free(s->profiles);
  mr_epi_plan_destroy(s->plan);
  mr_scratch_free(&s->packed);
  mr_scratch_free(&s->regridded);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_epi = {
    .name = "epi",
    .summary = "EPI echo trains to Cartesian readouts (before accumulate): Nyquist-ghost "
               "correction from the navigators, ramp-sampling regridding, reversed echoes "
               "reversed, per slice on the device",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(epi_gadget),
    .handles = MR_HANDLES_REVERSE | MR_HANDLES_EPI,
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
