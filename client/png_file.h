/* Writing an 8-bit grayscale PNG file with libpng. Returns 0, or -1 with
 * the reason in why. */
#ifndef MR_CLIENT_PNG_FILE_H
#define MR_CLIENT_PNG_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes a w x h image (rows top to bottom; borrowed) to path. */
int mr_png_file_write(const char *path, const uint8_t *pixels, uint32_t w, uint32_t h, char *why,
                      size_t why_size);

#endif
