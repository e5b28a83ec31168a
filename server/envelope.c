#include "envelope.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

void mr_envelope_clear(mr_envelope *e) {
  mr_message_unref(e->msg);
  free(e->text);
  *e = (mr_envelope){0};
}

static void drop(void *item) { mr_envelope_clear(item); }

int mr_envelope_channel(size_t bytes, void (*count)(int64_t delta), void (*on_item)(void *),
                        void (*on_room)(void *), void *hook_ctx, mr_chan **out) {
  mr_chan_opts o = {.item_size = sizeof(mr_envelope), .max_bytes = bytes, .on_item = on_item,
                    .on_room = on_room, .hook_ctx = hook_ctx, .count = count, .drop = drop};
  return mr_chan_create(&o, out);
}

int mr_envelope_send(mr_chan *ch, mr_message *msg, int wait) {
  mr_envelope e = {.msg = msg};
  size_t bytes = mr_envelope_bytes(msg);
  int rc = wait ? mr_chan_push(ch, &e, bytes, -1) : mr_chan_put(ch, &e, bytes);
  if (rc < 0)
    mr_message_unref(msg);
  return rc;
}

int mr_envelope_send_event(mr_chan *ch, int code, const char *text) {
  mr_envelope e = {.code = code, .text = strdup(text != NULL ? text : "")};
  if (e.text == NULL)
    return MR_ENOMEM;
  int rc = mr_chan_put(ch, &e, MR_ENVELOPE_OVERHEAD + strlen(e.text));
  if (rc < 0)
    free(e.text);
  return rc;
}

size_t mr_envelope_bytes(const mr_message *m) {
  return MR_ENVELOPE_OVERHEAD + mr_message_payload_bytes(m);
}
