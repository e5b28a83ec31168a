#include "thread_name.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

void mr_thread_name(const char *fmt, ...) {
  char name[16]; /* the kernel's limit, the terminator included */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  (void)pthread_setname_np(pthread_self(), name); /* a name is only a help */
}
