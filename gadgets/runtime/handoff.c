#include "handoff.h"

#include <string.h>

#include "registry.h"

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
        return (cls->device_input & MR_KIND_BIT(kind)) != 0;
    }
    h += len + (h[len] == ',');
  }
  return 0;
}
