#include "test_client_png_read.h"

#include <stdio.h>
#include <stdlib.h>

#include <png.h>

int mr_test_png_read_gray(const char *path, uint8_t **pixels, uint32_t *w, uint32_t *h) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return -1;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
  uint8_t *volatile buf = NULL; /* set after setjmp, read after longjmp */
  if (info == NULL || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    free(buf);
    return -1;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  *w = png_get_image_width(png, info);
  *h = png_get_image_height(png, info);
  int ok = png_get_bit_depth(png, info) == 8 && png_get_color_type(png, info) == PNG_COLOR_TYPE_GRAY;
  if (ok) {
    buf = malloc((size_t)*w * *h);
    for (uint32_t y = 0; buf != NULL && y < *h; y++)
      png_read_row(png, buf + (size_t)y * *w, NULL);
    png_read_end(png, NULL);
  }
  png_destroy_read_struct(&png, &info, NULL);
  fclose(f);
  if (!ok || buf == NULL) {
    free(buf);
    return -1;
  }
  *pixels = buf;
  return 0;
}
