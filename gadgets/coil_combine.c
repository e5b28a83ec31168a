/* coil_combine: one image from many coils. "rss": root sum of squares
 * (a magnitude image, stored with zero phase). */
#include <stdlib.h>

#include "coil.h"
#include "gadget.h"
#include "image_array.h"
#include "placement.h"

enum method { COMBINE_RSS };

typedef struct coil_combine {
  int method;
  int device, fallback;
  mr_placement place;
} coil_combine;

static const mr_param params[] = {
    {"method", MR_PARAM_ENUM, offsetof(coil_combine, method), "\"rss\"", 0, 0, "rss", 0,
     "rss: root sum of squares"},
    MR_PLACEMENT_PARAMS(coil_combine),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  coil_combine *s = state;
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

typedef struct rss_job {
  const mr_image_array *in;
  float *out;
} rss_job;

static int run_rss(mr_device *dev, void *arg) {
  rss_job *j = arg;
  return mr_coil_rss_host(dev, (const mr_cfloat *)j->in->data, j->in->nch,
                          mr_image_array_channel_size(j->in), j->out);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  coil_combine *s = state;
  const mr_image_array *in = msg->u.object.ptr;
  size_t n = mr_image_array_channel_size(in);
  mr_err e = {0};
  mr_image_array *a = mr_image_array_new(in->nx, in->ny, in->nz, 1, &e);
  float *mag = a != NULL ? malloc(n * sizeof *mag) : NULL;
  int rc;
  if (a == NULL || mag == NULL) {
    rc = mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s",
                        e.code ? e.msg : "out of memory combining coils");
    goto fail;
  }
  rss_job job = {in, mag};
  if ((rc = mr_placement_run(&s->place, ctx, run_rss, &job)) < 0)
    goto fail;
  for (size_t i = 0; i < n; i++)
    a->data[i] = mag[i];
  free(mag);
  mr_image_array_copy_meta(a, in);
  mr_message_unref(msg);
  mr_message *m = mr_image_array_message(a);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
fail:
  free(mag);
  mr_image_array_free(a);
  mr_message_unref(msg);
  return rc;
}

static void destroy(void *state) {
  coil_combine *s = state;
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_coil_combine = {
    .name = "coil_combine",
    .summary = "combines coil images into one: root sum of squares",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(coil_combine),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
