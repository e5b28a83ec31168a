/* Internal: the device steps of espirit.c, CPU and CUDA. */
#ifndef MR_GPU_ESPIRIT_IMPL_H
#define MR_GPU_ESPIRIT_IMPL_H

#include "espirit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies the box of size[0] x size[1] x size[2] samples at origin of each of
 * ncoils arrays of src (element (x, y, z) of coil c at src[c * stride[3] +
 * x * stride[0] + y * stride[1] + z * stride[2]]) into out, compact
 * [coil][z][y][x]. */
int mr_espirit_cpu_extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                           const size_t origin[3], const size_t size[3], size_t ncoils,
                           mr_cfloat *out);
int mr_espirit_cuda_extract(mr_device *dev, const mr_cfloat *src, const size_t stride[4],
                            const size_t origin[3], const size_t size[3], size_t ncoils,
                            mr_cfloat *out);

/* The plane's kernel geometry: kernel ku x kv, coils nc; the projector's
 * index of coil c, patch offset (pu, pv) is (c kv + pv) ku + pu. */
typedef struct mr_espirit_geom {
  int ku, kv;
  size_t nc;
  size_t nu, nv; /* the image plane */
} mr_espirit_geom;

/* The conjugated calibration matrices of count slices, each m x N
 * (column-major; m = (cu - ku + 1)(cv - kv + 1) patches, N = ku kv nc):
 * slice s's a[q + col m] = conj(cal[s][c][qv + pv][qu + pu]) for patch
 * q = qv (cu - ku + 1) + qu and col = (c kv + pv) ku + pu, from cal
 * [slice][coil][cv][cu]. The rows of conj(A) are conjugated patches, so its
 * right singular vectors are conj(V), the projector's factor as the lags
 * want it. */
int mr_espirit_cpu_calmat(mr_device *dev, const mr_cfloat *cal, size_t cu, size_t cv,
                          const mr_espirit_geom *g, size_t count, mr_cfloat *a);
int mr_espirit_cuda_calmat(mr_device *dev, const mr_cfloat *cal, size_t cu, size_t cv,
                           const mr_espirit_geom *g, size_t count, mr_cfloat *a);

/* Coil pairs i <= j, packed row by row. */
static inline size_t mr_espirit_pair(size_t i, size_t j, size_t nc) {
  return i * (2 * nc + 1 - i) / 2 + (j - i);
}

/* From the projector p (N x N, column-major, N = ku kv nc) onto the kept
 * kernels, each coil pair's sum over patch offsets of p at each lag,
 * times scale, written into grid [pair][nv][nu] at (nu/2 + du, nv/2 + dv),
 * everything else zero: G's coefficients, for one backward transform. */
int mr_espirit_cpu_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g,
                        float scale, mr_cfloat *grid);
int mr_espirit_cuda_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g,
                         float scale, mr_cfloat *grid);

/* Where one plane's maps go: coil c's pixel (u, v) at
 * maps[c * cstride + u * ustride + v * vstride]. */
typedef struct mr_espirit_out {
  mr_cfloat *maps;
  size_t ustride, vstride, cstride;
} mr_espirit_out;

/* Per pixel of the plane: G from grid (the packed upper triangle), its
 * dominant eigenvector by MR_ESPIRIT_POWER power iterations from G's
 * column of the largest diagonal element, zero where the Rayleigh quotient
 * is below crop, else its phase turned so that rot^H s is real and
 * positive (rot on dev). */
#define MR_ESPIRIT_POWER 30
int mr_espirit_cpu_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                         const mr_cfloat *rot, float crop, const mr_espirit_out *out);
int mr_espirit_cuda_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                          const mr_cfloat *rot, float crop, const mr_espirit_out *out);

#ifdef __cplusplus
}
#endif

#endif
