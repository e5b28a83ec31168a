/* An NHLBI compressor for tests (protocol/nhlbi.h has the layout), in the
 * two modes of Gadgetron's client: -P keeps `bits` bits per value and
 * scales the largest magnitude to the top of their range; -T keeps every
 * value within `tolerance` (scale 0.5 / tolerance, as many bits as the
 * largest value needs). Written from the format's description, not from
 * Gadgetron's code. */
#ifndef MR_TEST_NHLBI_ENCODE_H
#define MR_TEST_NHLBI_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "message.h"

/* Compresses n floats (borrowed) into a new block (*out, *len; the caller
 * frees it). 0, or -1 when bits is outside 1..31, the tolerance is not
 * positive, the values need more than 32 bits, or memory runs out. */
int mr_test_nhlbi_precision(const float *v, size_t n, unsigned bits, uint8_t **out, size_t *len);
int mr_test_nhlbi_tolerance(const float *v, size_t n, float tolerance, uint8_t **out,
                            size_t *len);

/* Replaces acquisition message m's samples by their compressed block and
 * sets MR_ACQ_COMPRESSED (bits > 0: precision mode; else tolerance). 0 or -1. */
int mr_test_nhlbi_compress_acquisition(mr_message *m, unsigned bits, float tolerance);

#endif
