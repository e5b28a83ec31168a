/* The wire decoder: a resumable state machine from bytes to messages.
 *
 * Feed it bytes in chunks of any size (one byte at a time works); it calls
 * on_message for every complete message. It allocates nothing whose size it
 * has not checked against its mr_limits first.
 *
 * Two kinds of trouble:
 * - A message that is well framed but not acceptable (over a limit, a
 *   QUERY with reserved != 0, an image whose attribute length disagrees
 *   with its header, ...): on_error is called with the reason as soon as
 *   it is known (when a declared length arrives, before its body), the
 *   message's bytes are skipped without being stored, and decoding goes on
 *   with the next message. The peer stays in step, so it can still be answered
 *   and its CLOSE still read.
 * - A framing error (an unknown id, an image of unknown data type): the
 *   stream cannot be followed any further. mr_decoder_feed() returns the
 *   error and every later call returns it again. */
#ifndef MR_PROTOCOL_DECODE_H
#define MR_PROTOCOL_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "wire_limits.h"
#include "message.h"

typedef struct mr_decoder mr_decoder;

typedef struct mr_decoder_callbacks {
  /* Takes msg. A non-zero return stops mr_decoder_feed() at once, which
   * returns that value; the decoder is unusable afterwards. */
  int (*on_message)(void *ctx, mr_message *msg);
  /* A rejected message (see above): code is MR_ELIMIT, MR_EPROTO or
   * MR_ENOMEM; text says which message, which field, which value. May be
   * NULL (rejections are then silent). */
  void (*on_error)(void *ctx, int code, const char *text);
  void *ctx;
} mr_decoder_callbacks;

/* limits is copied; NULL means mr_limits_default. */
int mr_decoder_create(const mr_limits *limits, const mr_decoder_callbacks *cb,
                      mr_decoder **out);
void mr_decoder_destroy(mr_decoder *dec);

/* Decodes len bytes. Returns 0, a negative MR_E* code on a framing error
 * (text in mr_decoder_error()), or on_message's non-zero return. */
int mr_decoder_feed(mr_decoder *dec, const void *bytes, size_t len);

/* Receiving in place, without a copy through the caller's buffer: while
 * the decoder is inside a variable part of a message (an acquisition's
 * samples, an image's pixels, ...), *dst is where its next bytes belong and
 * the return value is how many may go there; 0 (and *dst NULL) otherwise.
 * After receiving n of them there (n <= that room), the caller passes them
 * on with mr_decoder_received() instead of mr_decoder_feed(). The room
 * stays valid until the next call of either. */
size_t mr_decoder_body_room(mr_decoder *dec, void **dst);
/* The n bytes received in place at mr_decoder_body_room()'s *dst: like
 * mr_decoder_feed() of those bytes. */
int mr_decoder_received(mr_decoder *dec, size_t n);

/* The last framing error's text ("" if none). */
const char *mr_decoder_error(const mr_decoder *dec);
/* True between messages (no partial message buffered). */
int mr_decoder_idle(const mr_decoder *dec);
/* Bytes consumed since creation. */
uint64_t mr_decoder_offset(const mr_decoder *dec);

#endif
