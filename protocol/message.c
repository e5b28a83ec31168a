#include "message.h"

#include <stdlib.h>
#include <string.h>

#include "payload.h"

static const struct {
  uint16_t wire_id;
  const char *name;
} kinds[MR_MSG_KIND_COUNT] = {
    [MR_MSG_CONFIG_FILE] = {MR_ID_CONFIG_FILE, "CONFIG_FILE"},
    [MR_MSG_CONFIG_SCRIPT] = {MR_ID_CONFIG_SCRIPT, "CONFIG_SCRIPT"},
    [MR_MSG_HEADER] = {MR_ID_HEADER, "HEADER"},
    [MR_MSG_CLOSE] = {MR_ID_CLOSE, "CLOSE"},
    [MR_MSG_TEXT] = {MR_ID_TEXT, "TEXT"},
    [MR_MSG_QUERY] = {MR_ID_QUERY, "QUERY"},
    [MR_MSG_RESPONSE] = {MR_ID_RESPONSE, "RESPONSE"},
    [MR_MSG_ACQUISITION] = {MR_ID_ACQUISITION, "ACQUISITION"},
    [MR_MSG_DEPENDENCY_QUERY] = {MR_ID_DEPENDENCY_QUERY, "DEPENDENCY_QUERY"},
    [MR_MSG_IMAGE] = {MR_ID_IMAGE, "IMAGE"},
    [MR_MSG_WAVEFORM] = {MR_ID_WAVEFORM, "WAVEFORM"},
    [MR_MSG_DICOM] = {MR_ID_DICOM, "DICOM"},
    [MR_MSG_KSPACE] = {0, "KSPACE"},
    [MR_MSG_IMAGE_ARRAY] = {0, "IMAGE_ARRAY"},
};

uint16_t mr_message_wire_id(mr_message_kind kind) {
  return (unsigned)kind < MR_MSG_KIND_COUNT ? kinds[kind].wire_id : 0;
}

const char *mr_message_kind_name(mr_message_kind kind) {
  return (unsigned)kind < MR_MSG_KIND_COUNT ? kinds[kind].name : "UNKNOWN";
}

mr_message *mr_message_new(mr_message_kind kind) {
  mr_message *m = calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  atomic_init(&m->refs, 1);
  m->kind = kind;
  return m;
}

static char *copy_text(const char *s, size_t len) {
  char *t = malloc(len + 1);
  if (t == NULL)
    return NULL;
  if (len > 0)
    memcpy(t, s, len);
  t[len] = '\0';
  return t;
}

mr_message *mr_message_new_text(mr_message_kind kind, const char *s,
                                size_t len) {
  mr_message *m = mr_message_new(kind);
  if (m == NULL)
    return NULL;
  m->u.text = copy_text(s, len);
  if (m->u.text == NULL) {
    free(m);
    return NULL;
  }
  m->text_len = len;
  return m;
}

mr_message *mr_message_new_query(mr_message_kind kind, uint64_t correlation_id,
                                 const char *text, size_t len) {
  mr_message *m = mr_message_new(kind);
  if (m == NULL)
    return NULL;
  m->u.query.correlation_id = correlation_id;
  m->u.query.text = copy_text(text, len);
  if (m->u.query.text == NULL) {
    free(m);
    return NULL;
  }
  m->text_len = len;
  return m;
}

mr_message *mr_message_new_config_file(const char *name) {
  mr_message *m = mr_message_new(MR_MSG_CONFIG_FILE);
  if (m == NULL)
    return NULL;
  size_t n = strnlen(name, MR_CONFIG_NAME_BYTES);
  memcpy(m->u.config_name, name, n);
  m->u.config_name[n] = '\0';
  m->text_len = n;
  return m;
}

size_t mr_acquisition_traj_count(const ISMRMRD_AcquisitionHeader *head) {
  return (size_t)head->trajectory_dimensions * head->number_of_samples;
}

size_t mr_acquisition_data_count(const ISMRMRD_AcquisitionHeader *head) {
  return (size_t)head->active_channels * head->number_of_samples;
}

/* 1 when no float of f[n] has its exponent bits all set (infinity, NaN). */
static int floats_finite(const float *f, size_t n) {
  enum { BLOCK = 64 };
  uint32_t bad = 0;
  size_t i = 0;
  for (; i + BLOCK <= n; i += BLOCK) {
    uint32_t block = 0;
    for (int k = 0; k < BLOCK; k++) {
      uint32_t bits;
      memcpy(&bits, f + i + k, sizeof bits);
      block |= (bits & 0x7f800000u) + 0x00800000u; /* carries into bit 31 when all set */
    }
    bad |= block;
  }
  bad &= 0x80000000u;
  for (; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, f + i, sizeof bits);
    bad |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad == 0;
}

int mr_acquisition_finite(const mr_acquisition *a) {
  return floats_finite((const float *)a->data, 2 * mr_acquisition_data_count(&a->head)) &&
         (a->traj == NULL || floats_finite(a->traj, mr_acquisition_traj_count(&a->head)));
}

mr_message *mr_message_new_acquisition(const ISMRMRD_AcquisitionHeader *head) {
  mr_message *m = mr_message_new(MR_MSG_ACQUISITION);
  if (m == NULL)
    return NULL;
  mr_acquisition *a = &m->u.acq;
  a->head = *head;
  uint64_t traj_bytes, data_bytes;
  if (mr_payload_acquisition(head, &traj_bytes, &data_bytes) < 0)
    goto fail;
  if (traj_bytes > 0 && (a->traj = malloc((size_t)traj_bytes)) == NULL)
    goto fail;
  if (data_bytes > 0 && (a->data = malloc((size_t)data_bytes)) == NULL)
    goto fail;
  return m;
fail:
  mr_message_unref(m);
  return NULL;
}

size_t mr_image_pixel_bytes(uint16_t data_type) {
  switch (data_type) {
  case ISMRMRD_USHORT:
  case ISMRMRD_SHORT:
    return 2;
  case ISMRMRD_UINT:
  case ISMRMRD_INT:
  case ISMRMRD_FLOAT:
    return 4;
  case ISMRMRD_DOUBLE:
  case ISMRMRD_CXFLOAT:
    return 8;
  case ISMRMRD_CXDOUBLE:
    return 16;
  }
  return 0;
}

mr_message *mr_message_new_image(const ISMRMRD_ImageHeader *head,
                                 const char *attributes) {
  uint64_t data_bytes;
  if (mr_payload_image(head, &data_bytes) < 0)
    return NULL;
  mr_message *m = mr_message_new(MR_MSG_IMAGE);
  if (m == NULL)
    return NULL;
  mr_image *im = &m->u.image;
  im->head = *head;
  im->data_bytes = (size_t)data_bytes;
  if (im->data_bytes > 0 && (im->data = calloc(1, im->data_bytes)) == NULL)
    goto fail;
  if (attributes != NULL &&
      (im->attributes = copy_text(attributes, strlen(attributes))) == NULL)
    goto fail;
  return m;
fail:
  mr_message_unref(m);
  return NULL;
}

size_t mr_waveform_data_count(const ISMRMRD_WaveformHeader *head) {
  return (size_t)head->channels * head->number_of_samples;
}

mr_message *mr_message_new_dicom(uint8_t *bytes, uint32_t nbytes, const char *name,
                                 const char *attributes) {
  mr_message *m = mr_message_new(MR_MSG_DICOM);
  if (m == NULL) {
    free(bytes);
    return NULL;
  }
  m->u.dicom.bytes = bytes;
  m->u.dicom.nbytes = nbytes;
  m->u.dicom.name = copy_text(name != NULL ? name : "", name != NULL ? strlen(name) : 0);
  m->u.dicom.attributes =
      copy_text(attributes != NULL ? attributes : "", attributes != NULL ? strlen(attributes) : 0);
  if (m->u.dicom.name == NULL || m->u.dicom.attributes == NULL) {
    mr_message_unref(m);
    return NULL;
  }
  return m;
}

mr_message *mr_message_new_waveform(const ISMRMRD_WaveformHeader *head) {
  mr_message *m = mr_message_new(MR_MSG_WAVEFORM);
  if (m == NULL)
    return NULL;
  m->u.waveform.head = *head;
  uint64_t bytes;
  if (mr_payload_waveform(head, &bytes) < 0 ||
      (bytes > 0 && (m->u.waveform.data = malloc((size_t)bytes)) == NULL)) {
    mr_message_unref(m);
    return NULL;
  }
  return m;
}

mr_message *mr_message_new_object(mr_message_kind kind, void *ptr,
                                  void (*free_fn)(void *)) {
  mr_message *m = mr_message_new(kind);
  if (m == NULL) {
    if (free_fn != NULL)
      free_fn(ptr);
    return NULL;
  }
  m->u.object.ptr = ptr;
  m->u.object.free = free_fn;
  return m;
}

mr_message *mr_message_ref(mr_message *msg) {
  atomic_fetch_add_explicit(&msg->refs, 1, memory_order_relaxed);
  return msg;
}

static void free_payload(mr_message *m) {
  switch (m->kind) {
  case MR_MSG_CONFIG_SCRIPT:
  case MR_MSG_HEADER:
  case MR_MSG_TEXT:
  case MR_MSG_DEPENDENCY_QUERY:
    free(m->u.text);
    break;
  case MR_MSG_QUERY:
  case MR_MSG_RESPONSE:
    free(m->u.query.text);
    break;
  case MR_MSG_ACQUISITION:
    free(m->u.acq.traj);
    free(m->u.acq.data);
    free(m->u.acq.compressed);
    break;
  case MR_MSG_IMAGE:
    free(m->u.image.attributes);
    free(m->u.image.data);
    break;
  case MR_MSG_WAVEFORM:
    free(m->u.waveform.data);
    break;
  case MR_MSG_DICOM:
    free(m->u.dicom.bytes);
    free(m->u.dicom.name);
    free(m->u.dicom.attributes);
    break;
  case MR_MSG_KSPACE:
  case MR_MSG_IMAGE_ARRAY:
    if (m->u.object.free != NULL)
      m->u.object.free(m->u.object.ptr);
    break;
  case MR_MSG_CONFIG_FILE:
  case MR_MSG_CLOSE:
  case MR_MSG_KIND_COUNT:
    break;
  }
}

void mr_message_unref(mr_message *msg) {
  if (msg == NULL)
    return;
  if (atomic_fetch_sub_explicit(&msg->refs, 1, memory_order_acq_rel) != 1)
    return;
  free_payload(msg);
  free(msg);
}

size_t mr_message_payload_bytes(const mr_message *m) {
  switch (m->kind) {
  case MR_MSG_ACQUISITION:
    return mr_acquisition_traj_count(&m->u.acq.head) * sizeof(float) +
           (m->u.acq.data != NULL ? mr_acquisition_data_count(&m->u.acq.head) * 8 : 0) +
           m->u.acq.compressed_bytes;
  case MR_MSG_IMAGE:
    return m->u.image.data_bytes +
           (m->u.image.attributes != NULL ? strlen(m->u.image.attributes) : 0);
  case MR_MSG_WAVEFORM:
    return mr_waveform_data_count(&m->u.waveform.head) * sizeof(uint32_t);
  case MR_MSG_DICOM:
    return m->u.dicom.nbytes + strlen(m->u.dicom.name) + strlen(m->u.dicom.attributes);
  default:
    return m->text_len;
  }
}
