/* coil_compress: k-space buffers with fewer, virtual coils
 * (gpu/coil/compress.h): "svd", one matrix for every sample, or "gcc"
 * (geometric, Cartesian only), one per readout position. `channels`
 * virtual coils, or (channels 0) the fewest that keep `energy` of the
 * calibration data's energy.
 *
 * The matrix comes from the calibration of each encoding space and slice
 * once: the buffer's calibration lines (IS_PARALLEL_CALIBRATION: a
 * reference scan or separate ACS lines), else its sampled lines within
 * calib_size of the centre (embedded ACS; for non-Cartesian lines, every
 * sampled line: radial spokes all cross the centre). It is made anew when
 * the coil count or readout length changes, or when the buffer's
 * calibration generation does (image_array.h). Every buffer of the slice
 * is then compressed with it, its calibration lines too, so a GRAPPA, CS or
 * CG-SENSE step after it sees one consistent set of virtual coils. A noise
 * prewhitening step (noise_adjust) goes before it: the matrix assumes
 * white, equal noise across coils.
 *
 * On the placed device: the buffer's samples go up once (or are there
 * already), one product (svd) or transform, product per x and transform
 * back (gcc), and the compressed samples stay there for a device consumer
 * (handoff.h). */
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "compress.h"
#include "gadget.h"
#include "handoff.h"
#include "kspace.h"
#include "placement.h"

/* The matrix of one encoding space and slice. */
typedef struct slice_matrix {
  struct slice_matrix *next;
  int encoding;
  uint16_t slice;
  size_t nch, nro, nv;
  uint32_t generation;
  mr_cfloat *m; /* host; NULL: none yet */
  mr_buf *dev;  /* m on the device it was last used on */
} slice_matrix;

typedef struct coil_compress {
  int method;
  int channels;
  double energy;
  int calib;
  int device, fallback;
  mr_placement place;
  int on_device;
  slice_matrix *slices;
} coil_compress;

static const mr_param params[] = {
    MR_PARAM_ENUM(coil_compress, method, "method", "\"svd\"", "svd|gcc",
        "svd: one matrix from the calibration data's coil covariance; gcc: geometric, one "
        "matrix per readout position, aligned along the readout (Cartesian only)"),
    MR_PARAM_INT(coil_compress, channels, "channels", "0", 0, 1024,
        "virtual coils to keep (0: the fewest that keep `energy`; more than the scan's coils: "
        "all of them)"),
    MR_PARAM_DOUBLE(coil_compress, energy, "energy", "0.95", 1e-6, 1,
        "channels 0: the share of the calibration data's energy the virtual coils keep"),
    MR_PARAM_INT(coil_compress, calib, "calib_size", "24", 1, 1024,
        "without calibration lines: the sampled lines within this many of the centre (along "
        "e1, and e2 in 3D) are the calibration data"),
    MR_PLACEMENT_PARAMS(coil_compress),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  coil_compress *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

static slice_matrix *slice_entry(coil_compress *s, const mr_kspace *k) {
  for (slice_matrix *m = s->slices; m != NULL; m = m->next)
    if (m->encoding == k->encoding && m->slice == k->ref.idx.slice)
      return m;
  slice_matrix *m = calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  m->encoding = k->encoding;
  m->slice = k->ref.idx.slice;
  m->next = s->slices;
  s->slices = m;
  return m;
}

static void matrix_drop(slice_matrix *m) {
  free(m->m);
  mr_buf_destroy(m->dev);
  m->m = NULL;
  m->dev = NULL;
}

static size_t distance(size_t i, size_t n) {
  return i >= n / 2 ? i - n / 2 : n / 2 - i;
}

/* The calibration lines [ch][line][ro] (host, the caller frees) and their
 * count: the calibration part's sampled lines, or the buffer's near the
 * centre. */
static int calibration_lines(coil_compress *s, mr_gadget_ctx *ctx, mr_kspace *k,
                             mr_cfloat **out, size_t *count) {
  mr_err e = {0};
  mr_kspace *src = k->calib != NULL ? k->calib : k;
  if (mr_kspace_host(src, &e) == NULL)
    return mr_gadget_fail(ctx, e.code, "%s", mr_err_text(&e, e.code));
  size_t nlines = k->ne1 * k->ne2, n = 0, half = (size_t)s->calib / 2;
  for (size_t l = 0; l < nlines; l++)
    n += src->sampled[l] && (src == k->calib || k->traj != NULL ||
                             (distance(l % k->ne1, k->ne1) <= half &&
                              distance(l / k->ne1, k->ne2) <= half));
  if (n == 0)
    return mr_gadget_fail(ctx, MR_EDATA, "no calibration lines: neither lines flagged for "
                          "parallel calibration nor sampled lines within %d of the centre",
                          s->calib);
  size_t per = mr_kspace_channel_size(k);
  mr_cfloat *c = malloc(n * k->nro * k->nch * sizeof *c);
  if (c == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for %zu calibration lines", n);
  for (size_t l = 0, at = 0; l < nlines; l++) {
    if (!(src->sampled[l] && (src == k->calib || k->traj != NULL ||
                              (distance(l % k->ne1, k->ne1) <= half &&
                               distance(l / k->ne1, k->ne2) <= half))))
      continue;
    for (size_t ch = 0; ch < k->nch; ch++)
      memcpy(c + (ch * n + at) * k->nro, src->data + ch * per + l * k->nro,
             k->nro * sizeof *c);
    at++;
  }
  *out = c;
  *count = n;
  return 0;
}

typedef struct job {
  coil_compress *s;
  slice_matrix *m;
  mr_kspace *k;
  const mr_cfloat *cal; /* calibration lines when the matrix is due, else NULL */
  size_t ncal;
  mr_kspace *out;       /* made here */
  mr_kspace *out_calib; /* made here */
} job;

/* Compresses the sampled lines of k->calib into a new calibration part. */
static int compress_calib(mr_device *dev, job *j, const mr_cfloat *m, mr_err *err) {
  mr_kspace *c = j->k->calib;
  mr_err e = {0};
  mr_buf *in = NULL, *out = NULL;
  size_t lines = 0, nv = j->m->nv;
  j->out_calib = mr_kspace_new(c->nro, c->ne1, c->ne2, nv, 0, &e);
  if (j->out_calib == NULL)
    return mr_err_set(err, e.code, "%s", e.msg);
  mr_kspace_copy_meta(j->out_calib, c);
  memcpy(j->out_calib->sampled, c->sampled, c->ne1 * c->ne2);
  int rc = mr_kspace_gather_sampled(c, dev, &in, &lines, err);
  if (rc == 0 && lines > 0)
    rc = mr_buf_create(dev, nv * lines * c->nro * sizeof(mr_cfloat), &out, err);
  if (rc == 0 && lines > 0)
    rc = mr_compress_apply(dev, (mr_compress_method)j->s->method, m, c->nch, nv, lines, c->nro,
                           mr_buf_data(in), mr_buf_data(out), err);
  if (rc == 0 && lines > 0)
    rc = mr_kspace_scatter_sampled(j->out_calib, out, err);
  mr_buf_destroy(in);
  mr_buf_destroy(out);
  return rc;
}

static int compress_task(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  coil_compress *s = j->s;
  slice_matrix *sm = j->m;
  mr_kspace *k = j->k;
  mr_compress_method method = (mr_compress_method)s->method;
  size_t msize = mr_compress_matrix_size(method, k->nch, k->nro);
  int rc = 0;
  if (j->cal != NULL) {
    matrix_drop(sm);
    sm->m = malloc(msize * sizeof *sm->m);
    if (sm->m == NULL)
      return mr_err_set(err, MR_ENOMEM, "out of memory for the compression matrix");
    size_t channels = s->channels > 0 && (size_t)s->channels > k->nch ? k->nch
                                                                       : (size_t)s->channels;
    rc = mr_compress_matrix(dev, method, j->cal, k->nch, j->ncal, k->nro, channels, s->energy,
                            sm->m, &sm->nv, NULL, err);
    if (rc < 0) {
      matrix_drop(sm);
      return rc;
    }
    sm->nch = k->nch;
    sm->nro = k->nro;
    sm->generation = k->calib_generation;
  }
  if (sm->dev == NULL || mr_buf_device(sm->dev) != dev) {
    mr_buf_destroy(sm->dev);
    sm->dev = NULL;
    if ((rc = mr_buf_create(dev, msize * sizeof *sm->m, &sm->dev, err)) == 0 &&
        (rc = mr_buf_upload(sm->dev, 0, sm->m, msize * sizeof *sm->m, err)) < 0) {
      mr_buf_destroy(sm->dev);
      sm->dev = NULL;
    }
    if (rc < 0)
      return rc;
  }
  mr_err e = {0};
  const mr_cfloat *in = mr_kspace_on(k, dev, &e);
  if (in == NULL)
    return mr_err_set(err, e.code, "%s", e.msg);
  mr_kspace *out = k->traj != NULL ? mr_kspace_new(k->nro, k->ne1, k->ne2, sm->nv, k->traj_dims, &e)
                                   : mr_kspace_new_on(dev, k->nro, k->ne1, k->ne2, sm->nv, &e);
  if (out == NULL)
    return mr_err_set(err, e.code, "%s", e.msg);
  j->out = out;
  mr_kspace_copy_meta(out, k);
  memcpy(out->sampled, k->sampled, k->ne1 * k->ne2);
  if (k->traj != NULL)
    memcpy(out->traj, k->traj, k->ne1 * k->ne2 * k->nro * (size_t)k->traj_dims * sizeof *k->traj);
  mr_cfloat *o = mr_kspace_on(out, dev, &e);
  if (o == NULL)
    return mr_err_set(err, e.code, "%s", e.msg);
  rc = mr_compress_apply(dev, method, mr_buf_data(sm->dev), k->nch, sm->nv, k->ne1 * k->ne2, k->nro,
                         in, o, err);
  if (rc < 0)
    return rc;
  mr_kspace_changed_on(out, dev);
  return k->calib != NULL ? compress_calib(dev, j, mr_buf_data(sm->dev), err) : 0;
}

static int run_compress(mr_device *dev, void *arg, mr_err *err) {
  job *j = arg;
  mr_kspace_free(j->out); /* a retry on another device starts afresh */
  mr_kspace_free(j->out_calib);
  j->out = j->out_calib = NULL;
  return mr_device_run(dev, compress_task, arg, err);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  coil_compress *s = state;
  mr_kspace *k = msg->u.object.ptr;
  if (k->traj != NULL && s->method == MR_COMPRESS_GCC)
    return mr_gadget_fail(ctx, MR_ENOTSUP, "gcc compresses along a Cartesian readout: this "
                          "k-space has a trajectory (use method svd)");
  if (k->calib != NULL && (k->calib->nch != k->nch || k->calib->nro != k->nro ||
                           k->calib->ne1 != k->ne1 || k->calib->ne2 != k->ne2))
    return mr_gadget_fail(ctx, MR_EDATA, "calibration lines (%zu coils, %zu samples) do not "
                          "match the k-space (%zu coils, %zu samples)", k->calib->nch,
                          k->calib->nro, k->nch, k->nro);
  slice_matrix *sm = slice_entry(s, k);
  if (sm == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  job j = {.s = s, .m = sm, .k = k};
  mr_cfloat *cal = NULL;
  int rc = 0;
  if (sm->m == NULL || sm->nch != k->nch || sm->nro != k->nro ||
      sm->generation != k->calib_generation) {
    if ((rc = calibration_lines(s, ctx, k, &cal, &j.ncal)) < 0)
      return rc;
    j.cal = cal;
  }
  rc = mr_placement_run(&s->place, ctx, run_compress, &j);
  free(cal);
  if (rc == 0) {
    mr_err e = {0};
    j.out->calib = j.out_calib;
    j.out_calib = NULL;
    if ((rc = mr_kspace_hand_on(j.out, s->on_device, &e)) < 0)
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
  }
  if (rc < 0) {
    mr_kspace_free(j.out);
    mr_kspace_free(j.out_calib);
    return rc;
  }
  mr_message *m = mr_kspace_message(j.out);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

static void destroy(void *state) {
  coil_compress *s = state;
  while (s->slices != NULL) {
    slice_matrix *m = s->slices;
    s->slices = m->next;
    matrix_drop(m);
    free(m);
  }
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_coil_compress = {
    .name = "coil_compress",
    .summary = "k-space buffers to fewer virtual coils: SVD or geometric (GCC) compression, "
               "the matrix from each slice's calibration, applied on the device",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(coil_compress),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
