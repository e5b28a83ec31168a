/* NHLBI compression of acquisition samples, as Gadgetron's client sends
 * them with `-P` (precision) or `-T` (tolerance): acquisition flag bit 54
 * (MR_ACQ_COMPRESSED), and after the trajectory a `u32 size` and `size`
 * bytes (protocol/decode.c reads them) laid out as
 *
 *   u64 elements   float count: 2 * number_of_samples * active_channels
 *   f32 scale      value = integer / scale
 *   u8  bits       width of each integer, two's complement, 1..32
 *   ceil(bits * elements / 8) bytes: the integers packed back to back,
 *                  least significant bit first (bit i*bits of the block
 *                  starts element i; bit 0 of a byte is its lowest)
 *
 * The floats are the samples in the order of the uncompressed payload
 * (real, imaginary; samples fastest, then channels). Both modes produce
 * the same layout: -P fixes `bits` and scales the largest magnitude to the
 * top of the range; -T picks the scale from the tolerance (0.5 / tolerance)
 * and the bits the largest value needs. Every field is checked against
 * what the acquisition header announces before a sample is written. */
#ifndef MR_PROTOCOL_NHLBI_H
#define MR_PROTOCOL_NHLBI_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "message.h"

#define MR_NHLBI_HEADER_BYTES 13
#define MR_NHLBI_MAX_BITS 32

/* Decodes the compressed block `in` (len bytes, borrowed) into exactly
 * `count` floats at out (borrowed, count floats long). Returns 0, or
 * MR_EDATA with one line in err when the block does not hold `count`
 * elements, its scale or bit width is invalid, or its length is not the
 * one its header implies; out is then undefined. */
int mr_nhlbi_decode(const uint8_t *in, size_t len, float *out, uint64_t count, mr_err *err);

/* Replaces a compressed acquisition's bytes by its samples: allocates
 * a->data, decodes into it, frees a->compressed and clears the flag. On
 * failure (MR_EDATA, MR_ENOMEM, err says why) a is left as it was. */
int mr_acquisition_decompress(mr_acquisition *a, mr_err *err);

#endif
