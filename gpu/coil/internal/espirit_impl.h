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
                            mr_cfloat *out, mr_err *err);

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
                           const mr_espirit_geom *g, size_t count, mr_cfloat *a, mr_err *err);

/* Coil pairs i <= j, packed row by row. */
static inline size_t mr_espirit_pair(size_t i, size_t j, size_t nc) {
  return i * (2 * nc + 1 - i) / 2 + (j - i);
}

/* From the projector p (N x N, column-major, N = ku kv nc) onto the kept
 * kernels, each coil pair's sum over patch offsets of p at each lag
 * (du, dv), times scale: G's coefficients, into lag [pair][2 kv - 1][2 ku - 1]
 * (lag (du, dv) at [dv + kv - 1][du + ku - 1]). */
int mr_espirit_cpu_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g,
                        float scale, mr_cfloat *lag);
int mr_espirit_cuda_lags(mr_device *dev, const mr_cfloat *p, const mr_espirit_geom *g, float scale,
                         mr_cfloat *lag, mr_err *err);

/* G at every pixel from its lag coefficients: grid [pair][nv][nu] = sum over
 * lags of lag[pair][dv][du] e^{+2 pi i (du (u - nu/2) / nu + dv (v - nv/2) / nv)},
 * the centred inverse DFT of the zero-padded lags summed directly (the lags
 * are few: 11 x 11 for a 6 x 6 kernel), along u into row
 * [pair][2 kv - 1][nu], then along v. */
int mr_espirit_cpu_image(mr_device *dev, const mr_cfloat *lag, const mr_espirit_geom *g,
                         mr_cfloat *row, mr_cfloat *grid, mr_err *err);
int mr_espirit_cuda_image(mr_device *dev, const mr_cfloat *lag, const mr_espirit_geom *g,
                          mr_cfloat *row, mr_cfloat *grid, mr_err *err);

/* e^{+2 pi i d (x - n/2) / n} as the angle's fraction of a turn, m / n with
 * m in [0, n) (reduced exactly, in integers). */
#ifdef __CUDACC__
#define MR_ESPIRIT_FN __host__ __device__ inline
#else
#define MR_ESPIRIT_FN static inline
#endif
MR_ESPIRIT_FN long mr_espirit_turn(long d, size_t x, size_t n) {
  long m = d * ((long)x - (long)(n / 2)) % (long)n;
  return m < 0 ? m + (long)n : m;
}

/* Where one plane's maps go: coil c's pixel (u, v) at
 * maps[c * cstride + u * ustride + v * vstride]; prior, where not NULL, is
 * the previous x-slice's maps (same strides), the eigenvectors' warm start. */
typedef struct mr_espirit_out {
  mr_cfloat *maps;
  const mr_cfloat *prior;
  size_t ustride, vstride, cstride;
} mr_espirit_out;

/* Per pixel of the plane: G from grid (the packed upper triangle) and its
 * dominant eigenvector by power iteration, at most MR_ESPIRIT_POWER steps,
 * stopped once the residual |G v - lambda v| (lambda = v^H G v, v unit) is
 * at most MR_ESPIRIT_RESIDUAL, v then taken one step further. The start:
 * the previous pixel's eigenvector within a run of mr_espirit_run()
 * consecutive pixels (the maps are smooth; CPU and GPU cut the same runs,
 * so both take the same starts), for a run's first pixel prior's map there
 * where not zero, else G's column of the largest diagonal element. A pixel
 * whose trace(G) (>= its largest eigenvalue) is below crop is not iterated. The
 * map is zero where lambda is below crop, else its phase turned so that
 * rot^H s is real and positive (rot on dev). */
#define MR_ESPIRIT_POWER 30
#define MR_ESPIRIT_RESIDUAL 1e-4f

/* The pixels a run for nc coils: as many as one warp's share of shared
 * memory holds G for on the GPU (16.5 KiB: 4 at 32 coils, 1 at 64, at most 8). */
static inline size_t mr_espirit_run(size_t nc) {
  size_t run = 2112 / (nc * (nc + 1) / 2);
  return run < 1 ? 1 : run > 8 ? 8 : run;
}

int mr_espirit_cpu_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                         const mr_cfloat *rot, float crop, const mr_espirit_out *out);
int mr_espirit_cuda_eigen(mr_device *dev, const mr_cfloat *grid, const mr_espirit_geom *g,
                          const mr_cfloat *rot, float crop, const mr_espirit_out *out, mr_err *err);

#ifdef __cplusplus
}
#endif

#endif
