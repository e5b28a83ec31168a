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

static int make_cuts(stream_session *s) {
  s->cuts = malloc(((size_t)s->nunits + 2) * sizeof *s->cuts);
  if (s->cuts == NULL)
    return MR_ENOMEM;
  memcpy(s->cuts, s->unit_end, (size_t)s->nunits * sizeof *s->cuts);
  int n = s->nunits;
  s->cuts[n++] = s->last_acq_end;
  s->cuts[n++] = s->len;
  qsort(s->cuts, (size_t)n, sizeof *s->cuts, cmp_size);
  s->ncuts = 0;
  for (int i = 0; i < n; i++)
    if (s->ncuts == 0 || s->cuts[s->ncuts - 1] != s->cuts[i])
      s->cuts[s->ncuts++] = s->cuts[i];
  return 0;
}

int stream_session_load(const char *path, const char *config, stream_session *s, mr_err *err) {
  memset(s, 0, sizeof *s);
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
    if (imaging && (rc = note_unit(s, &cap_units, &k)) < 0) {
      rc = mr_err_set(err, rc, "out of memory");
      break;
    }
  }
  if (rc == 0 && s->nunits == 0)
    rc = mr_err_set(err, MR_EDATA, "%s holds no imaging acquisition", path);
  s->close_at = s->len;
  if (rc == 0)
    rc = append_message(s, &cap, mr_message_new(MR_MSG_CLOSE), err);
  if (rc == 0 && make_cuts(s) < 0)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory");
done:
  mr_dataset_close(ds);
  if (rc < 0)
    stream_session_free(s);
  return rc;
}

void stream_session_free(stream_session *s) {
  free(s->bytes);
  free(s->keys);
  free(s->unit_end);
  free(s->cuts);
  memset(s, 0, sizeof *s);
}
