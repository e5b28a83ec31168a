#include "decode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "payload.h"

/* Each message is read as: the 2-byte id, a fixed-size part whose length
 * depends on the id (read into `fixed`), then up to three variable segments
 * that go straight into the message's own buffers. A step function runs
 * after each stage and decides what comes next. */
enum stage { ST_ID, ST_FIXED, ST_BODY, ST_SKIP, ST_FAILED };

#define MAX_SEGMENTS 3
#define FIXED_MAX MR_CONFIG_NAME_BYTES /* the largest fixed part */

struct mr_decoder {
  mr_limits lim;
  mr_decoder_callbacks cb;
  enum stage stage;
  uint16_t id;
  uint8_t fixed[FIXED_MAX];
  size_t need, have; /* of `fixed` (ST_ID, ST_FIXED) */
  mr_message *msg;   /* under construction */
  struct {
    uint8_t *dst;
    size_t len;
  } seg[MAX_SEGMENTS];
  int nseg, cur;
  size_t seg_have;
  int body_pass;       /* how many segment lists this message has had */
  uint8_t size_u32[4]; /* compressed-size field of an acquisition */
  uint8_t len_u64[8];  /* a DICOM message's name and meta lengths */
  uint64_t skip_left;  /* ST_SKIP: bytes to discard */
  char reject[256];    /* reason for a message being skipped */
  uint64_t offset, msg_start;
  int fatal_code;
  char error[256];
};

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

int mr_decoder_create(const mr_limits *limits, const mr_decoder_callbacks *cb,
                      mr_decoder **out) {
  mr_decoder *d = calloc(1, sizeof *d);
  if (d == NULL)
    return MR_ENOMEM;
  d->lim = limits != NULL ? *limits : mr_limits_default;
  d->cb = *cb;
  d->stage = ST_ID;
  d->need = 2;
  *out = d;
  return 0;
}

void mr_decoder_destroy(mr_decoder *d) {
  if (d == NULL)
    return;
  mr_message_unref(d->msg);
  free(d);
}

const char *mr_decoder_error(const mr_decoder *d) { return d->error; }
int mr_decoder_idle(const mr_decoder *d) {
  return d->stage == ST_ID && d->have == 0;
}
uint64_t mr_decoder_offset(const mr_decoder *d) { return d->offset; }

static int fail(mr_decoder *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(mr_decoder *d, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->error, sizeof d->error, fmt, ap);
  va_end(ap);
  d->stage = ST_FAILED;
  d->fatal_code = code;
  mr_message_unref(d->msg);
  d->msg = NULL;
  return code;
}

static void next_message(mr_decoder *d) {
  d->stage = ST_ID;
  d->need = 2;
  d->have = 0;
  d->msg = NULL;
  d->nseg = d->cur = 0;
  d->seg_have = 0;
  d->body_pass = 0;
}

/* Marks the current message rejected: on_error reports `reason` at once
 * (a client that declared 4 GiB is not made to send them before it hears
 * why), then its remaining `left` bytes are discarded. */
static void reject(mr_decoder *d, int code, uint64_t left, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
static void reject(mr_decoder *d, int code, uint64_t left, const char *fmt,
                   ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->reject, sizeof d->reject, fmt, ap);
  va_end(ap);
  mr_message_unref(d->msg);
  d->msg = NULL;
  d->stage = ST_SKIP;
  d->skip_left = left;
  if (d->cb.on_error != NULL)
    d->cb.on_error(d->cb.ctx, code, d->reject);
}

static size_t fixed_size(uint16_t id) {
  switch (id) {
  case MR_ID_CONFIG_FILE:
    return MR_CONFIG_NAME_BYTES;
  case MR_ID_CONFIG_SCRIPT:
  case MR_ID_HEADER:
  case MR_ID_TEXT:
    return 4;
  case MR_ID_CLOSE:
    return 0;
  case MR_ID_QUERY:
    return 24;
  case MR_ID_RESPONSE:
    return 16;
  case MR_ID_DEPENDENCY_QUERY:
    return 8;
  case MR_ID_DICOM:
    return 4;
  case MR_ID_ACQUISITION:
    return sizeof(ISMRMRD_AcquisitionHeader);
  case MR_ID_IMAGE:
    return sizeof(ISMRMRD_ImageHeader) + 8;
  case MR_ID_WAVEFORM:
    return sizeof(ISMRMRD_WaveformHeader);
  }
  return SIZE_MAX;
}

static void add_segment(mr_decoder *d, void *dst, size_t len) {
  if (len == 0)
    return;
  d->seg[d->nseg].dst = dst;
  d->seg[d->nseg].len = len;
  d->nseg++;
}

static int emit(mr_decoder *d) {
  mr_message *m = d->msg;
  next_message(d);
  return d->cb.on_message(d->cb.ctx, m);
}

/* Rule 4 of docs/protocol.md: Python clients send a trailing NUL, C++ clients
 * do not; both mean the same text. */
static void strip_trailing_nuls(char *text, size_t *len) {
  while (*len > 0 && text[*len - 1] == '\0')
    (*len)--;
  text[*len] = '\0';
}

/* A text payload of u32 length `len` with limit `max`. */
static int start_text(mr_decoder *d, mr_message_kind kind, uint64_t len,
                      uint64_t max, const char *what, const char *limit) {
  if (len > max) {
    reject(d, MR_ELIMIT, len, "%s of %llu bytes is over the limit %s = %llu",
           what, (unsigned long long)len, limit, (unsigned long long)max);
    return 0;
  }
  d->msg = mr_message_new(kind);
  char *t = d->msg != NULL ? malloc(len + 1) : NULL;
  if (t == NULL) {
    reject(d, MR_ENOMEM, len, "out of memory for a %s of %llu bytes", what,
           (unsigned long long)len);
    return 0;
  }
  t[len] = '\0';
  d->msg->text_len = len;
  if (kind == MR_MSG_QUERY || kind == MR_MSG_RESPONSE)
    d->msg->u.query.text = t;
  else
    d->msg->u.text = t;
  add_segment(d, t, len);
  return 0;
}

static int after_fixed_acquisition(mr_decoder *d) {
  ISMRMRD_AcquisitionHeader h;
  memcpy(&h, d->fixed, sizeof h);
  uint64_t traj_bytes, data_bytes;
  if (mr_payload_acquisition(&h, &traj_bytes, &data_bytes) < 0)
    return fail(d, MR_ELIMIT, "ACQUISITION (scan_counter %u): its size does not fit in memory",
                h.scan_counter);
  int compressed = (h.flags & MR_ACQ_COMPRESSED) != 0;
  /* What to skip if rejected; a compressed line's size field comes later,
   * so only its trajectory can be skipped now, and a compressed line over a
   * limit is therefore a framing error. Its samples are checked at the
   * size they will have once decompressed. */
  uint64_t total = traj_bytes + data_bytes;
  const char *why = NULL, *name = NULL;
  uint64_t value = 0, limit = 0;
  if (h.trajectory_dimensions > d->lim.trajectory_dims)
    why = "trajectory_dimensions", name = "trajectory_dims", value = h.trajectory_dimensions,
    limit = d->lim.trajectory_dims;
  else if (h.active_channels > d->lim.channels)
    why = "active_channels", name = "channels", value = h.active_channels,
    limit = d->lim.channels;
  else if (h.number_of_samples > d->lim.samples)
    why = "number_of_samples", name = "samples", value = h.number_of_samples,
    limit = d->lim.samples;
  else if (total > d->lim.acquisition_bytes)
    why = "size in bytes", name = "acquisition_bytes", value = total,
    limit = d->lim.acquisition_bytes;
  if (why != NULL) {
    if (compressed)
      return fail(d, MR_ELIMIT,
                  "compressed ACQUISITION (scan_counter %u): %s %llu is over the limit %s = %llu",
                  h.scan_counter, why, (unsigned long long)value, name,
                  (unsigned long long)limit);
    reject(d, MR_ELIMIT, total,
           "ACQUISITION (scan_counter %u): %s %llu is over the limit %s = %llu",
           h.scan_counter, why, (unsigned long long)value, name,
           (unsigned long long)limit);
    return 0;
  }
  if (compressed) {
    /* Trajectory first, then the 4-byte compressed size. */
    h.active_channels = 0;
  }
  d->msg = mr_message_new_acquisition(&h);
  if (d->msg == NULL) {
    if (compressed) /* its length is not known yet: it cannot be skipped */
      return fail(d, MR_ENOMEM, "out of memory for a compressed ACQUISITION (scan_counter %u)",
                  h.scan_counter);
    reject(d, MR_ENOMEM, total, "out of memory for an ACQUISITION of %llu bytes",
           (unsigned long long)total);
    return 0;
  }
  mr_acquisition *a = &d->msg->u.acq;
  if (compressed) {
    memcpy(&a->head, d->fixed, sizeof a->head); /* restore active_channels */
    add_segment(d, a->traj, traj_bytes);
    add_segment(d, d->size_u32, 4);
  } else {
    add_segment(d, a->traj, traj_bytes);
    add_segment(d, a->data, data_bytes);
  }
  return 0;
}

/* A compressed acquisition's size field has arrived: read its bytes. */
static int after_compressed_size(mr_decoder *d) {
  mr_acquisition *a = &d->msg->u.acq;
  uint32_t n = rd32(d->size_u32);
  if (n > d->lim.acquisition_bytes) {
    unsigned sc = a->head.scan_counter;
    reject(d, MR_ELIMIT, n,
           "compressed ACQUISITION (scan_counter %u): %u bytes is over the limit "
           "acquisition_bytes = %llu",
           sc, n, (unsigned long long)d->lim.acquisition_bytes);
    return 0;
  }
  a->compressed = malloc(n > 0 ? n : 1);
  if (a->compressed == NULL) {
    reject(d, MR_ENOMEM, n, "out of memory for %u compressed bytes", n);
    return 0;
  }
  a->compressed_bytes = n;
  d->nseg = d->cur = 0;
  d->seg_have = 0;
  add_segment(d, a->compressed, n);
  return 0;
}

static int after_fixed_image(mr_decoder *d) {
  ISMRMRD_ImageHeader h;
  memcpy(&h, d->fixed, sizeof h);
  uint64_t attr_len = rd64(d->fixed + sizeof h);
  uint64_t data_bytes;
  int rc = mr_payload_image(&h, &data_bytes);
  if (rc == MR_EPROTO)
    return fail(d, MR_EPROTO, "IMAGE with unknown data_type %u", h.data_type);
  /* Its size does not fit in 64 bits: it cannot even be skipped. */
  if (rc < 0)
    return fail(d, MR_ELIMIT,
                "IMAGE of %u x %u x %u pixels x %u channels of data_type %u is over the limit "
                "image_bytes = %llu (its size does not fit in 64 bits)",
                h.matrix_size[0], h.matrix_size[1], h.matrix_size[2], h.channels, h.data_type,
                (unsigned long long)d->lim.image_bytes);
  uint64_t total = attr_len + data_bytes;
  if (attr_len > d->lim.attribute_bytes) {
    reject(d, MR_ELIMIT, total,
           "IMAGE attributes of %llu bytes are over the limit attribute_bytes = %llu",
           (unsigned long long)attr_len, (unsigned long long)d->lim.attribute_bytes);
    return 0;
  }
  if (data_bytes > d->lim.image_bytes) {
    reject(d, MR_ELIMIT, total,
           "IMAGE of %llu bytes is over the limit image_bytes = %llu",
           (unsigned long long)data_bytes, (unsigned long long)d->lim.image_bytes);
    return 0;
  }
  if (h.attribute_string_len != attr_len) {
    reject(d, MR_EPROTO, total,
           "IMAGE header says %u attribute bytes but %llu follow",
           h.attribute_string_len, (unsigned long long)attr_len);
    return 0;
  }
  d->msg = mr_message_new_image(&h, NULL);
  char *attr = d->msg != NULL ? malloc(attr_len + 1) : NULL;
  if (attr == NULL) {
    reject(d, MR_ENOMEM, total, "out of memory for an IMAGE of %llu bytes",
           (unsigned long long)total);
    return 0;
  }
  attr[attr_len] = '\0';
  d->msg->u.image.attributes = attr;
  add_segment(d, attr, attr_len);
  add_segment(d, d->msg->u.image.data, data_bytes);
  return 0;
}

static int after_fixed_waveform(mr_decoder *d) {
  ISMRMRD_WaveformHeader h;
  memcpy(&h, d->fixed, sizeof h);
  uint64_t bytes;
  if (mr_payload_waveform(&h, &bytes) < 0)
    return fail(d, MR_ELIMIT, "WAVEFORM: its size does not fit in memory");
  if (bytes > d->lim.waveform_bytes) {
    reject(d, MR_ELIMIT, bytes,
           "WAVEFORM of %llu bytes is over the limit waveform_bytes = %llu",
           (unsigned long long)bytes, (unsigned long long)d->lim.waveform_bytes);
    return 0;
  }
  d->msg = mr_message_new_waveform(&h);
  if (d->msg == NULL) {
    reject(d, MR_ENOMEM, bytes, "out of memory for a WAVEFORM of %llu bytes",
           (unsigned long long)bytes);
    return 0;
  }
  add_segment(d, d->msg->u.waveform.data, bytes);
  return 0;
}

/* A DICOM message (1018) comes in three passes: the file and the name's
 * length, the name and the meta's length, the meta. Its lengths arrive one
 * by one, so one over its limit cannot be skipped: a framing error. */
#define MR_DICOM_NAME_MAX 4096
static int after_fixed_dicom(mr_decoder *d) {
  uint32_t n = rd32(d->fixed);
  if (n > d->lim.image_bytes)
    return fail(d, MR_ELIMIT, "DICOM file of %u bytes is over the limit image_bytes = %llu", n,
                (unsigned long long)d->lim.image_bytes);
  d->msg = mr_message_new(MR_MSG_DICOM);
  uint8_t *bytes = d->msg != NULL ? malloc(n > 0 ? n : 1) : NULL;
  if (bytes == NULL)
    return fail(d, MR_ENOMEM, "out of memory for a DICOM file of %u bytes", n);
  d->msg->u.dicom.bytes = bytes;
  d->msg->u.dicom.nbytes = n;
  add_segment(d, bytes, n);
  add_segment(d, d->len_u64, 8);
  return 0;
}

/* Pass 1 of a DICOM message: the name; pass 2: the meta. */
static int after_dicom_length(mr_decoder *d) {
  mr_dicom *f = &d->msg->u.dicom;
  uint64_t len = rd64(d->len_u64);
  int name = d->body_pass == 1;
  uint64_t max = name ? MR_DICOM_NAME_MAX : d->lim.attribute_bytes;
  if (len > max)
    return fail(d, MR_ELIMIT, "DICOM %s of %llu bytes is over the limit %s = %llu",
                name ? "name" : "meta", (unsigned long long)len,
                name ? "4096" : "attribute_bytes", (unsigned long long)max);
  char *t = calloc((size_t)len + 1, 1);
  if (t == NULL)
    return fail(d, MR_ENOMEM, "out of memory for a DICOM %s of %llu bytes",
                name ? "name" : "meta", (unsigned long long)len);
  d->nseg = d->cur = 0;
  d->seg_have = 0;
  add_segment(d, t, (size_t)len);
  if (name) {
    f->name = t;
    add_segment(d, d->len_u64, 8);
  } else {
    f->attributes = t;
  }
  return 0;
}

/* The name is a C string in a fixed field: what follows its NUL is not
 * read (ISMRMRD's own client leaves uninitialised bytes there), as
 * Gadgetron does. */
static int after_fixed_config_file(mr_decoder *d) {
  const char *name = (const char *)d->fixed;
  if (strnlen(name, MR_CONFIG_NAME_BYTES) == 0) {
    reject(d, MR_EPROTO, 0, "empty config name (CONFIG_FILE)");
    return 0;
  }
  d->msg = mr_message_new_config_file(name);
  if (d->msg == NULL)
    reject(d, MR_ENOMEM, 0, "out of memory for a CONFIG_FILE");
  return 0;
}

/* The fixed part is complete: validate it and set up the segments. */
static int after_fixed(mr_decoder *d) {
  const uint8_t *f = d->fixed;
  switch (d->id) {
  case MR_ID_CONFIG_FILE:
    return after_fixed_config_file(d);
  case MR_ID_CONFIG_SCRIPT:
    return start_text(d, MR_MSG_CONFIG_SCRIPT, rd32(f), d->lim.config_script_bytes,
                      "CONFIG_SCRIPT", "config_script_bytes");
  case MR_ID_HEADER:
    return start_text(d, MR_MSG_HEADER, rd32(f), d->lim.header_bytes, "HEADER",
                      "header_bytes");
  case MR_ID_TEXT:
    return start_text(d, MR_MSG_TEXT, rd32(f), d->lim.text_bytes, "TEXT", "text_bytes");
  case MR_ID_CLOSE:
    d->msg = mr_message_new(MR_MSG_CLOSE);
    if (d->msg == NULL)
      reject(d, MR_ENOMEM, 0, "out of memory for a CLOSE");
    return 0;
  case MR_ID_QUERY: {
    uint64_t reserved = rd64(f), len = rd64(f + 16);
    if (reserved != 0 && len <= d->lim.query_bytes) {
      reject(d, MR_EPROTO, len, "QUERY reserved field is %llu, must be 0",
             (unsigned long long)reserved);
      return 0;
    }
    int rc = start_text(d, MR_MSG_QUERY, len, d->lim.query_bytes, "QUERY", "query_bytes");
    if (d->msg != NULL)
      d->msg->u.query.correlation_id = rd64(f + 8);
    return rc;
  }
  case MR_ID_RESPONSE: {
    int rc = start_text(d, MR_MSG_RESPONSE, rd64(f + 8), d->lim.query_bytes,
                        "RESPONSE", "query_bytes");
    if (d->msg != NULL)
      d->msg->u.query.correlation_id = rd64(f);
    return rc;
  }
  case MR_ID_DEPENDENCY_QUERY:
    return start_text(d, MR_MSG_DEPENDENCY_QUERY, rd64(f), d->lim.query_bytes,
                      "DEPENDENCY_QUERY", "query_bytes");
  case MR_ID_ACQUISITION:
    return after_fixed_acquisition(d);
  case MR_ID_IMAGE:
    return after_fixed_image(d);
  case MR_ID_WAVEFORM:
    return after_fixed_waveform(d);
  case MR_ID_DICOM:
    return after_fixed_dicom(d);
  }
  return fail(d, MR_EPROTO, "unknown message id %u", d->id);
}

/* All segments are in: finish the message (or ask for more). */
static int after_body(mr_decoder *d) {
  mr_message *m = d->msg;
  d->body_pass++;
  switch (m->kind) {
  case MR_MSG_CONFIG_SCRIPT:
  case MR_MSG_HEADER:
  case MR_MSG_TEXT:
  case MR_MSG_DEPENDENCY_QUERY:
    strip_trailing_nuls(m->u.text, &m->text_len);
    break;
  case MR_MSG_QUERY:
  case MR_MSG_RESPONSE:
    strip_trailing_nuls(m->u.query.text, &m->text_len);
    break;
  case MR_MSG_ACQUISITION:
    if (m->u.acq.head.flags & MR_ACQ_COMPRESSED) {
      if (d->body_pass == 1)
        return after_compressed_size(d);
    } else { /* looked at here, in cache, rather than on the session's thread */
      m->u.acq.finite = (int8_t)(mr_acquisition_finite(&m->u.acq) ? 1 : -1);
    }
    break;
  case MR_MSG_DICOM:
    if (d->body_pass <= 2)
      return after_dicom_length(d);
    break;
  case MR_MSG_IMAGE: {
    /* Gadgetron counts and sends a trailing NUL in the attributes. */
    size_t n = m->u.image.head.attribute_string_len;
    strip_trailing_nuls(m->u.image.attributes, &n);
    break;
  }
  default:
    break;
  }
  return 0;
}

/* A message was just rejected: with nothing left to skip it is over. */
static int after_reject(mr_decoder *d) {
  if (d->skip_left == 0)
    next_message(d);
  return 0;
}

/* Advances after a stage completes; may emit. */
static int advance(mr_decoder *d) {
  int rc;
  switch (d->stage) {
  case ST_ID:
    d->id = rd16(d->fixed);
    d->need = fixed_size(d->id);
    if (d->need == SIZE_MAX)
      return fail(d, MR_EPROTO, "unknown message id %u at byte %llu", d->id,
                  (unsigned long long)d->msg_start);
    d->have = 0;
    d->stage = ST_FIXED;
    if (d->need > 0)
      return 0;
    /* CLOSE has no fixed part: go straight on. */
    __attribute__((fallthrough));
  case ST_FIXED:
    d->nseg = d->cur = 0;
    d->seg_have = 0;
    d->stage = ST_BODY;
    if ((rc = after_fixed(d)) != 0)
      return rc;
    if (d->stage == ST_SKIP)
      return after_reject(d);
    break;
  case ST_BODY:
    break;
  case ST_SKIP:
    next_message(d);
    return 0;
  case ST_FAILED:
    return d->fatal_code;
  }
  /* ST_BODY: wait for segments, or finish. */
  if (d->cur < d->nseg)
    return 0;
  if ((rc = after_body(d)) != 0)
    return rc;
  if (d->stage == ST_SKIP)
    return after_reject(d);
  if (d->cur < d->nseg)
    return 0; /* more segments were added */
  return emit(d);
}

/* A body segment got n more bytes; moves on when it is full. */
static int body_took(mr_decoder *d, size_t n) {
  d->seg_have += n;
  d->offset += n;
  if (d->seg_have < d->seg[d->cur].len)
    return 0;
  d->cur++;
  d->seg_have = 0;
  return d->cur == d->nseg ? advance(d) : 0;
}

size_t mr_decoder_body_room(mr_decoder *d, void **dst) {
  *dst = NULL;
  if (d->stage != ST_BODY || d->cur >= d->nseg)
    return 0;
  *dst = d->seg[d->cur].dst + d->seg_have;
  return d->seg[d->cur].len - d->seg_have;
}

int mr_decoder_received(mr_decoder *d, size_t n) {
  if (d->stage == ST_FAILED)
    return d->fatal_code;
  if (n == 0)
    return 0;
  if (d->stage != ST_BODY || d->cur >= d->nseg || n > d->seg[d->cur].len - d->seg_have)
    return fail(d, MR_EINVAL, "%zu bytes received in place outside a message body", n);
  return body_took(d, n);
}

int mr_decoder_feed(mr_decoder *d, const void *bytes, size_t len) {
  const uint8_t *p = bytes;
  if (d->stage == ST_FAILED)
    return d->fatal_code;
  while (len > 0) {
    size_t n;
    switch (d->stage) {
    case ST_ID:
    case ST_FIXED:
      if (d->stage == ST_ID && d->have == 0)
        d->msg_start = d->offset;
      n = d->need - d->have;
      if (n > len)
        n = len;
      memcpy(d->fixed + d->have, p, n);
      d->have += n;
      break;
    case ST_BODY: {
      n = d->seg[d->cur].len - d->seg_have;
      if (n > len)
        n = len;
      memcpy(d->seg[d->cur].dst + d->seg_have, p, n);
      p += n;
      len -= n;
      int rc = body_took(d, n);
      if (rc != 0)
        return rc;
      continue;
    }
    case ST_SKIP:
      n = d->skip_left < len ? (size_t)d->skip_left : len;
      d->skip_left -= n;
      break;
    default:
      return d->fatal_code;
    }
    p += n;
    len -= n;
    d->offset += n;

    int done = 0;
    switch (d->stage) {
    case ST_ID:
    case ST_FIXED:
      done = d->have == d->need;
      break;
    case ST_SKIP:
      done = d->skip_left == 0;
      break;
    default:
      break;
    }
    if (done) {
      int rc = advance(d);
      if (rc != 0)
        return rc;
    }
  }
  return 0;
}
