/* Text from a peer made safe to show: on a terminal, in a log line. Every
 * byte that could drive a terminal (ESC and the other C0 controls, DEL,
 * C1 controls, bytes that are not UTF-8) is written as \xNN, a backslash
 * as \\, so a hostile server or client can neither forge a log record nor
 * retitle, clear or reprogram the terminal showing what it sent. The
 * server's log and reconclient both escape with this. */
#ifndef MR_BASE_ESCAPE_H
#define MR_BASE_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

enum {
  /* Newline and tab pass as they are (text shown as lines, not a log
   * record); otherwise they are \n and \t, and CR is \r either way. */
  MR_ESCAPE_KEEP_LINES = 1 << 0,
  /* Well-formed UTF-8 characters from U+00A0 up pass as they are;
   * otherwise every byte from 0x7f up is \xNN (printable ASCII only). */
  MR_ESCAPE_KEEP_UTF8 = 1 << 1,
};

/* Copies the len bytes at in to out (cap bytes, always terminated when cap
 * > 0), escaped as flags say; stops early rather than split an escape or a
 * character. Returns the length written. */
size_t mr_escape(const char *in, size_t len, char *out, size_t cap, unsigned flags);

/* Writes the len bytes at in to f, escaped as flags say. */
void mr_escape_write(FILE *f, const char *in, size_t len, unsigned flags);

#endif
