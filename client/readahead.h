/* Reading ahead of the sender: a thread pulls a source's messages (the
 * dataset, from HDF5) into a bounded queue, so that reading the file
 * overlaps writing the socket instead of alternating with it. */
#ifndef MR_CLIENT_READAHEAD_H
#define MR_CLIENT_READAHEAD_H

#include <stddef.h>

#include "stream.h"

typedef struct mr_readahead mr_readahead;

/* Starts the reading thread on src (borrowed until mr_readahead_stop),
 * holding at most about `bytes` of messages read and not yet sent. */
int mr_readahead_start(const mr_stream_source *src, size_t bytes, mr_readahead **out);

/* A source that yields what the thread read, in order, then the end or
 * the error the wrapped source gave. For one mr_stream_run(). */
mr_stream_source mr_readahead_source(mr_readahead *ra);

/* Stops the thread (also when it waits for room) and frees what is still
 * queued. NULL is ignored. */
void mr_readahead_stop(mr_readahead *ra);

#endif
