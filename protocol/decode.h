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

/* The last framing error's text ("" if none). */
const char *mr_decoder_error(const mr_decoder *dec);
/* True between messages (no partial message buffered). */
int mr_decoder_idle(const mr_decoder *dec);
/* Bytes consumed since creation. */
uint64_t mr_decoder_offset(const mr_decoder *dec);

#endif
