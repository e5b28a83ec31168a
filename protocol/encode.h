/* The wire encoder: a message becomes a few (pointer, length) pieces, the
 * id and fixed-size header in a small buffer of its own and the payload
 * pointing into the message itself, so pixels are never copied. */
#ifndef MR_PROTOCOL_ENCODE_H
#define MR_PROTOCOL_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "message.h"

#define MR_ENCODE_HEAD_MAX (2 + MR_CONFIG_NAME_BYTES)
#define MR_ENCODE_PIECES 4

typedef struct mr_piece {
  const void *base;
  size_t len;
} mr_piece;

typedef struct mr_encoded {
  uint8_t head[MR_ENCODE_HEAD_MAX];
  mr_piece piece[MR_ENCODE_PIECES];
  int npieces;
  uint64_t total; /* bytes on the wire */
} mr_encoded;

/* Encodes a wire message. Borrows msg: the pieces point into it and into
 * out->head, so both must outlive the write. Returns MR_EINVAL for chain
 * objects and for images or acquisitions whose buffers disagree with their
 * headers.
 *
 * Text payloads go out without a trailing NUL (as Gadgetron's C++ peers
 * send them); image attributes go out with one, counted in both attr_len
 * and attribute_string_len (as Gadgetron sends them). */
int mr_encode(const mr_message *msg, mr_encoded *out);

/* Encodes msg into one newly malloc'ed buffer (*bytes, *len); caller frees. */
int mr_encode_flat(const mr_message *msg, uint8_t **bytes, size_t *len);

#endif
