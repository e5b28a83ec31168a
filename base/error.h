/* Error codes shared by every layer, and a small buffer for the detail text.
 *
 * Functions return 0 on success or a negative MR_E* code (the libuv way).
 * Where the caller needs to tell a user *what* went wrong (which key of which
 * gadget, which limit, which byte) the function also takes an mr_err and
 * writes one line into it with mr_err_set(). */
#ifndef MR_BASE_ERROR_H
#define MR_BASE_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MR_ERROR_TABLE(X)                                                    \
  X(ENOMEM, -1, "out of memory")                                             \
  X(EINVAL, -2, "invalid argument")                                          \
  X(EPROTO, -3, "malformed message")                                         \
  X(ELIMIT, -4, "size over limit")                                           \
  X(EIO, -5, "input/output error")                                           \
  X(ENOENT, -6, "not found")                                                 \
  X(ECONFIG, -7, "invalid configuration")                                    \
  X(EHEADER, -8, "invalid ISMRMRD header")                                   \
  X(ESTATE, -9, "message out of order")                                      \
  X(ENOTSUP, -10, "not supported")                                           \
  X(EDEVICE, -11, "GPU error")                                               \
  X(EDEVMEM, -12, "GPU out of memory")                                       \
  X(ECANCELED, -13, "canceled")                                              \
  X(ETIMEDOUT, -14, "timed out")                                             \
  X(EDATA, -15, "invalid data")                                              \
  X(ENUMERIC, -16, "numerical failure")                                      \
  X(ECONN, -17, "connection error")                                          \
  X(EFRAME, -18, "stream framing lost")

enum {
#define MR_ERROR_ENUM(name, value, text) MR_##name = value,
  MR_ERROR_TABLE(MR_ERROR_ENUM)
#undef MR_ERROR_ENUM
};

/* Text for a code; never NULL. */
const char *mr_strerror(int code);
/* Short symbolic name ("EPROTO"); never NULL. */
const char *mr_errname(int code);

typedef struct mr_err {
  int code;
  char msg[512];
} mr_err;

/* Writes code and a printf-formatted line into e (if e is not NULL) and
 * returns code, so a failure reads `return mr_err_set(e, MR_EINVAL, ...)`.
 * Keeps the first error: a buffer that already holds one is left as it is
 * (the root cause is the useful line), and code is still returned. */
int mr_err_set(mr_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#ifdef __clang_analyzer__
/* The static analyzer does not follow calls into variadic functions, and
 * would take `return mr_err_set(...)` for a possible success: for it alone,
 * the call says what it returns (as mr_gadget_fail does). */
#define mr_err_set(e, code, ...) (mr_err_set((e), (code), __VA_ARGS__), (code))
#endif

/* Clears e for reuse. */
void mr_err_clear(mr_err *e);

/* The detail text if set, else mr_strerror(code). */
const char *mr_err_text(const mr_err *e, int code);

/* The code of the error e holds, or otherwise when it holds none (e NULL
 * or clear): for a caller whose callee reports through e and returns NULL. */
int mr_err_code(const mr_err *e, int otherwise);

#ifdef __cplusplus
}
#endif

#endif
