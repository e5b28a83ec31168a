#include "image_array.h"

#include <stdio.h>
#include <stdlib.h>

#include "budget.h"

static uint64_t footprint(size_t nx, size_t ny, size_t nz, size_t nch) {
  return (uint64_t)nx * ny * nz * nch * sizeof(float complex);
}

mr_image_array *mr_image_array_new(size_t nx, size_t ny, size_t nz, size_t nch, mr_err *err) {
  uint64_t bytes = footprint(nx, ny, nz, nch);
  char what[128];
  snprintf(what, sizeof what, "a %zux%zux%zu x %zu-channel image array", nx, ny, nz, nch);
  if (mr_budget_take(bytes, what, err) < 0)
    return NULL;
  mr_image_array *a = calloc(1, sizeof *a);
  if (a != NULL && (a->data = calloc(nx * ny * nz * nch, sizeof *a->data)) == NULL) {
    free(a);
    a = NULL;
  }
  if (a == NULL) {
    mr_budget_give(bytes);
    mr_err_set(err, MR_ENOMEM, "out of memory for %s", what);
    return NULL;
  }
  a->nx = nx;
  a->ny = ny;
  a->nz = nz;
  a->nch = nch;
  return a;
}

void mr_image_array_free(mr_image_array *a) {
  if (a == NULL)
    return;
  mr_budget_give(footprint(a->nx, a->ny, a->nz, a->nch));
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
