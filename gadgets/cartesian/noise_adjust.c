/* noise_adjust: prewhitening. Lines flagged IS_NOISE_MEASUREMENT are
 * gathered into the coil noise covariance C and kept out of the chain; from
 * the first other line on, every acquisition is multiplied by L^-1, where
 * L L^H = C (dwell_noise / dwell_line): noise power grows with bandwidth,
 * i.e. with the inverse dwell time, so the covariance is rescaled to each
 * line's dwell time. The channels then carry unit-variance, uncorrelated
 * noise. A scan often brings few noise samples for its channels (one line
 * of 256 for 32 coils): the sample covariance is then shrunk towards a
 * multiple of the identity by the Ledoit-Wolf rule, so that estimation
 * noise is not mistaken for coil coupling (with plenty of samples the
 * shrinkage vanishes). Streams without noise lines pass unchanged; noise
 * lines arriving after imaging data are dropped (the whitening is fixed).
 * Noise lines with no samples or no channels (Pulseq-based tools write
 * them) are skipped and counted; the client gets one TEXT warning with the
 * count at the end of the stream.
 *
 * Noise kept across connections (noise_store.h): with "store", the noise
 * gathered by a session (a noise-only scan: Gadgetron's
 * default_measurement_dependencies.xml) is stored at its end under the
 * header's measurementID. A scan that brings no noise lines of its own but
 * whose header names a Noise measurementDependency uses the stored one
 * ("use_stored"): its channel count must match (else a TEXT warning, and
 * no prewhitening), and its dwell time is scaled like the scan's own. The
 * images' meta says which noise whitened them (image_out: NoiseSource).
 *
 * Two places in a chain: before accumulate it whitens line by line on the
 * CPU; after accumulate (the installed configs: accumulate passes the noise
 * lines on first) it whitens whole k-space buffers, calibration part
 * included: on the "device" as one matrix product when the buffer is there
 * or goes on to a gadget that works on device data (handoff.h), else on the
 * CPU in place, one product per run of consecutive sampled lines (the
 * calibration part's likewise). The two give the same samples. On the device the
 * calibration part's sampled lines go up too, are whitened there in one
 * product and come back (it stays on the host, where grappa calibrates):
 * the CPU does no per-line work for a GPU session. */
#include <complex.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "buf.h"
#include "gadget.h"
#include "handoff.h"
#include "kspace.h"
#include "noise_store.h"
#include "placement.h"

typedef struct noise_adjust {
  mr_noise_stats noise;    /* the noise lines' sums (or a stored noise's) */
  int store;               /* parameter: store the noise at the end */
  int use_stored;          /* parameter: use the header's Noise dependency */
  char dependency[128];    /* its measurement id, "" when none */
  int started;             /* an imaging line came: the covariance is final */
  int have_white;
  float white_dwell_us;    /* the dwell time `white` was made for */
  float complex *white;    /* [nch][nch] row-major lower: L^-1 */
  struct mr_buf *white_dev; /* the same on the GPU (s->gpu.dev), or NULL */
  int white_dev_stale;      /* white changed since white_dev was filled */
  int device, fallback;
  mr_placement gpu;        /* k-space buffers: the "device" parameter */
  int on_device;           /* the k-space's next consumer takes device data */
  size_t empty_noise;      /* noise lines skipped for having no samples */
  mr_placement place;      /* the CPU: one line is too little for a GPU */
} noise_adjust;

static const mr_param params[] = {
    MR_PARAM_BOOL(noise_adjust, store, "store", "false",
        "store the noise lines' statistics at the end of the stream under the header's "
        "measurementID (needs --state-dir): a noise-only scan others name as their dependency"),
    MR_PARAM_BOOL(noise_adjust, use_stored, "use_stored", "true",
        "a scan without noise lines whose header names a Noise measurementDependency is "
        "prewhitened with the stored noise of that measurement"),
    MR_PLACEMENT_PARAMS(noise_adjust),
};

static void accumulate_noise(mr_noise_stats *s, const mr_acquisition *a) {
  size_t ns = a->head.number_of_samples;
  int n = s->nch;
  for (size_t t = 0; t < ns; t++) {
    double norm2 = 0;
    for (int i = 0; i < n; i++) {
      double complex xi = a->data[(size_t)i * ns + t];
      norm2 += creal(xi * conj(xi));
      for (int j = 0; j <= i; j++)
        s->cov[i * n + j] += xi * conj((double complex)a->data[(size_t)j * ns + t]);
    }
    s->fourth += norm2 * norm2;
  }
  s->samples += ns;
}

/* The Ledoit-Wolf shrinkage intensity of the sample covariance S = cov / N
 * towards mu I, mu = trace(S) / n: the estimated sampling error of S,
 * sum_t |x_t x_t^H - S|_F^2 / N^2 = (sum_t |x_t|^4 - N |S|_F^2) / N^2,
 * over its distance from mu I, capped at 1. */
static double shrinkage(const mr_noise_stats *s, double *mu) {
  int n = s->nch;
  double N = (double)s->samples, trace = 0, frob = 0;
  for (int i = 0; i < n; i++) {
    trace += creal(s->cov[i * n + i]) / N;
    for (int j = 0; j <= i; j++) {
      double complex v = s->cov[i * n + j] / N;
      frob += (i == j ? 1 : 2) * creal(v * conj(v));
    }
  }
  *mu = trace / n;
  double distance = frob - 2 * *mu * trace + *mu * *mu * n; /* |S - mu I|_F^2 */
  double error = (s->fourth - N * frob) / (N * N);
  if (!(distance > 0))
    return 1;
  double a = error / distance;
  return a < 0 ? 0 : a > 1 ? 1 : a;
}

/* white = L^-1 with L L^H = C * scale, C the shrunk sample covariance. */
static int make_whitening(noise_adjust *g, mr_gadget_ctx *ctx, double scale) {
  const mr_noise_stats *s = &g->noise;
  int n = s->nch;
  double mu, alpha = shrinkage(s, &mu);
  double norm = (1 - alpha) * scale / (double)s->samples, ridge = alpha * mu * scale;
  double complex *l = calloc((size_t)n * n, sizeof *l);
  if (l == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for the noise covariance");
  for (int j = 0; j < n; j++) {
    double d = creal(s->cov[j * n + j]) * norm + ridge;
    if (!(creal(s->cov[j * n + j]) > 1e-6 * mu * (double)s->samples))
      d = 0; /* a dead channel: shrinkage must not hide it */
    for (int k = 0; k < j; k++)
      d -= creal(l[j * n + k] * conj(l[j * n + k]));
    if (!(d > 0)) {
      free(l);
      return mr_gadget_fail(ctx, MR_EDATA,
                            "the noise covariance of %llu noise samples is not positive definite "
                            "(channel %d has no noise of its own): cannot prewhiten",
                            (unsigned long long)s->samples, j);
    }
    l[j * n + j] = sqrt(d);
    for (int i = j + 1; i < n; i++) {
      double complex v = s->cov[i * n + j] * norm;
      for (int k = 0; k < j; k++)
        v -= l[i * n + k] * conj(l[j * n + k]);
      l[i * n + j] = v / creal(l[j * n + j]);
    }
  }
  /* Invert the lower triangle column by column: L X = I. */
  for (int c = 0; c < n; c++)
    for (int i = 0; i < n; i++) {
      double complex v = i == c ? 1 : 0;
      if (i < c) {
        g->white[i * n + c] = 0;
        continue;
      }
      for (int k = c; k < i; k++)
        v -= l[i * n + k] * g->white[k * n + c];
      g->white[i * n + c] = (float complex)(v / creal(l[i * n + i]));
    }
  free(l);
  return 0;
}

/* `white` for lines of this dwell time. */
static int whitening_for(noise_adjust *s, mr_gadget_ctx *ctx, float dwell_us) {
  if (s->have_white && s->white_dwell_us == dwell_us)
    return 0;
  float noise_dwell_us = s->noise.dwell_us;
  double scale = noise_dwell_us > 0 && dwell_us > 0 ? (double)noise_dwell_us / dwell_us : 1.0;
  int rc = make_whitening(s, ctx, scale);
  if (rc < 0)
    return rc;
  s->have_white = 1;
  s->white_dwell_us = dwell_us;
  s->white_dev_stale = 1;
  return 0;
}

static int whiten(noise_adjust *s, mr_gadget_ctx *ctx, mr_acquisition *a, mr_err *err) {
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  if (h->active_channels != s->noise.nch)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has %u channels, the noise lines had %d",
                          h->scan_counter, h->active_channels, s->noise.nch);
  if (a->data == NULL)
    return mr_gadget_fail(ctx, MR_EDATA, "acquisition %u carries no samples to prewhiten",
                          h->scan_counter);
  int rc = whitening_for(s, ctx, h->sample_time_us);
  if (rc < 0)
    return rc;
  /* The line as a column-major samples x channels matrix X; `white`
   * read column-major is (L^-1)^T, so the whitened line is X (L^-1)^T. */
  int ns = h->number_of_samples, n = s->noise.nch;
  float complex *y = malloc((size_t)ns * (size_t)n * sizeof *y);
  if (y == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory prewhitening a line");
  mr_cmat x = {a->data, ns, n, ns, 0}, w = {s->white, n, n, n, 0}, out = {y, ns, n, ns, 0};
  rc = mr_blas_gemm(s->place.dev, MR_BLAS_N, MR_BLAS_N, 1, x, w, 0, out, 1, err);
  if (rc < 0) {
    free(y);
    return mr_gadget_fail(ctx, rc, "prewhitening: %s", mr_err_text(err, rc));
  }
  free(a->data);
  a->data = y;
  return 0;
}

typedef struct whiten_job {
  noise_adjust *s;
  mr_kspace *k;
} whiten_job;

/* L^-1 on dev: uploaded when it changed, else the copy from before. */
static int white_on(noise_adjust *s, mr_device *dev, const mr_buf **out, mr_err *err) {
  size_t bytes = (size_t)s->noise.nch * s->noise.nch * sizeof(mr_cfloat);
  if (s->white_dev != NULL && mr_buf_device(s->white_dev) != dev) {
    mr_buf_destroy(s->white_dev);
    s->white_dev = NULL;
  }
  int rc = 0;
  if (s->white_dev == NULL) {
    if ((rc = mr_buf_create(dev, bytes, &s->white_dev, err)) < 0) {
      s->white_dev = NULL;
      return rc;
    }
    s->white_dev_stale = 1;
  }
  if (s->white_dev_stale && (rc = mr_buf_upload(s->white_dev, 0, s->white, bytes, err)) < 0)
    return rc;
  s->white_dev_stale = 0;
  *out = s->white_dev;
  return 0;
}

/* Whitens the sampled lines of c (host memory) on dev (a GPU, or the CPU):
 * gathered into one (lines x readout) x channels matrix, one product, and
 * back into place. A failure leaves c unchanged unless the copy back
 * failed. */
static int whiten_sampled_on(noise_adjust *s, mr_device *dev, mr_kspace *c, const mr_buf *w,
                             mr_err *err) {
  int n = s->noise.nch;
  size_t m;
  mr_buf *x = NULL, *y = NULL;
  int rc = mr_kspace_gather_sampled(c, dev, &x, &m, err);
  if (rc < 0 || x == NULL)
    return rc;
  int points = (int)(m * c->nro);
  if ((rc = mr_buf_create(dev, mr_buf_size(x), &y, err)) == 0) {
    mr_cmat xm = {mr_buf_data(x), points, n, points, 0}, wm = {mr_buf_data(w), n, n, n, 0};
    mr_cmat ym = {mr_buf_data(y), points, n, points, 0};
    rc = mr_blas_gemm(dev, MR_BLAS_N, MR_BLAS_N, 1, xm, wm, 0, ym, 1, err);
  }
  if (rc == 0)
    rc = mr_kspace_scatter_sampled(c, y, err);
  mr_buf_destroy(x);
  mr_buf_destroy(y);
  return rc;
}

/* Whitens the sampled lines of k (host memory) on the CPU, in place. A run
 * of consecutive sampled lines is, in every channel, one stretch of
 * samples: the runs' rows of the (samples x channels) matrix the buffer is
 * (leading dimension: a channel's size) are multiplied where they lie by
 * `white` read column-major, (L^-1)^T, upper triangular: a triangular
 * product in place, in pieces spread over the CPU threads
 * (mr_blas_trmm_rows_host). No gathered copy and no fresh output per
 * slice: those were two new 10 MB buffers per slice of 32 coils, all of it
 * page faults; and one product and copy per run on the stage's thread
 * kept 15 of 16 threads idle between a slice's 80 small products. */
static int whiten_runs(noise_adjust *s, mr_kspace *k, mr_err *err) {
  int n = s->noise.nch;
  size_t lines = k->ne1 * k->ne2, nruns = 0;
  size_t *runs = malloc((lines / 2 + 1) * 2 * sizeof *runs);
  if (runs == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory for prewhitening");
  for (size_t l = 0; l < lines;) {
    if (!k->sampled[l]) {
      l++;
      continue;
    }
    size_t end = l;
    while (end < lines && k->sampled[end])
      end++;
    runs[2 * nruns] = l * k->nro;
    runs[2 * nruns++ + 1] = end * k->nro;
    l = end;
  }
  int points = (int)mr_kspace_channel_size(k);
  mr_cmat x = {k->data, points, n, points, 0}, w = {s->white, n, n, n, 0};
  int rc = mr_blas_trmm_rows_host(s->place.dev, x, w, runs, nruns, err);
  free(runs);
  return rc;
}

/* Whitens k (host memory) and its calibration part on the CPU. */
static int whiten_host(noise_adjust *s, mr_kspace *k, mr_err *err) {
  int rc = whiten_runs(s, k, err);
  if (rc == 0 && k->calib != NULL)
    rc = whiten_runs(s, k->calib, err);
  return rc;
}

/* The whole buffer as one (points x channels) times (channels x channels)
 * product on dev, into a new buffer that replaces the old one; the
 * calibration part on dev too, before (its failure leaves k as it was). */
static int whiten_batch_task(mr_device *dev, void *arg, mr_err *err) {
  whiten_job *j = arg;
  mr_kspace *k = j->k;
  int n = j->s->noise.nch;
  size_t points = mr_kspace_channel_size(k);
  mr_err e = {0};
  mr_cfloat *x = mr_kspace_on(k, dev, &e);
  if (x == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
  const mr_buf *w = NULL;
  mr_buf *y = NULL;
  int rc = white_on(j->s, dev, &w, err);
  if (rc == 0)
    rc = mr_buf_create(dev, points * (size_t)n * sizeof(mr_cfloat) + 1, &y, err);
  if (rc == 0) {
    mr_cmat xm = {x, (int)points, n, (int)points, 0};
    mr_cmat wm = {mr_buf_data(w), n, n, n, 0}, ym = {mr_buf_data(y), (int)points, n, (int)points, 0};
    rc = mr_blas_gemm(dev, MR_BLAS_N, MR_BLAS_N, 1, xm, wm, 0, ym, 1, err);
  }
  if (rc == 0 && k->calib != NULL)
    rc = whiten_sampled_on(j->s, dev, k->calib, w, err);
  if (rc < 0) {
    mr_buf_destroy(y);
    return rc;
  }
  mr_buf_destroy(k->dev); /* stream-ordered: after the product read it */
  k->dev = y;
  mr_kspace_changed_on(k, dev);
  return 0;
}

static int run_batch(mr_device *dev, void *arg, mr_err *err) {
  whiten_job *j = arg;
  if (mr_device_is_gpu(dev))
    return mr_device_run(dev, whiten_batch_task, arg, err);
  /* The GPU ran out of memory: the CPU whitens. */
  mr_err e = {0};
  if (mr_kspace_host(j->k, &e) == NULL)
    return mr_err_set(err, e.code ? e.code : MR_ENOMEM, "%s", mr_err_text(&e, MR_ENOMEM));
  mr_kspace_changed_on(j->k, dev);
  return whiten_host(j->s, j->k, err);
}

static int whiten_kspace(noise_adjust *s, mr_gadget_ctx *ctx, mr_kspace *k, mr_err *err) {
  if (k->nch != (size_t)s->noise.nch)
    return mr_gadget_fail(ctx, MR_EDATA, "k-space of slice %u has %zu channels, the noise "
                          "lines had %d", k->ref.idx.slice, k->nch, s->noise.nch);
  int rc = whitening_for(s, ctx, k->ref.sample_time_us);
  if (rc < 0)
    return rc;
  mr_device *dev = s->gpu.dev;
  size_t points = mr_kspace_channel_size(k);
  if (points > INT_MAX)
    return mr_gadget_fail(ctx, MR_ENOTSUP, "k-space of %zu samples per channel: at most %d "
                          "can be prewhitened", points, INT_MAX);
  whiten_job job = {s, k};
  if (k->calib != NULL && k->calib->data == NULL) {
    mr_err e = {0};
    if (mr_kspace_host(k->calib, &e) == NULL)
      return mr_gadget_fail(ctx, e.code, "%s", e.msg);
  }
  if (mr_device_is_gpu(dev) && k->traj == NULL &&
      (s->on_device || (k->dev != NULL && mr_buf_device(k->dev) == dev))) {
    if ((rc = mr_placement_run(&s->gpu, ctx, run_batch, &job)) < 0)
      return rc;
    if (!s->on_device) {
      mr_err e = {0};
      if (mr_kspace_host(k, &e) == NULL)
        return mr_gadget_fail(ctx, e.code, "%s", e.msg);
      mr_kspace_changed_on(k, s->place.dev);
    }
  } else {
    mr_err e = {0};
    if (mr_kspace_host(k, &e) == NULL)
      return mr_gadget_fail(ctx, e.code, "%s", e.msg);
    mr_kspace_changed_on(k, s->place.dev);
    if ((rc = whiten_host(s, k, err)) < 0)
      return mr_gadget_fail(ctx, rc, "prewhitening: %s", mr_err_text(err, rc));
  }
  return 0;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  noise_adjust *s = state;
  s->on_device = mr_handoff_on_device(ctx, MR_MSG_KSPACE);
  for (int i = 0; s->use_stored && i < ctx->hdr->ndependencies; i++)
    if (strcmp(ctx->hdr->dependencies[i].type, "Noise") == 0)
      snprintf(s->dependency, sizeof s->dependency, "%s", ctx->hdr->dependencies[i].measurement_id);
  int rc = mr_placement_acquire(&s->place, ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE);
  return rc < 0 ? rc : mr_placement_acquire(&s->gpu, ctx, s->device, s->fallback);
}

static void destroy(void *state) {
  noise_adjust *s = state;
  mr_noise_stats_free(&s->noise);
  free(s->white);
  mr_buf_destroy(s->white_dev);
  mr_placement_release(&s->place);
  mr_placement_release(&s->gpu);
}

static int warn(mr_gadget_ctx *ctx, mr_emit *out, const char *what) {
  char text[700];
  int n = snprintf(text, sizeof text, "WARNING: %s: %s", ctx->gadget, what);
  mr_message *m = mr_message_new_text(MR_MSG_TEXT, text, (size_t)n < sizeof text ? (size_t)n
                                                                                  : sizeof text - 1);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

/* The stored noise the header names, for a scan without noise lines of its
 * own and nch channels; a warning (and no prewhitening) when it is missing
 * or does not fit. */
static int adopt_stored(noise_adjust *s, mr_gadget_ctx *ctx, mr_emit *out, size_t nch) {
  mr_err e = {0};
  char what[sizeof e.msg + 64];
  mr_noise_stats stored;
  int rc = mr_noise_store_load(s->dependency, &stored, &e);
  if (rc == MR_ENOMEM)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  if (rc < 0) {
    snprintf(what, sizeof what, "%s: no prewhitening", e.msg);
    return warn(ctx, out, what);
  }
  if ((size_t)stored.nch != nch) {
    snprintf(what, sizeof what,
             "stored noise measurement '%s' has %d channels, the scan %zu: no prewhitening",
             s->dependency, stored.nch, nch);
    mr_noise_stats_free(&stored);
    return warn(ctx, out, what);
  }
  s->noise = stored;
  snprintf(ctx->notes->noise, sizeof ctx->notes->noise, "%s", s->dependency);
  return 0;
}

/* The first imaging data (nch channels): the noise is final from here on. */
static int start_imaging(noise_adjust *s, mr_gadget_ctx *ctx, mr_emit *out, size_t nch) {
  s->started = 1;
  int rc = 0;
  if (s->noise.samples > 0)
    snprintf(ctx->notes->noise, sizeof ctx->notes->noise, "scan");
  else if (s->dependency[0] != '\0' && (rc = adopt_stored(s, ctx, out, nch)) < 0)
    return rc;
  if (s->noise.samples == 0)
    return 0;
  int n = s->noise.nch;
  if ((s->white = malloc((size_t)n * (size_t)n * sizeof *s->white)) == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for a %d-channel whitening", n);
  return 0;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  noise_adjust *s = state;
  int rc = 0;
  if (msg->kind == MR_MSG_KSPACE) {
    mr_kspace *k = msg->u.object.ptr;
    mr_err e = {0};
    if (!s->started)
      rc = start_imaging(s, ctx, out, k->nch);
    if (rc == 0 && s->noise.samples > 0)
      rc = whiten_kspace(s, ctx, k, &e);
    else if (rc == 0 && (rc = mr_kspace_hand_on(k, s->on_device, &e)) < 0)
      rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    return rc < 0 ? rc : mr_emit_message(out, mr_message_ref(msg));
  }
  mr_acquisition *a = &msg->u.acq;
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  if (!(h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT))) {
    if (!s->started)
      rc = start_imaging(s, ctx, out, h->active_channels);
    mr_err e = {0};
    if (rc == 0 && s->noise.samples > 0)
      rc = whiten(s, ctx, a, &e);
    return rc < 0 ? rc : mr_emit_message(out, mr_message_ref(msg));
  }
  if (h->number_of_samples == 0 || h->active_channels == 0 || a->data == NULL) {
    s->empty_noise++;
  } else if (!s->started) {
    if (s->noise.nch == 0) {
      rc = mr_noise_stats_init(&s->noise, h->active_channels, h->sample_time_us);
      if (rc == MR_EINVAL)
        rc = mr_gadget_fail(ctx, rc, "noise line %u has %u channels: at most %d are handled",
                            h->scan_counter, h->active_channels, MR_NOISE_MAX_CHANNELS);
      else if (rc < 0)
        rc = mr_gadget_fail(ctx, rc, "out of memory for a %u-channel noise covariance",
                            h->active_channels);
    } else if (h->active_channels != s->noise.nch)
      rc = mr_gadget_fail(ctx, MR_EDATA, "noise line %u has %u channels, earlier ones had %d",
                          h->scan_counter, h->active_channels, s->noise.nch);
    if (rc == 0)
      accumulate_noise(&s->noise, a);
  }
  return rc;
}

/* "store": the noise of this stream, under its header's measurementID. */
static int store_noise(noise_adjust *s, mr_gadget_ctx *ctx, mr_emit *out) {
  if (ctx->hdr == NULL)
    return 0; /* a header-less run (docs/protocol.md rule 6): nothing came */
  if (s->noise.samples == 0)
    return warn(ctx, out, "the stream had no noise lines: nothing stored");
  if (ctx->hdr->measurement_id[0] == '\0')
    return mr_gadget_fail(ctx, MR_EDATA, "the header names no measurementInformation/"
                                         "measurementID to store the noise under");
  mr_err e = {0};
  int rc = mr_noise_store_save(ctx->hdr->measurement_id, &s->noise, &e);
  return rc < 0 ? mr_gadget_fail(ctx, rc, "%s", e.msg) : 0;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  noise_adjust *s = state;
  int rc = s->store ? store_noise(s, ctx, out) : 0;
  return rc < 0 ? rc : mr_emit_empty_noise_warning(ctx, out, s->empty_noise);
}

const mr_gadget_class mr_gadget_noise_adjust = {
    .name = "noise_adjust",
    .summary = "prewhitening: coil noise covariance from the noise lines, or a stored noise "
               "measurement the header names (dwell-time scaled), L^-1 applied to every later "
               "line; noise lines are not passed on; optionally stores the noise",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(noise_adjust),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_KSPACE) |
                MR_KIND_BIT(MR_MSG_TEXT),
    .device_input = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
