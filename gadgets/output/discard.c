/* discard: the end of a chain that sends nothing back. Everything that
 * reaches it is dropped: a health check (Gadgetron's `isalive.xml`) or a
 * session run only for what an earlier gadget stores (a noise-only scan)
 * answers with CLOSE alone; TEXT warnings of earlier gadgets still reach
 * the client. */
#include "gadget.h"

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  (void)state, (void)ctx, (void)msg, (void)out;
  return 0;
}

const mr_gadget_class mr_gadget_discard = {
    .name = "discard",
    .summary = "drops every acquisition, waveform and image that reaches it (a chain that "
               "answers nothing but CLOSE)",
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_WAVEFORM) |
               MR_KIND_BIT(MR_MSG_IMAGE),
    .produces = 0,
    .process = process,
};
