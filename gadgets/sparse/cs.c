/* cs: compressed sensing of Cartesian 2D/3D k-space buffers, any set of
 * sampled phase-encode lines (2D) or ky-kz points (3D) as the buffer's
 * mask says: the SENSE data term with coil maps and an L1-wavelet, TV or
 * L2 regulariser (gpu/sparse/sparse.h: FISTA, or CG for l2; the whole
 * solve one device task), one combined complex image per buffer, cropped
 * to the recon matrix as fft does.
 *
 * Calibration lines the buffer holds apart (separate ACS lines) join its
 * sampled lines: they are samples of the same k-space.
 *
 * Maps from the fully sampled centre of the buffer's own k-space (the
 * largest box of sampled lines around the centre, at least MIN_CALIB
 * lines (and partitions) wide), by gpu/coil's estimators, as coil_combine
 * and fhd_cg take theirs: "lowres" (the coil images Hann-windowed in
 * k-space to that box, normalised to unit root sum of squares:
 * mr_coil_maps_lowres) or "espirit" (espirit.h, BART's ecalib -m1, its
 * calibration region that box, at most 24 wide). lowres is the default:
 * on the tests' phantoms ESPIRiT's maps give no better image (2D) and fail
 * on a small 3D calibration (docs/compressed-sensing.md). A scan without such a
 * centre, a lambda of 0 with wavelet or tv, NaN samples or a mask with one
 * line get an error, never an image.
 *
 * A dynamic series ("temporal_lambda" > 0, regularizer tv; cs_series.c): the 2D
 * buffers of a slice (one per repetition or phase: a cine's phases, a
 * dynamic scan's repetitions, each undersampled by its own mask) are held
 * to the end of the scan and reconstructed together, each frame's SENSE
 * term its own 2D transform with the maps shared (gpu/sparse/series.h),
 * spatial TV plus temporal TV along the frames (tv.h's MR_TV_FRAMES: as
 * BART's pics -R T:1024:0:lambda), one image per frame in the order the
 * frames came. The maps come from the frames' summed k-space over the
 * centre every frame sampled.
 *
 * k-space may come on the device (remove_oversampling on a GPU); the image
 * goes on as device data when image_out takes it (handoff.h). */
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "buf.h"
#include "coil.h"
#include "cs_impl.h"
#include "espirit.h"
#include "fft.h"
#include "gadget.h"
#include "handoff.h"
#include "image_array.h"
#include "kspace.h"
#include "placement.h"
#include "sparse.h"

static const mr_param params[] = {
    MR_PARAM_ENUM(cs_gadget, regularizer, "regularizer", "\"wavelet\"", "wavelet|tv|l2",
        "wavelet: L1 of a multi-level Daubechies wavelet (random shifts per iteration), FISTA; "
        "tv: isotropic total variation, FISTA; l2: Tikhonov-regularised SENSE, CG"),
    MR_PARAM_DOUBLE(cs_gadget, lambda, "lambda", "0.005", 0, 1e3,
        "regularisation weight relative to the data's scale, taken as BART's pics takes it "
        "(the 90th percentile, or the maximum when a few pixels stand far above it, of the "
        "low-resolution image of the fully sampled centre; of the zero-filled image for a "
        "dynamic series or a scan without centre lines), so that BART's pics -r means the "
        "same: above 0 for wavelet and tv"),
    MR_PARAM_DOUBLE(cs_gadget, temporal_lambda, "temporal_lambda", "0", 0, 1e3,
        "regularizer tv, 2D: a dynamic series; the buffers of a slice (its repetitions or "
        "phases, each its own mask) are held to the end of the scan and reconstructed "
        "together with temporal total variation along the frames of this weight, relative as "
        "lambda (BART's pics -R T:1024:0:lambda), one image per frame; 0: each buffer alone"),
    MR_PARAM_INT(cs_gadget, iterations, "iterations", "100", 1, 100000,
        "FISTA iterations (wavelet, tv) or CG iterations (l2)"),
    MR_PARAM_DOUBLE(cs_gadget, tolerance, "tolerance", "0", 0, 1,
        "stop once the image changes by at most this fraction of its norm in an iteration "
        "(tested every 10; l2: CG's relative residual); 0: every iteration"),
    MR_PARAM_ENUM(cs_gadget, maps, "maps", "\"lowres\"", "lowres|espirit",
        "coil maps from the scan's fully sampled k-space centre: lowres (the coil images "
        "low-passed by a Hann window, normalised) or espirit (BART's ecalib -m1: eigenvectors "
        "of the calibration's ESPIRiT operator, zero outside the object; wants a calibration "
        "region well above its 6-sample kernel)"),
    MR_PLACEMENT_PARAMS(cs_gadget),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  cs_gadget *s = state;
  if (s->regularizer != MR_SPARSE_L2 && s->lambda <= 0)
    return mr_gadget_fail(ctx, MR_ECONFIG,
                          "lambda 0 with regularizer %s: give a lambda above 0 (0.005 is "
                          "BART's usual), or use regularizer l2",
                          s->regularizer == MR_SPARSE_TV ? "tv" : "wavelet");
  if (s->temporal_lambda > 0 && s->regularizer != MR_SPARSE_TV)
    return mr_gadget_fail(ctx, MR_ECONFIG,
                          "temporal_lambda %g needs regularizer \"tv\" (the temporal term is "
                          "total variation along the frames)",
                          s->temporal_lambda);
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_IMAGE_ARRAY);
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

/* Whether every line of the box of half-widths hy, hz around the centre
 * was sampled (sampled [ne2][ne1]). */
static int box_sampled(const uint8_t *sampled, size_t ne1, size_t ne2, size_t hy, size_t hz) {
  size_t cy = ne1 / 2, cz = ne2 / 2;
  if (hy > cy || hz > cz || cy + hy > ne1 || cz + hz > ne2)
    return 0;
  size_t z0 = ne2 > 1 ? cz - hz : 0, z1 = ne2 > 1 ? cz + hz : 1;
  for (size_t z = z0; z < z1; z++)
    for (size_t y = cy - hy; y < cy + hy; y++)
      if (!sampled[z * ne1 + y])
        return 0;
  return 1;
}

/* Widths 2 x the half-widths of the largest box that grows. */
void mr_cs_calibration_box(const uint8_t *sampled, size_t ne1, size_t ne2, size_t *wy,
                           size_t *wz) {
  size_t hy = 0, hz = 0;
  int grew = 1;
  while (grew) {
    grew = 0;
    if (box_sampled(sampled, ne1, ne2, hy + 1, ne2 > 1 ? (hz > 0 ? hz : 1) : 0))
      hy++, grew = 1;
    if (ne2 > 1 && box_sampled(sampled, ne1, ne2, hy > 0 ? hy : 1, hz + 1))
      hz++, grew = 1;
  }
  *wy = 2 * hy;
  *wz = ne2 > 1 ? 2 * hz : 1;
}

int mr_cs_coil_maps(cs_job *j, mr_device *dev, const mr_cfloat *kspace, mr_cfloat *maps,
                    mr_err *err) {
  mr_kspace *k = j->k;
  size_t dims[3] = {k->nro, k->ne1, k->ne2};
  if (j->s->maps == MAPS_ESPIRIT) {
    mr_espirit_opts o;
    mr_espirit_opts_default(&o);
    int calib = (int)(k->ne2 > 1 && j->calib[1] < j->calib[0] ? j->calib[1] : j->calib[0]);
    o.calib = calib < o.calib ? calib : o.calib;
    o.kernel = o.kernel < o.calib ? o.kernel : o.calib;
    return mr_espirit_maps(dev, kspace, dims, k->nch, &o, maps, err);
  }
  mr_fft_opts o = {.rank = k->ne2 > 1 ? 3 : 2, .dims = {k->nro, k->ne1, k->ne2},
                   .batch = k->nch};
  int width[3] = {(int)j->calib[0], (int)j->calib[0], (int)j->calib[1]};
  int rc = mr_fft_plan_keep(dev, &o, &j->s->maps_fft, err);
  if (rc == 0)
    rc = mr_fft_execute(j->s->maps_fft, MR_FFT_BACKWARD, kspace, maps, err);
  return rc == 0 ? mr_coil_maps_lowres(dev, maps, k->nch, dims, width, MR_COIL_MAP_FLOOR, maps, err)
                 : rc;
}

/* One device task: k-space onto dev, maps, the solve (into scratch when
 * the recon matrix crops it), the image array. */
static int cs_task(mr_device *dev, void *arg, mr_err *err) {
  cs_job *j = arg;
  mr_kspace *k = j->k;
  size_t n = mr_kspace_channel_size(k);
  int crop = j->n[0] != k->nro || j->n[1] != k->ne1 || j->n[2] != k->ne2;
  mr_sparse_opts o;
  mr_sparse_opts_default(&o);
  o.dims[0] = k->nro;
  o.dims[1] = k->ne1;
  o.dims[2] = k->ne2;
  o.ncoils = k->nch;
  o.regularizer = (mr_sparse_regularizer)j->s->regularizer;
  o.lambda = j->s->lambda;
  o.iterations = j->s->iterations;
  o.tolerance = j->s->tolerance;
  int rc = mr_sparse_plan_keep(dev, &o, &j->s->plan, err);
  if (rc < 0)
    return rc;
  mr_err e = {0};
  const mr_cfloat *kspace = mr_kspace_on(k, dev, &e);
  mr_image_array *a = kspace != NULL
                          ? mr_image_array_new_on(dev, j->n[0], j->n[1], j->n[2], 1, &e)
                          : NULL;
  mr_cfloat *img = a != NULL ? mr_image_array_on(a, dev, &e) : NULL;
  if (img == NULL) {
    mr_image_array_free(a);
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", e.code ? e.msg : "out of memory");
  }
  mr_buf *maps = NULL, *full = NULL;
  rc = mr_buf_create(dev, n * k->nch * sizeof(mr_cfloat), &maps, err);
  if (rc == 0 && crop)
    rc = mr_buf_create(dev, n * sizeof(mr_cfloat), &full, err);
  mr_cfloat *x = full != NULL ? mr_buf_data(full) : img;
  if (rc == 0)
    rc = mr_cs_coil_maps(j, dev, kspace, mr_buf_data(maps), err);
  if (rc == 0)
    rc =
        mr_sparse_solve(j->s->plan, kspace, k->sampled, mr_buf_data(maps), x, j->cancel, NULL, err);
  if (rc == 0 && crop) {
    size_t from[3] = {k->nro, k->ne1, k->ne2};
    rc = mr_block_crop_center(dev, 1, x, from, img, j->n, err);
  }
  mr_buf_destroy(maps);
  mr_buf_destroy(full);
  if (rc < 0) {
    mr_image_array_free(a);
    return rc;
  }
  j->out = a;
  return 0;
}

static int run_cs(mr_device *dev, void *arg, mr_err *err) {
  return mr_device_run(dev, cs_task, arg, err);
}

static size_t sampled_lines(const mr_kspace *k) {
  size_t count = 0;
  for (size_t i = 0; i < k->ne1 * k->ne2; i++)
    count += k->sampled[i] != 0;
  return count;
}

/* Whether k's calibration part (ACS lines gathered apart) holds lines its
 * data lacks: they are samples of the same k-space, for the maps and the
 * data term both. */
static int calib_adds(const mr_kspace *k) {
  const mr_kspace *c = k->calib;
  if (c == NULL || c->nro != k->nro || c->ne1 != k->ne1 || c->ne2 != k->ne2 || c->nch != k->nch)
    return 0;
  for (size_t i = 0; i < k->ne1 * k->ne2; i++)
    if (c->sampled[i] && !k->sampled[i])
      return 1;
  return 0;
}

/* A host copy of k with its calibration lines filled in (NULL with a line
 * in err when over the budget or out of memory). */
static mr_kspace *with_calibration(mr_kspace *k, mr_err *err) {
  const float complex *data = mr_kspace_host(k, err);
  mr_kspace *m = data != NULL ? mr_kspace_new(k->nro, k->ne1, k->ne2, k->nch, 0, err) : NULL;
  if (m == NULL)
    return NULL;
  mr_kspace_copy_meta(m, k);
  size_t lines = k->ne1 * k->ne2, n = mr_kspace_channel_size(k);
  memcpy(m->data, data, n * k->nch * sizeof *data);
  for (size_t l = 0; l < lines; l++) {
    m->sampled[l] = k->sampled[l];
    if (k->sampled[l] || !k->calib->sampled[l])
      continue;
    m->sampled[l] = 1;
    for (size_t c = 0; c < k->nch; c++)
      memcpy(m->data + c * n + l * k->nro, k->calib->data + c * n + l * k->nro,
             k->nro * sizeof *data);
  }
  return m;
}

static int reconstruct(cs_gadget *s, mr_gadget_ctx *ctx, mr_kspace *k, mr_image_array **out);

int mr_cs_no_calibration(mr_gadget_ctx *ctx, const mr_kspace *k, const size_t calib[2],
                         int frames) {
  if (calib[0] >= MIN_CALIB && (k->ne2 == 1 || calib[1] >= MIN_CALIB))
    return 0;
  return mr_gadget_fail(ctx, MR_EDATA,
                        "no calibration region for the coil maps: the fully sampled k-space "
                        "centre%s is %zu line%s x %zu partition%s, at least %d of each needed",
                        frames ? " every frame sampled" : "", calib[0], calib[0] == 1 ? "" : "s", calib[1], calib[1] == 1 ? "" : "s",
                        MIN_CALIB);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  cs_gadget *s = state;
  mr_kspace *k = msg->u.object.ptr, *merged = NULL;
  if (calib_adds(k)) {
    mr_err e = {0};
    if ((merged = with_calibration(k, &e)) == NULL)
      return mr_gadget_fail(ctx, e.code ? e.code : MR_ENOMEM, "%s",
                            e.code ? e.msg : "out of memory");
  }
  if (s->temporal_lambda > 0)
    return mr_cs_series_hold(s, ctx, msg, merged);
  mr_image_array *a = NULL;
  int rc = reconstruct(s, ctx, merged != NULL ? merged : k, &a);
  mr_kspace_free(merged);
  return rc < 0 ? rc : mr_image_array_emit(a, k, ctx, out);
}

static int reconstruct(cs_gadget *s, mr_gadget_ctx *ctx, mr_kspace *k, mr_image_array **out) {
  if (k->traj != NULL)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "got non-Cartesian k-space (trajectory_dimensions %d): cs "
                          "reconstructs Cartesian scans",
                          k->traj_dims);
  size_t lines = sampled_lines(k);
  if (lines < 2)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "%zu sampled line%s of %zu x %zu: too few to reconstruct", lines,
                          lines == 1 ? "" : "s", k->ne1, k->ne2);
  mr_cancel cancel = mr_gadget_cancel(ctx);
  cs_job job = {s, k, {0, 0},
                {k->recon.matrix.x < k->nro ? k->recon.matrix.x : k->nro,
                 k->recon.matrix.y < k->ne1 ? k->recon.matrix.y : k->ne1,
                 k->recon.matrix.z < k->ne2 ? k->recon.matrix.z : k->ne2},
                &cancel, NULL};
  for (int d = 0; d < 3; d++)
    if (job.n[d] == 0)
      job.n[d] = d == 0 ? k->nro : d == 1 ? k->ne1 : k->ne2;
  mr_cs_calibration_box(k->sampled, k->ne1, k->ne2, &job.calib[0], &job.calib[1]);
  if (mr_cs_no_calibration(ctx, k, job.calib, 0) < 0)
    return MR_EDATA;
  int rc = mr_placement_run(&s->place, ctx, run_cs, &job);
  if (rc < 0)
    return rc; /* reported by the placement */
  mr_image_array *a = job.out;
  if (!s->on_device) {
    mr_err e = {0};
    if ((rc = mr_image_array_to_host(a, &e)) < 0) {
      mr_image_array_free(a);
      return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    }
  }
  *out = a;
  return 0;
}

static void destroy(void *state) {
  cs_gadget *s = state;
  mr_cs_series_free(s);
  mr_sparse_plan_destroy(s->plan);
  mr_fft_plan_destroy(s->maps_fft);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_cs = {
    .name = "cs",
    .summary = "compressed sensing of Cartesian k-space buffers (any sampled lines or ky-kz "
               "points): SENSE with L1-wavelet, TV or L2 regularisation, one combined image",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(cs_gadget),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_IMAGE_ARRAY),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .handles = MR_HANDLES_ACCELERATION,
    .configure = configure,
    .process = process,
    .flush = mr_cs_series_flush,
    .destroy = destroy,
};
