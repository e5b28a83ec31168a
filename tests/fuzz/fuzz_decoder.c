/* libFuzzer target: the wire decoder. The input is fed in two chunks
 * split where its first byte says, so resuming mid-message is fuzzed too;
 * limits are small so the reject-and-skip paths are reached. */
#include <stddef.h>
#include <stdint.h>

#include "decode.h"

static int on_message(void *ctx, mr_message *m) {
  (*(int *)ctx)++;
  mr_message_unref(m);
  return 0;
}

static void on_error(void *ctx, int code, const char *text) {
  (void)ctx;
  (void)code;
  (void)text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mr_limits lim = mr_limits_default;
  lim.header_bytes = lim.text_bytes = lim.config_script_bytes = 4096;
  lim.query_bytes = 256;
  lim.acquisition_bytes = lim.image_bytes = lim.waveform_bytes = 1 << 16;
  lim.attribute_bytes = 1024;
  int count = 0;
  mr_decoder_callbacks cb = {on_message, on_error, &count};
  mr_decoder *d = NULL;
  if (mr_decoder_create(&lim, &cb, &d) != 0)
    return 0;
  size_t split = size > 0 ? data[0] % (size + 1) : 0;
  if (mr_decoder_feed(d, data, split) == 0)
    mr_decoder_feed(d, data + split, size - split);
  mr_decoder_destroy(d);
  return 0;
}
