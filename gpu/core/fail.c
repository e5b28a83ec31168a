#include "fail.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "error.h"

static _Thread_local char detail[256];

/* The name in parentheses: fail.h's macro for the analyzer is not expanded. */
int(mr_fail)(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return code;
}

const char *mr_fail_detail(void) { return detail; }

void mr_fail_set_detail(const char *line) {
  snprintf(detail, sizeof detail, "%s", line);
}

int mr_device_error(mr_err *err, int code, const char *what) {
  const char *why = detail[0] != '\0' ? detail : mr_strerror(code);
  if (what == NULL)
    return mr_err_set(err, code, "%s", why);
  return mr_err_set(err, code, "%s: %s", what, why);
}

const char *mr_device_last_error(void) { return detail; }

void mr_device_clear_error(void) { detail[0] = '\0'; }
