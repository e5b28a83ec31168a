/* image_out: turns image arrays into ISMRMRD IMAGE messages for the
 * client: float magnitude (or phase, real, imaginary) or complex pixels,
 * the ImageHeader filled from the acquisitions (matrix, field of view,
 * position and orientation, counters, time stamps, image and series
 * indices) and ISMRMRD meta attributes. An image with a pixel that is not
 * finite (NaN or infinite) is never sent: the client gets an error naming
 * the count and the first such pixel instead. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gadget.h"
#include "image_array.h"

enum image_kind { OUT_MAGNITUDE, OUT_COMPLEX, OUT_PHASE, OUT_REAL, OUT_IMAG };

typedef struct image_out {
  int kind;
  int series;
  uint16_t next_index;
} image_out;

static const mr_param params[] = {
    MR_PARAM_ENUM(image_out, kind, "type", "\"magnitude\"", "magnitude|complex|phase|real|imag",
        "pixel type sent to the client"),
    MR_PARAM_INT(image_out, series, "series", "1", 0, 65535,
        "image_series_index of every image (the client's output group image_<series>)"),
};

static const uint16_t image_types[] = {
    [OUT_MAGNITUDE] = ISMRMRD_IMTYPE_MAGNITUDE, [OUT_COMPLEX] = ISMRMRD_IMTYPE_COMPLEX,
    [OUT_PHASE] = ISMRMRD_IMTYPE_PHASE,         [OUT_REAL] = ISMRMRD_IMTYPE_REAL,
    [OUT_IMAG] = ISMRMRD_IMTYPE_IMAG,
};

static void fill_header(const image_out *s, const mr_image_array *a, uint16_t index,
                        ISMRMRD_ImageHeader *h) {
  ismrmrd_init_image_header(h);
  const ISMRMRD_AcquisitionHeader *r = &a->ref;
  h->data_type = s->kind == OUT_COMPLEX ? ISMRMRD_CXFLOAT : ISMRMRD_FLOAT;
  h->image_type = image_types[s->kind];
  h->measurement_uid = r->measurement_uid;
  h->matrix_size[0] = (uint16_t)a->nx;
  h->matrix_size[1] = (uint16_t)a->ny;
  h->matrix_size[2] = (uint16_t)a->nz;
  h->field_of_view[0] = a->fov_mm.x;
  h->field_of_view[1] = a->fov_mm.y;
  h->field_of_view[2] = a->fov_mm.z;
  h->channels = (uint16_t)a->nch;
  memcpy(h->position, r->position, sizeof h->position);
  memcpy(h->read_dir, r->read_dir, sizeof h->read_dir);
  memcpy(h->phase_dir, r->phase_dir, sizeof h->phase_dir);
  memcpy(h->slice_dir, r->slice_dir, sizeof h->slice_dir);
  memcpy(h->patient_table_position, r->patient_table_position,
         sizeof h->patient_table_position);
  h->average = r->idx.average;
  h->slice = r->idx.slice;
  h->contrast = r->idx.contrast;
  h->phase = r->idx.phase;
  h->repetition = r->idx.repetition;
  h->set = r->idx.set;
  h->acquisition_time_stamp = r->acquisition_time_stamp;
  memcpy(h->physiology_time_stamp, r->physiology_time_stamp,
         sizeof h->physiology_time_stamp);
  h->image_index = index;
  h->image_series_index = (uint16_t)s->series;
}

/* Copies s into out (size bytes) with XML's special characters escaped. */
static void xml_escape(const char *s, char *out, size_t size) {
  size_t used = 0;
  for (; *s != '\0' && used + 7 < size; s++) {
    const char *rep = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;"
                    : *s == '"' ? "&quot;" : NULL;
    if (rep != NULL)
      used += (size_t)snprintf(out + used, size - used, "%s", rep);
    else
      out[used++] = *s;
  }
  out[used] = '\0';
}

/* ISMRMRD meta attributes: <ismrmrdMeta><meta><name/><value/>...</meta>. */
static char *meta_xml(const mr_gadget_ctx *ctx, const float *mag, size_t n) {
  float lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < n; i++) {
    lo = mag[i] < lo ? mag[i] : lo;
    hi = mag[i] > hi ? mag[i] : hi;
  }
  if (n == 0)
    lo = hi = 0;
  char config[256];
  xml_escape(ctx->config, config, sizeof config);
  size_t size = 2048 + sizeof config + 32 * strlen(ctx->history), used = 0;
  char *x = malloc(size);
  if (x == NULL)
    return NULL;
  used += (size_t)snprintf(x + used, size - used,
                           "<?xml version=\"1.0\"?><ismrmrdMeta>"
                           "<meta><name>DataRole</name><value>Image</value></meta>"
                           "<meta><name>ImageComment</name><value>%s</value></meta>"
                           "<meta><name>ImageProcessingHistory</name>",
                           config);
  const char *h = ctx->history;
  while (*h != '\0') {
    size_t len = strcspn(h, ",");
    used += (size_t)snprintf(x + used, size - used, "<value>%.*s</value>", (int)len, h);
    h += len + (h[len] == ',');
  }
  used += (size_t)snprintf(x + used, size - used, "</meta>");
  if (ctx->notes->noise[0] != '\0') { /* which noise prewhitened the data (noise_adjust) */
    char noise[sizeof ctx->notes->noise * 6];
    xml_escape(ctx->notes->noise, noise, sizeof noise);
    used += (size_t)snprintf(x + used, size - used,
                             "<meta><name>NoiseSource</name><value>%s</value></meta>", noise);
  }
  snprintf(x + used, size - used,
           "<meta><name>WindowCenter</name><value>%g</value></meta>"
           "<meta><name>WindowWidth</name><value>%g</value></meta></ismrmrdMeta>",
           0.5 * ((double)lo + hi), (double)hi - lo);
  return x;
}

static void convert(int kind, const float complex *src, size_t n, void *dst) {
  float *f = dst;
  switch (kind) {
  case OUT_COMPLEX:
    memcpy(dst, src, n * sizeof *src);
    return;
  case OUT_MAGNITUDE:
    for (size_t i = 0; i < n; i++)
      f[i] = cabsf(src[i]);
    return;
  case OUT_PHASE:
    for (size_t i = 0; i < n; i++)
      f[i] = cargf(src[i]);
    return;
  case OUT_REAL:
    for (size_t i = 0; i < n; i++)
      f[i] = crealf(src[i]);
    return;
  case OUT_IMAG:
    for (size_t i = 0; i < n; i++)
      f[i] = cimagf(src[i]);
    return;
  }
}

/* Fails when a pixel of a (its host copy, px) is not finite. */
static int check_finite(mr_gadget_ctx *ctx, const mr_image_array *a, const float complex *px,
                        uint16_t index) {
  size_t n = mr_image_array_channel_size(a) * a->nch, bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(crealf(px[i])) || !isfinite(cimagf(px[i]))) {
      first = bad == 0 ? i : first;
      bad++;
    }
  }
  if (bad == 0)
    return 0;
  size_t per = mr_image_array_channel_size(a), at = first % per;
  return mr_gadget_fail(ctx, MR_EDATA,
                        "image %u (repetition %u) has %zu pixels that are not finite, the first "
                        "at x %zu, y %zu, z %zu, channel %zu (%g%+gi): not sent",
                        (unsigned)index, a->ref.idx.repetition, bad, at % a->nx,
                        at / a->nx % a->ny, at / a->nx / a->ny, first / per,
                        (double)crealf(px[first]), (double)cimagf(px[first]));
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  image_out *s = state;
  mr_image_array *a = msg->u.object.ptr;
  int rc = 0;
  if (a->nx > UINT16_MAX || a->ny > UINT16_MAX || a->nz > UINT16_MAX || a->nch > UINT16_MAX) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "image of %zux%zux%zu x %zu channels is too large",
                        a->nx, a->ny, a->nz, a->nch);
    goto done;
  }
  size_t n = mr_image_array_channel_size(a) * a->nch;
  mr_err e = {0};
  const float complex *pixels = mr_image_array_host(a, &e); /* finished: to the host */
  if (pixels == NULL) {
    rc = mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
    goto done;
  }
  if ((rc = check_finite(ctx, a, pixels, (uint16_t)(s->next_index + 1))) < 0)
    goto done;
  ISMRMRD_ImageHeader h;
  fill_header(s, a, ++s->next_index, &h);
  mr_message *im = mr_message_new_image(&h, NULL);
  if (im == NULL) {
    rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for an image");
    goto done;
  }
  convert(s->kind, pixels, n, im->u.image.data);
  /* Window from the magnitude (the pixels themselves when they are it). */
  float *mag = s->kind == OUT_MAGNITUDE ? im->u.image.data : malloc(n * sizeof *mag);
  if (mag != NULL && s->kind != OUT_MAGNITUDE)
    convert(OUT_MAGNITUDE, pixels, n, mag);
  im->u.image.attributes = mag != NULL ? meta_xml(ctx, mag, n) : NULL;
  if (mag != im->u.image.data)
    free(mag);
  if (im->u.image.attributes == NULL) {
    mr_message_unref(im);
    rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for image attributes");
    goto done;
  }
  rc = mr_emit_message(out, im);
done:
  return rc;
}

const mr_gadget_class mr_gadget_image_out = {
    .name = "image_out",
    .summary = "sends image arrays to the client as ISMRMRD images with header and meta data",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(image_out),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE),
    .device_input = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .process = process,
};
