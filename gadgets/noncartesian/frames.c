/* frames: real-time non-Cartesian streams (golden-angle radial, say) to
 * one k-space buffer per frame of K readouts, for gridding or fhd_cg.
 *
 * K ("spokes") comes from the parameter or, when it is 0, from the
 * header's kspace_encoding_step_1 limit (maximum + 1: a real-time stream
 * numbers the spokes of each frame from 0). Without a sliding window
 * ("step" 0 or K) every K readouts make a frame, and a readout flagged
 * LAST_IN_REPETITION ends its frame early (a frame the sender made
 * shorter). With a sliding window ("step" S < K) a new frame comes every S
 * readouts, each over the last K (the flags are then ignored); the first
 * once K have arrived.
 *
 * The buffer of frame f (from 0) holds its readouts in the order they
 * came, all lines marked sampled, with their trajectories; its ref is the
 * header of the frame's middle readout (time stamps, geometry) with
 * idx.repetition = f (modulo 65536), so the images come out numbered per
 * frame. At the end of the stream, readouts not yet in a frame make one
 * more over the last K (a full window when sliding); when fewer than K
 * arrived since the last frame, "partial" decides: "emit" sends them as a
 * frame of fewer lines (the unfilled lines unsampled), "drop" discards them.
 *
 * One stream of readouts: every imaging readout must share the first one's
 * encoding space, slice, samples, channels and trajectory dimensions.
 * Noise and other non-imaging lines are kept out, as in accumulate. */
#include <stdlib.h>
#include <string.h>

#include "gadget.h"
#include "kspace.h"

enum { PARTIAL_EMIT, PARTIAL_DROP };

typedef struct frames {
  int spokes, step, partial; /* parameters */
  size_t k, s;               /* resolved: readouts per frame, new readouts per frame */
  int started;               /* the first readout fixed the shape */
  uint16_t encoding, slice;
  size_t ns, nch;
  int dims;
  /* The readouts not yet handed over: without a sliding window line i is
   * the frame's i-th readout; with one, readout t sits at line t % K. */
  mr_kspace *ring;
  ISMRMRD_AcquisitionHeader *heads; /* [K], same places */
  size_t total;                     /* imaging readouts so far */
  size_t empty;                     /* readouts with no samples or no channels: skipped */
  size_t held;                      /* readouts in the ring, <= K */
  size_t fresh;                     /* readouts since the last frame */
  uint32_t frame;                   /* frames sent */
} frames;

static const mr_param params[] = {
    MR_PARAM_INT(frames, spokes, "spokes", "0", 0, 65536,
        "readouts per frame (K); 0: the header's kspace_encoding_step_1 maximum + 1"),
    MR_PARAM_INT(frames, step, "step", "0", 0, 65536,
        "sliding window: a new frame every `step` readouts over the last K; 0: step = K (no "
        "overlap)"),
    MR_PARAM_ENUM(frames, partial, "partial", "\"emit\"", "emit|drop",
        "at the end of the stream, fewer than K readouts since the last frame: send them as a "
        "frame, or drop them"),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  frames *s = state;
  s->k = (size_t)s->spokes;
  if (s->k == 0) {
    const mr_limit *e1 = &ctx->hdr->encoding[0].limits.e1;
    if (!e1->present)
      return mr_gadget_fail(ctx, MR_ECONFIG,
                            "spokes per frame: set \"spokes\", or send a header whose "
                            "kspace_encoding_step_1 limit says it");
    s->k = (size_t)e1->maximum + 1;
  }
  s->s = s->step > 0 ? (size_t)s->step : s->k;
  if (s->s > s->k)
    return mr_gadget_fail(ctx, MR_ECONFIG, "step %zu is more than the %zu spokes of a frame",
                          s->s, s->k);
  s->heads = calloc(s->k, sizeof *s->heads);
  if (s->heads == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for %zu readout headers", s->k);
  return 0;
}

static int sliding(const frames *s) { return s->s < s->k; }

/* The first readout fixes the stream's shape; later ones must match it. */
static int check_shape(frames *s, mr_gadget_ctx *ctx, const ISMRMRD_AcquisitionHeader *h,
                       const float *traj) {
  if (!s->started) {
    if (h->encoding_space_ref >= ctx->hdr->nencodings)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "acquisition %u names encoding space %u; the header has %d",
                            h->scan_counter, h->encoding_space_ref, ctx->hdr->nencodings);
    if (traj == NULL || h->trajectory_dimensions < 2)
      return mr_gadget_fail(ctx, MR_EDATA,
                            "acquisition %u has no trajectory (%u dimensions): frames are for "
                            "non-Cartesian readouts",
                            h->scan_counter, h->trajectory_dimensions);
    s->started = 1;
    s->encoding = h->encoding_space_ref;
    s->slice = h->idx.slice;
    s->ns = h->number_of_samples;
    s->nch = h->active_channels;
    s->dims = h->trajectory_dimensions;
    return 0;
  }
  if (h->encoding_space_ref != s->encoding || h->idx.slice != s->slice)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u is encoding %u slice %u; the stream began with "
                          "encoding %u slice %u (frames takes one slice)",
                          h->scan_counter, h->encoding_space_ref, h->idx.slice, s->encoding,
                          s->slice);
  if (h->number_of_samples != s->ns || h->active_channels != s->nch ||
      h->trajectory_dimensions != s->dims || traj == NULL)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has %u samples x %u channels, trajectory dimensions "
                          "%u; earlier readouts had %zu x %zu, %d",
                          h->scan_counter, h->number_of_samples, h->active_channels,
                          h->trajectory_dimensions, s->ns, s->nch, s->dims);
  return 0;
}

static int ring_new(frames *s, mr_gadget_ctx *ctx) {
  mr_err e = {0};
  s->ring = mr_kspace_new(s->ns, s->k, 1, s->nch, s->dims, &e);
  if (s->ring == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", e.msg);
  const mr_encoding *enc = &ctx->hdr->encoding[s->encoding];
  s->ring->encoding = s->encoding;
  s->ring->recon = enc->recon;
  s->ring->encoded = enc->encoded;
  return 0;
}

static void put(frames *s, const mr_acquisition *a, size_t line) {
  mr_kspace *k = s->ring;
  size_t per = mr_kspace_channel_size(k), ns = s->ns;
  for (size_t c = 0; c < s->nch; c++)
    memcpy(k->data + c * per + line * ns, a->data + c * ns, ns * sizeof *k->data);
  memcpy(k->traj + line * ns * (size_t)s->dims, a->traj, ns * (size_t)s->dims * sizeof *k->traj);
  k->sampled[line] = 1;
  s->heads[line] = a->head;
}

/* The held readouts as a frame: the ring itself without a sliding window,
 * else a copy in time order. */
static int send_frame(frames *s, mr_gadget_ctx *ctx, mr_emit *out) {
  mr_kspace *k;
  size_t first = 0; /* the oldest readout's line */
  if (!sliding(s)) {
    k = s->ring;
    s->ring = NULL;
  } else {
    mr_err e = {0};
    if ((k = mr_kspace_new(s->ns, s->k, 1, s->nch, s->dims, &e)) == NULL)
      return mr_gadget_fail(ctx, e.code, "%s", e.msg);
    k->encoding = s->ring->encoding;
    k->recon = s->ring->recon;
    k->encoded = s->ring->encoded;
    first = (s->total - s->held) % s->k;
    size_t per = mr_kspace_channel_size(k), ns = s->ns, d = (size_t)s->dims;
    for (size_t i = 0; i < s->held; i++) {
      size_t from = (first + i) % s->k;
      for (size_t c = 0; c < s->nch; c++)
        memcpy(k->data + c * per + i * ns, s->ring->data + c * per + from * ns,
               ns * sizeof *k->data);
      memcpy(k->traj + i * ns * d, s->ring->traj + from * ns * d, ns * d * sizeof *k->traj);
      k->sampled[i] = 1;
    }
  }
  k->ref = s->heads[(first + s->held / 2) % s->k];
  k->ref.idx.repetition = (uint16_t)s->frame;
  s->frame++;
  s->fresh = 0;
  if (!sliding(s))
    s->held = 0;
  mr_message *m = mr_kspace_message(k);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  frames *s = state;
  const mr_acquisition *a = &msg->u.acq;
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  int rc = 0;
  if (h->flags & MR_KSPACE_KEPT_OUT)
    goto done;
  if (s->heads == NULL) { /* not configured: no header came */
    rc = mr_gadget_fail(ctx, MR_EDATA, "frames needs the stream's header");
    goto done;
  }
  if (h->number_of_samples == 0 || h->active_channels == 0) {
    /* A flagged sync or navigator line of a converted file: nothing to
     * place, though its end-of-repetition flag still ends a frame. */
    s->empty++;
    if (!sliding(s) && s->fresh > 0 && (h->flags & MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION)))
      rc = send_frame(s, ctx, out);
    goto done;
  }
  if ((rc = check_shape(s, ctx, h, a->traj)) < 0)
    goto done;
  if (s->ring == NULL && (rc = ring_new(s, ctx)) < 0)
    goto done;
  put(s, a, sliding(s) ? s->total % s->k : s->held);
  s->total++;
  s->held += s->held < s->k;
  s->fresh++;
  int last = !sliding(s) && (h->flags & MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION));
  if ((s->held == s->k && s->fresh >= s->s) || last)
    rc = send_frame(s, ctx, out);
done:
  return rc;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  frames *s = state;
  int rc = 0;
  if (s->fresh > 0 && !(s->held < s->k && s->partial == PARTIAL_DROP))
    rc = send_frame(s, ctx, out);
  return rc < 0 ? rc : mr_emit_empty_lines_warning(ctx, out, s->empty);
}

static void destroy(void *state) {
  frames *s = state;
  mr_kspace_free(s->ring);
  free(s->heads);
}

const mr_gadget_class mr_gadget_frames = {
    .name = "frames",
    .summary = "real-time non-Cartesian readouts to one k-space buffer per frame of K "
               "(optionally a sliding window)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(frames),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE) | MR_KIND_BIT(MR_MSG_TEXT),
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
