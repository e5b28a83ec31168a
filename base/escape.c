#include "escape.h"

#include <stdint.h>
#include <string.h>

/* The length of the well-formed UTF-8 character at p (at most len bytes)
 * when it is U+00A0 or above, else 0: no overlong form, no surrogate,
 * nothing past U+10FFFF, no C1 control. */
static size_t utf8_printable(const unsigned char *p, size_t len) {
  size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (n == 0 || n > len || p[0] > 0xf4)
    return 0;
  uint32_t cp = p[0] & (0x7f >> n);
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  static const uint32_t least[5] = {0, 0, 0xa0, 0x800, 0x10000};
  if (cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return n;
}

/* The escaped form of the byte (or character) at p into esc (at least 5
 * bytes); *used is how many input bytes it covers. */
static size_t escape_one(const unsigned char *p, size_t len, unsigned flags, char *esc,
                         size_t *used) {
  static const char hex[] = "0123456789abcdef";
  *used = 1;
  unsigned char c = *p;
  if ((flags & MR_ESCAPE_KEEP_LINES) && (c == '\n' || c == '\t')) {
    esc[0] = (char)c;
    return 1;
  }
  if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
    esc[0] = '\\';
    esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
    return 2;
  }
  if (c >= 0x20 && c < 0x7f) {
    esc[0] = (char)c;
    return 1;
  }
  size_t n = (flags & MR_ESCAPE_KEEP_UTF8) ? utf8_printable(p, len) : 0;
  if (n > 0) {
    memcpy(esc, p, n);
    *used = n;
    return n;
  }
  esc[0] = '\\';
  esc[1] = 'x';
  esc[2] = hex[c >> 4];
  esc[3] = hex[c & 15];
  return 4;
}

size_t mr_escape(const char *in, size_t len, char *out, size_t cap, unsigned flags) {
  if (cap == 0)
    return 0;
  const unsigned char *p = (const unsigned char *)in;
  size_t n = 0;
  while (len > 0) {
    char esc[5];
    size_t used, k = escape_one(p, len, flags, esc, &used);
    if (n + k >= cap)
      break;
    memcpy(out + n, esc, k);
    n += k;
    p += used;
    len -= used;
  }
  out[n] = '\0';
  return n;
}

void mr_escape_write(FILE *f, const char *in, size_t len, unsigned flags) {
  const unsigned char *p = (const unsigned char *)in;
  while (len > 0) {
    char esc[5];
    size_t used, k = escape_one(p, len, flags, esc, &used);
    fwrite(esc, 1, k, f);
    p += used;
    len -= used;
  }
}
