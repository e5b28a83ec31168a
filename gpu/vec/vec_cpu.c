#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "device_impl.h"
#include "error.h"
#include "vec_impl.h"

/* Samples per thread hand-out for the elementwise kinds. */
#define GRAIN 16384
/* Reductions sum fixed blocks of this many samples in double, then the
 * block sums in order: the result does not depend on the thread count. */
#define BLOCK 65536

static void elementwise(void *arg, size_t begin, size_t end) {
  const mr_vec_args *v = arg;
  const float complex *x = v->x, *y = v->y;
  float complex *out = v->out, a = v->alpha;
  switch (v->kind) {
  case MR_VEC_SCALE:
    for (size_t i = begin; i < end; i++)
      out[i] = a * out[i];
    break;
  case MR_VEC_AXPY:
    for (size_t i = begin; i < end; i++)
      out[i] += a * x[i];
    break;
  case MR_VEC_MUL:
    for (size_t i = begin; i < end; i++)
      out[i] = x[i] * y[i];
    break;
  case MR_VEC_CONJ_MUL:
    for (size_t i = begin; i < end; i++)
      out[i] = conjf(x[i]) * y[i];
    break;
  case MR_VEC_ABS:
    for (size_t i = begin; i < end; i++)
      v->fout[i] = cabsf(x[i]);
    break;
  case MR_VEC_COPY:
    memcpy(out + begin, x + begin, (end - begin) * sizeof *out);
    break;
  case MR_VEC_ZERO:
    memset(out + begin, 0, (end - begin) * sizeof *out);
    break;
  default:
    break;
  }
}

typedef struct reduction {
  const mr_vec_args *v;
  double complex *partial; /* one per block */
} reduction;

static void reduce_blocks(void *arg, size_t begin, size_t end) {
  const reduction *r = arg;
  const float complex *x = r->v->x, *y = r->v->y;
  for (size_t b = begin; b < end; b++) {
    size_t lo = b * BLOCK, hi = lo + BLOCK < r->v->n ? lo + BLOCK : r->v->n;
    double complex s = 0;
    if (r->v->kind == MR_VEC_SUMSQ) {
      double re = 0;
      for (size_t i = lo; i < hi; i++)
        re += (double)crealf(x[i]) * crealf(x[i]) + (double)cimagf(x[i]) * cimagf(x[i]);
      s = re;
    } else {
      for (size_t i = lo; i < hi; i++)
        s += (double complex)conjf(x[i]) * y[i];
    }
    r->partial[b] = s;
  }
}

int mr_vec_cpu_run(mr_device *dev, const mr_vec_args *v, mr_err *err) {
  mr_cpu_threads *threads = mr_device_threads(dev);
  if (v->kind != MR_VEC_SUMSQ && v->kind != MR_VEC_DOT) {
    mr_cpu_parallel_for(threads, v->n, GRAIN, elementwise, (void *)v);
    return 0;
  }
  size_t blocks = (v->n + BLOCK - 1) / BLOCK;
  reduction r = {.v = v, .partial = malloc(blocks * sizeof *r.partial)};
  if (r.partial == NULL)
    return mr_err_set(err, MR_ENOMEM, "vec: out of memory");
  mr_cpu_parallel_for(threads, blocks, 1, reduce_blocks, &r);
  double complex total = 0;
  for (size_t b = 0; b < blocks; b++)
    total += r.partial[b];
  free(r.partial);
  if (v->kind == MR_VEC_SUMSQ)
    *v->sum = creal(total);
  else
    *v->dot = (float complex)total;
  return 0;
}

typedef struct crop_job {
  const float complex *in;
  float complex *out;
  const size_t *in_dims, *at, *out_dims;
} crop_job;

/* Items are output rows (one y, z, batch each). */
static void crop_rows(void *arg, size_t begin, size_t end) {
  const crop_job *j = arg;
  const size_t *n = j->in_dims, *m = j->out_dims;
  for (size_t row = begin; row < end; row++) {
    size_t y = row % m[1], z = row / m[1] % m[2], b = row / m[1] / m[2];
    memcpy(j->out + row * m[0],
           j->in + ((b * n[2] + z + j->at[2]) * n[1] + y + j->at[1]) * n[0] + j->at[0],
           m[0] * sizeof *j->out);
  }
}

int mr_vec_cpu_crop(mr_device *dev, size_t batch, const mr_cfloat *in,
                    const size_t in_dims[3], const size_t at[3], mr_cfloat *out,
                    const size_t out_dims[3]) {
  crop_job j = {in, out, in_dims, at, out_dims};
  mr_cpu_parallel_for(mr_device_threads(dev), batch * out_dims[1] * out_dims[2],
                      GRAIN / out_dims[0] + 1, crop_rows, &j);
  return 0;
}
