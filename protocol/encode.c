#include "encode.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "payload.h"

static uint8_t *wr16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  return p + 2;
}
static uint8_t *wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
  return p + 4;
}
static uint8_t *wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
  return p + 8;
}

static void add(mr_encoded *e, const void *base, size_t len) {
  if (len == 0)
    return;
  e->piece[e->npieces].base = base;
  e->piece[e->npieces].len = len;
  e->npieces++;
  e->total += len;
}

static int encode_image(const mr_image *im, mr_encoded *e, uint8_t *p) {
  ISMRMRD_ImageHeader h = im->head;
  if (mr_payload_image_matches(im) < 0)
    return MR_EINVAL;
  uint64_t attr_len = im->attributes != NULL ? strlen(im->attributes) + 1 : 0;
  if (attr_len > UINT32_MAX)
    return MR_EINVAL;
  h.attribute_string_len = (uint32_t)attr_len;
  memcpy(p, &h, sizeof h);
  p = wr64(p + sizeof h, attr_len);
  add(e, e->head, (size_t)(p - e->head));
  add(e, im->attributes, attr_len);
  add(e, im->data, im->data_bytes);
  return 0;
}

static int encode_acquisition(const mr_acquisition *a, mr_encoded *e,
                              uint8_t *p) {
  uint64_t traj_bytes, data_bytes;
  if (mr_payload_acquisition(&a->head, &traj_bytes, &data_bytes) < 0 ||
      (traj_bytes > 0 && a->traj == NULL))
    return MR_EINVAL;
  memcpy(p, &a->head, sizeof a->head);
  add(e, e->head, (size_t)(p + sizeof a->head - e->head));
  add(e, a->traj, (size_t)traj_bytes);
  if (a->head.flags & MR_ACQ_COMPRESSED) {
    /* NHLBI-compressed samples (nhlbi.h): u32 size, then the block. The
     * size goes in the head buffer's spare room after the header. */
    if (a->compressed == NULL)
      return MR_EINVAL;
    uint8_t *size = p + sizeof a->head;
    wr32(size, a->compressed_bytes);
    add(e, size, 4);
    add(e, a->compressed, a->compressed_bytes);
    return 0;
  }
  if (data_bytes > 0 && a->data == NULL)
    return MR_EINVAL;
  add(e, a->data, (size_t)data_bytes);
  return 0;
}

int mr_encode(const mr_message *m, mr_encoded *e) {
  uint16_t id = mr_message_wire_id(m->kind);
  if (id == 0)
    return MR_EINVAL;
  e->npieces = 0;
  e->total = 0;
  uint8_t *p = wr16(e->head, id);
  switch (m->kind) {
  case MR_MSG_CONFIG_FILE:
    memset(p, 0, MR_CONFIG_NAME_BYTES);
    memcpy(p, m->u.config_name, strnlen(m->u.config_name, MR_CONFIG_NAME_BYTES));
    add(e, e->head, 2 + MR_CONFIG_NAME_BYTES);
    return 0;
  case MR_MSG_CONFIG_SCRIPT:
  case MR_MSG_HEADER:
  case MR_MSG_TEXT:
    if (m->text_len > UINT32_MAX)
      return MR_EINVAL;
    p = wr32(p, (uint32_t)m->text_len);
    add(e, e->head, (size_t)(p - e->head));
    add(e, m->u.text, m->text_len);
    return 0;
  case MR_MSG_CLOSE:
    add(e, e->head, 2);
    return 0;
  case MR_MSG_QUERY:
    p = wr64(p, 0);
    p = wr64(p, m->u.query.correlation_id);
    p = wr64(p, m->text_len);
    add(e, e->head, (size_t)(p - e->head));
    add(e, m->u.query.text, m->text_len);
    return 0;
  case MR_MSG_RESPONSE:
    p = wr64(p, m->u.query.correlation_id);
    p = wr64(p, m->text_len);
    add(e, e->head, (size_t)(p - e->head));
    add(e, m->u.query.text, m->text_len);
    return 0;
  case MR_MSG_DEPENDENCY_QUERY:
    p = wr64(p, m->text_len);
    add(e, e->head, (size_t)(p - e->head));
    add(e, m->u.text, m->text_len);
    return 0;
  case MR_MSG_ACQUISITION:
    return encode_acquisition(&m->u.acq, e, p);
  case MR_MSG_IMAGE:
    return encode_image(&m->u.image, e, p);
  case MR_MSG_DICOM: {
    /* u32 nbytes | the file | u64 name length, name, u64 meta length (in
     * the head buffer after the first 6 bytes) | the meta XML. */
    const mr_dicom *f = &m->u.dicom;
    size_t name_len = strlen(f->name), attr_len = strlen(f->attributes);
    if ((f->nbytes > 0 && f->bytes == NULL) || name_len > MR_ENCODE_HEAD_MAX - 6 - 16)
      return MR_EINVAL;
    p = wr32(p, f->nbytes);
    add(e, e->head, 6);
    add(e, f->bytes, f->nbytes);
    uint8_t *tail = p;
    p = wr64(p, name_len);
    memcpy(p, f->name, name_len);
    p = wr64(p + name_len, attr_len);
    add(e, tail, (size_t)(p - tail));
    add(e, f->attributes, attr_len);
    return 0;
  }
  case MR_MSG_WAVEFORM: {
    uint64_t bytes;
    if (mr_payload_waveform(&m->u.waveform.head, &bytes) < 0 ||
        (bytes > 0 && m->u.waveform.data == NULL))
      return MR_EINVAL;
    /* Copied field by field into a zeroed struct so its 8 padding bytes
     * go out as zeros, never as stale memory. */
    const ISMRMRD_WaveformHeader *s = &m->u.waveform.head;
    ISMRMRD_WaveformHeader h;
    memset(&h, 0, sizeof h);
    h.version = s->version;
    h.flags = s->flags;
    h.measurement_uid = s->measurement_uid;
    h.scan_counter = s->scan_counter;
    h.time_stamp = s->time_stamp;
    h.number_of_samples = s->number_of_samples;
    h.channels = s->channels;
    h.sample_time_us = s->sample_time_us;
    h.waveform_id = s->waveform_id;
    memcpy(p, &h, sizeof h);
    add(e, e->head, 2 + sizeof h);
    add(e, m->u.waveform.data, (size_t)bytes);
    return 0;
  }
  default:
    return MR_EINVAL;
  }
}

int mr_encode_flat(const mr_message *msg, uint8_t **bytes, size_t *len) {
  mr_encoded e;
  int rc = mr_encode(msg, &e);
  if (rc != 0)
    return rc;
  uint8_t *buf = malloc(e.total > 0 ? e.total : 1);
  if (buf == NULL)
    return MR_ENOMEM;
  size_t off = 0;
  for (int i = 0; i < e.npieces; i++) {
    memcpy(buf + off, e.piece[i].base, e.piece[i].len);
    off += e.piece[i].len;
  }
  *bytes = buf;
  *len = off;
  return 0;
}
