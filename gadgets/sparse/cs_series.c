/* cs's dynamic series (temporal_lambda > 0; docs/compressed-sensing.md):
 * a slice's 2D buffers (one per repetition or phase, each its own mask)
 * held to the end of the scan, then solved together by gpu/sparse with
 * the series operator and temporal TV along the frames, the maps from the
 * frames' summed k-space over the centre every frame sampled; one image
 * per frame, emitted with its buffer's header. */
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "buf.h"
#include "cs_impl.h"
#include "image_array.h"
#include "vec.h"

/* Most frames of a series held for a joint solve, and most series
 * (slices, contrasts, sets) of a scan. */
#define MAX_FRAMES 1024
#define MAX_SERIES 256

static mr_kspace *frame_kspace(const series *se, size_t f) {
  return se->merged[f] != NULL ? se->merged[f] : se->msgs[f]->u.object.ptr;
}

static void series_free(series *se) {
  for (size_t f = 0; f < se->frames; f++) {
    mr_message_unref(se->msgs[f]);
    mr_kspace_free(se->merged[f]);
  }
  free(se->msgs);
  free(se->merged);
  memset(se, 0, sizeof *se);
}

/* The series of k's slice, contrast and set (made when new; NULL with the
 * gadget's line past MAX_SERIES or out of memory). */
static series *series_of(cs_gadget *s, mr_gadget_ctx *ctx, const mr_kspace *k) {
  uint16_t key[3] = {k->ref.idx.slice, k->ref.idx.contrast, k->ref.idx.set};
  for (size_t i = 0; i < s->nseries; i++)
    if (memcmp(s->series[i].key, key, sizeof key) == 0)
      return &s->series[i];
  if (s->nseries == MAX_SERIES) {
    mr_gadget_fail(ctx, MR_ELIMIT, "more than %d series (slices, contrasts, sets) held for "
                   "temporal_lambda", MAX_SERIES);
    return NULL;
  }
  series *grown = realloc(s->series, (s->nseries + 1) * sizeof *grown);
  if (grown == NULL) {
    mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    return NULL;
  }
  s->series = grown;
  series *se = &s->series[s->nseries++];
  memset(se, 0, sizeof *se);
  memcpy(se->key, key, sizeof key);
  return se;
}

/* Holds msg's buffer (merged: its copy with the calibration lines, taken)
 * as the next frame of its series. */
int mr_cs_series_hold(cs_gadget *s, mr_gadget_ctx *ctx, mr_message *msg, mr_kspace *merged) {
  mr_kspace *k = merged != NULL ? merged : msg->u.object.ptr;
  const char *why = k->traj != NULL ? "non-Cartesian k-space"
                    : k->ne2 > 1    ? "3D buffers (a series is of 2D frames)"
                                    : NULL;
  series *se = why == NULL ? series_of(s, ctx, k) : NULL;
  if (why != NULL)
    mr_gadget_fail(ctx, MR_EDATA, "temporal_lambda: got %s", why);
  const mr_kspace *first = se != NULL && se->frames > 0 ? frame_kspace(se, 0) : NULL;
  if (se != NULL && first != NULL &&
      (first->nro != k->nro || first->ne1 != k->ne1 || first->nch != k->nch)) {
    mr_gadget_fail(ctx, MR_EDATA,
                   "temporal_lambda: frame %zu of slice %u is %zu x %zu with %zu coils, the "
                   "first %zu x %zu with %zu: a series' frames share their shape",
                   se->frames, (unsigned)se->key[0], k->nro, k->ne1, k->nch, first->nro,
                   first->ne1, first->nch);
    se = NULL;
  } else if (se != NULL && se->frames == MAX_FRAMES) {
    mr_gadget_fail(ctx, MR_ELIMIT, "temporal_lambda: more than %d frames in slice %u",
                   MAX_FRAMES, (unsigned)se->key[0]);
    se = NULL;
  }
  mr_message **msgs = se != NULL ? realloc(se->msgs, (se->frames + 1) * sizeof *msgs) : NULL;
  if (msgs != NULL)
    se->msgs = msgs;
  mr_kspace **kept = msgs != NULL ? realloc(se->merged, (se->frames + 1) * sizeof *kept) : NULL;
  if (kept != NULL)
    se->merged = kept;
  if (kept == NULL) {
    mr_kspace_free(merged);
    return se != NULL ? mr_gadget_fail(ctx, MR_ENOMEM, "out of memory") : MR_EDATA;
  }
  se->msgs[se->frames] = mr_message_ref(msg);
  se->merged[se->frames++] = merged;
  return 0;
}

typedef struct series_job {
  cs_gadget *s;
  const series *se;
  size_t calib[2];          /* the centre every frame sampled */
  size_t n[3];              /* a frame's cropped image */
  const mr_cancel *cancel;
  mr_image_array **out;     /* [frames], made here */
} series_job;

/* One device task: the frames' k-space side by side on dev, maps from
 * their sum, the joint solve, a cropped image per frame. */
static int series_task(mr_device *dev, void *arg, mr_err *err) {
  series_job *j = arg;
  const series *se = j->se;
  mr_kspace *k0 = frame_kspace(se, 0);
  size_t n = k0->nro * k0->ne1, nk = n * k0->nch, frames = se->frames;
  mr_sparse_opts o;
  mr_sparse_opts_default(&o);
  o.dims[0] = k0->nro;
  o.dims[1] = k0->ne1;
  o.dims[2] = frames;
  o.ncoils = k0->nch;
  o.regularizer = MR_SPARSE_TV;
  o.lambda = j->s->lambda;
  o.iterations = j->s->iterations;
  o.tolerance = j->s->tolerance;
  o.time = MR_TV_FRAMES;
  o.temporal_lambda = j->s->temporal_lambda;
  int rc = mr_sparse_plan_keep(dev, &o, &j->s->plan, err);
  mr_buf *all = NULL, *sum = NULL, *maps = NULL, *images = NULL;
  uint8_t *mask = malloc(frames * k0->ne1);
  if (rc == 0 && mask == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "cs: out of memory");
  if (rc == 0)
    rc = mr_buf_create(dev, frames * nk * sizeof(mr_cfloat), &all, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nk * sizeof(mr_cfloat), &sum, err);
  if (rc == 0)
    rc = mr_buf_create(dev, nk * sizeof(mr_cfloat), &maps, err);
  if (rc == 0)
    rc = mr_buf_create(dev, frames * n * sizeof(mr_cfloat), &images, err);
  if (rc == 0)
    rc = mr_vec_zero(dev, nk, mr_buf_data(sum), err);
  mr_cfloat *kall = rc == 0 ? mr_buf_data(all) : NULL, one = 1;
  for (size_t f = 0; f < frames && rc == 0; f++) {
    mr_err e = {0};
    mr_kspace *k = frame_kspace(se, f);
    const mr_cfloat *kf = mr_kspace_on(k, dev, &e);
    if (kf == NULL)
      rc = mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
    if (rc == 0)
      rc = mr_vec_copy(dev, nk, kf, kall + f * nk, err);
    if (rc == 0)
      rc = mr_vec_axpy(dev, nk, one, kf, mr_buf_data(sum), err);
    if (rc == 0)
      memcpy(mask + f * k0->ne1, k->sampled, k0->ne1);
  }
  cs_job maps_job = {.s = j->s, .k = k0, .calib = {j->calib[0], j->calib[1]}};
  if (rc == 0)
    rc = mr_cs_coil_maps(&maps_job, dev, mr_buf_data(sum), mr_buf_data(maps), err);
  if (rc == 0)
    rc = mr_sparse_solve(j->s->plan, kall, mask, mr_buf_data(maps), mr_buf_data(images), j->cancel,
                         NULL, err);
  size_t from[3] = {k0->nro, k0->ne1, 1};
  for (size_t f = 0; f < frames && rc == 0; f++) {
    mr_err e = {0};
    mr_image_array *a = mr_image_array_new_on(dev, j->n[0], j->n[1], 1, 1, &e);
    mr_cfloat *img = a != NULL ? mr_image_array_on(a, dev, &e) : NULL;
    if (img == NULL) {
      mr_image_array_free(a);
      rc = mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
      break;
    }
    j->out[f] = a;
    rc = mr_block_crop_center(dev, 1, (mr_cfloat *)mr_buf_data(images) + f * n, from, img, j->n,
                              err);
  }
  free(mask);
  mr_buf_destroy(all);
  mr_buf_destroy(sum);
  mr_buf_destroy(maps);
  mr_buf_destroy(images);
  return rc;
}

static int run_series(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, series_task, arg, err);
}

/* The series' images, emitted frame by frame with their buffers' headers. */
static int reconstruct_series(cs_gadget *s, mr_gadget_ctx *ctx, const series *se,
                              mr_emit *out) {
  mr_kspace *k0 = frame_kspace(se, 0);
  uint8_t *every = malloc(k0->ne1);
  mr_image_array **images = calloc(se->frames, sizeof *images);
  if (every == NULL || images == NULL) {
    free(every);
    free(images);
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  }
  for (size_t y = 0; y < k0->ne1; y++) {
    every[y] = 1;
    for (size_t f = 0; f < se->frames; f++)
      every[y] &= frame_kspace(se, f)->sampled[y] != 0;
  }
  mr_cancel cancel = mr_gadget_cancel(ctx);
  series_job job = {s, se, {0, 0},
                    {k0->recon.matrix.x > 0 && k0->recon.matrix.x < k0->nro ? k0->recon.matrix.x
                                                                             : k0->nro,
                     k0->recon.matrix.y > 0 && k0->recon.matrix.y < k0->ne1 ? k0->recon.matrix.y
                                                                             : k0->ne1,
                     1},
                    &cancel, images};
  mr_cs_calibration_box(every, k0->ne1, 1, &job.calib[0], &job.calib[1]);
  free(every);
  int rc = mr_cs_no_calibration(ctx, k0, job.calib, 1);
  if (rc == 0)
    rc = mr_placement_run(&s->place, ctx, run_series, &job);
  for (size_t f = 0; f < se->frames && rc == 0 && !s->on_device; f++) {
    mr_err e = {0};
    if ((rc = mr_image_array_to_host(images[f], &e)) < 0)
      mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
  }
  for (size_t f = 0; f < se->frames; f++) {
    if (rc == 0)
      rc = mr_image_array_emit(images[f], se->msgs[f]->u.object.ptr, ctx, out);
    else
      mr_image_array_free(images[f]);
  }
  free(images);
  return rc;
}

/* End of scan: every held series, reconstructed. */
int mr_cs_series_flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  cs_gadget *s = state;
  int rc = 0;
  for (size_t i = 0; i < s->nseries; i++) {
    if (rc == 0 && s->series[i].frames > 0)
      rc = reconstruct_series(s, ctx, &s->series[i], out);
    series_free(&s->series[i]);
  }
  s->nseries = 0;
  return rc;
}

void mr_cs_series_free(cs_gadget *s) {
  for (size_t i = 0; i < s->nseries; i++)
    series_free(&s->series[i]);
  free(s->series);
  s->series = NULL;
  s->nseries = 0;
}
