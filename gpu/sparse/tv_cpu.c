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
  const float complex *u, *in;
  float complex *out;
} tv_job;

/* The neighbour of pixel i one step up (+1) or down (-1) axis a, periodic. */
static size_t neighbour(const tv_job *j, size_t i, int a, int up) {
  size_t len = j->s->dims[a], st = j->stride[a], pos = i / st % len;
  if (up)
    return pos + 1 == len ? i - pos * st : i + st;
  return pos == 0 ? i + (len - 1) * st : i - st;
}

static void primal_range(void *arg, size_t begin, size_t end) {
  const tv_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float complex div = 0; /* D^H p */
    for (int k = 0; k < j->s->naxes; k++) {
      const float complex *p = j->in + (size_t)k * j->n;
      div += p[neighbour(j, i, j->s->axis[k], 0)] - p[i];
    }
    j->out[i] = (j->u != NULL ? j->u[i] : 0) - j->t * div;
  }
}

static void dual_range(void *arg, size_t begin, size_t end) {
  const tv_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float norm2 = 0;
    for (int k = 0; k < j->s->naxes; k++) {
      float complex *p = j->out + (size_t)k * j->n;
      p[i] += j->t * (j->in[neighbour(j, i, j->s->axis[k], 1)] - j->in[i]);
      norm2 += crealf(p[i]) * crealf(p[i]) + cimagf(p[i]) * cimagf(p[i]);
    }
    if (j->project && norm2 > 1) {
      float f = 1 / sqrtf(norm2);
      for (int k = 0; k < j->s->naxes; k++)
        j->out[(size_t)k * j->n + i] *= f;
    }
  }
}

static tv_job job(const mr_tv_shape *s) {
  tv_job j = {.s = s, .n = s->dims[0] * s->dims[1] * s->dims[2],
              .stride = {1, s->dims[0], s->dims[0] * s->dims[1]}};
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
