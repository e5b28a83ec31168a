/* An encoded message as libuv write buffers. uv_buf_init() takes an
 * `unsigned int` length, so a piece of 4 GiB or more would be sent
 * truncated and the client would lose framing: pieces are cut into
 * buffers of at most MR_WRITE_BUF_MAX bytes instead. */
#ifndef MR_SERVER_WRITE_BUFS_H
#define MR_SERVER_WRITE_BUFS_H

#include <uv.h>

#include "encode.h"

#define MR_WRITE_BUF_MAX ((size_t)1 << 30)

/* Fills bufs[0..cap) with enc's pieces in order; returns how many buffers,
 * or MR_ELIMIT when more than cap would be needed. Borrows enc: the
 * buffers point into its pieces. */
int mr_write_bufs(const mr_encoded *enc, uv_buf_t *bufs, int cap);

#endif
