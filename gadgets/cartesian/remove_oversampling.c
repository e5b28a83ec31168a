/* remove_oversampling: halves (in general: crops) the readout of each
 * Cartesian acquisition to the recon field of view. The readout is taken
 * to image space (centered inverse FFT per channel), its central part kept
 * and transformed back, so later gadgets see fewer samples and the same
 * k-space. Non-Cartesian encodings (gridding handles their oversampling)
 * and noise lines pass untouched; stored coordinates of Cartesian lines
 * are dropped, since they no longer match the samples.
 *
 * Two places in a chain: before accumulate it crops line by line on the
 * CPU (one line is too little work for a GPU); after accumulate (the
 * installed configs) it takes whole k-space buffers and crops every line
 * of a slice in one batch: on the "device" when the buffer is there or
 * goes on to a gadget that works on device data (handoff.h), else on the
 * CPU. On the CPU a 2x oversampled readout is halved by two transforms of
 * half its length (gpu/fft/halve.h), a buffer's lines spread over the CPU
 * threads, its lines without samples zeroed there too; any other factor
 * goes line by line (each line's channels gathered for one transform).
 * Both places give the same k-space for symmetric echoes; an
 * asymmetric echo is cropped after accumulate padded it to a centred
 * readout. The calibration
 * part stays on the host (grappa calibrates there); on the device its
 * sampled lines go up, are cropped in one batch and come back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fft.h"
#include "gadget.h"
#include "halve.h"
#include "handoff.h"
#include "kspace.h"
#include "placement.h"
#include "vec.h"

typedef struct remove_os {
  double ratio[MR_MAX_ENCODINGS]; /* recon / encoded field of view along x */
  int any;                        /* some encoding is oversampled */
  int device, fallback;
  mr_placement cpu;   /* lines */
  mr_placement place; /* k-space buffers */
  int on_device;      /* the k-space's next consumer takes device data */
  mr_fft_plan *full, *cropped; /* CPU, for the current line shape */
  size_t ns, nout, nch;
  mr_cfloat *tmp, *line;
  mr_fft_plan *bfull, *bcropped; /* a slice's lines in one batch */
  mr_fft_plan *cfull, *ccropped; /* its calibration lines in one batch */
  mr_fft_halve *halve; /* halving readouts on the CPU, for the current shape */
} remove_os;

static const mr_param params[] = {MR_PLACEMENT_PARAMS(remove_os)};

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
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  for (int i = 0; i < MR_MAX_ENCODINGS; i++) {
    s->ratio[i] = i < ctx->hdr->nencodings ? fov_ratio(&ctx->hdr->encoding[i]) : 1.0;
    s->any |= s->ratio[i] != 1.0;
  }
  if (!s->any)
    return 0;
  int rc = mr_placement_acquire(&s->cpu, ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE);
  return rc < 0 ? rc : mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

static void drop_plans(remove_os *s) {
  mr_fft_plan_destroy(s->full);
  mr_fft_plan_destroy(s->cropped);
  free(s->tmp);
  free(s->line);
  s->full = s->cropped = NULL;
  s->tmp = s->line = NULL;
  s->ns = 0;
}

static void drop_batch_plans(remove_os *s) {
  mr_fft_plan_destroy(s->bfull);
  mr_fft_plan_destroy(s->bcropped);
  mr_fft_plan_destroy(s->cfull);
  mr_fft_plan_destroy(s->ccropped);
  s->bfull = s->bcropped = s->cfull = s->ccropped = NULL;
}

static int make_plans(remove_os *s, size_t ns, size_t nout, size_t nch, mr_err *err) {
  if (s->ns == ns && s->nout == nout && s->nch == nch)
    return 0;
  drop_plans(s);
  mr_fft_opts a = {.rank = 1, .dims = {ns, 1, 1}, .batch = nch};
  mr_fft_opts b = {.rank = 1, .dims = {nout, 1, 1}, .batch = nch};
  int rc = mr_fft_plan_create(s->cpu.dev, &a, &s->full, err);
  if (rc == 0)
    rc = mr_fft_plan_create(s->cpu.dev, &b, &s->cropped, err);
  if (rc == 0 && ((s->tmp = malloc(ns * nch * sizeof *s->tmp)) == NULL ||
                  (s->line = malloc(ns * nch * sizeof *s->line)) == NULL))
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

/* What cropping does to a line's header. */
static void crop_header(ISMRMRD_AcquisitionHeader *h, size_t nout, double ratio) {
  ISMRMRD_AcquisitionHeader o = *h;
  h->number_of_samples = (uint16_t)nout;
  h->trajectory_dimensions = 0;
  h->center_sample = scaled(o.center_sample, ratio);
  h->discard_pre = scaled(o.discard_pre, ratio);
  h->discard_post = scaled(o.discard_post, ratio);
  h->sample_time_us = (float)(o.sample_time_us / ratio);
}

/* Crops one readout of nch channels (side by side) into out + c *
 * out_stride: centred inverse FFT, the central nout pixels, FFT back (the
 * line plans, on the CPU). in may be s->line. */
static int crop_line(remove_os *s, const mr_cfloat *in, mr_cfloat *out, size_t out_stride,
                     mr_err *err) {
  size_t ns = s->ns, nout = s->nout, nch = s->nch, start = ns / 2 - nout / 2;
  int rc = mr_fft_execute_host(s->full, MR_FFT_BACKWARD, in, s->tmp, err);
  if (rc < 0)
    return rc;
  for (size_t c = 0; c < nch; c++)
    memmove(s->tmp + c * nout, s->tmp + c * ns + start, nout * sizeof *s->tmp);
  if (out_stride == nout)
    return mr_fft_execute_host(s->cropped, MR_FFT_FORWARD, s->tmp, out, err);
  rc = mr_fft_execute_host(s->cropped, MR_FFT_FORWARD, s->tmp, s->line, err);
  for (size_t c = 0; rc == 0 && c < nch; c++)
    memcpy(out + c * out_stride, s->line + c * nout, nout * sizeof *out);
  return rc;
}

/* Halving applies: the readout of nro samples goes to nout, both even. */
static int halves(size_t nro, size_t nout) { return nro == 2 * nout && nout % 2 == 0; }

/* The halving for readouts of nro samples on nch channels. */
static int make_half(remove_os *s, size_t nro, size_t nch, mr_err *err) {
  if (s->halve != NULL && mr_fft_halve_nro(s->halve) == nro && mr_fft_halve_nch(s->halve) == nch)
    return 0;
  mr_fft_halve_destroy(s->halve);
  s->halve = NULL;
  return mr_fft_halve_create(s->cpu.dev, nro, nch, &s->halve, err);
}

/* Every line of k into out (host memory both), halved on the CPU threads;
 * a line k did not sample is zeroed when `zero`, else left alone. */
static int halve_lines_cpu(remove_os *s, const mr_kspace *k, mr_kspace *out, int zero,
                           mr_err *err) {
  size_t lines = k->ne1 * k->ne2, n = 0;
  int rc = make_half(s, k->nro, k->nch, err);
  size_t slots = lines > 0 ? lines : 1;
  const mr_cfloat **in = rc == 0 ? malloc(slots * sizeof *in) : NULL;
  mr_cfloat **to = in != NULL ? malloc(slots * sizeof *to) : NULL;
  if (rc == 0 && to == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory");
  for (size_t l = 0; rc == 0 && l < lines; l++)
    if (k->sampled[l] || zero) {
      in[n] = k->sampled[l] ? k->data + l * k->nro : NULL;
      to[n++] = out->data + l * out->nro;
    }
  if (rc == 0)
    rc = mr_fft_halve_host(s->halve, in, mr_kspace_channel_size(k), to,
                           mr_kspace_channel_size(out), n, err);
  free(in);
  free(to);
  return rc;
}

/* Every sampled line of k (host memory) into out (host memory); the others
 * zeroed when `zero`. */
static int crop_lines_cpu(remove_os *s, const mr_kspace *k, mr_kspace *out, int zero,
                          mr_err *err) {
  size_t lines = k->ne1 * k->ne2, in_stride = mr_kspace_channel_size(k),
         out_stride = mr_kspace_channel_size(out);
  if (halves(k->nro, out->nro))
    return halve_lines_cpu(s, k, out, zero, err);
  if (zero)
    mr_kspace_zero_unsampled(out);
  int rc = make_plans(s, k->nro, out->nro, k->nch, err);
  for (size_t l = 0; rc == 0 && l < lines; l++) {
    if (!k->sampled[l])
      continue;
    for (size_t c = 0; c < k->nch; c++) /* the line's channels side by side */
      memcpy(s->line + c * k->nro, k->data + c * in_stride + l * k->nro,
             k->nro * sizeof *s->line);
    rc = crop_line(s, s->line, out->data + l * out->nro, out_stride, err);
  }
  return rc;
}

typedef struct batch_job {
  remove_os *s;
  mr_kspace *k;
  mr_kspace *out;
} batch_job;

/* `batch` readouts of nro samples (in, on dev) cropped to nout each (out):
 * inverse transforms into scratch, the central samples into out, forward
 * transforms in place; the plans are kept in *full and *cropped. */
static int crop_readouts(mr_device *dev, const mr_cfloat *in, size_t nro, size_t batch,
                         mr_cfloat *out, size_t nout, mr_fft_plan **full, mr_fft_plan **cropped,
                         mr_err *err) {
  mr_fft_opts a = {.rank = 1, .dims = {nro, 1, 1}, .batch = batch};
  mr_fft_opts b = {.rank = 1, .dims = {nout, 1, 1}, .batch = batch};
  int rc;
  if ((rc = mr_fft_plan_keep(dev, &a, full, err)) < 0 ||
      (rc = mr_fft_plan_keep(dev, &b, cropped, err)) < 0)
    return rc;
  mr_buf *scratch = NULL;
  rc = mr_buf_create(dev, batch * nro * sizeof(mr_cfloat), &scratch, err);
  if (rc == 0)
    rc = mr_fft_execute(*full, MR_FFT_BACKWARD, in, mr_buf_data(scratch), err);
  if (rc == 0) {
    size_t from[3] = {nro, batch, 1}, at[3] = {nro / 2 - nout / 2, 0, 0}, to[3] = {nout, batch, 1};
    rc = mr_vec_crop(dev, 1, mr_buf_data(scratch), from, at, out, to, err);
  }
  if (rc == 0)
    rc = mr_fft_execute(*cropped, MR_FFT_FORWARD, out, out, err);
  mr_buf_destroy(scratch);
  return rc;
}

/* All lines of every channel as one batch on dev. */
static int crop_batch_task(mr_device *dev, void *arg, mr_err *err) {
  batch_job *j = arg;
  mr_kspace *k = j->k;
  mr_err e = {0};
  const mr_cfloat *in = mr_kspace_on(k, dev, &e);
  mr_cfloat *out = in != NULL ? mr_kspace_on(j->out, dev, &e) : NULL;
  if (out == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
  return crop_readouts(dev, in, k->nro, k->nch * k->ne1 * k->ne2, out, j->out->nro, &j->s->bfull,
                       &j->s->bcropped, err);
}

/* The sampled lines of j->k (host memory) gathered on dev, cropped as one
 * batch, and put into the same lines of j->out (host memory). */
static int crop_calib_task(mr_device *dev, void *arg, mr_err *err) {
  batch_job *j = arg;
  mr_buf *in = NULL, *out = NULL;
  size_t m;
  int rc = mr_kspace_gather_sampled(j->k, dev, &in, &m, err);
  if (rc < 0 || in == NULL)
    return rc;
  size_t batch = m * j->k->nch, nout = j->out->nro;
  if ((rc = mr_buf_create(dev, batch * nout * sizeof(mr_cfloat), &out, err)) == 0)
    rc = crop_readouts(dev, mr_buf_data(in), j->k->nro, batch, mr_buf_data(out), nout, &j->s->cfull,
                       &j->s->ccropped, err);
  if (rc == 0)
    rc = mr_kspace_scatter_sampled(j->out, out, err);
  mr_buf_destroy(in);
  mr_buf_destroy(out);
  return rc;
}

static int run_batch(mr_device *dev, void *arg, mr_err *err) {
  batch_job *j = arg;
  if (mr_device_is_gpu(dev))
    return mr_device_run(dev, crop_batch_task, arg, err);
  /* The GPU ran out of memory: the CPU crops line by line. */
  mr_err e = {0};
  if (mr_kspace_host(j->k, &e) == NULL || mr_kspace_host(j->out, &e) == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
  mr_kspace_changed_on(j->out, dev);
  return crop_lines_cpu(j->s, j->k, j->out, 1, err);
}

/* A cropped copy of k (host memory, as is the copy): on dev when a GPU (its
 * sampled lines in one batch), else line by line on the CPU. The lines k
 * did not sample are zeroed unless k is a calibration part (only its
 * sampled lines are defined: kspace.h). */
static mr_kspace *crop_host(remove_os *s, mr_gadget_ctx *ctx, mr_device *dev, const mr_kspace *k,
                            size_t nout, int calib, int *rc) {
  mr_err e = {0};
  /* Each sampled line is written whole. */
  mr_kspace *out = mr_kspace_new_gather(k->pinned, nout, k->ne1, k->ne2, k->nch, 0, &e);
  if (out == NULL) {
    *rc = mr_gadget_fail(ctx, e.code < 0 ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
    return NULL;
  }
  memcpy(out->sampled, k->sampled, k->ne1 * k->ne2);
  batch_job job = {s, (mr_kspace *)k, out}; /* k is only read */
  mr_err why = {0};
  *rc = mr_device_is_gpu(dev) ? mr_device_run(dev, crop_calib_task, &job, &why) : MR_EDEVMEM;
  if (*rc == MR_EDEVMEM) { /* the CPU's turn: no GPU, or it is out of memory */
    mr_err_clear(&why);
    *rc = crop_lines_cpu(s, k, out, !calib, &why);
  } else if (*rc == 0 && !calib) {
    mr_kspace_zero_unsampled(out);
  }
  if (*rc < 0) {
    mr_kspace_free(out);
    *rc = mr_gadget_fail(ctx, *rc, "readout of %zu samples: %s", k->nro, mr_err_text(&why, *rc));
    return NULL;
  }
  mr_kspace_copy_meta(out, k);
  return out;
}

static int process_kspace(remove_os *s, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  mr_kspace *k = msg->u.object.ptr;
  double ratio = k->encoding < MR_MAX_ENCODINGS ? s->ratio[k->encoding] : 1.0;
  if (ratio == 1.0 || k->traj != NULL || k->nro < 2) {
    mr_err e = {0};
    int rc = mr_kspace_hand_on(k, s->on_device, &e);
    if (rc < 0)
      return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    return mr_emit_message(out, mr_message_ref(msg));
  }
  size_t nout = (size_t)lround(k->nro * ratio);
  if (nout == 0)
    nout = 1;
  mr_device *dev = s->place.dev;
  int on_gpu = mr_device_is_gpu(dev) &&
               (s->on_device || (k->dev != NULL && mr_buf_device(k->dev) == dev));
  int rc = 0;
  mr_kspace *o = NULL;
  if (on_gpu) {
    mr_err e = {0};
    o = mr_kspace_new_on(dev, nout, k->ne1, k->ne2, k->nch, &e);
    if (o == NULL)
      rc = mr_gadget_fail(ctx, e.code < 0 ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
    batch_job job = {s, k, o};
    if (rc == 0 && (rc = mr_placement_run(&s->place, ctx, run_batch, &job)) == 0 &&
        !s->on_device) {
      if (mr_kspace_host(o, &e) == NULL)
        rc = mr_gadget_fail(ctx, e.code < 0 ? e.code : MR_ENOMEM, "%s",
                            mr_err_text(&e, MR_ENOMEM));
      else
        mr_kspace_changed_on(o, s->cpu.dev); /* the host copy is the one */
    }
  } else {
    mr_err e = {0};
    if (mr_kspace_host(k, &e) == NULL)
      rc = mr_gadget_fail(ctx, e.code < 0 ? e.code : MR_ENOMEM, "%s",
                          mr_err_text(&e, MR_ENOMEM));
    else
      o = crop_host(s, ctx, s->cpu.dev, k, nout, 0, &rc);
  }
  if (rc == 0 && k->calib != NULL) /* on the host, as ever; on the GPU with the rest */
    o->calib = crop_host(s, ctx, on_gpu ? dev : s->cpu.dev, k->calib, nout, 1, &rc);
  if (rc < 0) {
    mr_kspace_free(o);
    return rc;
  }
  mr_kspace_copy_meta(o, k);
  memcpy(o->sampled, k->sampled, k->ne1 * k->ne2);
  crop_header(&o->ref, nout, ratio);
  if (o->calib != NULL)
    crop_header(&o->calib->ref, nout, ratio);
  mr_message *m = mr_kspace_message(o);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  remove_os *s = state;
  if (msg->kind == MR_MSG_KSPACE)
    return process_kspace(s, ctx, msg, out);
  const ISMRMRD_AcquisitionHeader *h = &msg->u.acq.head;
  double ratio = h->encoding_space_ref < MR_MAX_ENCODINGS ? s->ratio[h->encoding_space_ref] : 1.0;
  if (ratio == 1.0 || h->number_of_samples == 0 ||
      (h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT)))
    return mr_emit_message(out, mr_message_ref(msg));
  size_t ns = h->number_of_samples, nch = h->active_channels;
  size_t nout = (size_t)lround(ns * ratio);
  if (nout == 0)
    nout = 1;
  int halving = halves(ns, nout);
  mr_err why = {0};
  int rc = halving ? make_half(s, ns, nch, &why) : make_plans(s, ns, nout, nch, &why);
  ISMRMRD_AcquisitionHeader nh = *h;
  crop_header(&nh, nout, ratio);
  mr_message *m = rc == 0 ? mr_message_new_acquisition(&nh) : NULL;
  if (rc == 0 && m == NULL)
    rc = MR_ENOMEM;
  const mr_cfloat *in = (const mr_cfloat *)msg->u.acq.data;
  mr_cfloat *to = rc == 0 ? (mr_cfloat *)m->u.acq.data : NULL;
  if (rc == 0)
    rc = halving ? mr_fft_halve_host(s->halve, &in, ns, &to, nout, 1, &why)
                 : crop_line(s, in, to, nout, &why);
  if (rc < 0) {
    mr_message_unref(m);
    return mr_gadget_fail(ctx, rc, "readout of %zu samples: %s", ns, mr_err_text(&why, rc));
  }
  return mr_emit_message(out, m);
}

static void destroy(void *state) {
  remove_os *s = state;
  drop_plans(s);
  drop_batch_plans(s);
  mr_fft_halve_destroy(s->halve);
  mr_placement_release(&s->place);
  mr_placement_release(&s->cpu);
}

const mr_gadget_class mr_gadget_remove_oversampling = {
    .name = "remove_oversampling",
    .summary = "crops each readout to the recon field of view (encoded vs recon space)",
    .params = params, /* the header says how much oversampling there is */
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(remove_os),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_KSPACE),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
