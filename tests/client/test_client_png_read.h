/* Test helper: decodes an 8-bit grayscale PNG with libpng. */
#ifndef MR_TEST_CLIENT_PNG_READ_H
#define MR_TEST_CLIENT_PNG_READ_H

#include <stdint.h>

/* Reads path into *pixels (malloc'ed, rows top to bottom; caller frees),
 * *w, *h. Returns 0, or -1 when the file is missing, not a PNG, or not
 * 8-bit grayscale. */
int mr_test_png_read_gray(const char *path, uint8_t **pixels, uint32_t *w, uint32_t *h);

#endif
