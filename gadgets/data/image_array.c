#include "image_array.h"

#include <stdio.h>
#include <stdlib.h>

#include "budget.h"
#include "buf.h"
#include "gadget.h"
#include "kspace.h"

static uint64_t footprint(const mr_image_array *a) {
  return (uint64_t)a->nx * a->ny * a->nz * a->nch * sizeof(float complex);
}

static void describe(const mr_image_array *a, char *what, size_t size) {
  snprintf(what, size, "a %zux%zux%zu x %zu-channel image array", a->nx, a->ny, a->nz, a->nch);
}

/* The shell of an array, no pixels yet. */
static mr_image_array *shell(size_t nx, size_t ny, size_t nz, size_t nch, mr_err *err) {
  mr_image_array *a = calloc(1, sizeof *a);
  if (a == NULL) {
    mr_err_set(err, MR_ENOMEM, "out of memory for an image array");
    return NULL;
  }
  a->nx = nx;
  a->ny = ny;
  a->nz = nz;
  a->nch = nch;
  return a;
}

/* Host pixels for a (zeroed), counted against the budget. */
static int alloc_host(mr_image_array *a, mr_err *err) {
  char what[128];
  describe(a, what, sizeof what);
  if (mr_budget_take(footprint(a), what, err) < 0)
    return MR_ELIMIT;
  a->data = calloc(a->nx * a->ny * a->nz * a->nch, sizeof *a->data);
  if (a->data == NULL) {
    mr_budget_give(footprint(a));
    return mr_err_set(err, MR_ENOMEM, "out of memory for %s", what);
  }
  return 0;
}

/* Device pixels for a on dev (a GPU), counted against the budget. */
static int alloc_device(mr_image_array *a, mr_device *dev, mr_err *err) {
  char what[128];
  describe(a, what, sizeof what);
  if (mr_budget_take(footprint(a), what, err) < 0)
    return MR_ELIMIT;
  mr_err why = {0};
  int rc = mr_buf_create(dev, footprint(a) > 0 ? footprint(a) : 1, &a->dev, &why);
  if (rc < 0) {
    mr_budget_give(footprint(a));
    a->dev = NULL;
    return mr_err_set(err, rc, "%s on the GPU: %s", what, mr_err_text(&why, rc));
  }
  return 0;
}

mr_image_array *mr_image_array_new(size_t nx, size_t ny, size_t nz, size_t nch, mr_err *err) {
  mr_image_array *a = shell(nx, ny, nz, nch, err);
  if (a != NULL && alloc_host(a, err) < 0) {
    free(a);
    return NULL;
  }
  return a;
}

mr_image_array *mr_image_array_new_on(mr_device *dev, size_t nx, size_t ny, size_t nz,
                                      size_t nch, mr_err *err) {
  if (!mr_device_is_gpu(dev))
    return mr_image_array_new(nx, ny, nz, nch, err);
  mr_image_array *a = shell(nx, ny, nz, nch, err);
  if (a != NULL && alloc_device(a, dev, err) < 0) {
    free(a);
    return NULL;
  }
  return a;
}

void mr_image_array_free(mr_image_array *a) {
  if (a == NULL)
    return;
  if (a->data != NULL)
    mr_budget_give(footprint(a));
  if (a->dev != NULL)
    mr_budget_give(footprint(a));
  free(a->data);
  mr_buf_destroy(a->dev);
  free(a);
}

float complex *mr_image_array_host(mr_image_array *a, mr_err *err) {
  if (a->data != NULL)
    return a->data;
  if (alloc_host(a, err) < 0)
    return NULL;
  mr_err why = {0};
  int rc = mr_buf_download(a->dev, 0, a->data, footprint(a), &why);
  if (rc < 0) {
    mr_err_set(err, rc, "downloading an image array: %s", mr_err_text(&why, rc));
    return NULL;
  }
  return a->data;
}

int mr_image_array_to_host(mr_image_array *a, mr_err *err) {
  if (mr_image_array_host(a, err) == NULL)
    return mr_err_code(err, MR_ENOMEM);
  if (a->dev != NULL) {
    mr_budget_give(footprint(a));
    mr_buf_destroy(a->dev);
    a->dev = NULL;
  }
  return 0;
}

mr_cfloat *mr_image_array_on(mr_image_array *a, mr_device *dev, mr_err *err) {
  if (!mr_device_is_gpu(dev))
    return mr_image_array_host(a, err);
  if (a->dev != NULL && mr_buf_device(a->dev) == dev)
    return mr_buf_data(a->dev);
  /* On another GPU (a config may place gadgets apart): through the host. */
  if (a->dev != NULL) {
    if (mr_image_array_host(a, err) == NULL)
      return NULL;
    mr_budget_give(footprint(a));
    mr_buf_destroy(a->dev);
    a->dev = NULL;
  }
  if (alloc_device(a, dev, err) < 0)
    return NULL;
  mr_err why = {0};
  int rc = mr_buf_upload(a->dev, 0, a->data, footprint(a), &why);
  if (rc < 0) {
    mr_err_set(err, rc, "uploading an image array: %s", mr_err_text(&why, rc));
    return NULL;
  }
  return mr_buf_data(a->dev);
}

void mr_image_array_copy_meta(mr_image_array *dst, const mr_image_array *src) {
  dst->ref = src->ref;
  dst->fov_mm = src->fov_mm;
  dst->calib_generation = src->calib_generation;
}

static void free_array(void *p) { mr_image_array_free(p); }

mr_message *mr_image_array_message(mr_image_array *a) {
  return mr_message_new_object(MR_MSG_IMAGE_ARRAY, a, free_array);
}

int mr_image_array_emit(mr_image_array *a, const mr_kspace *k, mr_gadget_ctx *ctx,
                        mr_emit *out) {
  a->ref = k->ref;
  a->fov_mm = k->recon.fov_mm;
  a->calib_generation = k->calib_generation;
  mr_message *m = mr_image_array_message(a);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}
