/* scale: multiplies the pixels of ISMRMRD images (after image_out) by a
 * constant, or by what makes each image's largest magnitude `max` (a
 * viewer's window: 4095 for 12-bit DICOM). An image of zeros passes
 * unchanged in that mode. Float and complex float pixels (what image_out
 * sends); any other pixel type is an error naming it.
 *
 * The worked example of docs/writing-a-gadget.md: the smallest complete
 * gadget, with a parameter table, one process() and nothing held between
 * messages. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "gadget.h"

enum scale_mode { SCALE_FACTOR, SCALE_MAX };

typedef struct scale {
  int mode;      /* enum scale_mode */
  double factor; /* SCALE_FACTOR: every pixel times this */
  double max;    /* SCALE_MAX: each image's largest magnitude becomes this */
} scale;

static const mr_param params[] = {
    MR_PARAM_ENUM(scale, mode, "mode", "\"factor\"", "factor|max",
        "factor: every pixel times `factor`; max: each image scaled so that its largest "
        "magnitude is `max`"),
    MR_PARAM_DOUBLE(scale, factor, "factor", "1", 1e-12, 1e12, "the constant of mode factor"),
    MR_PARAM_DOUBLE(scale, max, "max", "4095", 1e-12, 1e12,
        "the largest magnitude of each image in mode max"),
};

/* The largest magnitude among n pixels (complex when cx). */
static double largest_magnitude(const float *px, size_t n, int cx) {
  double top = 0;
  for (size_t i = 0; i < n; i++) {
    double m = cx ? cabs((double)px[2 * i] + I * (double)px[2 * i + 1]) : fabs(px[i]);
    top = m > top ? m : top;
  }
  return top;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  const scale *s = state;
  const mr_image *in = &msg->u.image;
  uint16_t type = in->head.data_type;
  if (type != ISMRMRD_FLOAT && type != ISMRMRD_CXFLOAT)
    return mr_gadget_fail(ctx, MR_ENOTSUP,
                          "images of ISMRMRD data type %u: only float (%d) and complex float "
                          "(%d) can be scaled", (unsigned)type, ISMRMRD_FLOAT, ISMRMRD_CXFLOAT);
  /* A message may be shared (a reference kept by an earlier gadget), so
   * the scaled pixels go into a new one rather than over the old ones. */
  mr_message *scaled = mr_message_new_image(&in->head, in->attributes);
  if (scaled == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for a %zu-byte image",
                          in->data_bytes);
  int cx = type == ISMRMRD_CXFLOAT;
  size_t pixels = in->data_bytes / (cx ? 2 * sizeof(float) : sizeof(float));
  const float *src = in->data;
  float *dst = scaled->u.image.data;
  double k = s->factor;
  if (s->mode == SCALE_MAX) {
    double top = largest_magnitude(src, pixels, cx);
    k = top > 0 ? s->max / top : 1;
  }
  int overflow = 0;
  for (size_t i = 0; i < pixels * (cx ? 2 : 1); i++) {
    dst[i] = (float)(k * src[i]);
    overflow |= isinf(dst[i]) && !isinf(src[i]);
  }
  if (overflow) { /* never send an image that is not what was asked for */
    mr_message_unref(scaled);
    return mr_gadget_fail(ctx, MR_EDATA, "scaling by %g overflows float pixels", k);
  }
  return mr_emit_message(out, scaled);
}

const mr_gadget_class mr_gadget_scale = {
    .name = "scale",
    .summary = "multiplies image pixels by a constant, or scales each image to a largest "
               "magnitude (after image_out)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(scale),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE),
    .process = process,
};
