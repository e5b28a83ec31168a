/* One conversation with the server, full duplex: a sender thread writes
 * what a source yields (then CLOSE) while the calling thread reads and
 * decodes the server's messages until the server's CLOSE.
 *
 * Images are therefore received while acquisitions are still going out
 * (docs/protocol.md rule 3). The stream itself handles TEXT (each printed on
 * stderr; one beginning "ERROR:" counts as a server error) and CLOSE, and
 * treats any message a server must not send as a protocol violation. */
#ifndef MR_CLIENT_STREAM_H
#define MR_CLIENT_STREAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "error.h"
#include "message.h"
#include "net.h"

typedef struct mr_stream_source {
  /* Yields the next message to send (*out, taken by the stream), or
   * *out = NULL when there is nothing more; the stream then sends CLOSE.
   * A negative return ends the sending (CLOSE still goes out, so the
   * server can finish) and becomes the stream's result. Called on the
   * sender thread. */
  int (*next)(void *ctx, mr_message **out, mr_err *err);
  void *ctx;
} mr_stream_source;

typedef struct mr_stream_sink {
  /* Called on the calling thread for each IMAGE and RESPONSE; borrows msg.
   * A negative return stops the stream and becomes its result. */
  int (*on_message)(void *ctx, const mr_message *msg, mr_err *err);
  void *ctx;
} mr_stream_sink;

/* Counters, updated as messages move; safe to read from any thread. */
typedef struct mr_stream_stats {
  atomic_uint_fast64_t acquisitions, waveforms, images;
  atomic_uint_fast64_t acq_bytes; /* on the wire, headers included */
  atomic_int_least64_t first_acq_ms, last_acq_ms; /* mr_net_now_ms(); 0: none yet */
} mr_stream_stats;

/* What the server said beyond images and responses. */
typedef struct mr_stream_result {
  int server_errors;        /* TEXT messages beginning "ERROR:" */
  char first_error[512];    /* the first of them, "ERROR: " stripped, escaped (not shown
                               as it came: the caller's failure says it) */
} mr_stream_result;

/* Runs the conversation on net (borrowed) until the server's CLOSE. stats
 * may be NULL. Returns 0 when the server closed properly (its errors, if
 * any, are in *res: the caller decides), or a negative code with a line in
 * err: MR_ECONN, MR_ETIMEDOUT, MR_EPROTO (the server broke the protocol),
 * or the source's or sink's error. */
int mr_stream_run(mr_net *net, const mr_stream_source *src, const mr_stream_sink *sink,
                  mr_stream_stats *stats, mr_stream_result *res, mr_err *err);

#endif
