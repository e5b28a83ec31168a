/* libFuzzer target: the NHLBI decoder (protocol/nhlbi.h). The input is a
 * little-endian u16 sample count and a u8 channel count (what the
 * acquisition header announces), then the compressed block; the decoder
 * must refuse every block that does not hold exactly that many values
 * without reading or writing outside the block and the output. */
#include <stdint.h>
#include <stdlib.h>

#include "nhlbi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  uint64_t count = 2 * (uint64_t)(data[0] | data[1] << 8) * data[2];
  float *out = malloc(count > 0 ? (size_t)count * sizeof(float) : 1);
  if (out == NULL)
    return 0;
  mr_err err = {0};
  mr_nhlbi_decode(data + 3, size - 3, out, count, &err);
  free(out);
  return 0;
}
