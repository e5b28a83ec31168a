#include "image_array.h"

#include <stdlib.h>

mr_image_array *mr_image_array_new(size_t nx, size_t ny, size_t nz, size_t nch) {
  mr_image_array *a = calloc(1, sizeof *a);
  if (a == NULL)
    return NULL;
  a->nx = nx;
  a->ny = ny;
  a->nz = nz;
  a->nch = nch;
  a->data = calloc(nx * ny * nz * nch, sizeof *a->data);
  if (a->data == NULL) {
    free(a);
    return NULL;
  }
  return a;
}

void mr_image_array_free(mr_image_array *a) {
  if (a == NULL)
    return;
  free(a->data);
  free(a);
}

void mr_image_array_copy_meta(mr_image_array *dst, const mr_image_array *src) {
  dst->ref = src->ref;
  dst->fov_mm = src->fov_mm;
}

static void free_array(void *p) { mr_image_array_free(p); }

mr_message *mr_image_array_message(mr_image_array *a) {
  return mr_message_new_object(MR_MSG_IMAGE_ARRAY, a, free_array);
}
