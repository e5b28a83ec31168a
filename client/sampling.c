#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int mr_sampling_parse(const char *name) {
  if (strcmp(name, "vd") == 0)
    return MR_SAMPLING_VD;
  if (strcmp(name, "poisson") == 0)
    return MR_SAMPLING_POISSON;
  return -1;
}

/* xorshift64: the same sequence for the same seed everywhere. */
static double uniform(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return ((*state >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

static uint64_t seeded(unsigned seed) {
  uint64_t s = 0xD1B54A32D192ED03ull ^ ((uint64_t)seed * 0x9E3779B97F4A7C15ull);
  return s != 0 ? s : 1;
}

/* The calibration block's first index and size along an axis of n. */
static void centre_block(int n, int calibration, int *first, int *size) {
  *size = calibration < n ? calibration : n;
  *first = n / 2 - *size / 2;
}

int mr_sampling_in_calibration(const mr_sampling *s, int y, int z) {
  int y0, ysize, z0 = 0, zsize = 1;
  centre_block(s->ny, s->calibration, &y0, &ysize);
  if (s->nz > 1)
    centre_block(s->nz, s->calibration, &z0, &zsize);
  return y >= y0 && y < y0 + ysize && z >= z0 && z < z0 + zsize;
}

double mr_sampling_radius(const mr_sampling *s, double r0, int y, int z) {
  double ky = (y - s->ny / 2) / (0.5 * s->ny), kz = (z - s->nz / 2) / (0.5 * s->nz);
  return r0 * (1 + 2 * sqrt(ky * ky + kz * kz));
}

/* A candidate line and its Efraimidis-Spirakis key, log(u) / weight: the
 * largest keys are a weighted draw without replacement. */
typedef struct keyed {
  double key;
  int y;
} keyed;

static int by_key_descending(const void *a, const void *b) {
  double ka = ((const keyed *)a)->key, kb = ((const keyed *)b)->key;
  return (ka < kb) - (ka > kb);
}

static long vd_lines(const mr_sampling *s, long wanted, uint8_t *mask) {
  keyed *pool = malloc((size_t)s->ny * sizeof *pool);
  if (pool == NULL)
    return MR_ENOMEM;
  uint64_t state = seeded(s->seed);
  long taken = 0, candidates = 0;
  for (int y = 0; y < s->ny; y++) {
    double u = uniform(&state); /* drawn for every line: the same stream whatever the centre */
    if (mr_sampling_in_calibration(s, y, 0)) {
      mask[y] = 1;
      taken++;
      continue;
    }
    double w = 1 - abs(y - s->ny / 2) / (0.5 * s->ny + 1);
    pool[candidates++] = (keyed){log(u) / (w * w), y};
  }
  qsort(pool, (size_t)candidates, sizeof *pool, by_key_descending);
  for (long i = 0; taken < wanted && i < candidates; i++, taken++)
    mask[pool[i].y] = 1;
  free(pool);
  return taken;
}

/* One Poisson-disc pattern of scale r0: the calibration block, then the
 * points of `order` each taken when no point taken before lies nearer than
 * its radius. Returns the number taken. */
static long poisson_throw(const mr_sampling *s, double r0, const int *order, long candidates,
                          uint8_t *mask) {
  int ny = s->ny, nz = s->nz;
  long taken = 0;
  for (int z = 0; z < nz; z++)
    for (int y = 0; y < ny; y++) {
      mask[(size_t)z * ny + y] = (uint8_t)mr_sampling_in_calibration(s, y, z);
      taken += mask[(size_t)z * ny + y];
    }
  for (long i = 0; i < candidates; i++) {
    int y = order[i] % ny, z = order[i] / ny;
    double radius = mr_sampling_radius(s, r0, y, z);
    int reach = (int)ceil(radius), free_here = 1;
    for (int dz = -reach; free_here && dz <= reach; dz++)
      for (int dy = -reach; dy <= reach; dy++) {
        int qy = y + dy, qz = z + dz;
        if (qy < 0 || qy >= ny || qz < 0 || qz >= nz || !mask[(size_t)qz * ny + qy])
          continue;
        if (dy * dy + dz * dz < radius * radius) {
          free_here = 0;
          break;
        }
      }
    if (free_here) {
      mask[order[i]] = 1;
      taken++;
    }
  }
  return taken;
}

static long poisson_disc(const mr_sampling *s, long wanted, uint8_t *mask, double *r0_out) {
  long n = (long)s->ny * s->nz, candidates = 0;
  int *order = malloc((size_t)n * sizeof *order);
  if (order == NULL)
    return MR_ENOMEM;
  for (int z = 0; z < s->nz; z++)
    for (int y = 0; y < s->ny; y++)
      if (!mr_sampling_in_calibration(s, y, z))
        order[candidates++] = z * s->ny + y;
  uint64_t state = seeded(s->seed);
  for (long i = candidates - 1; i > 0; i--) { /* Fisher-Yates */
    long j = (long)(uniform(&state) * (double)(i + 1));
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  /* More radius, fewer points: lo keeps >= wanted, hi < wanted. */
  double lo = 0, hi = s->ny > s->nz ? s->ny : s->nz;
  long at_lo = n, at_hi = poisson_throw(s, hi, order, candidates, mask);
  for (int i = 0; i < 40 && labs(at_lo - wanted) > wanted / 200 && at_hi < wanted; i++) {
    double mid = 0.5 * (lo + hi);
    long got = poisson_throw(s, mid, order, candidates, mask);
    if (got >= wanted) {
      lo = mid;
      at_lo = got;
    } else {
      hi = mid;
      at_hi = got;
    }
  }
  double r0 = labs(at_lo - wanted) <= labs(wanted - at_hi) ? lo : hi;
  long taken = poisson_throw(s, r0, order, candidates, mask);
  free(order);
  *r0_out = r0;
  return taken;
}

long mr_sampling_mask(const mr_sampling *s, uint8_t *mask, double *r0, mr_err *err) {
  double radius = 0;
  if (r0 != NULL)
    *r0 = 0;
  if (s->ny < 1 || s->nz < 1)
    return mr_err_set(err, MR_EINVAL, "an empty phase-encode grid (%d x %d)", s->ny, s->nz);
  if (!(s->r >= 1) || s->r > 1000)
    return mr_err_set(err, MR_EINVAL, "--acceleration must be 1 .. 1000, got %g", s->r);
  if (s->calibration < 0)
    return mr_err_set(err, MR_EINVAL, "--calibration must be >= 0, got %d", s->calibration);
  if (s->kind == MR_SAMPLING_VD && s->nz != 1)
    return mr_err_set(err, MR_EINVAL, "--sampling vd is for 2D scans; 3D takes poisson");
  if (s->kind == MR_SAMPLING_POISSON && s->nz == 1)
    return mr_err_set(err, MR_EINVAL, "--sampling poisson is for 3D scans; 2D takes vd");
  long n = (long)s->ny * s->nz, wanted = lround((double)n / s->r), calibration = 0;
  for (int z = 0; z < s->nz; z++)
    for (int y = 0; y < s->ny; y++)
      calibration += mr_sampling_in_calibration(s, y, z);
  if (s->kind == MR_SAMPLING_FULL || wanted >= n) {
    memset(mask, 1, (size_t)n);
    return n;
  }
  if (wanted < 2)
    return mr_err_set(err, MR_EINVAL, "--acceleration %g leaves %ld of %ld phase encodes", s->r,
                      wanted, n);
  if (calibration > wanted)
    return mr_err_set(err, MR_EINVAL,
                      "--calibration %d needs %ld phase encodes but --acceleration %g leaves "
                      "%ld of %ld", s->calibration, calibration, s->r, wanted, n);
  memset(mask, 0, (size_t)n);
  long taken = s->kind == MR_SAMPLING_VD ? vd_lines(s, wanted, mask)
                                         : poisson_disc(s, wanted, mask, &radius);
  if (taken < 0)
    return mr_err_set(err, (int)taken, "out of memory for the sampling pattern");
  if (r0 != NULL)
    *r0 = radius;
  return taken;
}
