/* accumulate: gathers acquisitions into k-space buffers, one per
 * encoding space / slice / contrast / phase / repetition / set, placed by
 * their encoding counters, and sends a buffer on when its trigger line
 * arrives (LAST_IN_SLICE or LAST_IN_REPETITION) or at the end of the
 * stream; the buffers that trigger completes too go with it (see
 * send_completed). Lines repeated with other `average` counters are averaged.
 * Noise, navigator, phase-correction and other non-imaging lines are
 * kept out; noise lines go on down the chain as they are, for a
 * noise_adjust placed after accumulate, which whitens whole buffers (those
 * with no samples or channels, as Pulseq-based tools write them, are
 * counted instead, and the client is warned once at the end).
 * Calibration-only lines go to the buffer's calib part; calibration-and-
 * imaging lines to both.
 *
 * When the buffer's consumer works on device data (handoff.h) and the
 * "device" is a GPU, the buffer's lines go up in batches while the rest of
 * the slice is still arriving (an eighth of its lines, at least 8, at a
 * time) from pinned host memory, so that the slice is on the GPU when its
 * last line comes; should the GPU be out of memory, the buffer goes on
 * from the host instead. The batches are copied while the next lines are
 * gathered; the gadget waits for the copies once, when the buffer goes on
 * (or is dropped), so its pinned block is never reused while read. */
#include <stdlib.h>
#include <string.h>

#include "copy_uncached.h"
#include "gadget.h"
#include "handoff.h"
#include "kspace.h"
#include "placement.h"

enum trigger { TRIGGER_SLICE, TRIGGER_REPETITION, TRIGGER_END };

typedef struct open_buffer {
  struct open_buffer *next;
  uint16_t key[6]; /* encoding, slice, contrast, phase, repetition, set */
  mr_kspace *k;
  uint16_t *count;       /* [e2][e1] lines summed (for averaging) */
  uint16_t *calib_count; /* same, for k->calib */
  int ref_is_center;
  size_t ro_offset;      /* where sample 0 lands in the buffer's readout */
  long e1_offset, e2_offset;
  mr_device *pin;        /* the GPU the buffer goes up to (pinned), or NULL */
  uint8_t *dirty;        /* [e2][e1]: changed since the last upload; NULL: none */
  size_t ndirty, batch;  /* lines changed; lines per upload */
} open_buffer;

typedef struct accumulate {
  int trigger;
  int device, fallback;
  mr_placement place;
  int upload;         /* buffers go up to place.dev while they fill */
  open_buffer *open;
  size_t empty_noise; /* noise lines with no samples or channels */
  size_t empty_lines; /* imaging lines with none: skipped (their trigger flags still count) */
} accumulate;

static const mr_param params[] = {
    MR_PARAM_ENUM(accumulate, trigger, "trigger", "\"slice\"", "slice|repetition|end",
        "send a buffer on at LAST_IN_SLICE, at LAST_IN_REPETITION, or only at the end"),
    MR_PLACEMENT_PARAMS(accumulate),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  accumulate *s = state;
  int rc = mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
  s->upload = rc == 0 && mr_device_is_gpu(s->place.dev) &&
              mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  return rc;
}

static void free_open(open_buffer *b) {
  if (b->k != NULL && b->dirty != NULL)
    mr_kspace_wait_uploads(b->k, NULL); /* the copies read b->k's samples */
  mr_kspace_free(b->k);
  free(b->dirty);
  free(b->count);
  free(b->calib_count);
  free(b);
}

/* Lines along an encoding direction: the matrix, or more if the limits
 * say counters go further (some sequences number past the matrix). */
static size_t extent(uint16_t matrix, const mr_limit *l) {
  size_t n = matrix;
  if (l->present && (size_t)l->maximum + 1 > n)
    n = (size_t)l->maximum + 1;
  return n > 0 ? n : 1;
}

/* Shift that puts the limits' center line at the buffer's center, so
 * partial-Fourier data lands where a full acquisition would. Zero when the
 * limits do not say, or when the shift would push acquired lines out. */
static long center_offset(size_t n, const mr_limit *l) {
  if (!l->present)
    return 0;
  long off = (long)(n / 2) - (long)l->center;
  if ((long)l->minimum + off < 0 || (long)l->maximum + off >= (long)n)
    return 0;
  return off;
}

static open_buffer *open_new(mr_gadget_ctx *ctx, const mr_acquisition *a,
                             const uint16_t key[6], mr_device *upload, mr_err *err) {
  const mr_encoding *enc = &ctx->hdr->encoding[key[0]];
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  size_t ns = h->number_of_samples, nro = ns, ro_offset = 0;
  /* An asymmetric echo is padded so that its center sample is the middle
   * of the readout. */
  if (h->center_sample > 0 && h->center_sample != ns / 2 && h->center_sample < ns) {
    size_t half = h->center_sample > ns - h->center_sample ? h->center_sample
                                                           : ns - h->center_sample;
    nro = 2 * half;
    ro_offset = half - h->center_sample;
  }
  /* Cartesian data may carry its k-space coordinates too (ISMRMRD's
   * generator with -k does); the header's trajectory decides. */
  int cartesian = h->trajectory_dimensions == 0 || enc->trajectory == MR_TRAJ_CARTESIAN ||
                  enc->trajectory == MR_TRAJ_EPI;
  size_t ne1 = cartesian ? extent(enc->encoded.matrix.y, &enc->limits.e1)
                         : (enc->limits.e1.present ? (size_t)enc->limits.e1.maximum + 1
                                                   : enc->encoded.matrix.y);
  size_t ne2 = cartesian ? extent(enc->encoded.matrix.z, &enc->limits.e2)
                         : (enc->limits.e2.present ? (size_t)enc->limits.e2.maximum + 1 : 1);
  open_buffer *b = calloc(1, sizeof *b);
  if (b == NULL) {
    mr_err_set(err, MR_ENOMEM, "out of memory");
    return NULL;
  }
  memcpy(b->key, key, sizeof b->key);
  /* Lines that go up in batches are gathered in pinned memory. */
  b->k = mr_kspace_new_gather(cartesian ? upload : NULL, nro, ne1, ne2, h->active_channels,
                              cartesian ? 0 : h->trajectory_dimensions, err);
  b->count = calloc(ne1 * ne2, sizeof *b->count);
  if (b->k == NULL || b->count == NULL) {
    mr_err_set(err, MR_ENOMEM, "out of memory for line counts");
    free_open(b);
    return NULL;
  }
  b->ro_offset = ro_offset;
  b->e1_offset = cartesian ? center_offset(ne1, &enc->limits.e1) : 0;
  b->e2_offset = cartesian ? center_offset(ne2, &enc->limits.e2) : 0;
  /* Lines to upload in batches (Cartesian data only: trajectories stay on
   * the host, and so does a buffer without room for its flags). */
  if (upload != NULL && cartesian)
    b->pin = upload;
  if (b->pin != NULL && (b->dirty = calloc(ne1 * ne2, 1)) != NULL) {
    b->batch = ne1 * ne2 / 8;
    if (b->batch < 8)
      b->batch = 8;
  }
  b->k->ref = *h;
  b->k->encoding = key[0];
  b->k->recon = enc->recon;
  b->k->encoded = enc->encoded;
  return b;
}

/* Adds the line's samples into buffer k at (e1, e2), averaging repeats.
 * The first time a line comes it is written whole (k's samples start
 * undefined: mr_kspace_new_gather). */
static void add_line(mr_kspace *k, uint16_t *count, const open_buffer *b,
                     const mr_acquisition *a, size_t e1, size_t e2) {
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  size_t ns = h->number_of_samples, line = e2 * k->ne1 + e1;
  uint16_t c = count[line];
  float w_old = (float)c / (float)(c + 1), w_new = 1.0f / (float)(c + 1);
  int reverse = (h->flags & MR_FLAG(ISMRMRD_ACQ_IS_REVERSE)) != 0;
  for (size_t ch = 0; ch < k->nch; ch++) {
    float complex *dst = k->data + (ch * k->ne2 * k->ne1 + line) * k->nro + b->ro_offset;
    const float complex *src = a->data + ch * ns;
    if (c == 0) {
      memset(dst - b->ro_offset, 0, b->ro_offset * sizeof *dst);
      memset(dst + ns, 0, (k->nro - b->ro_offset - ns) * sizeof *dst);
      if (!reverse) { /* the common case: a plain copy, not through the cache */
        mr_copy_uncached(dst, src, ns * sizeof *dst);
        continue;
      }
      for (size_t s = 0; s < ns; s++)
        dst[s] = src[ns - 1 - s];
      continue;
    }
    for (size_t s = 0; s < ns; s++) {
      float complex v = src[reverse ? ns - 1 - s : s];
      dst[s] = dst[s] * w_old + v * w_new;
    }
  }
  if (k->traj != NULL) {
    size_t d = (size_t)k->traj_dims;
    float *dst = k->traj + (line * k->nro + b->ro_offset) * d;
    memcpy(dst, a->traj, ns * d * sizeof *dst);
  }
  count[line] = c < UINT16_MAX ? c + 1 : c;
  k->sampled[line] = 1;
}

/* Uploads the changed lines, run by run. A failure (the GPU out of memory)
 * is not the scan's: the buffer goes on from the host. */
static void upload_dirty(accumulate *s, open_buffer *b) {
  size_t lines = b->k->ne1 * b->k->ne2;
  mr_copy_uncached_fence(); /* the copy engine reads what add_line wrote */
  mr_err e = {0};
  for (size_t l = 0; l < lines && b->dirty != NULL;) {
    if (!b->dirty[l]) {
      l++;
      continue;
    }
    size_t end = l;
    while (end < lines && b->dirty[end])
      b->dirty[end++] = 0;
    if (mr_kspace_upload_lines(b->k, s->place.dev, l, end - l, &e) < 0) {
      free(b->dirty); /* the device copy is gone: no more uploads */
      b->dirty = NULL;
    }
    l = end;
  }
  b->ndirty = 0;
}

static int place(mr_gadget_ctx *ctx, open_buffer *b, const mr_acquisition *a) {
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  mr_kspace *k = b->k;
  if (h->active_channels != k->nch)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has %u channels, earlier lines had %zu",
                          h->scan_counter, h->active_channels, k->nch);
  if (h->number_of_samples + b->ro_offset > k->nro)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has %u samples, the buffer holds %zu",
                          h->scan_counter, h->number_of_samples, k->nro - b->ro_offset);
  if (k->traj != NULL && h->trajectory_dimensions != k->traj_dims)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has trajectory_dimensions %u, earlier lines had %d",
                          h->scan_counter, h->trajectory_dimensions, k->traj_dims);
  long e1 = (long)h->idx.kspace_encode_step_1 + b->e1_offset;
  long e2 = (long)h->idx.kspace_encode_step_2 + b->e2_offset;
  if (e1 < 0 || e1 >= (long)k->ne1 || e2 < 0 || e2 >= (long)k->ne2)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u: line (%u, %u) is outside the %zu x %zu encoding matrix",
                          h->scan_counter, h->idx.kspace_encode_step_1,
                          h->idx.kspace_encode_step_2, k->ne1, k->ne2);
  int calib = (h->flags & (MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION) |
                           MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION_AND_IMAGING))) != 0;
  int imaging = !(h->flags & MR_FLAG(ISMRMRD_ACQ_IS_PARALLEL_CALIBRATION));
  if (calib) {
    if (b->calib_count == NULL) { /* the first calibration line: k->calib is NULL too */
      mr_err e = {0};
      /* Pinned too when the buffer goes up: grappa uploads its lines. */
      k->calib = mr_kspace_new_gather(b->pin, k->nro, k->ne1, k->ne2, k->nch, k->traj_dims, &e);
      b->calib_count = calloc(k->ne1 * k->ne2, sizeof *b->calib_count);
      if (k->calib == NULL || b->calib_count == NULL) { /* neither, so the two stay paired */
        mr_kspace_free(k->calib);
        k->calib = NULL;
        free(b->calib_count);
        b->calib_count = NULL;
        return mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "calibration lines: %s",
                              e.code ? e.msg : "out of memory");
      }
      k->calib->ref = k->ref;
      k->calib->encoding = k->encoding;
      k->calib->recon = k->recon;
      k->calib->encoded = k->encoded;
    }
    add_line(k->calib, b->calib_count, b, a, (size_t)e1, (size_t)e2);
  }
  if (imaging) {
    add_line(k, b->count, b, a, (size_t)e1, (size_t)e2);
    if (b->dirty != NULL && !b->dirty[(size_t)e2 * k->ne1 + (size_t)e1]) {
      b->dirty[(size_t)e2 * k->ne1 + (size_t)e1] = 1;
      b->ndirty++;
    }
    /* The center line's header describes the buffer best. */
    const mr_encoding *enc = &ctx->hdr->encoding[b->key[0]];
    if (!b->ref_is_center && enc->limits.e1.present &&
        h->idx.kspace_encode_step_1 == enc->limits.e1.center &&
        (!enc->limits.e2.present || h->idx.kspace_encode_step_2 == enc->limits.e2.center)) {
      k->ref = *h;
      b->ref_is_center = 1;
    }
  }
  return 0;
}

static int send(accumulate *s, open_buffer *b, mr_emit *out) {
  for (open_buffer **p = &s->open; *p != NULL; p = &(*p)->next) {
    if (*p == b) {
      *p = b->next;
      break;
    }
  }
  int on_gpu = 0;
  if (b->dirty != NULL) {
    upload_dirty(s, b); /* the rest of the slice */
    mr_err e = {0};
    /* A failure drops the device copy: the buffer goes on from the host. */
    on_gpu = mr_kspace_wait_uploads(b->k, &e) == 0 && b->k->dev != NULL;
  }
  mr_copy_uncached_fence(); /* the next gadget's thread reads the lines */
  mr_kspace *k = b->k;
  b->k = NULL;
  free_open(b);
  /* The copy on the GPU is complete (its unsampled lines were zeroed
   * there): the host copy goes, and its pinned block back to the cache
   * for the next slice, instead of zeroing what the host never reads. */
  if (on_gpu)
    mr_kspace_changed_on(k, s->place.dev);
  else
    mr_kspace_zero_unsampled(k);
  /* The calibration part's unsampled lines stay undefined (kspace.h). */
  mr_message *m = mr_kspace_message(k);
  return m != NULL ? mr_emit_message(out, m) : MR_ENOMEM;
}

/* Whether o is completed by the trigger line a of buffer b: scanners flag
 * only the last acquisition of a slice (or repetition), so on a multi-echo
 * or multi-set scan only the last echo's or set's last line carries it.
 * Another buffer of the same encoding and repetition (and, for the slice
 * trigger, slice and phase) that already holds the trigger's line is done
 * as well; one that does not (its own flagged line still to come) is not. */
static int completed_by(const accumulate *s, const open_buffer *o, const open_buffer *b,
                        const mr_acquisition *a) {
  if (o == b || o->key[0] != b->key[0] || o->key[4] != b->key[4])
    return 0;
  if (s->trigger == TRIGGER_SLICE && (o->key[1] != b->key[1] || o->key[3] != b->key[3]))
    return 0;
  long e1 = (long)a->head.idx.kspace_encode_step_1 + o->e1_offset;
  long e2 = (long)a->head.idx.kspace_encode_step_2 + o->e2_offset;
  if (e1 < 0 || e1 >= (long)o->k->ne1 || e2 < 0 || e2 >= (long)o->k->ne2)
    return 0;
  size_t line = (size_t)e2 * o->k->ne1 + (size_t)e1;
  return o->count[line] > 0 || (o->calib_count != NULL && o->calib_count[line] > 0);
}

/* Sends the buffers trigger line a completes, oldest first, then b. */
static int send_completed(accumulate *s, open_buffer *b, const mr_acquisition *a, mr_emit *out) {
  for (;;) {
    open_buffer *oldest = NULL;
    for (open_buffer *o = s->open; o != NULL; o = o->next)
      if (completed_by(s, o, b, a))
        oldest = o;
    if (oldest == NULL)
      break;
    int rc = send(s, oldest, out);
    if (rc < 0)
      return rc;
  }
  return send(s, b, out);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  accumulate *s = state;
  const mr_acquisition *a = &msg->u.acq;
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  int rc = 0;
  if (h->flags & MR_KSPACE_KEPT_OUT) {
    if (h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)) {
      if (h->number_of_samples > 0 && h->active_channels > 0 && a->data != NULL)
        return mr_emit_message(out, mr_message_ref(msg));
      s->empty_noise++;
    }
    goto done;
  }
  int empty = h->number_of_samples == 0 || h->active_channels == 0;
  if (empty)
    s->empty_lines++; /* nothing to place; a buffer it ends still goes out (below) */
  if (h->encoding_space_ref >= ctx->hdr->nencodings) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "acquisition %u names encoding space %u; the header has %d",
                        h->scan_counter, h->encoding_space_ref, ctx->hdr->nencodings);
    goto done;
  }
  uint16_t key[6] = {h->encoding_space_ref, h->idx.slice, h->idx.contrast,
                     h->idx.phase, h->idx.repetition, h->idx.set};
  open_buffer *b = s->open;
  while (b != NULL && memcmp(b->key, key, sizeof key) != 0)
    b = b->next;
  if (b == NULL && empty)
    goto done; /* it ends no buffer either */
  if (b == NULL) {
    mr_err e = {0};
    if ((b = open_new(ctx, a, key, s->upload ? s->place.dev : NULL, &e)) == NULL) {
      rc = mr_gadget_fail(ctx, e.code, "%s", e.msg);
      goto done;
    }
    b->next = s->open;
    s->open = b;
  }
  if (!empty && (rc = place(ctx, b, a)) < 0)
    goto done;
  if (b->dirty != NULL && b->ndirty >= b->batch)
    upload_dirty(s, b);
  int last = (s->trigger == TRIGGER_SLICE && (h->flags & MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE))) ||
             (s->trigger == TRIGGER_REPETITION &&
              (h->flags & MR_FLAG(ISMRMRD_ACQ_LAST_IN_REPETITION)));
  if (last)
    rc = send_completed(s, b, a, out);
done:
  return rc;
}

/* At the end, whatever is still open goes out, oldest first. */
static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  accumulate *s = state;
  while (s->open != NULL) {
    open_buffer *oldest = s->open;
    while (oldest->next != NULL)
      oldest = oldest->next;
    int rc = send(s, oldest, out);
    if (rc < 0)
      return rc;
  }
  int rc = mr_emit_empty_noise_warning(ctx, out, s->empty_noise);
  return rc < 0 ? rc : mr_emit_empty_lines_warning(ctx, out, s->empty_lines);
}

static void destroy(void *state) {
  accumulate *s = state;
  while (s->open != NULL) {
    open_buffer *b = s->open;
    s->open = b->next;
    free_open(b);
  }
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_accumulate = {
    .name = "accumulate",
    .summary = "gathers acquisitions into k-space buffers per slice/contrast/phase/repetition/set",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(accumulate),
    .handles = MR_HANDLES_REVERSE,
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE) | MR_KIND_BIT(MR_MSG_ACQUISITION) |
                MR_KIND_BIT(MR_MSG_TEXT),
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
