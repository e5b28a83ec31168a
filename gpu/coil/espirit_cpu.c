/* ESPIRiT's device steps on the CPU (espirit_impl.h). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_threads.h"
#include "device_impl.h"
#include "espirit_impl.h"

int mr_espirit_cpu_extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                           const size_t origin[3], const size_t size[3], size_t ncoils,
                           mr_cfloat *out) {
  (void)dev;
  for (size_t c = 0; c < ncoils; c++)
    for (size_t z = 0; z < size[2]; z++)
      for (size_t y = 0; y < size[1]; y++)
        for (size_t x = 0; x < size[0]; x++)
          *out++ = src[c * stride[3] + (origin[0] + x) * stride[0] + (origin[1] + y) * stride[1] +
                       (origin[2] + z) * stride[2]];
  return 0;
}

int mr_espirit_cpu_calmat(mr_device *dev, const mr_cfloat *cal, size_t cu, size_t cv,
                          const mr_espirit_geom *g, size_t count, mr_cfloat *a) {
  (void)dev;
  size_t ku = (size_t)g->ku, kv = (size_t)g->kv, ru = cu - ku + 1, rv = cv - kv + 1;
  size_t m = ru * rv, N = ku * kv * g->nc;
  for (size_t s = 0; s < count; s++) {
    const mr_cfloat *d = cal + s * g->nc * cu * cv;
    mr_cfloat *as = a + s * m * N;
    for (size_t c = 0; c < g->nc; c++)
      for (size_t pv = 0; pv < kv; pv++)
        for (size_t pu = 0; pu < ku; pu++) {
          size_t col = (c * kv + pv) * ku + pu;
          for (size_t qv = 0; qv < rv; qv++)
            for (size_t qu = 0; qu < ru; qu++)
              as[qv * ru + qu + col * m] = conjf(d[(c * cv + qv + pv) * cu + qu + pu]);
        }
  }
  return 0;
}

int mr_espirit_cpu_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g,
                        float scale, mr_cfloat *lag) {
  (void)dev;
  size_t N = (size_t)g->ku * (size_t)g->kv * g->nc;
  size_t nlu = 2 * (size_t)g->ku - 1, nlv = 2 * (size_t)g->kv - 1;
  for (size_t i = 0; i < g->nc; i++)
    for (size_t j = i; j < g->nc; j++) {
      mr_cfloat *out = lag + mr_espirit_pair(i, j, g->nc) * nlu * nlv;
      for (int dv = 1 - g->kv; dv < g->kv; dv++)
        for (int du = 1 - g->ku; du < g->ku; du++) {
          float complex sum = 0;
          for (int pv = dv > 0 ? dv : 0; pv < g->kv && pv - dv < g->kv; pv++)
            for (int pu = du > 0 ? du : 0; pu < g->ku && pu - du < g->ku; pu++) {
              size_t r = (i * (size_t)g->kv + (size_t)pv) * (size_t)g->ku + (size_t)pu;
              size_t c = (j * (size_t)g->kv + (size_t)(pv - dv)) * (size_t)g->ku +
                         (size_t)(pu - du);
              sum += p[r + c * N];
            }
          out[(size_t)(dv + g->kv - 1) * nlu + (size_t)(du + g->ku - 1)] = sum * scale;
        }
    }
  return 0;
}

/* out [2 k - 1][n]: e^{+2 pi i d (x - n/2) / n} for lag d = 1 - k .. k - 1
 * and x < n. */
static void twiddles(int k, size_t n, float complex *out) {
  for (long d = 1 - k; d < k; d++)
    for (size_t x = 0; x < n; x++) {
      double a = 2 * M_PI * (double)mr_espirit_turn(d, x, n) / (double)n;
      *out++ = (float)cos(a) + I * (float)sin(a);
    }
}

typedef struct image_job {
  const mr_cfloat *lag;
  const mr_espirit_geom *g;
  mr_cfloat *row, *grid;
  const float complex *tu, *tv; /* the twiddles [2 ku - 1][nu], [2 kv - 1][nv] */
} image_job;

/* out [i][x] = sum over d < nd of a[i ai + d ad] b[d][x], for i < ni and
 * x < nx. */
static void product(const float complex *a, size_t ai, size_t ad, const float complex *b,
                    size_t ni, size_t nd, size_t nx, float complex *out) {
  for (size_t i = 0; i < ni; i++)
    for (size_t x = 0; x < nx; x++) {
      float complex sum = 0;
      for (size_t d = 0; d < nd; d++)
        sum += a[i * ai + d * ad] * b[d * nx + x];
      out[i * nx + x] = sum;
    }
}

/* Coil pairs [begin, end). */
static void image_range(void *arg, size_t begin, size_t end) {
  const image_job *e = arg;
  const mr_espirit_geom *g = e->g;
  size_t nlu = 2 * (size_t)g->ku - 1, nlv = 2 * (size_t)g->kv - 1, nu = g->nu, nv = g->nv;
  for (size_t pair = begin; pair < end; pair++) {
    const mr_cfloat *lag = e->lag + pair * nlv * nlu;
    mr_cfloat *row = e->row + pair * nlv * nu, *out = e->grid + pair * nu * nv;
    /* row [dv][u] = lag [dv][du] tu [du][u]; out [v][u] = tv [dv][v] row [dv][u] */
    product(lag, nlu, 1, e->tu, nlv, nlu, nu, row);
    product(e->tv, 1, nv, row, nv, nlv, nu, out);
  }
}

int mr_espirit_cpu_image(mr_device *dev, const mr_cfloat *lag, const mr_espirit_geom *g,
                         mr_cfloat *row, mr_cfloat *grid, mr_err *err) {
  size_t nlu = 2 * (size_t)g->ku - 1, nlv = 2 * (size_t)g->kv - 1;
  float complex *tu = malloc(nlu * g->nu * sizeof *tu), *tv = malloc(nlv * g->nv * sizeof *tv);
  if (tu == NULL || tv == NULL) {
    free(tu);
    free(tv);
    return mr_err_set(err, MR_ENOMEM, "espirit: out of memory");
  }
  twiddles(g->ku, g->nu, tu);
  twiddles(g->kv, g->nv, tv);
  image_job e = {lag, g, row, grid, tu, tv};
  mr_cpu_parallel_for(mr_device_threads(dev), g->nc * (g->nc + 1) / 2, 1, image_range, &e);
  free(tu);
  free(tv);
  return 0;
}

typedef struct eigen_job {
  const mr_cfloat *grid;
  const mr_espirit_geom *g;
  const mr_cfloat *rot;
  float crop;
  const mr_espirit_out *out;
  size_t run;
} eigen_job;

/* Normalises v (n values) in place; its norm before. */
static float normalise(float complex *v, size_t n) {
  float norm = 0;
  for (size_t i = 0; i < n; i++)
    norm += crealf(v[i]) * crealf(v[i]) + cimagf(v[i]) * cimagf(v[i]);
  norm = sqrtf(norm);
  for (size_t i = 0; norm > 0 && i < n; i++)
    v[i] /= norm;
  return norm;
}

/* G's dominant eigenpair by power iteration from v (unit; the eigenvector
 * out), espirit_impl.h's stopping rule; lambda, 0 where G v = 0. */
static float power(const float complex *G, size_t nc, float complex *v) {
  float complex w[MR_ESPIRIT_MAX_COILS];
  float lambda = 0;
  for (int it = 0; it < MR_ESPIRIT_POWER; it++) {
    for (size_t i = 0; i < nc; i++) {
      float complex sum = 0;
      for (size_t j = 0; j < nc; j++)
        sum += G[i * nc + j] * v[j];
      w[i] = sum;
    }
    lambda = 0;
    for (size_t i = 0; i < nc; i++)
      lambda += crealf(conjf(v[i]) * w[i]);
    float res = 0;
    for (size_t i = 0; i < nc; i++) {
      float complex r = w[i] - lambda * v[i];
      res += crealf(r) * crealf(r) + cimagf(r) * cimagf(r);
    }
    if (!(normalise(w, nc) > 0))
      return 0;
    memcpy(v, w, nc * sizeof *v);
    if (res <= MR_ESPIRIT_RESIDUAL * MR_ESPIRIT_RESIDUAL)
      break;
  }
  return lambda;
}

/* Pixels [begin, end) are runs [begin, end) of e->run pixels. */
static void eigen_range(void *arg, size_t begin, size_t end) {
  const eigen_job *e = arg;
  const mr_espirit_out *out = e->out;
  size_t nc = e->g->nc, npix = e->g->nu * e->g->nv;
  float complex G[MR_ESPIRIT_MAX_COILS * MR_ESPIRIT_MAX_COILS];
  float complex v[MR_ESPIRIT_MAX_COILS];
  for (size_t px = begin * e->run; px < end * e->run && px < npix; px++) {
    size_t u = px % e->g->nu, vv = px / e->g->nu, at = u * out->ustride + vv * out->vstride;
    /* v: the previous pixel's eigenvector (unit, or zero where G was) */
    int warm = px % e->run != 0 && normalise(v, nc) > 0;
    float trace = 0;
    for (size_t i = 0; i < nc; i++)
      for (size_t j = i; j < nc; j++) {
        float complex x = e->grid[mr_espirit_pair(i, j, nc) * npix + px];
        G[i * nc + j] = x;
        G[j * nc + i] = conjf(x);
      }
    for (size_t i = 0; i < nc; i++)
      trace += crealf(G[i * nc + i]);
    if (!warm && out->prior != NULL) {
      for (size_t i = 0; i < nc; i++)
        v[i] = out->prior[i * out->cstride + at];
      warm = normalise(v, nc) > 0;
    }
    if (!warm) {
      size_t start = 0;
      for (size_t j = 1; j < nc; j++)
        if (crealf(G[j * nc + j]) > crealf(G[start * nc + start]))
          start = j;
      for (size_t i = 0; i < nc; i++)
        v[i] = G[i * nc + start];
      normalise(v, nc);
    }
    float lambda = trace >= e->crop ? power(G, nc, v) : 0;
    float complex z = 0;
    for (size_t i = 0; i < nc; i++)
      z += conjf(e->rot[i]) * v[i];
    float az = cabsf(z);
    float complex turn = az > 0 ? conjf(z) / az : 1;
    int keep = lambda >= e->crop;
    for (size_t i = 0; i < nc; i++)
      out->maps[i * out->cstride + at] = keep ? v[i] * turn : 0;
  }
}

int mr_espirit_cpu_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                         const mr_cfloat *rot, float crop, const mr_espirit_out *out) {
  size_t run = mr_espirit_run(g->nc), runs = (g->nu * g->nv + run - 1) / run;
  eigen_job e = {grid, g, rot, crop, out, run};
  mr_cpu_parallel_for(mr_device_threads(dev), runs, 64, eigen_range, &e);
  return 0;
}
