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
 * count at the end of the stream. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "gadget.h"
#include "kspace.h"
#include "placement.h"

typedef struct noise_adjust {
  int nch;                 /* channels of the noise lines, 0 before the first */
  double complex *cov;     /* [nch][nch] lower triangle: sum of x x^H */
  double fourth;           /* sum of |x|^4 over samples (Ledoit-Wolf) */
  size_t samples;
  float noise_dwell_us;
  int started;             /* an imaging line came: the covariance is final */
  int have_white;
  float white_dwell_us;    /* the dwell time `white` was made for */
  float complex *white;    /* [nch][nch] row-major lower: L^-1 */
  size_t empty_noise;      /* noise lines skipped for having no samples */
  mr_placement place;      /* the CPU: one line is too little for a GPU */
} noise_adjust;

static void accumulate_noise(noise_adjust *s, const mr_acquisition *a) {
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
static double shrinkage(const noise_adjust *s, double *mu) {
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
static int make_whitening(noise_adjust *s, mr_gadget_ctx *ctx, double scale) {
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
                            "the noise covariance of %zu noise samples is not positive definite "
                            "(channel %d has no noise of its own): cannot prewhiten",
                            s->samples, j);
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
        s->white[i * n + c] = 0;
        continue;
      }
      for (int k = c; k < i; k++)
        v -= l[i * n + k] * s->white[k * n + c];
      s->white[i * n + c] = (float complex)(v / creal(l[i * n + i]));
    }
  free(l);
  return 0;
}

static int whiten(noise_adjust *s, mr_gadget_ctx *ctx, mr_acquisition *a) {
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  if (h->active_channels != s->nch)
    return mr_gadget_fail(ctx, MR_EDATA,
                          "acquisition %u has %u channels, the noise lines had %d",
                          h->scan_counter, h->active_channels, s->nch);
  if (a->data == NULL)
    return mr_gadget_fail(ctx, MR_EDATA, "acquisition %u carries no samples to prewhiten",
                          h->scan_counter);
  if (!s->have_white || s->white_dwell_us != h->sample_time_us) {
    double scale = s->noise_dwell_us > 0 && h->sample_time_us > 0
                       ? (double)s->noise_dwell_us / h->sample_time_us
                       : 1.0;
    int rc = make_whitening(s, ctx, scale);
    if (rc < 0)
      return rc;
    s->have_white = 1;
    s->white_dwell_us = h->sample_time_us;
  }
  /* The line as a column-major samples x channels matrix X; `white`
   * read column-major is (L^-1)^T, so the whitened line is X (L^-1)^T. */
  int ns = h->number_of_samples, n = s->nch;
  float complex *y = malloc((size_t)ns * (size_t)n * sizeof *y);
  if (y == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory prewhitening a line");
  mr_cmat x = {a->data, ns, n, ns, 0}, w = {s->white, n, n, n, 0}, out = {y, ns, n, ns, 0};
  int rc = mr_blas_gemm(s->place.dev, MR_BLAS_N, MR_BLAS_N, 1, x, w, 0, out, 1);
  if (rc < 0) {
    free(y);
    return mr_gadget_fail(ctx, rc, "prewhitening: %s", mr_device_last_error());
  }
  free(a->data);
  a->data = y;
  return 0;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  noise_adjust *s = state;
  return mr_placement_acquire(&s->place, ctx, MR_PARAM_DEVICE_CPU, MR_FALLBACK_NONE);
}

static void free_noise(noise_adjust *s) {
  free(s->cov);
  free(s->white);
  s->cov = NULL;
  s->white = NULL;
  s->nch = 0;
}

static void destroy(void *state) {
  noise_adjust *s = state;
  free_noise(s);
  mr_placement_release(&s->place);
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  noise_adjust *s = state;
  mr_acquisition *a = &msg->u.acq;
  const ISMRMRD_AcquisitionHeader *h = &a->head;
  int rc = 0;
  if (!(h->flags & MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT))) {
    s->started = 1;
    if (s->samples > 0 && (rc = whiten(s, ctx, a)) < 0) {
      mr_message_unref(msg);
      return rc;
    }
    return mr_emit_message(out, msg);
  }
  if (h->number_of_samples == 0 || h->active_channels == 0 || a->data == NULL) {
    s->empty_noise++;
  } else if (!s->started) {
    if (s->nch == 0) {
      int n = h->active_channels;
      s->cov = calloc((size_t)n * n, sizeof *s->cov);
      s->white = malloc((size_t)n * n * sizeof *s->white);
      if (s->cov == NULL || s->white == NULL) {
        free_noise(s);
        rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory for a %d-channel noise covariance", n);
      } else {
        s->nch = n;
        s->noise_dwell_us = h->sample_time_us;
      }
    } else if (h->active_channels != s->nch)
      rc = mr_gadget_fail(ctx, MR_EDATA, "noise line %u has %u channels, earlier ones had %d",
                          h->scan_counter, h->active_channels, s->nch);
    if (rc == 0)
      accumulate_noise(s, a);
  }
  mr_message_unref(msg);
  return rc;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  noise_adjust *s = state;
  return mr_emit_empty_noise_warning(ctx, out, s->empty_noise);
}

const mr_gadget_class mr_gadget_noise_adjust = {
    .name = "noise_adjust",
    .summary = "prewhitening: coil noise covariance from the noise lines (dwell-time scaled), "
               "L^-1 applied to every later line; noise lines are not passed on",
    .state_size = sizeof(noise_adjust),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_TEXT),
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
