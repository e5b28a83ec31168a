/* A live progress line on stderr while a dataset streams: acquisitions
 * sent (of how many), megabytes and MB/s, images received. Shown only when
 * stderr is a terminal, refreshed by a thread of its own a few times a
 * second, so it moves even while both stream threads are blocked. */
#ifndef MR_CLIENT_PROGRESS_H
#define MR_CLIENT_PROGRESS_H

#include <stdint.h>

#include "stream.h"

typedef struct mr_progress mr_progress;

/* Starts showing stats (borrowed; must outlive the progress). Returns NULL,
 * showing nothing, when stderr is not a terminal (or memory is short: a
 * progress line is not worth failing a scan for). */
mr_progress *mr_progress_start(const mr_stream_stats *stats, uint64_t total_acquisitions);

/* Draws the last state, ends the line and frees p; NULL is fine. */
void mr_progress_stop(mr_progress *p);

#endif
