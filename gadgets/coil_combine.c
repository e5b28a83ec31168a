/* coil_combine: one image from many coils. "rss": root sum of squares
 * (a magnitude image, stored with zero phase). "weighted": Roemer's
 * sensitivity-weighted sum, sum_c conj(s_c) x_c / sum_c |s_c|^2 (complex),
 * with maps s_c estimated from the central calib_size samples of k-space,
 * the ACS region of an accelerated scan: the coil images are taken back to
 * k-space, windowed there (Hann) to that centre, transformed to low-
 * resolution images l_c and normalised, s_c = l_c / sqrt(sum_c |l_c|^2). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "coil.h"
#include "fft.h"
#include "gadget.h"
#include "image_array.h"
#include "placement.h"

enum method { COMBINE_RSS, COMBINE_WEIGHTED };

typedef struct coil_combine {
  int method;
  int calib[2];
  int device, fallback;
  mr_placement place;
} coil_combine;

static const mr_param params[] = {
    {"method", MR_PARAM_ENUM, offsetof(coil_combine, method), "\"rss\"", 0, 0, "rss|weighted", 0,
     "rss: root sum of squares; weighted: sensitivity-weighted with maps from the k-space centre"},
    {"calib_size", MR_PARAM_INTS, offsetof(coil_combine, calib), "[24, 24]", 4, 1024, NULL, 2,
     "weighted: readout samples and lines of the k-space centre the maps come from"},
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

typedef struct weighted_job {
  const mr_image_array *in;
  const int *calib;
  mr_cfloat *maps; /* [ch][pixel] scratch */
  mr_cfloat *out;
} weighted_job;

/* A Hann window of width w (samples) centred on n / 2; 0 outside. */
static float hann(size_t k, size_t n, int w) {
  double d = (double)k - (double)(n / 2);
  if (w >= (int)n)
    w = (int)n;
  return fabs(d) * 2 < w ? (float)(0.5 * (1 + cos(2 * M_PI * d / w))) : 0.0f;
}

static int run_weighted(mr_device *dev, void *arg) {
  weighted_job *j = arg;
  const mr_image_array *in = j->in;
  size_t n = mr_image_array_channel_size(in), plane = in->nx * in->ny;
  memcpy(j->maps, in->data, n * in->nch * sizeof *j->maps);
  mr_fft_opts o = {.rank = in->nz > 1 ? 3 : 2, .dims = {in->nx, in->ny, in->nz},
                   .batch = in->nch};
  mr_fft_plan *plan = NULL;
  int rc = mr_fft_plan_create(dev, &o, &plan);
  if (rc == 0)
    rc = mr_fft_execute_host(plan, MR_FFT_FORWARD, j->maps, j->maps);
  float *wx = rc == 0 ? malloc(in->nx * sizeof *wx) : NULL;
  float *wy = wx != NULL ? malloc(in->ny * sizeof *wy) : NULL;
  if (rc == 0 && wy == NULL)
    rc = MR_ENOMEM;
  if (rc == 0) {
    for (size_t x = 0; x < in->nx; x++)
      wx[x] = hann(x, in->nx, j->calib[0]);
    for (size_t y = 0; y < in->ny; y++)
      wy[y] = hann(y, in->ny, j->calib[1]);
    for (size_t i = 0; i < n * in->nch; i++) {
      size_t p = i % plane;
      j->maps[i] *= wx[p % in->nx] * wy[p / in->nx];
    }
    rc = mr_fft_execute_host(plan, MR_FFT_BACKWARD, j->maps, j->maps);
  }
  free(wx);
  free(wy);
  mr_fft_plan_destroy(plan);
  if (rc < 0)
    return rc;
  /* Normalise to unit root sum of squares; pixels with next to no
   * low-resolution signal get no map (and a zero image). */
  double peak = 0;
  for (size_t p = 0; p < n; p++) {
    double ss = 0;
    for (size_t c = 0; c < in->nch; c++) {
      mr_cfloat v = j->maps[c * n + p];
      ss += crealf(v) * crealf(v) + cimagf(v) * cimagf(v);
    }
    j->out[p] = (float)sqrt(ss);
    if (ss > peak)
      peak = ss;
  }
  float floor_ = (float)(1e-6 * sqrt(peak));
  for (size_t p = 0; p < n; p++) {
    float r = crealf(j->out[p]);
    float scale = r > floor_ ? 1.0f / r : 0.0f;
    for (size_t c = 0; c < in->nch; c++)
      j->maps[c * n + p] *= scale;
  }
  return mr_coil_combine_host(dev, (const mr_cfloat *)in->data, j->maps, in->nch, n, j->out);
}

static int combine_weighted(coil_combine *s, mr_gadget_ctx *ctx, const mr_image_array *in,
                            mr_image_array *a) {
  size_t n = mr_image_array_channel_size(in), maps_bytes = n * in->nch * sizeof(mr_cfloat);
  mr_err me = {0};
  mr_cfloat *maps = mr_budget_alloc(maps_bytes, "the coil maps", &me);
  if (maps == NULL)
    return mr_gadget_fail(ctx, me.code, "%s", me.msg);
  weighted_job job = {in, s->calib, maps, (mr_cfloat *)a->data};
  int rc = mr_placement_run(&s->place, ctx, run_weighted, &job);
  mr_budget_free(maps, maps_bytes);
  return rc;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  coil_combine *s = state;
  const mr_image_array *in = msg->u.object.ptr;
  size_t n = mr_image_array_channel_size(in);
  if (s->method == COMBINE_WEIGHTED) {
    mr_err e = {0};
    mr_image_array *a = mr_image_array_new(in->nx, in->ny, in->nz, 1, &e);
    int rc = a == NULL ? mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s",
                                        e.code ? e.msg : "out of memory combining coils")
                       : combine_weighted(s, ctx, in, a);
    if (rc == 0)
      mr_image_array_copy_meta(a, in);
    else
      mr_image_array_free(a);
    mr_message_unref(msg);
    if (rc < 0)
      return rc;
    mr_message *m = mr_image_array_message(a);
    return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  }
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
    .summary = "combines coil images into one: root sum of squares, or sensitivity-weighted "
               "with maps from the k-space centre",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(coil_combine),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
