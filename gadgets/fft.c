/* fft: k-space buffers to complex coil images by a centered 2D or 3D
 * inverse FFT (one per coil, batched), cropped to the header's recon
 * matrix where the encoded one is larger (phase oversampling, or a readout
 * whose oversampling was not removed). */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "fft.h"
#include "gadget.h"
#include "image_array.h"
#include "kspace.h"
#include "placement.h"

typedef struct fft_gadget {
  int device, fallback;
  mr_placement place;
} fft_gadget;

static const mr_param params[] = {MR_PLACEMENT_PARAMS(fft_gadget)};

static int configure(void *state, mr_gadget_ctx *ctx) {
  fft_gadget *s = state;
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

typedef struct fft_job {
  const mr_kspace *k;
  mr_cfloat *out;
} fft_job;

static int run_fft(mr_device *dev, void *arg) {
  fft_job *j = arg;
  const mr_kspace *k = j->k;
  mr_fft_opts o = {.rank = k->ne2 > 1 ? 3 : 2, .dims = {k->nro, k->ne1, k->ne2}, .batch = k->nch};
  mr_fft_plan *plan = NULL;
  int rc = mr_fft_plan_create(dev, &o, &plan);
  if (rc == 0)
    rc = mr_fft_execute_host(plan, MR_FFT_BACKWARD, (const mr_cfloat *)k->data, j->out);
  mr_fft_plan_destroy(plan);
  return rc;
}

/* The centered n_out of n along one axis. */
static size_t crop_start(size_t n, size_t n_out) { return n / 2 - n_out / 2; }

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  fft_gadget *s = state;
  const mr_kspace *k = msg->u.object.ptr;
  int rc = 0;
  if (k->traj != NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "got non-Cartesian k-space (trajectory_dimensions %d): use gridding",
                        k->traj_dims);
    goto done;
  }
  size_t nch = k->nch, per = mr_kspace_channel_size(k), full_bytes = per * nch * sizeof(mr_cfloat);
  mr_err fe = {0};
  mr_cfloat *full = mr_budget_alloc(full_bytes, "the FFT's full-size coil images", &fe);
  if (full == NULL) {
    rc = mr_gadget_fail(ctx, fe.code, "%s", fe.msg);
    goto done;
  }
  fft_job job = {k, full};
  if ((rc = mr_placement_run(&s->place, ctx, run_fft, &job)) < 0) {
    mr_budget_free(full, full_bytes);
    goto done;
  }
  size_t nx = k->recon.matrix.x < k->nro ? k->recon.matrix.x : k->nro;
  size_t ny = k->recon.matrix.y < k->ne1 ? k->recon.matrix.y : k->ne1;
  size_t nz = k->recon.matrix.z < k->ne2 ? k->recon.matrix.z : k->ne2;
  mr_err e = {0};
  mr_image_array *a = mr_image_array_new(nx, ny, nz, nch, &e);
  if (a == NULL) {
    mr_budget_free(full, full_bytes);
    rc = mr_gadget_fail(ctx, e.code, "%s", e.msg);
    goto done;
  }
  size_t x0 = crop_start(k->nro, nx), y0 = crop_start(k->ne1, ny), z0 = crop_start(k->ne2, nz);
  for (size_t c = 0; c < nch; c++)
    for (size_t z = 0; z < nz; z++)
      for (size_t y = 0; y < ny; y++)
        memcpy(a->data + ((c * nz + z) * ny + y) * nx,
               full + ((c * k->ne2 + z + z0) * k->ne1 + y + y0) * k->nro + x0,
               nx * sizeof *a->data);
  mr_budget_free(full, full_bytes);
  a->ref = k->ref;
  a->fov_mm = k->recon.fov_mm;
  mr_message *m = mr_image_array_message(a);
  rc = m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
done:
  mr_message_unref(msg);
  return rc;
}

static void destroy(void *state) {
  fft_gadget *s = state;
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
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
