/* mr-bench stream: replaying a session from memory, timed.
 *
 * To a server: the calling thread writes the session's bytes, pausing at
 * each cut (stream_session.h) only to read the clock, while a receiver
 * thread decodes what comes back and notes when each image arrives (by
 * volume, when a volume's last image arrives); the time ends at the
 * server's CLOSE.
 *
 * To a sink: the same bytes, written the same way, to a thread that only
 * reads and discards them and answers one byte when it has them all; the
 * time ends at that byte. This is the raw loopback copy every server time
 * is compared with. */
#ifndef MR_BENCH_STREAM_REPLAY_H
#define MR_BENCH_STREAM_REPLAY_H

#include "bench.h"
#include "stream_session.h"

typedef struct stream_timing {
  /* Milliseconds from the first byte written. */
  double wall_ms;       /* to the server's CLOSE (the sink's byte) */
  double last_acq_ms;   /* to the last acquisition written */
  double last_image_ms; /* to the last image's arrival; NaN with none */
  /* Per unit: its last acquisition written -> its first image arrived (by
   * volume: its last image); NaN where no image (not all of a volume's)
   * came, or the unit was not sent. Malloc'ed [nunits]
   * by the server replay, NULL for the sink. */
  double *latency_ms;
  int units_sent;       /* < nunits when the session was cut short */
  int abandoned;        /* cut short, and no CLOSE within the drain time */
  int images;
  int unmatched_images; /* no unit of that key, or its unit had its images already */
  size_t bytes_sent;
  char error[512];      /* "" when the session went right */
} stream_timing;

/* Replays s to the server on 127.0.0.1:port: as fast as the socket takes
 * it, or, with pace_ms > 0, as a scanner would: unit u's bytes not before
 * pace_ms * u after the start (a frame rate, or a TR: by volume each
 * volume's slices spread over it, s->cut_pace), so that latency is measured
 * at that rate rather than behind a backlog. After cap_ms of sending it
 * stops at the next unit's end and sends CLOSE (0: no cap); a server still
 * working drain_ms later is left (t->abandoned, wall_ms NaN). A session the
 * server failed (an ERROR text, no CLOSE, silence for silence_ms, a broken
 * connection) returns -1 with the reason in t->error; t is filled as far
 * as it got either way. Free t with stream_timing_free(). */
int stream_replay_server(const stream_session *s, int port, double pace_ms, double cap_ms,
                         double drain_ms, int silence_ms, stream_timing *t);

/* The raw copy of s's bytes to a discarding sink; -1 with t->error. */
int stream_replay_raw(const stream_session *s, stream_timing *t);

void stream_timing_free(stream_timing *t);

/* Where a paced session's tail is: writes array "late_units" of the units
 * (in sending order) whose latency reached p99, as [unit, latency ms]
 * (unit u is sent u paces after the first), the first 40 of them. Whether
 * they come in one burst (a stall: consecutive units) or spread over the
 * session (each unit's own cost) is what the percentiles cannot say. */
void stream_write_late_units(bench_json *j, const stream_session *s, const stream_timing *t,
                             double p99);

#endif
