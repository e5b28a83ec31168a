/* partial_fourier: completes a Cartesian k-space whose e1 lines stop short
 * of one edge (partial Fourier: part of one half of k-space not acquired)
 * by homodyne detection (Noll, Nishimura, Macovski 1991), where a chain
 * without it zero-fills. Per coil:
 *   - the lines both halves hold, [c - m, c + m] around the centre line
 *     c = ne1 / 2, give the phase: a Hann-windowed low-pass image;
 *   - the acquired lines are weighted by Noll's ramp H (0 to 2 across the
 *     symmetric part, H(c + d) + H(c - d) = 2; 2 beyond it, 0 where nothing
 *     was acquired), which stands in for the missing conjugate half;
 *   - the image of the weighted lines, its phase taken off, keeps its real
 *     part, and goes back to k-space, now complete, for fft.
 * The result is a real image per coil (the object's smooth phase removed,
 * for magnitude images; the sign is kept). A k-space sampled evenly about
 * its centre passes unchanged. Its FFTs run where "device" says (host
 * arrays, mr_fft_execute_host); the rest runs on the host. Partial Fourier
 * along e2 and an asymmetric echo (readout) stay zero-filled. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"
#include "gadget.h"
#include "kspace.h"
#include "placement.h"
#include "scratch.h"

/* Fewer lines than this on both sides of the centre make no phase. */
enum { MIN_SYMMETRIC = 4 };

typedef struct partial_fourier {
  int device, fallback;
  mr_placement place;
  mr_fft_plan *plan;    /* for the last shape and device */
  mr_scratch weighted;  /* the ramp-weighted coil images */
  mr_scratch lowpass;   /* the phase images */
} partial_fourier;

static const mr_param params[] = {
    MR_PLACEMENT_PARAMS(partial_fourier),
};

static int configure(void *state, mr_gadget_ctx *ctx) {
  partial_fourier *s = state;
  return mr_placement_acquire(&s->place, ctx, s->device, s->fallback);
}

typedef struct homodyne_job {
  partial_fourier *s;
  mr_kspace *k;
  const float *ramp, *window; /* [ne1] */
} homodyne_job;

static int run_homodyne(mr_device *dev, void *arg, mr_err *err) {
  homodyne_job *j = arg;
  mr_kspace *k = j->k;
  mr_fft_opts o = {.rank = k->ne2 > 1 ? 3 : 2, .dims = {k->nro, k->ne1, k->ne2},
                   .batch = k->nch};
  int rc = mr_fft_plan_keep(dev, &o, &j->s->plan, err);
  if (rc < 0)
    return rc;
  mr_cfloat *a = j->s->weighted.p, *p = j->s->lowpass.p;
  const mr_cfloat *data = (const mr_cfloat *)k->data;
  size_t lines = k->nch * k->ne2 * k->ne1;
  for (size_t l = 0; l < lines; l++) {
    size_t y = l % k->ne1;
    for (size_t x = 0; x < k->nro; x++) {
      mr_cfloat v = data[l * k->nro + x];
      a[l * k->nro + x] = v * j->ramp[y];
      p[l * k->nro + x] = v * j->window[y];
    }
  }
  if ((rc = mr_fft_execute_host(j->s->plan, MR_FFT_BACKWARD, a, a, err)) < 0 ||
      (rc = mr_fft_execute_host(j->s->plan, MR_FFT_BACKWARD, p, p, err)) < 0)
    return rc;
  /* Re(a e^{-i phase(p)}): the projection of a on p's direction. */
  size_t n = lines * k->nro;
  for (size_t i = 0; i < n; i++) {
    float mag = cabsf(p[i]);
    a[i] = mag > 0 ? crealf(a[i] * conjf(p[i])) / mag : 0.0f;
  }
  return mr_fft_execute_host(j->s->plan, MR_FFT_FORWARD, a, (mr_cfloat *)k->data, err);
}

/* The ramp and window for sampled lines [lo, hi] about centre c, the
 * longer side above it when up, below it otherwise; m lines both sides
 * hold. */
static void filters(size_t ne1, size_t c, size_t m, int up, float *ramp, float *window) {
  for (size_t y = 0; y < ne1; y++) {
    long d = up ? (long)y - (long)c : (long)c - (long)y; /* towards the longer side */
    if (d < -(long)m) {
      ramp[y] = 0;
      window[y] = 0;
    } else if (d <= (long)m) {
      ramp[y] = 1.0f + (float)d / (float)(m + 1);
      window[y] = 0.5f * (1.0f + cosf((float)M_PI * (float)d / (float)(m + 1)));
    } else {
      ramp[y] = 2;
      window[y] = 0;
    }
  }
  /* With an even ne1, line 0 (-ne1/2) is its own mirror (periodically):
   * it stands for itself. */
  if (ne1 % 2 == 0 && ramp[0] > 0)
    ramp[0] = 1;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  partial_fourier *s = state;
  mr_kspace *k = msg->u.object.ptr;
  float *ramp = NULL;
  mr_err e = {0};
  int rc = 0;
  if (k->traj != NULL) {
    rc = mr_gadget_fail(ctx, MR_EDATA, "got non-Cartesian k-space: partial Fourier needs "
                                       "Cartesian lines");
    goto done;
  }
  if ((rc = mr_kspace_hand_on(k, 0, &e)) < 0) { /* the samples on the host only */
    rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    goto done;
  }
  /* The acquired extent along e1, over every partition. */
  size_t lo = k->ne1, hi = 0, c = k->ne1 / 2;
  for (size_t z = 0; z < k->ne2; z++)
    for (size_t y = 0; y < k->ne1; y++)
      if (k->sampled[z * k->ne1 + y]) {
        lo = y < lo ? y : lo;
        hi = y > hi ? y : hi;
      }
  if (lo > c || hi < c) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "lines %zu to %zu of %zu leave out the k-space centre (line %zu): "
                        "nothing to estimate the phase from",
                        lo, hi, k->ne1, c);
    goto done;
  }
  size_t below = c - lo, above = hi - c, m = below < above ? below : above;
  size_t longer = below > above ? below : above;
  if (longer - m <= 1) /* even (an even ne1 has one line more below) */
    return mr_emit_message(out, mr_message_ref(msg));
  if (m < MIN_SYMMETRIC) {
    rc = mr_gadget_fail(ctx, MR_EDATA,
                        "lines %zu to %zu of %zu: %zu lines on the short side of the centre, "
                        "homodyne needs %d",
                        lo, hi, k->ne1, m, MIN_SYMMETRIC);
    goto done;
  }
  size_t bytes = k->nch * mr_kspace_channel_size(k) * sizeof(mr_cfloat);
  if ((rc = mr_scratch_grow(&s->weighted, bytes, "homodyne images", &e)) < 0 ||
      (rc = mr_scratch_grow(&s->lowpass, bytes, "homodyne phase", &e)) < 0) {
    rc = mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    goto done;
  }
  if ((ramp = malloc(2 * k->ne1 * sizeof *ramp)) == NULL) {
    rc = mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
    goto done;
  }
  filters(k->ne1, c, m, above > below, ramp, ramp + k->ne1);
  homodyne_job job = {s, k, ramp, ramp + k->ne1};
  if ((rc = mr_placement_run(&s->place, ctx, run_homodyne, &job)) < 0)
    goto done;
  free(ramp);
  memset(k->sampled, 1, k->ne1 * k->ne2);
  return mr_emit_message(out, mr_message_ref(msg));
done:
  free(ramp);
  return rc;
}

static void destroy(void *state) {
  partial_fourier *s = state;
  mr_fft_plan_destroy(s->plan);
  mr_scratch_free(&s->weighted);
  mr_scratch_free(&s->lowpass);
  mr_placement_release(&s->place);
}

const mr_gadget_class mr_gadget_partial_fourier = {
    .name = "partial_fourier",
    .summary = "completes partial Fourier k-space along e1 by homodyne detection (a real image "
               "per coil) where a chain without it zero-fills",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(partial_fourier),
    .accepts = MR_KIND_BIT(MR_MSG_KSPACE),
    .produces = MR_KIND_BIT(MR_MSG_KSPACE),
    .configure = configure,
    .process = process,
    .destroy = destroy,
};
