#include "h5.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <hdf5.h>
#include <ismrmrd/ismrmrd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Protected by lock. */
static char first_error[512];
static int failed;

/* libismrmrd pushes several lines for one failure, innermost (HDF5) first;
 * the first one says what actually went wrong. */
static void capture(const char *file, int line, const char *function, int code,
                    const char *msg) {
  (void)file;
  (void)line;
  (void)function;
  if (!failed)
    snprintf(first_error, sizeof first_error, "%s (%s)", msg != NULL ? msg : "",
             ismrmrd_strerror(code));
  failed = 1;
}

static void install(void) { ismrmrd_set_error_handler(capture); }

void mr_h5_lock(void) {
  /* HDF5 keeps its automatic error printing per thread. */
  static _Thread_local int quiet;
  pthread_once(&once, install);
  pthread_mutex_lock(&lock);
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    quiet = 1;
  }
  failed = 0;
  first_error[0] = '\0';
}

void mr_h5_unlock(void) { pthread_mutex_unlock(&lock); }

int mr_h5_failed(void) { return failed; }

const char *mr_h5_error(void) { return first_error; }

int mr_h5_exists(hid_t fid, const char *path) {
  char prefix[1024];
  size_t n = strlen(path);
  if (n >= sizeof prefix)
    return 0;
  /* H5Lexists fails (rather than answering no) when an intermediate group
   * is missing, so walk the path one component at a time. */
  for (size_t i = 1; i <= n; i++) {
    if (i < n && path[i] != '/')
      continue;
    memcpy(prefix, path, i);
    prefix[i] = '\0';
    if (strcmp(prefix, "/") != 0 && H5Lexists(fid, prefix, H5P_DEFAULT) <= 0)
      return 0;
  }
  return 1;
}

typedef struct names {
  char *buf;
  size_t size, len;
} names;

static herr_t add_name(hid_t group, const char *name, const H5L_info_t *info, void *ctx) {
  (void)group;
  (void)info;
  names *nm = ctx;
  int n = snprintf(nm->buf + nm->len, nm->size - nm->len, "%s%s", nm->len > 0 ? ", " : "", name);
  if (n < 0 || (size_t)n >= nm->size - nm->len)
    return 1; /* full: stop */
  nm->len += (size_t)n;
  return 0;
}

void mr_h5_list_top(hid_t fid, char *buf, size_t size) {
  names nm = {.buf = buf, .size = size};
  buf[0] = '\0';
  H5Literate(fid, H5_INDEX_NAME, H5_ITER_INC, NULL, add_name, &nm);
  if (nm.len == 0)
    snprintf(buf, size, "none");
}
