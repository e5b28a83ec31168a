/* One-line log records on stderr: time, level, text. Thread-safe.
 *
 * A record is always one line of printable ASCII: the text is escaped
 * (mr_escape, base/escape.h), so nothing a client sends (a config name
 * with a newline, ESC sequences in a TEXT) can forge a record or drive
 * the terminal that shows the log. */
#ifndef MR_SERVER_LOG_H
#define MR_SERVER_LOG_H

typedef enum mr_log_level { MR_LOG_ERROR, MR_LOG_WARN, MR_LOG_INFO, MR_LOG_DEBUG } mr_log_level;

/* Records below `level` are dropped. */
void mr_log_set_level(mr_log_level level);
/* "error", "warn", "info", "debug" -> level; -1 if unknown. */
int mr_log_level_parse(const char *name);

void mr_log(mr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
