#include "handoff.h"

#include <string.h>

#include "registry.h"

/* The gadgets that read their input through mr_kspace_on() or
 * mr_image_array_on(). */
static int device_aware(const char *name, size_t len, mr_message_kind kind) {
  static const char *const kspace[] = {"fft", "remove_oversampling", "noise_adjust", "grappa"};
  static const char *const images[] = {"coil_combine", "image_out"};
  const char *const *names = kind == MR_MSG_KSPACE ? kspace : images;
  size_t n = kind == MR_MSG_KSPACE ? sizeof kspace / sizeof *kspace
                                   : sizeof images / sizeof *images;
  for (size_t i = 0; i < n; i++)
    if (strlen(names[i]) == len && strncmp(names[i], name, len) == 0)
      return 1;
  return 0;
}

int mr_handoff_on_device(const mr_gadget_ctx *ctx, mr_message_kind kind) {
  if (ctx->history == NULL || (kind != MR_MSG_KSPACE && kind != MR_MSG_IMAGE_ARRAY))
    return 0;
  const char *h = ctx->history;
  for (int i = 0; *h != '\0'; i++) {
    size_t len = strcspn(h, ",");
    if (i > ctx->index) {
      char name[64];
      if (len >= sizeof name)
        return 0;
      memcpy(name, h, len);
      name[len] = '\0';
      const mr_gadget_class *cls = mr_registry_find(name);
      if (cls != NULL && (cls->accepts & MR_KIND_BIT(kind)))
        return device_aware(name, len, kind);
    }
    h += len + (h[len] == ',');
  }
  return 0;
}
