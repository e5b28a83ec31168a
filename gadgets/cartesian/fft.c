/* fft: k-space buffers to complex coil images by a centered 2D or 3D
 * inverse FFT (one per coil, batched), cropped to the header's recon
 * matrix where the encoded one is larger (phase oversampling, or a readout
 * whose oversampling was not removed). The plan is made once per shape.
 * On a GPU the coil images stay there when the next gadget works on device
 * data (coil_combine, image_out: handoff.h); otherwise they come back. */
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "buf.h"
#include "fft.h"
#include "gadget.h"
#include "handoff.h"
#include "image_array.h"
#include "kspace.h"
#include "placement.h"

typedef struct fft_gadget {
  int device, fallback;
  mr_placement place;
  int on_device;     /* the next consumer takes device data */
  mr_fft_plan *plan; /* for the last shape */
} fft_gadget;

static const mr_param params[] = {MR_PLACEMENT_PARAMS(fft_gadget)};

static int configure(void *state, mr_gadget_ctx *ctx) {
  fft_gadget *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_IMAGE_ARRAY);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* The transform of k's shape on dev, made once per shape and device. */
static int plan_for(fft_gadget *s, mr_device *dev, const mr_kspace *k, mr_err *err) {
  mr_fft_opts o = {.rank = k->ne2 > 1 ? 3 : 2, .dims = {k->nro, k->ne1, k->ne2}, .batch = k->nch};
  return mr_fft_plan_keep(dev, &o, &s->plan, err);
}

typedef struct fft_job {
  fft_gadget *s;
  mr_kspace *k;        /* borrowed */
  size_t n[3];         /* the cropped image */
  mr_image_array *out; /* made here */
} fft_job;

/* One device task: k-space onto dev, the transform in the image array's
 * own memory when nothing is cropped, else in scratch and cropped. */
static int fft_task(mr_device *dev, void *arg, mr_err *err) {
  fft_job *j = arg;
  mr_kspace *k = j->k;
  size_t nch = k->nch, full = mr_kspace_channel_size(k) * nch;
  int crop = j->n[0] != k->nro || j->n[1] != k->ne1 || j->n[2] != k->ne2;
  mr_err e = {0};
  const mr_cfloat *in = mr_kspace_on(k, dev, &e);
  mr_image_array *a = in != NULL ? mr_image_array_new_on(dev, j->n[0], j->n[1], j->n[2], nch, &e)
                                 : NULL;
  mr_cfloat *img = a != NULL ? mr_image_array_on(a, dev, &e) : NULL;
  if (img == NULL) {
    mr_image_array_free(a);
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
  }
  mr_buf *scratch = NULL;
  int rc = plan_for(j->s, dev, k, err);
  if (rc == 0 && crop)
    rc = mr_buf_create(dev, full * sizeof(mr_cfloat), &scratch, err);
  mr_cfloat *t = scratch != NULL ? mr_buf_data(scratch) : img;
  if (rc == 0)
    rc = mr_fft_execute(j->s->plan, MR_FFT_BACKWARD, in, t, err);
  if (rc == 0 && crop) {
    size_t from[3] = {k->nro, k->ne1, k->ne2};
    rc = mr_block_crop_center(dev, nch, t, from, img, j->n, err);
  }
  mr_buf_destroy(scratch);
  if (rc < 0) {
    mr_image_array_free(a);
    return rc;
  }
  j->out = a;
  return 0;
}

static int run_fft(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, fft_task, arg, err);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  fft_gadget *s = state;
  mr_kspace *k = msg->u.object.ptr;
  int rc = 0;
  if (k->traj != NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "got non-Cartesian k-space (trajectory_dimensions %d): use gridding",
                        k->traj_dims);
    goto done;
  }
  fft_job job = {s, k, {k->recon.matrix.x < k->nro ? k->recon.matrix.x : k->nro,
                        k->recon.matrix.y < k->ne1 ? k->recon.matrix.y : k->ne1,
                        k->recon.matrix.z < k->ne2 ? k->recon.matrix.z : k->ne2},
                 NULL};
  if ((rc = mr_placement_run(&s->place, ctx, run_fft, &job)) < 0)
    goto done;
  mr_image_array *a = job.out;
  if (!s->on_device) {
    mr_err e = {0};
    if ((rc = mr_image_array_to_host(a, &e)) < 0) {
      mr_image_array_free(a);
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
      goto done;
    }
  }
  rc = mr_image_array_emit(a, k, ctx, out);
done:
  return rc;
}

static void destroy(void *state) {
  fft_gadget *s = state;
  mr_fft_plan_destroy(s->plan);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_fft = {
    .name = "fft",
    .summary = "k-space buffers to coil images: centered 2D/3D inverse FFT, cropped to the recon matrix",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(fft_gadget),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
