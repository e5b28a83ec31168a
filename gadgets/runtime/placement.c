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

int mr_placement_run(mr_placement *p, mr_gadget_ctx *ctx, mr_device_task op, void *arg) {
  mr_err e = {0};
  int rc = op(p->dev, arg, &e);
  int gpu_failed = rc == MR_EDEVMEM || (rc == MR_EDEVICE && p->fallback == MR_FALLBACK_GPU);
  if (!gpu_failed || p->fallback == MR_FALLBACK_NONE || mr_device_gpu_index(p->dev) < 0)
    return rc < 0 ? mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc)) : rc;
  int first = rc;
  if (p->fallback == MR_FALLBACK_GPU) {
    /* Without another GPU in the pool, on to the CPU. */
    if (p->other == NULL)
      (void)mr_pool_acquire_other(p->pool, &p->dev, 1, &p->other, NULL);
    if (p->other != NULL) {
      mr_err_clear(&e);
      rc = op(p->other, arg, &e);
      if (rc != MR_EDEVMEM && rc != MR_EDEVICE)
        return rc < 0 ? mr_gadget_fail(ctx, rc, "%s on GPU %d; on GPU %d: %s", mr_strerror(first),
                                       mr_device_ordinal(p->dev), mr_device_ordinal(p->other),
                                       mr_err_text(&e, rc))
                      : rc;
    }
  }
  if (p->cpu == NULL) {
    mr_err_clear(&e);
    if (mr_pool_acquire(p->pool, "cpu", &p->cpu, &e) < 0)
      return mr_gadget_fail(ctx, first, "%s, and no CPU to fall back on", mr_strerror(first));
  }
  mr_err_clear(&e);
  rc = op(p->cpu, arg, &e);
  return rc < 0 ? mr_gadget_fail(ctx, rc, "%s; on the CPU: %s", mr_strerror(first),
                                 mr_err_text(&e, rc))
                : rc;
}
