/* The sizes of the payloads message headers announce, computed in one
 * place with overflow checks. The decoder, the message constructors, the
 * encoder and the client all size their buffers from these, so no header
 * can make one of them allocate less than another reads or writes (an
 * IMAGE of 33657 x 54192 x 45917 pixels x 55065 float channels is over
 * 2^64 bytes, not the 33 MiB its product wraps to in 64 bits). */
#ifndef MR_PROTOCOL_PAYLOAD_H
#define MR_PROTOCOL_PAYLOAD_H

#include <stdint.h>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/waveform.h>

/* Each writes the byte count(s) and returns 0, or returns MR_ELIMIT when a
 * count does not fit in size_t (the outputs are then left alone). */

/* Trajectory floats and complex samples of an acquisition (data_bytes as
 * if uncompressed). */
int mr_payload_acquisition(const ISMRMRD_AcquisitionHeader *h, uint64_t *traj_bytes,
                           uint64_t *data_bytes);
/* Pixels of an image: x * y * z * channels * the data_type's size; also
 * MR_EPROTO for an unknown data_type. */
int mr_payload_image(const ISMRMRD_ImageHeader *h, uint64_t *data_bytes);
/* The u32 values of a waveform. */
int mr_payload_waveform(const ISMRMRD_WaveformHeader *h, uint64_t *data_bytes);

struct mr_image;
/* 0 when an image's pixel buffer holds exactly what its header announces
 * (so code that walks the pixels by the header stays inside the buffer),
 * else MR_EDATA. Borrows im. */
int mr_payload_image_matches(const struct mr_image *im);

#endif
