#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "escape.h"

static mr_log_level threshold = MR_LOG_INFO;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const names[] = {"error", "warn", "info", "debug"};

void mr_log_set_level(mr_log_level level) { threshold = level; }

int mr_log_level_parse(const char *name) {
  for (int i = 0; i < 4; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

void mr_log(mr_log_level level, const char *fmt, ...) {
  if (level > threshold)
    return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char text[2048], line[2048 + 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
  n += snprintf(line + n, sizeof line - (size_t)n, ".%03ldZ %-5s ", (long)tv.tv_usec / 1000,
                names[level]);
  /* Clients choose much of what is logged (config names, TEXT, error
   * details quoting their bytes): one record is one line, whatever they
   * sent. */
  mr_escape(text, strlen(text), line + n, sizeof line - (size_t)n, 0);
  pthread_mutex_lock(&lock);
  fprintf(stderr, "%s\n", line);
  pthread_mutex_unlock(&lock);
}
