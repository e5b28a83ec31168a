#include "fail.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

static _Thread_local char detail[256];

int mr_fail(int code, const char *fmt, ...) {
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

const char *mr_device_last_error(void) { return detail; }

void mr_device_clear_error(void) { detail[0] = '\0'; }
