/* Glue between the client and the HDF5 / libismrmrd libraries.
 *
 * The dataset reader (sender thread) and the image writer (receiving
 * thread) use HDF5 at the same time. Not every HDF5 build is thread-safe,
 * and libismrmrd reports errors through one process-wide handler, so every
 * HDF5 or libismrmrd call in the client runs under mr_h5_lock().
 *
 * libismrmrd 1.8 returns success from some failed reads (it ignores its own
 * read_element status) and prints its errors on stderr. While the lock is
 * held, its messages are captured here instead, so a caller checks
 * mr_h5_failed() after each call and reports mr_h5_error() in one line. */
#ifndef MR_CLIENT_H5_H
#define MR_CLIENT_H5_H

#include <stddef.h>

#include <hdf5.h>

/* Takes the lock, silences HDF5's own error printing for this thread and
 * clears the captured error. */
void mr_h5_lock(void);
void mr_h5_unlock(void);

/* Whether libismrmrd reported an error since mr_h5_lock(). */
int mr_h5_failed(void);
/* The first libismrmrd error since mr_h5_lock() ("" if none); valid while
 * the lock is held. */
const char *mr_h5_error(void);

/* Whether something (a group, a dataset) exists at path ("a" or "a/b"; a
 * leading '/' is fine) in the open file fid. Call under the lock. */
int mr_h5_exists(hid_t fid, const char *path);

/* Writes the names of the file's top-level objects into buf as "a, b"
 * ("none" when empty). Call under the lock. */
void mr_h5_list_top(hid_t fid, char *buf, size_t size);

#endif
