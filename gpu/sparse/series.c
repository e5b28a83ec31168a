#include "series.h"

#include <stdlib.h>

#include "error.h"
#include "sense.h"

struct mr_series {
  size_t frames, n, ncoils, lines; /* n: pixels of a frame; lines: a frame's mask */
  mr_sense **sense;                /* one per frame */
};

int mr_series_create(mr_device *dev, const size_t dims[3], size_t ncoils, size_t frames,
                     mr_series **out, mr_err *err) {
  *out = NULL;
  if (frames < 1 || (frames > 1 && dims[2] != 1) || frames > SIZE_MAX / sizeof(mr_sense *))
    return mr_err_set(err, MR_EINVAL, "series: %zu frames of %zu x %zu x %zu", frames, dims[0],
                      dims[1], dims[2]);
  mr_series *s = calloc(1, sizeof *s);
  if (s == NULL || (s->sense = calloc(frames, sizeof *s->sense)) == NULL) {
    free(s);
    return mr_err_set(err, MR_ENOMEM, "series: out of memory");
  }
  s->frames = frames;
  s->ncoils = ncoils;
  s->n = dims[0] * dims[1] * dims[2];
  s->lines = dims[1] * dims[2];
  int rc = 0;
  for (size_t f = 0; f < frames && rc == 0; f++)
    rc = mr_sense_create(dev, dims, ncoils, &s->sense[f], err);
  if (rc < 0) {
    mr_series_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

void mr_series_destroy(mr_series *s) {
  if (s == NULL)
    return;
  for (size_t f = 0; f < s->frames; f++)
    mr_sense_destroy(s->sense[f]);
  free(s->sense);
  free(s);
}

int mr_series_set(mr_series *s, const mr_cfloat *maps, const uint8_t *mask, size_t *fewest,
                  mr_err *err) {
  size_t least = SIZE_MAX;
  int rc = 0;
  for (size_t f = 0; f < s->frames && rc == 0; f++) {
    size_t lines = 0;
    rc = mr_sense_set(s->sense[f], maps, mask + f * s->lines, &lines, err);
    least = lines < least ? lines : least;
  }
  if (fewest != NULL)
    *fewest = least;
  return rc;
}

int mr_series_adjoint(mr_series *s, const mr_cfloat *k, mr_cfloat *x, mr_err *err) {
  int rc = 0;
  for (size_t f = 0; f < s->frames && rc == 0; f++)
    rc = mr_sense_adjoint(s->sense[f], k + f * s->ncoils * s->n, x + f * s->n, err);
  return rc;
}

int mr_series_normal(mr_series *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  int rc = 0;
  for (size_t f = 0; f < s->frames && rc == 0; f++)
    rc = mr_sense_normal(s->sense[f], x + f * s->n, y + f * s->n, err);
  return rc;
}

int mr_series_step(mr_series *s, const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *u,
                   mr_err *err) {
  int rc = 0;
  for (size_t f = 0; f < s->frames && rc == 0; f++)
    rc = mr_sense_step(s->sense[f], z + f * s->n, ahb + f * s->n, step, u + f * s->n, err);
  return rc;
}

int mr_series_peak(mr_series *s, float *peak, mr_err *err) {
  return mr_sense_peak(s->sense[0], peak, err);
}
