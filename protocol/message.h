/* One refcounted message type for everything that travels: the wire
 * messages of the Gadgetron/ISMRMRD protocol and the objects gadgets pass
 * to each other inside a chain.
 *
 * Ownership: a function that "takes" a message consumes one reference;
 * one that "borrows" it does not. mr_message_unref() frees on the last
 * reference. Passing a message down a gadget chain always hands it over. */
#ifndef MR_PROTOCOL_MESSAGE_H
#define MR_PROTOCOL_MESSAGE_H

#include <complex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/waveform.h>

#include "wire_limits.h"

_Static_assert(sizeof(ISMRMRD_AcquisitionHeader) == 340,
               "AcquisitionHeader must be the packed 340-byte ISMRMRD struct");
_Static_assert(sizeof(ISMRMRD_ImageHeader) == 198,
               "ImageHeader must be the packed 198-byte ISMRMRD struct");
_Static_assert(sizeof(ISMRMRD_WaveformHeader) == 40,
               "WaveformHeader must be the naturally aligned 40-byte struct");

/* Wire ids (the uint16 that starts every message). */
enum mr_wire_id {
  MR_ID_CONFIG_FILE = 1,
  MR_ID_CONFIG_SCRIPT = 2,
  MR_ID_HEADER = 3,
  MR_ID_CLOSE = 4,
  MR_ID_TEXT = 5,
  MR_ID_QUERY = 6,
  MR_ID_RESPONSE = 7,
  MR_ID_ACQUISITION = 1008,
  MR_ID_DICOM = 1018, /* DICOM_WITHNAME */
  MR_ID_DEPENDENCY_QUERY = 1019,
  MR_ID_IMAGE = 1022,
  MR_ID_WAVEFORM = 1026,
};

/* ISMRMRD acquisition flag bit N is mask 1 << (N - 1). */
#define MR_FLAG(bit) (UINT64_C(1) << ((bit) - 1))
/* Bit 54: NHLBI-compressed samples follow the trajectory. */
#define MR_ACQ_COMPRESSED MR_FLAG(54)

typedef enum mr_message_kind {
  MR_MSG_CONFIG_FILE,
  MR_MSG_CONFIG_SCRIPT,
  MR_MSG_HEADER,
  MR_MSG_CLOSE,
  MR_MSG_TEXT,
  MR_MSG_QUERY,
  MR_MSG_RESPONSE,
  MR_MSG_ACQUISITION,
  MR_MSG_DEPENDENCY_QUERY,
  MR_MSG_IMAGE,
  MR_MSG_WAVEFORM,
  MR_MSG_DICOM, /* a DICOM file with a name (Gadgetron's DICOM writer, id 1018) */
  /* Never on the wire: objects gadgets pass along a chain. Their payload
   * types are defined by gadgets/ (protocol/ only carries and frees them). */
  MR_MSG_KSPACE,      /* a k-space buffer (gadgets/kspace.h) */
  MR_MSG_IMAGE_ARRAY, /* complex images, maybe per coil (gadgets/image_array.h) */
  MR_MSG_KIND_COUNT
} mr_message_kind;

#define MR_KIND_BIT(kind) (UINT32_C(1) << (kind))
_Static_assert(MR_MSG_KIND_COUNT <= 32, "kind masks are 32 bits");

typedef struct mr_acquisition {
  ISMRMRD_AcquisitionHeader head;
  float *traj;         /* [number_of_samples][trajectory_dimensions] or NULL */
  float complex *data; /* [active_channels][number_of_samples]; NULL if compressed */
  uint8_t *compressed; /* NHLBI-compressed samples, when MR_ACQ_COMPRESSED */
  uint32_t compressed_bytes;
  /* 1: every sample and trajectory value is finite, -1: one is not, 0:
   * not looked at (mr_acquisition_finite). The decoder looks as the body
   * arrives, on the loop thread, while the bytes are still in cache. */
  int8_t finite;
} mr_acquisition;

typedef struct mr_image {
  ISMRMRD_ImageHeader head;
  char *attributes; /* meta XML, NUL-terminated, or NULL */
  void *data;       /* pixels of head.data_type: x, y, z, channel */
  size_t data_bytes;
} mr_image;

typedef struct mr_waveform {
  ISMRMRD_WaveformHeader head;
  uint32_t *data; /* [channels][number_of_samples] */
} mr_waveform;

/* Id 1018 on the wire: u32 nbytes, the file, u64 name length, the name,
 * u64 meta length, the ISMRMRD meta XML (both without a NUL). */
typedef struct mr_dicom {
  uint8_t *bytes; /* the DICOM file (Part 10: preamble, DICM, meta, data set) */
  uint32_t nbytes;
  char *name;       /* NUL-terminated, maybe empty */
  char *attributes; /* ISMRMRD meta XML, NUL-terminated, maybe empty */
} mr_dicom;

typedef struct mr_query {
  uint64_t correlation_id;
  char *text;
} mr_query;

/* Payload of a chain object (MR_MSG_KSPACE, MR_MSG_IMAGE_ARRAY). */
typedef struct mr_object {
  void *ptr;
  void (*free)(void *ptr);
} mr_object;

typedef struct mr_message {
  atomic_int refs;
  mr_message_kind kind;
  union {
    char config_name[MR_CONFIG_NAME_BYTES + 1]; /* CONFIG_FILE, NUL-terminated */
    char *text; /* CONFIG_SCRIPT, HEADER, TEXT, DEPENDENCY_QUERY: NUL-terminated */
    mr_query query; /* QUERY and RESPONSE */
    mr_acquisition acq;
    mr_image image;
    mr_waveform waveform;
    mr_dicom dicom;
    mr_object object;
  } u;
  size_t text_len; /* strlen of u.text / u.query.text */
} mr_message;

/* Allocation: every constructor returns NULL when out of memory. */

/* A message of kind with no payload yet (zeroed), one reference. */
mr_message *mr_message_new(mr_message_kind kind);
/* TEXT, CONFIG_SCRIPT, HEADER or DEPENDENCY_QUERY with a copy of len bytes
 * of s (need not be NUL-terminated). */
mr_message *mr_message_new_text(mr_message_kind kind, const char *s, size_t len);
/* QUERY or RESPONSE with a copy of text. */
mr_message *mr_message_new_query(mr_message_kind kind, uint64_t correlation_id,
                                 const char *text, size_t len);
/* CONFIG_FILE naming name (truncated to 1024 bytes). */
mr_message *mr_message_new_config_file(const char *name);
/* An acquisition with room for its trajectory and data, as head says. */
mr_message *mr_message_new_acquisition(const ISMRMRD_AcquisitionHeader *head);
/* An image with room for head's pixels (payload.h); attributes copied if
 * not NULL. Returns NULL also when head.data_type is not an ISMRMRD type
 * or the pixels' size does not fit in size_t. */
mr_message *mr_message_new_image(const ISMRMRD_ImageHeader *head,
                                 const char *attributes);
/* A waveform with room for head's data. */
mr_message *mr_message_new_waveform(const ISMRMRD_WaveformHeader *head);
/* A DICOM message: takes bytes (malloc'ed, nbytes long), copies name and
 * attributes (NULL: empty). NULL when out of memory (bytes freed). */
mr_message *mr_message_new_dicom(uint8_t *bytes, uint32_t nbytes, const char *name,
                                 const char *attributes);
/* A chain object; takes ptr (freed with free_fn on the last unref). */
mr_message *mr_message_new_object(mr_message_kind kind, void *ptr,
                                  void (*free_fn)(void *));

/* Adds a reference; returns msg. */
mr_message *mr_message_ref(mr_message *msg);
/* Drops a reference (NULL is fine). */
void mr_message_unref(mr_message *msg);

/* Wire id of a wire kind; 0 for chain objects. */
uint16_t mr_message_wire_id(mr_message_kind kind);
/* "ACQUISITION", "IMAGE", ...; never NULL. */
const char *mr_message_kind_name(mr_message_kind kind);

/* Floats of trajectory / complex samples an acquisition header announces
 * (u16 x u16: never overflows; byte sizes come from payload.h). */
size_t mr_acquisition_traj_count(const ISMRMRD_AcquisitionHeader *head);
size_t mr_acquisition_data_count(const ISMRMRD_AcquisitionHeader *head);
/* 1 when every complex sample and trajectory value of a (uncompressed) is
 * finite, else 0: integer tests of the exponent bits, in blocks the
 * compiler vectorises (half the time of isfinite() value by value). */
int mr_acquisition_finite(const mr_acquisition *a);
/* Bytes of one pixel of an ISMRMRD data_type; 0 when unknown. */
size_t mr_image_pixel_bytes(uint16_t data_type);
/* The memory a message's payload holds (samples and trajectory, pixels
 * and attributes, a waveform's data, a DICOM file, text): what queues and
 * the memory budget count. */
size_t mr_message_payload_bytes(const mr_message *m);
/* u32 values a waveform header announces (u16 x u16). */
size_t mr_waveform_data_count(const ISMRMRD_WaveformHeader *head);

/* Flag test on an acquisition (bit is the ISMRMRD bit number, 1-based). */
static inline int mr_acq_flag(const mr_acquisition *a, int bit) {
  return (a->head.flags & MR_FLAG(bit)) != 0;
}

#endif
