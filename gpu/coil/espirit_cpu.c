/* ESPIRiT's device steps on the CPU (espirit_impl.h). */
#include <complex.h>
#include <math.h>
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
                        float scale, mr_cfloat *grid) {
  (void)dev;
  size_t npix = g->nu * g->nv, N = (size_t)g->ku * (size_t)g->kv * g->nc;
  memset(grid, 0, g->nc * (g->nc + 1) / 2 * npix * sizeof *grid);
  for (size_t i = 0; i < g->nc; i++)
    for (size_t j = i; j < g->nc; j++) {
      mr_cfloat *out = grid + mr_espirit_pair(i, j, g->nc) * npix;
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
          size_t u = (size_t)((long)(g->nu / 2) + du), v = (size_t)((long)(g->nv / 2) + dv);
          out[v * g->nu + u] = sum * scale;
        }
    }
  return 0;
}

typedef struct eigen_job {
  const mr_cfloat *grid;
  const mr_espirit_geom *g;
  const mr_cfloat *rot;
  float crop;
  const mr_espirit_out *out;
} eigen_job;

static void eigen_range(void *arg, size_t begin, size_t end) {
  const eigen_job *e = arg;
  size_t nc = e->g->nc, npix = e->g->nu * e->g->nv;
  float complex G[MR_ESPIRIT_MAX_COILS * MR_ESPIRIT_MAX_COILS];
  float complex v[MR_ESPIRIT_MAX_COILS], w[MR_ESPIRIT_MAX_COILS];
  for (size_t px = begin; px < end; px++) {
    for (size_t i = 0; i < nc; i++)
      for (size_t j = i; j < nc; j++) {
        float complex x = e->grid[mr_espirit_pair(i, j, nc) * npix + px];
        G[i * nc + j] = x;
        G[j * nc + i] = conjf(x);
      }
    size_t start = 0;
    for (size_t j = 1; j < nc; j++)
      if (crealf(G[j * nc + j]) > crealf(G[start * nc + start]))
        start = j;
    for (size_t i = 0; i < nc; i++)
      v[i] = G[i * nc + start];
    float lambda = 0;
    for (int it = 0; it <= MR_ESPIRIT_POWER; it++) {
      float norm = 0;
      for (size_t i = 0; i < nc; i++)
        norm += crealf(v[i]) * crealf(v[i]) + cimagf(v[i]) * cimagf(v[i]);
      norm = sqrtf(norm);
      if (!(norm > 0)) {
        lambda = 0;
        break;
      }
      for (size_t i = 0; i < nc; i++)
        v[i] /= norm;
      for (size_t i = 0; i < nc; i++) {
        float complex sum = 0;
        for (size_t j = 0; j < nc; j++)
          sum += G[i * nc + j] * v[j];
        w[i] = sum;
      }
      if (it == MR_ESPIRIT_POWER) { /* v unit: the Rayleigh quotient */
        lambda = 0;
        for (size_t i = 0; i < nc; i++)
          lambda += crealf(conjf(v[i]) * w[i]);
        break;
      }
      memcpy(v, w, nc * sizeof *v);
    }
    float complex z = 0;
    for (size_t i = 0; i < nc; i++)
      z += conjf(e->rot[i]) * v[i];
    float az = cabsf(z);
    float complex turn = az > 0 ? conjf(z) / az : 1;
    int keep = lambda >= e->crop;
    size_t u = px % e->g->nu, vv = px / e->g->nu;
    mr_cfloat *o = e->out->maps + u * e->out->ustride + vv * e->out->vstride;
    for (size_t i = 0; i < nc; i++)
      o[i * e->out->cstride] = keep ? v[i] * turn : 0;
  }
}

int mr_espirit_cpu_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                         const mr_cfloat *rot, float crop, const mr_espirit_out *out) {
  eigen_job e = {grid, g, rot, crop, out};
  mr_cpu_parallel_for(mr_device_threads(dev), g->nu * g->nv, 256, eigen_range, &e);
  return 0;
}
