#include "nhlbi_encode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nhlbi.h"

static float largest_magnitude(const float *v, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++)
    m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
  return m;
}

/* Header, then each value rounded to an integer of `bits` bits, two's
 * complement, packed least significant bit first. */
static int pack(const float *v, size_t n, float scale, unsigned bits, uint8_t **out,
                size_t *len) {
  size_t bytes = MR_NHLBI_HEADER_BYTES + ((uint64_t)n * bits + 7) / 8;
  uint8_t *b = calloc(bytes, 1);
  if (b == NULL)
    return -1;
  uint64_t count = n;
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(count >> (8 * i));
  memcpy(b + 8, &scale, 4);
  b[12] = (uint8_t)bits;
  uint8_t *p = b + MR_NHLBI_HEADER_BYTES;
  uint64_t mask = (UINT64_C(1) << bits) - 1;
  for (size_t i = 0; i < n; i++) {
    int64_t q = isfinite(scale) ? (int64_t)llrintf(v[i] * scale) : 0;
    uint64_t u = (uint64_t)q & mask;
    uint64_t pos = (uint64_t)i * bits;
    for (unsigned k = 0; k < bits; k++, pos++)
      if (u >> k & 1)
        p[pos / 8] |= (uint8_t)(1u << (pos % 8));
  }
  *out = b;
  *len = bytes;
  return 0;
}

int mr_test_nhlbi_precision(const float *v, size_t n, unsigned bits, uint8_t **out, size_t *len) {
  /* 31 at most, as Gadgetron's compressor: 2^31 - 1 is not a float, and
   * the largest value would round past it. */
  if (bits < 1 || bits > 31)
    return -1;
  float top = (float)((UINT64_C(1) << (bits - 1)) - 1);
  float largest = largest_magnitude(v, n);
  float scale = top / largest; /* +inf when all are 0 */
  /* Above 24 bits the float product may round past the top integer. */
  const double top_int = (double)((UINT64_C(1) << (bits - 1)) - 1);
  while (isfinite(scale) && (double)llrintf(largest * scale) > top_int)
    scale = nextafterf(scale, 0.0f);
  return pack(v, n, scale, bits, out, len);
}

int mr_test_nhlbi_tolerance(const float *v, size_t n, float tolerance, uint8_t **out,
                            size_t *len) {
  if (!(tolerance > 0.0f))
    return -1;
  float scale = 0.5f / tolerance;
  uint64_t top = (uint64_t)ceil((double)largest_magnitude(v, n) * scale);
  unsigned bits = 1; /* the sign */
  for (; top != 0; top >>= 1)
    bits++;
  if (bits > MR_NHLBI_MAX_BITS)
    return -1;
  return pack(v, n, scale, bits, out, len);
}

int mr_test_nhlbi_compress_acquisition(mr_message *m, unsigned bits, float tolerance) {
  mr_acquisition *a = &m->u.acq;
  size_t n = 2 * (size_t)a->head.number_of_samples * a->head.active_channels;
  uint8_t *block;
  size_t len;
  int rc = bits > 0 ? mr_test_nhlbi_precision((const float *)a->data, n, bits, &block, &len)
                    : mr_test_nhlbi_tolerance((const float *)a->data, n, tolerance, &block, &len);
  if (rc < 0)
    return -1;
  free(a->data);
  a->data = NULL;
  a->compressed = block;
  a->compressed_bytes = (uint32_t)len;
  a->head.flags |= MR_ACQ_COMPRESSED;
  return 0;
}
