#include "placement.h"

#include <stdio.h>

#include "pool.h"

int mr_placement_acquire(mr_placement *p, mr_gadget_ctx *ctx, int device, int fallback) {
  p->pool = ctx->pool;
  p->fallback = fallback;
  if (device == MR_PARAM_DEVICE_AUTO && ctx->device != NULL) {
    p->dev = ctx->device;
    return 0;
  }
  char want[16];
  if (device == MR_PARAM_DEVICE_AUTO)
    snprintf(want, sizeof want, "auto");
  else if (device == MR_PARAM_DEVICE_CPU)
    snprintf(want, sizeof want, "cpu");
  else
    snprintf(want, sizeof want, "%d", device);
  p->owned = 1;
  mr_err e = {0};
  int rc = mr_pool_acquire(ctx->pool, want, &p->dev, &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "device \"%s\": %s", want, mr_err_text(&e, rc));
  return 0;
}

void mr_placement_release(mr_placement *p) {
  if (p->dev != NULL && p->owned)
    mr_pool_release(p->pool, p->dev);
  if (p->cpu != NULL)
    mr_pool_release(p->pool, p->cpu);
  if (p->other != NULL)
    mr_pool_release(p->pool, p->other);
  p->dev = p->cpu = p->other = NULL;
}

int mr_placement_run(mr_placement *p, mr_gadget_ctx *ctx, int (*op)(mr_device *, void *),
                     void *arg) {
  /* Only a line op's own gpu/ calls leave explains its failure: an older
   * one (another gadget's, an earlier scan's) must not be reported. */
  mr_device_clear_error();
  int rc = op(p->dev, arg);
  int gpu_failed = rc == MR_EDEVMEM || (rc == MR_EDEVICE && p->fallback == MR_FALLBACK_GPU);
  if (!gpu_failed || p->fallback == MR_FALLBACK_NONE || mr_device_gpu_index(p->dev) < 0)
    return rc < 0 ? mr_gadget_fail_device(ctx, rc, NULL) : rc;
  int first = rc;
  if (p->fallback == MR_FALLBACK_GPU) {
    /* Without another GPU in the pool, on to the CPU. */
    if (p->other == NULL)
      (void)mr_pool_acquire_other(p->pool, &p->dev, 1, &p->other, NULL);
    if (p->other != NULL) {
      mr_device_clear_error();
      rc = op(p->other, arg);
      if (rc != MR_EDEVMEM && rc != MR_EDEVICE)
        return rc < 0 ? mr_gadget_fail(ctx, rc, "%s on GPU %d; on GPU %d: %s",
                                       mr_strerror(first), mr_device_ordinal(p->dev),
                                       mr_device_ordinal(p->other), mr_strerror(rc))
                      : rc;
    }
  }
  if (p->cpu == NULL) {
    mr_err e = {0};
    if (mr_pool_acquire(p->pool, "cpu", &p->cpu, &e) < 0)
      return mr_gadget_fail(ctx, first, "%s, and no CPU to fall back on", mr_strerror(first));
  }
  rc = op(p->cpu, arg);
  return rc < 0 ? mr_gadget_fail(ctx, rc, "%s; on the CPU: %s", mr_strerror(first),
                                 mr_strerror(rc))
                : rc;
}
