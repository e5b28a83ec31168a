#include "noise_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state_dir.h"

#define SUFFIX ".noise"
static const char magic[8] = {'M', 'R', 'N', 'O', 'I', 'S', 'E', '1'};

/* The file: this header, then cov as nch * nch pairs of doubles (real,
 * imaginary), little-endian like the wire protocol. */
typedef struct file_head {
  char magic[8];
  char id[136]; /* NUL-terminated: checked against the file name */
  uint32_t nch;
  float dwell_us;
  uint64_t samples;
  double fourth;
} file_head;
_Static_assert(sizeof(file_head) == 168, "noise file header layout");

int mr_noise_stats_init(mr_noise_stats *s, int nch, float dwell_us) {
  memset(s, 0, sizeof *s);
  if (nch <= 0 || nch > MR_NOISE_MAX_CHANNELS)
    return MR_EINVAL;
  s->cov = calloc((size_t)nch * (size_t)nch, sizeof *s->cov);
  if (s->cov == NULL)
    return MR_ENOMEM;
  s->nch = nch;
  s->dwell_us = dwell_us;
  return 0;
}

void mr_noise_stats_free(mr_noise_stats *s) {
  free(s->cov);
  memset(s, 0, sizeof *s);
}

void mr_noise_stats_sigmas(const mr_noise_stats *s, double *min, double *max, double *mean) {
  *min = INFINITY;
  *max = 0;
  *mean = 0;
  for (int c = 0; c < s->nch; c++) {
    double sigma = sqrt(creal(s->cov[c * s->nch + c]) / (double)s->samples);
    *min = sigma < *min ? sigma : *min;
    *max = sigma > *max ? sigma : *max;
    *mean += sigma / s->nch;
  }
  if (s->nch == 0)
    *min = 0;
}

static void file_name(const char *id, char *name, size_t size) {
  snprintf(name, size, "%s" SUFFIX, id);
}

int mr_noise_store_save(const char *id, const mr_noise_stats *s, mr_err *err) {
  if (!mr_state_name_ok(id))
    return mr_err_set(err, MR_EINVAL,
                      "measurement id '%.100s' cannot name a stored noise (1 to 128 of "
                      "A-Z a-z 0-9 . _ -, not starting with '.')", id);
  int dirfd = mr_state_dir_fd("noise");
  if (dirfd < 0)
    return mr_err_set(err, MR_ENOTSUP, "no noise store: reconserver runs without --state-dir");
  if (s->nch <= 0 || s->nch > MR_NOISE_MAX_CHANNELS || s->samples == 0)
    return mr_err_set(err, MR_EINVAL, "no noise samples to store");
  file_head h = {.nch = (uint32_t)s->nch, .dwell_us = s->dwell_us, .samples = s->samples,
                 .fourth = s->fourth};
  memcpy(h.magic, magic, sizeof magic);
  snprintf(h.id, sizeof h.id, "%s", id);
  mr_state_file f;
  int rc = mr_state_file_begin(dirfd, &f, err);
  if (rc < 0)
    return rc;
  size_t n = (size_t)s->nch * (size_t)s->nch;
  if ((rc = mr_state_file_write(&f, &h, sizeof h, err)) < 0 ||
      (rc = mr_state_file_write(&f, s->cov, n * sizeof *s->cov, err)) < 0) {
    mr_state_file_abort(&f);
    return rc;
  }
  char name[160];
  file_name(id, name, sizeof name);
  const mr_state_limits *lim = mr_state_dir_limits();
  mr_state_bounds keep = {SUFFIX, lim->noise_max_entries, lim->noise_max_age_s, 0};
  return mr_state_file_commit(&f, name, &keep, err);
}

/* A file that parsed: finite sums, a positive diagonal. */
static int plausible(const mr_noise_stats *s) {
  if (!isfinite(s->fourth) || !(s->fourth >= 0) || !isfinite(s->dwell_us) || s->dwell_us < 0)
    return 0;
  for (int i = 0; i < s->nch; i++) {
    if (!(creal(s->cov[i * s->nch + i]) > 0))
      return 0;
    for (int j = 0; j <= i; j++)
      if (!isfinite(creal(s->cov[i * s->nch + j])) || !isfinite(cimag(s->cov[i * s->nch + j])))
        return 0;
  }
  return 1;
}

int mr_noise_store_load(const char *id, mr_noise_stats *out, mr_err *err) {
  memset(out, 0, sizeof *out);
  if (!mr_state_name_ok(id))
    return mr_err_set(err, MR_ENOENT, "measurement id '%.100s' cannot name a stored noise", id);
  int dirfd = mr_state_dir_fd("noise");
  if (dirfd < 0)
    return mr_err_set(err, MR_ENOENT, "no noise store: reconserver runs without --state-dir");
  char name[160];
  file_name(id, name, sizeof name);
  size_t max = sizeof(file_head) + (size_t)MR_NOISE_MAX_CHANNELS * MR_NOISE_MAX_CHANNELS *
                                       sizeof(double complex);
  char *data = NULL;
  size_t len = 0;
  time_t mtime = 0;
  mr_err why = {0};
  int rc = mr_state_read(dirfd, name, max, &data, &len, &mtime, &why);
  if (rc == MR_ENOENT)
    return mr_err_set(err, MR_ENOENT, "noise measurement '%s' is not stored", id);
  if (rc < 0)
    return mr_err_set(err, rc, "stored noise measurement '%s': %s", id, why.msg);
  const mr_state_limits *lim = mr_state_dir_limits();
  if (lim->noise_max_age_s > 0 && time(NULL) - mtime > lim->noise_max_age_s) {
    free(data);
    mr_state_prune(dirfd, &(mr_state_bounds){SUFFIX, 0, lim->noise_max_age_s, 0});
    return mr_err_set(err, MR_ENOENT, "noise measurement '%s' is older than %lld s", id,
                      (long long)lim->noise_max_age_s);
  }
  file_head h;
  rc = MR_EDATA;
  if (len >= sizeof h) {
    memcpy(&h, data, sizeof h);
    size_t n = (size_t)h.nch * h.nch;
    if (memcmp(h.magic, magic, sizeof magic) == 0 && h.id[sizeof h.id - 1] == '\0' &&
        strcmp(h.id, id) == 0 && h.nch > 0 && h.nch <= MR_NOISE_MAX_CHANNELS &&
        h.samples > 0 && len == sizeof h + n * sizeof(double complex)) {
      rc = mr_noise_stats_init(out, (int)h.nch, h.dwell_us);
      if (rc == 0) {
        memcpy(out->cov, data + sizeof h, n * sizeof(double complex));
        out->samples = h.samples;
        out->fourth = h.fourth;
        if (!plausible(out)) {
          mr_noise_stats_free(out);
          rc = MR_EDATA;
        }
      }
    }
  }
  free(data);
  if (rc == MR_ENOMEM)
    return mr_err_set(err, rc, "out of memory loading noise measurement '%s'", id);
  if (rc < 0)
    return mr_err_set(err, MR_EDATA, "stored noise measurement '%s' is damaged", id);
  return 0;
}
