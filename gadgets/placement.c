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
  p->dev = p->cpu = NULL;
}

int mr_placement_run(mr_placement *p, mr_gadget_ctx *ctx, int (*op)(mr_device *, void *),
                     void *arg) {
  /* Only a line op's own gpu/ calls leave explains its failure: an older
   * one (another gadget's, an earlier scan's) must not be reported. */
  mr_device_clear_error();
  int rc = op(p->dev, arg);
  if (rc != MR_EDEVMEM || p->fallback != MR_FALLBACK_CPU || !mr_device_is_gpu(p->dev))
    return rc < 0 ? mr_gadget_fail_device(ctx, rc, NULL) : rc;
  if (p->cpu == NULL) {
    mr_err e = {0};
    if (mr_pool_acquire(p->pool, "cpu", &p->cpu, &e) < 0)
      return mr_gadget_fail(ctx, MR_EDEVMEM, "GPU out of memory, and no CPU to fall back on");
  }
  rc = op(p->cpu, arg);
  return rc < 0 ? mr_gadget_fail(ctx, rc, "GPU out of memory; on the CPU: %s", mr_strerror(rc))
                : rc;
}
