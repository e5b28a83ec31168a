/* dicom_out: ISMRMRD images -> DICOM MR Image files, sent to the client
 * as Gadgetron's DICOM writer sends them (message 1018: the file, a name,
 * the image's meta XML), one file per 2D plane (protocol/dicom_image.h).
 * Patient, study and series come from the session's ISMRMRD header; a
 * series UID per image_series_index. An image of more planes than the
 * dicom_planes limit (protocol/wire_limits.h) is refused. With "images": true the images go on
 * to the client as well (an HDF5 copy next to the DICOM files). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dicom_image.h"
#include "gadget.h"
#include "wire_limits.h"

typedef struct dicom_out {
  int images;
  int ready; /* the study is read and DCMTK can write */
  mr_dicom_study study;
} dicom_out;

static const mr_param params[] = {
    MR_PARAM_BOOL(dicom_out, images, "images", "false", "also send the ISMRMRD images on"),
};

/* Once, from configure (or the first image of a header-less chain). */
static int prepare(dicom_out *s, mr_gadget_ctx *ctx) {
  mr_err e = {0};
  int rc = mr_dicom_can_write(&e);
  if (rc == 0)
    rc = mr_dicom_study_init(&s->study, ctx->hdr != NULL ? ctx->hdr->xml : NULL, &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  s->ready = 1;
  return 0;
}

static int configure(void *state, mr_gadget_ctx *ctx) { return prepare(state, ctx); }

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  dicom_out *s = state;
  const mr_image *im = &msg->u.image;
  unsigned planes = mr_dicom_planes(im);
  uint32_t max = mr_limits_installed()->dicom_planes;
  if (planes > max)
    return mr_gadget_fail(ctx, MR_ELIMIT,
                          "image %u of series %u has %u planes (%u partitions x %u channels): "
                          "more than the dicom_planes limit of %u DICOM files per image "
                          "(--limit dicom_planes=N)",
                          im->head.image_index, im->head.image_series_index, planes,
                          im->head.matrix_size[2], im->head.channels, max);
  int rc = s->ready ? 0 : prepare(s, ctx);
  for (unsigned p = 0; p < planes && rc == 0; p++) {
    uint8_t *bytes = NULL;
    uint32_t len = 0;
    mr_err e = {0};
    rc = mr_dicom_encode(&s->study, im, p, &bytes, &len, &e);
    if (rc < 0) {
      rc = mr_gadget_fail(ctx, rc, "%s", e.msg);
      break;
    }
    char name[64];
    if (planes > 1)
      snprintf(name, sizeof name, "image_%u_%06u_%u", im->head.image_series_index,
               im->head.image_index, p);
    else
      snprintf(name, sizeof name, "image_%u_%06u", im->head.image_series_index,
               im->head.image_index);
    mr_message *m = mr_message_new_dicom(bytes, len, name, im->attributes);
    rc = m != NULL ? mr_emit_message(out, m)
                   : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for a DICOM message");
  }
  if (rc == 0 && s->images)
    return mr_emit_message(out, mr_message_ref(msg));
  return rc;
}

const mr_gadget_class mr_gadget_dicom_out = {
    .name = "dicom_out",
    .summary = "images -> DICOM MR Image files, sent as Gadgetron's DICOM writer does (1018)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(dicom_out),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE),
    .produces = MR_KIND_BIT(MR_MSG_DICOM) | MR_KIND_BIT(MR_MSG_IMAGE),
    .configure = configure,
    .process = process,
};
