/* The server's state directory (--state-dir): what outlives a connection
 * and a restart (stored noise measurements, raw stream dumps). One per
 * process, opened at start-up before any session runs and read-only
 * afterwards; without one, nothing is stored.
 *
 * Files are never named by a client's bytes alone (the callers check their
 * names against a short list of characters) and are opened relative to the
 * directory, never following a link; every file is written under a
 * temporary name, synced and renamed into place, so a reader sees a whole
 * file or none. */
#ifndef MR_GADGETS_STATE_DIR_H
#define MR_GADGETS_STATE_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

typedef struct mr_state_limits {
  int noise_max_entries;   /* noise measurements kept; the oldest go first */
  int64_t noise_max_age_s; /* older ones are neither used nor kept */
  uint64_t dump_max_bytes; /* raw stream dumps together, those being written included */
} mr_state_limits;

extern const mr_state_limits mr_state_limits_default;

/* Opens (creating it, mode 0700, and its folders noise/ and dumps/) the
 * state directory at path with the given limits (borrowed, copied), and
 * removes the temporary files of writers that are gone (a server killed
 * mid-write), whatever their age: each writer holds a lock (flock) on its
 * temporary file, so those of another live server sharing the directory
 * stay. */
int mr_state_dir_open(const char *path, const mr_state_limits *limits, mr_err *err);
void mr_state_dir_close(void);

/* The open folder `sub` ("noise" or "dumps") as a directory descriptor,
 * or -1 when no state directory is open. */
int mr_state_dir_fd(const char *sub);
const mr_state_limits *mr_state_dir_limits(void);

/* What a folder keeps: its files whose names end in suffix, none older
 * than max_age_s, at most max_entries of them, at most max_bytes together
 * with the bytes reserved for files being written (0: no bound). The
 * oldest go first. */
typedef struct mr_state_bounds {
  const char *suffix;
  int max_entries;
  int64_t max_age_s;
  uint64_t max_bytes;
} mr_state_bounds;

/* A file being written under a temporary name in a folder. */
typedef struct mr_state_file {
  int dirfd;
  int fd;
  char tmp[64];
  uint64_t bytes, reserved;
} mr_state_file;

int mr_state_file_begin(int dirfd, mr_state_file *f, mr_err *err);
/* Takes bytes more of the folder's byte bound (keep->max_bytes) for f
 * before they are written: the files being written in this process never
 * pass it together (MR_ELIMIT when they would), and the oldest stored
 * files are removed to make room. Given back by commit or abort. */
int mr_state_file_reserve(mr_state_file *f, uint64_t bytes, const mr_state_bounds *keep,
                          mr_err *err);
int mr_state_file_write(mr_state_file *f, const void *data, size_t len, mr_err *err);
/* Syncs the file, renames it to name (replacing one of that name), syncs
 * the folder and, when keep is not NULL, prunes the folder to keep's
 * bounds, all under one lock (the process's, and flock of the folder's
 * `.lock` file for other servers sharing it): the file committed last is
 * the newest, and it is never the one pruned. The file is closed either
 * way. */
int mr_state_file_commit(mr_state_file *f, const char *name, const mr_state_bounds *keep,
                         mr_err *err);
/* Closes and removes the temporary file. */
void mr_state_file_abort(mr_state_file *f);

/* Reads the regular file name of dirfd (not a link), of at most max_bytes,
 * into a malloc'ed buffer; *mtime is its modification time. MR_ENOENT when
 * there is none. */
int mr_state_read(int dirfd, const char *name, size_t max_bytes, char **data, size_t *len,
                  time_t *mtime, mr_err *err);

/* Removes the files of dirfd that keep's bounds do not keep, oldest
 * first, under the folder's lock; a file removed meanwhile by another
 * server counts as removed. */
void mr_state_prune(int dirfd, const mr_state_bounds *keep);

/* 1 when name is 1..128 characters of [A-Za-z0-9._-] not starting with '.':
 * safe as part of a file name. */
int mr_state_name_ok(const char *name);

#endif
