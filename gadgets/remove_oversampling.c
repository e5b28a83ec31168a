/* remove_oversampling: halves (in general: crops) the readout of each
 * Cartesian acquisition to the recon field of view. The readout is taken
 * to image space (centered inverse FFT per channel), its central part kept
 * and transformed back, so later gadgets see fewer samples and the same
 * k-space. Runs on the CPU: one line is too little work for a GPU.
 * Non-Cartesian encodings (gridding handles their oversampling) and noise
 * lines pass untouched; stored coordinates of Cartesian lines are dropped,
 * since they no longer match the samples. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"
#include "gadget.h"
#include "placement.h"

typedef struct remove_os {
  double ratio[MR_MAX_ENCODINGS]; /* recon / encoded field of view along x */
  int any;                        /* some encoding is oversampled */
  mr_placement place;
  mr_fft_plan *full, *cropped; /* for the current line shape */
  size_t ns, nout, nch;
  mr_cfloat *tmp;
} remove_os;

/* Below this the data counts as not oversampled (rounding in headers). */
#define MIN_OVERSAMPLING 1.01

/* The oversampling factor comes from the fields of view (the matrices
 * when a header gives no FOV). */
static double fov_ratio(const mr_encoding *e) {
  const mr_encoding_space *enc = &e->encoded, *rec = &e->recon;
  if (e->trajectory != MR_TRAJ_CARTESIAN && e->trajectory != MR_TRAJ_EPI)
    return 1.0;
  if (enc->fov_mm.x > 0 && rec->fov_mm.x > 0)
    return enc->fov_mm.x > MIN_OVERSAMPLING * rec->fov_mm.x ? rec->fov_mm.x / enc->fov_mm.x : 1.0;
  return enc->matrix.x > MIN_OVERSAMPLING * rec->matrix.x ? (double)rec->matrix.x / enc->matrix.x
                                                          : 1.0;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  remove_os *s = state;
  for (int i = 0; i < MR_MAX_ENCODINGS; i++) {
    s->ratio[i] = i < ctx->hdr->nencodings ? fov_ratio(&ctx->hdr->encoding[i]) : 1.0;
    s->any |= s->ratio[i] != 1.0;
  }
  if (!s->any)
    return 0;
  return mr_placement_acquire(&s->place, ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE);
}

static void drop_plans(remove_os *s) {
  mr_fft_plan_destroy(s->full);
  mr_fft_plan_destroy(s->cropped);
  free(s->tmp);
  s->full = s->cropped = NULL;
  s->tmp = NULL;
  s->ns = 0;
}

static int make_plans(remove_os *s, size_t ns, size_t nout, size_t nch) {
  if (s->ns == ns && s->nout == nout && s->nch == nch)
    return 0;
  drop_plans(s);
  mr_fft_opts a = {.rank = 1, .dims = {ns, 1, 1}, .batch = nch};
  mr_fft_opts b = {.rank = 1, .dims = {nout, 1, 1}, .batch = nch};
  int rc = mr_fft_plan_create(s->place.dev, &a, &s->full);
  if (rc == 0)
    rc = mr_fft_plan_create(s->place.dev, &b, &s->cropped);
  if (rc == 0 && (s->tmp = malloc(ns * nch * sizeof *s->tmp)) == NULL)
    rc = MR_ENOMEM;
  if (rc < 0) {
    drop_plans(s);
    return rc;
  }
  s->ns = ns;
  s->nout = nout;
  s->nch = nch;
  return 0;
}

static uint16_t scaled(uint16_t v, double ratio) { return (uint16_t)lround(v * ratio); }

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  remove_os *s = state;
  const ISMRMRD_AcquisitionHeader *h = &msg->u.acq.head;
  double ratio = h->encoding_space_ref < MR_MAX_ENCODINGS ? s->ratio[h->encoding_space_ref] : 1.0;
  if (ratio == 1.0 || h->number_of_samples == 0 ||
      (h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)))
    return mr_emit_message(out, msg);
  size_t ns = h->number_of_samples, nch = h->active_channels;
  size_t nout = (size_t)lround(ns * ratio);
  if (nout == 0)
    nout = 1;
  int rc = make_plans(s, ns, nout, nch);
  ISMRMRD_AcquisitionHeader nh = *h;
  nh.number_of_samples = (uint16_t)nout;
  nh.trajectory_dimensions = 0;
  nh.center_sample = scaled(h->center_sample, ratio);
  nh.discard_pre = scaled(h->discard_pre, ratio);
  nh.discard_post = scaled(h->discard_post, ratio);
  nh.sample_time_us = (float)(h->sample_time_us / ratio);
  mr_message *m = rc == 0 ? mr_message_new_acquisition(&nh) : NULL;
  if (rc == 0 && m == NULL)
    rc = MR_ENOMEM;
  if (rc == 0)
    rc = mr_fft_execute_host(s->full, MR_FFT_BACKWARD, (const mr_cfloat *)msg->u.acq.data, s->tmp);
  if (rc == 0) {
    /* Keep the central nout pixels of each channel, in place. */
    size_t start = ns / 2 - nout / 2;
    for (size_t c = 0; c < nch; c++)
      memmove(s->tmp + c * nout, s->tmp + c * ns + start, nout * sizeof *s->tmp);
    rc = mr_fft_execute_host(s->cropped, MR_FFT_FORWARD, s->tmp, (mr_cfloat *)m->u.acq.data);
  }
  mr_message_unref(msg);
  if (rc < 0) {
    mr_message_unref(m);
    return mr_gadget_fail(ctx, rc, "readout of %zu samples: %s", ns, mr_strerror(rc));
  }
  return mr_emit_message(out, m);
}

static void destroy(void *state) {
  remove_os *s = state;
  drop_plans(s);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_remove_oversampling = {
    .name = "remove_oversampling",
    .summary = "crops each readout to the recon field of view (encoded vs recon space)",
    .params = NULL, /* the header says how much oversampling there is */
    .nparams = 0,
    .state_size = sizeof(remove_os),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
