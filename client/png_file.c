#include "png_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <png.h>

int mr_png_file_write(const char *path, const uint8_t *pixels, uint32_t w, uint32_t h, char *why,
                      size_t why_size) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    snprintf(why, why_size, "%s", strerror(errno));
    return -1;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
  if (info == NULL) {
    png_destroy_write_struct(&png, NULL);
    fclose(f);
    snprintf(why, why_size, "out of memory");
    return -1;
  }
  /* libpng reports its errors by longjmp back to here. */
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    snprintf(why, why_size, "libpng failed");
    return -1;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (uint32_t y = 0; y < h; y++)
    png_write_row(png, pixels + (size_t)y * w);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  if (fclose(f) != 0) {
    snprintf(why, why_size, "%s", strerror(errno));
    return -1;
  }
  return 0;
}
