#include "stream_session.h"

#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "encode.h"
#include "message.h"

/* Appends len bytes, growing the buffer by doubling. */
static int append(stream_session *s, size_t *cap, const uint8_t *b, size_t len) {
  if (s->len + len > *cap) {
    size_t want = *cap > 0 ? *cap : (size_t)1 << 20;
    while (want < s->len + len)
      want *= 2;
    uint8_t *grown = realloc(s->bytes, want);
    if (grown == NULL)
      return MR_ENOMEM;
    s->bytes = grown;
    *cap = want;
  }
  memcpy(s->bytes + s->len, b, len);
  s->len += len;
  return 0;
}

/* Takes m. */
static int append_message(stream_session *s, size_t *cap, mr_message *m, mr_err *err) {
  if (m == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  uint8_t *b;
  size_t len;
  int rc = mr_encode_flat(m, &b, &len);
  mr_message_unref(m);
  if (rc < 0)
    return mr_err_set(err, rc, "cannot encode a message: %s", mr_strerror(rc));
  rc = append(s, cap, b, len);
  free(b);
  return rc < 0 ? mr_err_set(err, rc, "out of memory for the session (%zu bytes)", s->len) : 0;
}

int stream_session_unit(const stream_session *s, const stream_key *k) {
  stream_key volume = {{0, 0, 0, k->v[3], 0}};
  if (s->volume_images > 0)
    k = &volume;
  /* Newest first: a unit's acquisitions are usually contiguous. */
  for (int i = s->nunits - 1; i >= 0; i--)
    if (memcmp(&s->keys[i], k, sizeof *k) == 0)
      return i;
  return -1;
}

int stream_session_cut(const stream_session *s, size_t at) {
  int lo = 0, hi = s->ncuts - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (s->cuts[mid] < at)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Notes that the acquisition just appended (ending at s->len) belongs to
 * key's unit. */
static int note_unit(stream_session *s, int *cap_units, const stream_key *k) {
  int u = stream_session_unit(s, k);
  stream_key volume = {{0, 0, 0, k->v[3], 0}};
  if (s->volume_images > 0)
    k = &volume;
  if (u < 0) {
    if (s->nunits == *cap_units) {
      int want = *cap_units > 0 ? 2 * *cap_units : 64;
      stream_key *keys = realloc(s->keys, (size_t)want * sizeof *keys);
      if (keys != NULL)
        s->keys = keys;
      size_t *ends = realloc(s->unit_end, (size_t)want * sizeof *ends);
      if (ends != NULL)
        s->unit_end = ends;
      if (keys == NULL || ends == NULL)
        return MR_ENOMEM;
      *cap_units = want;
    }
    u = s->nunits++;
    s->keys[u] = *k;
  }
  s->unit_end[u] = s->len;
  return 0;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* By volume: the runs of acquisitions of one slice (key), each's end and
 * volume, in order. */
typedef struct runs {
  size_t *end;
  int *volume;
  int n, cap;
  stream_key last;
} runs;

/* Notes the acquisition just appended (ending at s->len) of key k. */
static int note_run(stream_session *s, runs *r, const stream_key *k) {
  if (r->n > 0 && memcmp(&r->last, k, sizeof *k) == 0) {
    r->end[r->n - 1] = s->len;
    return 0;
  }
  if (r->n == r->cap) {
    int want = r->cap > 0 ? 2 * r->cap : 256;
    size_t *end = realloc(r->end, (size_t)want * sizeof *end);
    if (end != NULL)
      r->end = end;
    int *volume = realloc(r->volume, (size_t)want * sizeof *volume);
    if (volume != NULL)
      r->volume = volume;
    if (end == NULL || volume == NULL)
      return MR_ENOMEM;
    r->cap = want;
  }
  r->end[r->n] = s->len;
  r->volume[r->n++] = stream_session_unit(s, k);
  r->last = *k;
  return 0;
}

/* cut_pace from the runs: run j of the m runs of volume v starts at
 * v + j / m; a cut's bytes belong to the first run ending at or after it. */
static int pace_cuts(stream_session *s, const runs *r) {
  s->cut_pace = malloc((size_t)s->ncuts * sizeof *s->cut_pace);
  double *start = malloc((size_t)r->n * sizeof *start);
  if (s->cut_pace == NULL || start == NULL) {
    free(start);
    return MR_ENOMEM;
  }
  for (int j = 0, first = 0; j < r->n; j++) {
    if (j > 0 && r->volume[j] != r->volume[j - 1])
      first = j;
    int m = 0;
    while (first + m < r->n && r->volume[first + m] == r->volume[first])
      m++;
    start[j] = r->volume[j] + (double)(j - first) / m;
  }
  for (int i = 0, j = 0; i < s->ncuts; i++) {
    while (j < r->n && r->end[j] < s->cuts[i])
      j++;
    s->cut_pace[i] = j < r->n ? start[j] : i > 0 ? s->cut_pace[i - 1] : 0;
  }
  free(start);
  return 0;
}

static int make_cuts(stream_session *s, const runs *r) {
  s->cuts = malloc(((size_t)s->nunits + (size_t)r->n + 2) * sizeof *s->cuts);
  if (s->cuts == NULL)
    return MR_ENOMEM;
  memcpy(s->cuts, s->unit_end, (size_t)s->nunits * sizeof *s->cuts);
  int n = s->nunits;
  for (int j = 0; j < r->n; j++)
    s->cuts[n++] = r->end[j];
  s->cuts[n++] = s->last_acq_end;
  s->cuts[n++] = s->len;
  qsort(s->cuts, (size_t)n, sizeof *s->cuts, cmp_size);
  s->ncuts = 0;
  for (int i = 0; i < n; i++)
    if (s->ncuts == 0 || s->cuts[s->ncuts - 1] != s->cuts[i])
      s->cuts[s->ncuts++] = s->cuts[i];
  return r->n > 0 ? pace_cuts(s, r) : 0;
}

static int load(const char *path, const char *config, int volume_images, stream_session *s,
                mr_err *err) {
  memset(s, 0, sizeof *s);
  s->volume_images = volume_images;
  runs r = {0};
  mr_dataset *ds = NULL;
  size_t cap = 0;
  int cap_units = 0;
  int rc = mr_dataset_open(path, "dataset", &ds, err);
  if (rc < 0)
    return rc;
  const char *xml = mr_dataset_header(ds);
  if ((rc = append_message(s, &cap, mr_message_new_config_file(config), err)) < 0 ||
      (rc = append_message(s, &cap, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)), err)) <
          0)
    goto done;
  for (;;) {
    mr_message *m = NULL;
    if ((rc = mr_dataset_next(ds, &m, err)) < 0 || m == NULL)
      break;
    stream_key k = {{0}};
    int imaging = m->kind == MR_MSG_ACQUISITION &&
                  !mr_acq_flag(&m->u.acq, ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
    if (m->kind == MR_MSG_ACQUISITION) {
      const ISMRMRD_EncodingCounters *c = &m->u.acq.head.idx;
      k = (stream_key){{c->slice, c->contrast, c->phase, c->repetition, c->set}};
      s->acquisitions++;
    }
    int is_acq = m->kind == MR_MSG_ACQUISITION;
    if ((rc = append_message(s, &cap, m, err)) < 0)
      break;
    if (is_acq)
      s->last_acq_end = s->len;
    if (imaging && ((rc = note_unit(s, &cap_units, &k)) < 0 ||
                    (volume_images > 0 && (rc = note_run(s, &r, &k)) < 0))) {
      rc = mr_err_set(err, rc, "out of memory");
      break;
    }
  }
  if (rc == 0 && s->nunits == 0)
    rc = mr_err_set(err, MR_EDATA, "%s holds no imaging acquisition", path);
  s->close_at = s->len;
  if (rc == 0)
    rc = append_message(s, &cap, mr_message_new(MR_MSG_CLOSE), err);
  if (rc == 0 && make_cuts(s, &r) < 0)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory");
done:
  mr_dataset_close(ds);
  free(r.end);
  free(r.volume);
  if (rc < 0)
    stream_session_free(s);
  return rc;
}

int stream_session_load(const char *path, const char *config, stream_session *s, mr_err *err) {
  return load(path, config, 0, s, err);
}

int stream_session_load_volumes(const char *path, const char *config, int images_per_volume,
                                stream_session *s, mr_err *err) {
  return load(path, config, images_per_volume, s, err);
}

void stream_session_free(stream_session *s) {
  free(s->bytes);
  free(s->keys);
  free(s->unit_end);
  free(s->cuts);
  free(s->cut_pace);
  memset(s, 0, sizeof *s);
}
