#include "error.h"

#include <stdarg.h>
#include <stdio.h>

const char *mr_strerror(int code) {
  switch (code) {
  case 0:
    return "success";
#define MR_ERROR_TEXT(name, value, text)                                     \
  case value:                                                                \
    return text;
    MR_ERROR_TABLE(MR_ERROR_TEXT)
#undef MR_ERROR_TEXT
  }
  return "unknown error";
}

const char *mr_errname(int code) {
  switch (code) {
  case 0:
    return "OK";
#define MR_ERROR_NAME(name, value, text)                                     \
  case value:                                                                \
    return #name;
    MR_ERROR_TABLE(MR_ERROR_NAME)
#undef MR_ERROR_NAME
  }
  return "EUNKNOWN";
}

int(mr_err_set)(mr_err *e, int code, const char *fmt, ...) {
  if (e == NULL || e->code != 0)
    return code;
  e->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return code;
}

void mr_err_clear(mr_err *e) {
  e->code = 0;
  e->msg[0] = '\0';
}

int mr_err_code(const mr_err *e, int otherwise) {
  return e != NULL && e->code < 0 ? e->code : otherwise;
}

const char *mr_err_text(const mr_err *e, int code) {
  if (e != NULL && e->code != 0 && e->msg[0] != '\0')
    return e->msg;
  return mr_strerror(code);
}
