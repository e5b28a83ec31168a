/* coil_combine: one image from many coils. "rss": root sum of squares
 * (a magnitude image, stored with zero phase). "weighted": Roemer's
 * sensitivity-weighted sum, sum_c conj(s_c) x_c / sum_c |s_c|^2 (complex),
 * with maps s_c estimated from the central calib_size samples of k-space,
 * the ACS region of an accelerated scan, by gpu/coil's estimators
 * ("estimator"): "lowres", the coil images taken back to k-space, windowed
 * there (Hann, along x, y and, in 3D, z with the second calib_size) to that
 * centre, transformed to low-resolution images l_c and normalised,
 * s_c = l_c / sqrt(sum_c |l_c|^2) (mr_coil_maps_lowres); or "espirit", the
 * ESPIRiT maps of the coil images' k-space with a calibration region of
 * calib_size (espirit.h: its defaults otherwise), zero where no coil sees
 * the object, so the combination is zero there too.
 *
 * When maps are made ("maps"): "slice" (the default, as Gadgetron does)
 * keeps one set of maps per encoding space and slice, made from the first
 * image of that slice and reused for its later images (repetitions,
 * phases, contrasts, sets); they are made anew when the image shape or the
 * coil count changes, or when the image's calibration generation does
 * (grappa counts calibrations per slice: new ACS lines or a reference scan). "image" makes them from
 * every image. The maps stay on the device the combination runs on (a GPU
 * computes them there) and count against the memory budget.
 *
 * All the math runs on the placed device; on a GPU the coil images come as
 * device data from fft and the combined image goes on as device data to
 * image_out (handoff.h). */
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "buf.h"
#include "coil.h"
#include "espirit.h"
#include "fft.h"
#include "gadget.h"
#include "handoff.h"
#include "image_array.h"
#include "placement.h"

enum method { COMBINE_RSS, COMBINE_WEIGHTED };
enum maps_rule { MAPS_PER_SLICE, MAPS_PER_IMAGE };
enum estimator { ESTIMATE_LOWRES, ESTIMATE_ESPIRIT };

/* The maps of one encoding space and slice. */
typedef struct slice_maps {
  struct slice_maps *next;
  uint16_t encoding, slice;
  size_t nx, ny, nz, nch;
  uint32_t generation;
  mr_buf *maps; /* [ch][pixel] on the device they were made on; NULL: none */
} slice_maps;

typedef struct coil_combine {
  int method;
  int calib[2];
  int maps_rule;
  int estimator;
  int device, fallback;
  mr_placement place;
  int on_device;     /* the next consumer takes device data */
  mr_fft_plan *plan; /* ESPIRiT's transform of the coil images, for the last shape */
  mr_buf *kspace;    /* ESPIRiT's k-space of the coil images, kept */
  slice_maps *slices;
} coil_combine;

static const mr_param params[] = {
    MR_PARAM_ENUM(coil_combine, method, "method", "\"rss\"", "rss|weighted",
        "rss: root sum of squares; weighted: sensitivity-weighted with maps from the k-space centre"),
    MR_PARAM_INTS(coil_combine, calib, "calib_size", "[24, 24]", 4, 1024,
        "weighted: readout samples and lines (and, in 3D, partitions) of the k-space centre the "
        "maps come from"),
    MR_PARAM_ENUM(coil_combine, maps_rule, "maps", "\"slice\"", "slice|image",
        "weighted: maps made once per slice (remade when the shape, the coils or the calibration "
        "change) or from every image"),
    MR_PARAM_ENUM(coil_combine, estimator, "estimator", "\"lowres\"", "lowres|espirit",
        "weighted: maps from the low-passed coil images over their root sum of squares, or "
        "ESPIRiT's eigenvector maps of the k-space centre"),
    MR_PLACEMENT_PARAMS(coil_combine),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  coil_combine *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_IMAGE_ARRAY);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

static uint64_t maps_bytes(const slice_maps *m) {
  return (uint64_t)m->nx * m->ny * m->nz * m->nch * sizeof(mr_cfloat);
}

static void drop_maps(slice_maps *m) {
  if (m->maps == NULL)
    return;
  mr_budget_give(maps_bytes(m));
  mr_buf_destroy(m->maps);
  m->maps = NULL;
}

/* The slice's entry for in (made when missing); NULL when out of memory. */
static slice_maps *slice_entry(coil_combine *s, const mr_image_array *in) {
  uint16_t enc = in->ref.encoding_space_ref, slice = in->ref.idx.slice;
  for (slice_maps *m = s->slices; m != NULL; m = m->next)
    if (m->encoding == enc && m->slice == slice)
      return m;
  slice_maps *m = calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->encoding = enc;
  m->slice = slice;
  m->next = s->slices;
  s->slices = m;
  return m;
}

/* Whether m holds maps for in on dev under the gadget's rule. */
static int maps_current(const coil_combine *s, const slice_maps *m, const mr_image_array *in,
                        mr_device *dev) {
  return s->maps_rule == MAPS_PER_SLICE && m->maps != NULL && mr_buf_device(m->maps) == dev &&
         m->nx == in->nx && m->ny == in->ny && m->nz == in->nz && m->nch == in->nch &&
         m->generation == in->calib_generation;
}

/* ESPIRiT's transform of in's shape on dev, made once per shape and device. */
static int plan_for(coil_combine *s, mr_device *dev, const mr_image_array *in, mr_err *err) {
  mr_fft_opts o = {.rank = in->nz > 1 ? 3 : 2, .dims = {in->nx, in->ny, in->nz},
                   .batch = in->nch};
  return mr_fft_plan_keep(dev, &o, &s->plan, err);
}

/* The coil images x of in (on dev) in k-space, in s->kspace (kept). */
static int espirit_kspace(coil_combine *s, mr_device *dev, const mr_image_array *in,
                          const mr_cfloat *x, mr_err *err) {
  size_t bytes = mr_image_array_channel_size(in) * in->nch * sizeof(mr_cfloat);
  int rc = 0;
  if (s->kspace == NULL || mr_buf_device(s->kspace) != dev || mr_buf_size(s->kspace) < bytes) {
    mr_buf_destroy(s->kspace);
    s->kspace = NULL;
    rc = mr_buf_create(dev, bytes, &s->kspace, err);
  }
  if (rc == 0)
    rc = plan_for(s, dev, in, err);
  return rc == 0 ? mr_fft_execute(s->plan, MR_FFT_FORWARD, x, mr_buf_data(s->kspace), err) : rc;
}

/* Makes m's maps on dev from the coil images x (on dev) of in. */
static int make_maps(coil_combine *s, mr_device *dev, slice_maps *m, const mr_image_array *in,
                     const mr_cfloat *x, mr_err *err) {
  drop_maps(m);
  m->nx = in->nx;
  m->ny = in->ny;
  m->nz = in->nz;
  m->nch = in->nch;
  m->generation = in->calib_generation;
  mr_err e = {0};
  if (mr_budget_take(maps_bytes(m), "coil maps", &e) < 0)
    return mr_err_set(err, e.code, "%s", e.msg);
  int rc = mr_buf_create(dev, maps_bytes(m), &m->maps, err);
  if (rc < 0) {
    mr_budget_give(maps_bytes(m));
    m->maps = NULL;
    return rc;
  }
  size_t dims[3] = {in->nx, in->ny, in->nz};
  mr_cfloat *maps = mr_buf_data(m->maps);
  if (s->estimator == ESTIMATE_LOWRES) {
    int width[3] = {s->calib[0], s->calib[1], s->calib[1]};
    rc = mr_coil_maps_lowres(dev, x, in->nch, dims, width, MR_COIL_MAP_FLOOR, maps, err);
  } else {
    mr_espirit_opts o;
    mr_espirit_opts_default(&o);
    o.calib = s->calib[0] < s->calib[1] ? s->calib[0] : s->calib[1];
    o.kernel = o.kernel < o.calib ? o.kernel : o.calib;
    rc = espirit_kspace(s, dev, in, x, err);
    if (rc == 0)
      rc = mr_espirit_maps(dev, mr_buf_data(s->kspace), dims, in->nch, &o, maps, err);
  }
  if (rc < 0)
    drop_maps(m);
  return rc;
}

typedef struct combine_job {
  coil_combine *s;
  mr_image_array *in;  /* borrowed */
  mr_image_array *out; /* made here */
} combine_job;

/* One device task: the coil images onto dev (when they are not there),
 * maps when due, the combination into a new array on dev. */
static int combine_task(mr_device *dev, void *arg, mr_err *err) {
  combine_job *j = arg;
  coil_combine *s = j->s;
  mr_image_array *in = j->in;
  size_t n = mr_image_array_channel_size(in);
  mr_err e = {0};
  const mr_cfloat *x = mr_image_array_on(in, dev, &e);
  mr_image_array *a = x != NULL ? mr_image_array_new_on(dev, in->nx, in->ny, in->nz, 1, &e)
                                : NULL;
  if (a == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
  mr_cfloat *out = mr_image_array_on(a, dev, &e);
  int rc;
  if (s->method == COMBINE_RSS) {
    rc = mr_coil_rss_complex(dev, x, in->nch, n, out, err);
  } else {
    slice_maps *m = slice_entry(s, in);
    if (m == NULL) {
      mr_image_array_free(a);
      return mr_err_set(err, MR_ENOMEM, "out of memory for coil maps");
    }
    rc = maps_current(s, m, in, dev) ? 0 : make_maps(s, dev, m, in, x, err);
    if (rc == 0)
      rc = mr_coil_combine(dev, x, mr_buf_data(m->maps), in->nch, n, out, err);
  }
  if (rc < 0) {
    mr_image_array_free(a);
    return rc;
  }
  j->out = a;
  return 0;
}

static int run_combine(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, combine_task, arg, err);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  coil_combine *s = state;
  combine_job job = {s, msg->u.object.ptr, NULL};
  int rc = mr_placement_run(&s->place, ctx, run_combine, &job);
  mr_image_array *a = job.out;
  if (rc == 0 && !s->on_device) {
    mr_err e = {0};
    if ((rc = mr_image_array_to_host(a, &e)) < 0)
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
  }
  if (rc == 0)
    mr_image_array_copy_meta(a, job.in);
  else
    mr_image_array_free(a);
  if (rc < 0)
    return rc;
  mr_message *m = mr_image_array_message(a);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

static void destroy(void *state) {
  coil_combine *s = state;
  while (s->slices != NULL) {
    slice_maps *m = s->slices;
    s->slices = m->next;
    drop_maps(m);
    free(m);
  }
  mr_fft_plan_destroy(s->plan);
  mr_buf_destroy(s->kspace);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_coil_combine = {
    .name = "coil_combine",
    .summary = "combines coil images into one: root sum of squares, or sensitivity-weighted "
               "with maps from the k-space centre (made once per slice)",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(coil_combine),
    .accepts = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .device_input = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
