#include <complex.h>
#include <math.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "tv_impl.h"

typedef struct tv_job {
  const mr_tv_shape *s;
  size_t n, stride[3];
  float t;
  int project;
  const float complex *u, *in, *ref;
  float complex *out;
} tv_job;

/* The neighbour of pixel i one step up (+1) or down (-1) axis a, periodic. */
static size_t neighbour(const tv_job *j, size_t i, int a, int up) {
  size_t len = j->s->dims[a], st = j->stride[a], pos = i / st % len;
  if (up)
    return pos + 1 == len ? i - pos * st : i + st;
  return pos == 0 ? i + (len - 1) * st : i - st;
}

/* Pixel i's frame along dims[2] and whether it has a predecessor and a
 * successor (the temporal differences are not periodic). */
static void frame_of(const tv_job *j, size_t i, int *has_prev, int *has_next) {
  size_t pos = i / j->stride[2];
  *has_prev = pos > 0;
  *has_next = pos + 1 < j->s->dims[2];
}

/* (w T^H p_t)[i]. */
static float complex temporal_adjoint(const tv_job *j, size_t i) {
  const float complex *p = j->in + (size_t)j->s->naxes * j->n;
  float w = j->s->weight;
  if (j->s->time == MR_TV_REFERENCE)
    return w * p[i];
  int prev, next;
  frame_of(j, i, &prev, &next);
  return w * ((prev ? p[i - j->stride[2]] : 0) - (next ? p[i] : 0));
}

static void primal_range(void *arg, size_t begin, size_t end) {
  const tv_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float complex div = 0; /* K^H p */
    for (int k = 0; k < j->s->naxes; k++) {
      const float complex *p = j->in + (size_t)k * j->n;
      div += p[neighbour(j, i, j->s->axis[k], 0)] - p[i];
    }
    if (j->s->time != MR_TV_SPATIAL)
      div += temporal_adjoint(j, i);
    j->out[i] = (j->u != NULL ? j->u[i] : 0) - j->t * div;
  }
}

static float norm2_of(float complex z) { return crealf(z) * crealf(z) + cimagf(z) * cimagf(z); }

/* p_t[i] += tau (w T x - c)[i], projected to unit magnitude. */
static void temporal_dual(const tv_job *j, size_t i) {
  float complex *p = j->out + (size_t)j->s->naxes * j->n, d;
  if (j->s->time == MR_TV_REFERENCE) {
    d = j->in[i] - (j->project && j->ref != NULL ? j->ref[i] : 0);
  } else {
    int prev, next;
    frame_of(j, i, &prev, &next);
    d = next ? j->in[i + j->stride[2]] - j->in[i] : 0;
  }
  p[i] += j->t * j->s->weight * d;
  float m2 = norm2_of(p[i]);
  if (j->project && m2 > 1)
    p[i] *= 1 / sqrtf(m2);
}

static void dual_range(void *arg, size_t begin, size_t end) {
  const tv_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float norm2 = 0;
    for (int k = 0; k < j->s->naxes; k++) {
      float complex *p = j->out + (size_t)k * j->n;
      p[i] += j->t * (j->in[neighbour(j, i, j->s->axis[k], 1)] - j->in[i]);
      norm2 += norm2_of(p[i]);
    }
    if (j->project && norm2 > 1) {
      float f = 1 / sqrtf(norm2);
      for (int k = 0; k < j->s->naxes; k++)
        j->out[(size_t)k * j->n + i] *= f;
    }
    if (j->s->time != MR_TV_SPATIAL)
      temporal_dual(j, i);
  }
}

static tv_job job(const mr_tv_shape *s) {
  tv_job j = {.s = s, .n = s->dims[0] * s->dims[1] * s->dims[2],
              .stride = {1, s->dims[0], s->dims[0] * s->dims[1]},
              .ref = (const float complex *)s->reference};
  return j;
}

int mr_tv_cpu_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                     const mr_cfloat *p, mr_cfloat *x) {
  tv_job j = job(s);
  j.t = t;
  j.u = u;
  j.in = p;
  j.out = x;
  mr_cpu_parallel_for(mr_device_threads(dev), j.n, 4096, primal_range, &j);
  return 0;
}

int mr_tv_cpu_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                   const mr_cfloat *x, mr_cfloat *p) {
  tv_job j = job(s);
  j.t = tau;
  j.project = project;
  j.in = x;
  j.out = p;
  mr_cpu_parallel_for(mr_device_threads(dev), j.n, 4096, dual_range, &j);
  return 0;
}
