#include "nhlbi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t read_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* The integer of `bits` bits starting at bit `pos` of the packed block
 * (nbytes long), sign-extended. Reads only bytes inside the block: the
 * caller has checked that the block holds every element's bits. */
static int64_t read_packed(const uint8_t *p, size_t nbytes, uint64_t pos, unsigned bits) {
  size_t first = (size_t)(pos / 8);
  unsigned shift = (unsigned)(pos % 8);
  size_t span = (shift + bits + 7) / 8; /* at most 5 bytes for 32 bits */
  uint64_t window = 0;
  for (size_t i = 0; i < span && first + i < nbytes; i++)
    window |= (uint64_t)p[first + i] << (8 * i);
  uint64_t mask = (UINT64_C(1) << bits) - 1;
  uint64_t v = (window >> shift) & mask;
  if (v & (UINT64_C(1) << (bits - 1)))
    return (int64_t)v - (int64_t)(UINT64_C(1) << bits);
  return (int64_t)v;
}

int mr_nhlbi_decode(const uint8_t *in, size_t len, float *out, uint64_t count, mr_err *err) {
  if (len < MR_NHLBI_HEADER_BYTES)
    return mr_err_set(err, MR_EDATA, "NHLBI block of %zu bytes is shorter than its %d-byte header",
                      len, MR_NHLBI_HEADER_BYTES);
  uint64_t elements = read_u64(in);
  float scale;
  memcpy(&scale, in + 8, sizeof scale); /* little-endian hosts only, like the ISMRMRD structs */
  unsigned bits = in[12];
  if (elements != count)
    return mr_err_set(err, MR_EDATA,
                      "NHLBI block holds %llu values; the header announces %llu "
                      "(2 x samples x active channels)",
                      (unsigned long long)elements, (unsigned long long)count);
  if (bits < 1 || bits > MR_NHLBI_MAX_BITS)
    return mr_err_set(err, MR_EDATA, "NHLBI block has %u bits per value (1 to %d allowed)", bits,
                      MR_NHLBI_MAX_BITS);
  /* An all-zero line compressed by precision has an infinite scale
   * (largest value 0): its values decode to 0. A zero, negative or NaN
   * scale comes from no encoder. */
  if (!(scale > 0.0f))
    return mr_err_set(err, MR_EDATA, "NHLBI block has scale %g (must be positive)", (double)scale);
  if (count > UINT64_MAX / MR_NHLBI_MAX_BITS)
    return mr_err_set(err, MR_EDATA, "NHLBI block of %llu values is too large",
                      (unsigned long long)count);
  uint64_t need = (count * bits + 7) / 8;
  size_t have = len - MR_NHLBI_HEADER_BYTES;
  if (need != have)
    return mr_err_set(err, MR_EDATA,
                      "NHLBI block has %zu bytes of values; %llu values of %u bits need %llu",
                      have, (unsigned long long)count, bits, (unsigned long long)need);
  const uint8_t *packed = in + MR_NHLBI_HEADER_BYTES;
  for (uint64_t i = 0; i < count; i++)
    out[i] = (float)read_packed(packed, have, i * bits, bits) / scale;
  return 0;
}

int mr_acquisition_decompress(mr_acquisition *a, mr_err *err) {
  uint64_t count = 2 * (uint64_t)a->head.number_of_samples * a->head.active_channels;
  float complex *data = malloc(count > 0 ? (size_t)count * sizeof(float) : 1);
  if (data == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory decompressing acquisition %u",
                      a->head.scan_counter);
  int rc = mr_nhlbi_decode(a->compressed, a->compressed_bytes, (float *)data, count, err);
  if (rc < 0) {
    free(data);
    return rc;
  }
  free(a->data);
  a->data = data;
  free(a->compressed);
  a->compressed = NULL;
  a->compressed_bytes = 0;
  a->head.flags &= ~MR_ACQ_COMPRESSED;
  return 0;
}
