#include <stdint.h>
#include <stdlib.h>

#include "buf.h"
#include "error.h"
#include "prox.h"
#include "wavelet_impl.h"

/* Enough levels for any image a budget admits (each halves an axis). */
#define MAX_LEVELS 24

struct mr_wavelet {
  mr_device *dev;
  size_t dims[3];
  mr_wavelet_taps taps;
  int levels;
  size_t len[MAX_LEVELS + 1][3]; /* each level's region; len[levels] the coarse band */
  mr_buf *scratch;               /* one image */
  int small_from;                /* the first level done in shared memory */
  int by_plane;                  /* a GPU's 2D levels, one launch each (wavelet_impl.h) */
  mr_buf *scratch2;              /* by_plane: the low bands' second image */
};

/* Daubechies scaling filters (orthonormal: sum h = sqrt 2). */
static const double DB2[4] = {0.48296291314453414, 0.83651630373780772, 0.22414386804201339,
                              -0.12940952255126034};
static const double DB4[8] = {0.23037781330889650, 0.71484657055291540, 0.63088076792985890,
                              -0.02798376941685985, -0.18703481171909309, 0.03084138183556076,
                              0.03288301166688519, -0.01059740178506903};

static int set_taps(mr_wavelet_filter filter, mr_wavelet_taps *t, mr_err *err) {
  const double *h = filter == MR_WAVELET_DB2 ? DB2 : filter == MR_WAVELET_DB4 ? DB4 : NULL;
  if (h == NULL)
    return mr_err_set(err, MR_EINVAL, "wavelet: unknown filter %d", (int)filter);
  t->taps = filter == MR_WAVELET_DB2 ? 4 : 8;
  for (int k = 0; k < t->taps; k++)
    t->h[k] = (float)h[k];
  return 0;
}

/* Whether axis d of a region of length n is halved at the next level. */
static int halves(size_t n, int taps) { return n % 2 == 0 && n >= 2 * (size_t)taps; }

/* The first level a GPU does in shared memory (wavelet_impl.h); levels
 * past the last on the CPU. */
static int first_small(const mr_wavelet *w) {
  if (!mr_device_is_gpu(w->dev))
    return w->levels;
  for (int l = 0; l < w->levels; l++)
    if (w->len[l][0] * w->len[l][1] * w->len[l][2] <= MR_WAVELET_SMALL &&
        w->levels - l <= MR_WAVELET_MAX_SMALL_LEVELS)
      return l;
  return w->levels;
}

int mr_wavelet_create(mr_device *dev, const size_t dims[3], mr_wavelet_filter filter,
                      mr_wavelet **out, mr_err *err) {
  *out = NULL;
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[0] > SIZE_MAX / 8 / dims[1] / dims[2] ||
      dims[0] * dims[1] * dims[2] > UINT32_MAX)
    return mr_err_set(err, MR_EINVAL, "wavelet: image of %zu x %zu x %zu", dims[0], dims[1],
                      dims[2]);
  mr_wavelet *w = calloc(1, sizeof *w);
  if (w == NULL)
    return mr_err_set(err, MR_ENOMEM, "wavelet: out of memory");
  w->dev = dev;
  int rc = set_taps(filter, &w->taps, err);
  for (int d = 0; d < 3; d++)
    w->dims[d] = w->len[0][d] = dims[d];
  while (rc == 0 && w->levels < MAX_LEVELS) {
    size_t *cur = w->len[w->levels], *next = w->len[w->levels + 1];
    int any = 0;
    for (int d = 0; d < 3; d++) {
      int h = halves(cur[d], w->taps.taps);
      next[d] = h ? cur[d] / 2 : cur[d];
      any |= h;
    }
    if (!any)
      break;
    w->levels++;
  }
  if (rc == 0)
    rc = mr_buf_create(dev, dims[0] * dims[1] * dims[2] * sizeof(mr_cfloat), &w->scratch, err);
  w->small_from = first_small(w);
  w->by_plane = mr_device_is_gpu(dev) && dims[2] == 1 && w->small_from > 0;
  for (int l = 0; l < w->small_from; l++) /* every level before the small ones halves x and y */
    w->by_plane &= w->len[l + 1][0] != w->len[l][0] && w->len[l + 1][1] != w->len[l][1];
  if (rc == 0 && w->by_plane)
    rc = mr_buf_create(dev, dims[0] * dims[1] * sizeof(mr_cfloat), &w->scratch2, err);
  if (rc < 0) {
    mr_wavelet_destroy(w);
    return rc;
  }
  *out = w;
  return 0;
}

void mr_wavelet_destroy(mr_wavelet *w) {
  if (w == NULL)
    return;
  mr_buf_destroy(w->scratch);
  mr_buf_destroy(w->scratch2);
  free(w);
}

int mr_wavelet_levels(const mr_wavelet *w) { return w->levels; }

void mr_wavelet_coarse(const mr_wavelet *w, size_t box[3]) {
  for (int d = 0; d < 3; d++)
    box[d] = w->len[w->levels][d];
}

static int pass(mr_wavelet *w, const size_t len[3], int axis, int inverse, const mr_cfloat *src,
                mr_cfloat *dst, mr_err *err) {
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(w->dev))
    return mr_wavelet_cuda_pass(w->dev, w->dims, len, axis, inverse, &w->taps, src, dst, err);
#endif
  return mr_wavelet_cpu_pass(w->dev, w->dims, len, axis, inverse, &w->taps, src, dst, err);
}

static int copy(mr_wavelet *w, const size_t len[3], const size_t shift[3], const mr_cfloat *src,
                mr_cfloat *dst, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(w->dev))
    return mr_wavelet_cuda_copy(w->dev, w->dims, len, shift, src, dst, err);
#endif
  return mr_wavelet_cpu_copy(w->dev, w->dims, len, shift, src, dst);
}

static const size_t NO_SHIFT[3] = {0, 0, 0};

/* One level's passes over its region, between c and the scratch image,
 * ending in c: forward along x, y, z; the adjoint in reverse order. */
static int level(mr_wavelet *w, int l, int inverse, mr_cfloat *c, mr_err *err) {
  mr_cfloat *t = mr_buf_data(w->scratch), *cur = c, *other = t;
  const size_t *len = w->len[l], *next = w->len[l + 1];
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++) {
    int axis = inverse ? 2 - i : i;
    if (next[axis] == len[axis])
      continue;
    rc = pass(w, len, axis, inverse, cur, other, err);
    mr_cfloat *swap = cur;
    cur = other;
    other = swap;
  }
  if (rc == 0 && cur != c)
    rc = copy(w, len, NO_SHIFT, cur, c, err);
  return rc;
}

/* Levels [from, levels) in one launch (GPU only), the inverse's
 * coefficients thresholded by t as they are read. */
static int small_levels(mr_wavelet *w, int from, int inverse, float t, mr_cfloat *c, mr_err *err) {
  (void)err;
#ifdef MR_HAVE_CUDA
  if (from < w->levels)
    return mr_wavelet_cuda_small(w->dev, w->dims, (const size_t(*)[3]) & w->len[from],
                                 w->levels - from, inverse, &w->taps, t, c, err);
#else
  (void)w, (void)from, (void)inverse, (void)t, (void)c;
#endif
  return 0;
}

/* A GPU's 2D level in one launch (wavelet_impl.h); m: the momentum the
 * last synthesis does, or NULL. */
static int plane_level(mr_wavelet *w, int l, int inverse, const size_t shift[3], float t,
                       const mr_wavelet_momentum *m, const mr_cfloat *lo_in, mr_cfloat *c,
                       mr_cfloat *lo_out, mr_err *err) {
#ifdef MR_HAVE_CUDA
  return mr_wavelet_cuda_level2d(w->dev, w->dims, w->len[l], inverse, &w->taps, shift, t, m, lo_in,
                                 c, lo_out, err);
#else
  (void)w, (void)l, (void)inverse, (void)shift, (void)t, (void)m, (void)lo_in, (void)c,
      (void)lo_out;
  return mr_err_set(err, MR_EINVAL, "wavelet: no GPU");
#endif
}

/* The low bands go between the two scratch images, the details straight
 * into c; the level before the small ones leaves its low band in c. */
static mr_cfloat *low_band(mr_wavelet *w, int l) {
  return l % 2 == 0 ? mr_buf_data(w->scratch) : mr_buf_data(w->scratch2);
}

int mr_wavelet_forward(mr_wavelet *w, const size_t shift[3], const mr_cfloat *x, mr_cfloat *c,
                       mr_err *err) {
  int from = w->small_from, rc = 0;
  if (w->by_plane) {
    const mr_cfloat *in = x;
    for (int l = 0; l < from && rc == 0; l++) {
      mr_cfloat *lo = l == from - 1 ? c : low_band(w, l);
      rc = plane_level(w, l, 0, l == 0 ? shift : NULL, 0, NULL, in, c, lo, err);
      in = lo;
    }
    return rc == 0 ? small_levels(w, from, 0, 0, c, err) : rc;
  }
  rc = copy(w, w->dims, shift, x, c, err);
  for (int l = 0; l < from && rc == 0; l++)
    rc = level(w, l, 0, c, err);
  return rc == 0 ? small_levels(w, from, 0, 0, c, err) : rc;
}

/* The by-plane synthesis, thresholding as it reads; m: the momentum of
 * its last launch, or NULL. */
static int plane_adjoint(mr_wavelet *w, const size_t shift[3], float t,
                         const mr_wavelet_momentum *m, mr_cfloat *c, mr_cfloat *x, mr_err *err) {
  if (!(t >= 0))
    return mr_err_set(err, MR_EINVAL, "wavelet: threshold %g", (double)t);
  int from = w->small_from, rc = small_levels(w, from, 1, t, c, err);
  const mr_cfloat *lo = c;
  for (int l = from - 1; l >= 0 && rc == 0; l--) {
    mr_cfloat *out = l == 0 ? x : low_band(w, l);
    rc = plane_level(w, l, 1, l == 0 ? shift : NULL, t, l == 0 ? m : NULL, lo, c, out, err);
    lo = out;
  }
  return rc;
}

int mr_wavelet_adjoint_soft(mr_wavelet *w, const size_t shift[3], float t, mr_cfloat *c,
                            mr_cfloat *x, mr_err *err) {
  if (w->by_plane)
    return plane_adjoint(w, shift, t, NULL, c, x, err);
  size_t keep[3];
  mr_wavelet_coarse(w, keep);
  int rc = mr_prox_soft(w->dev, w->dims, keep, t, c, err);
  return rc == 0 ? mr_wavelet_adjoint(w, shift, c, x, err) : rc;
}

int mr_wavelet_adjoint_soft_momentum(mr_wavelet *w, const size_t shift[3], float t, mr_cfloat *c,
                                     float beta, mr_cfloat *prev, mr_cfloat *z, mr_cfloat *x,
                                     mr_err *err) {
  if (w->by_plane) {
    mr_wavelet_momentum m = {beta, prev, z};
    return plane_adjoint(w, shift, t, &m, c, x, err);
  }
  int rc = mr_wavelet_adjoint_soft(w, shift, t, c, x, err);
  return rc == 0
             ? mr_prox_momentum(w->dev, w->dims[0] * w->dims[1] * w->dims[2], beta, x, prev, z, err)
             : rc;
}

int mr_wavelet_momentum_fused(const mr_wavelet *w) { return w->by_plane; }

int mr_wavelet_adjoint(mr_wavelet *w, const size_t shift[3], mr_cfloat *c, mr_cfloat *x,
                       mr_err *err) {
  if (w->by_plane)
    return plane_adjoint(w, shift, 0, NULL, c, x, err);
  int from = w->small_from, rc = small_levels(w, from, 1, 0, c, err);
  for (int l = from - 1; l >= 0 && rc == 0; l--)
    rc = level(w, l, 1, c, err);
  size_t back[3];
  for (int d = 0; d < 3; d++)
    back[d] = (w->dims[d] - shift[d] % w->dims[d]) % w->dims[d];
  return rc == 0 ? copy(w, w->dims, back, c, x, err) : rc;
}
