/* Every bound on what a peer may send, in one place.
 *
 * The decoder compares each size it reads from the wire against these
 * before it allocates anything. The defaults suit clinical data (a 3D
 * 1024-channel acquisition line fits; a 4 GiB "header" does not); servers
 * may lower or raise them at start-up. */
#ifndef MR_PROTOCOL_WIRE_LIMITS_H
#define MR_PROTOCOL_WIRE_LIMITS_H

#include <stdint.h>

/* Fixed by the wire format. */
#define MR_CONFIG_NAME_BYTES 1024
#define MR_MAX_TRAJECTORY_DIMS 3
#define MR_MAX_CHANNELS 1024 /* ISMRMRD channel mask: 16 x 64 bits */

typedef struct mr_limits {
  uint32_t config_script_bytes; /* CONFIG_SCRIPT payload */
  uint32_t header_bytes;        /* HEADER (ISMRMRD XML) payload */
  uint32_t text_bytes;          /* TEXT payload */
  uint64_t query_bytes;         /* QUERY / RESPONSE / DEPENDENCY_QUERY text */
  uint32_t channels;            /* active channels of one acquisition */
  uint32_t trajectory_dims;     /* trajectory_dimensions */
  uint32_t samples;             /* number_of_samples of one acquisition */
  uint64_t acquisition_bytes;   /* trajectory + data of one acquisition */
  uint64_t image_bytes;         /* pixels of one image */
  uint64_t attribute_bytes;     /* image meta attribute XML */
  uint64_t waveform_bytes;      /* data of one waveform */
  uint32_t chain_steps;         /* steps (gadgets) of one chain: a CONFIG_SCRIPT
                                   or an installed config */
  uint32_t session_threads;     /* pipeline threads one session's chain may
                                   start (one per stage after the first, and
                                   its gadgets' own workers at most) */
  uint64_t connection_bytes;    /* memory one connection holds: read ahead
                                   of the chain and output not yet written
                                   to the socket, half each */
  uint32_t dicom_planes;        /* DICOM files made of one image (dicom_out:
                                   one per 2D plane, partitions x channels) */
} mr_limits;

/* The defaults (see wire_limits.c for the values and why). */
extern const mr_limits mr_limits_default;

/* Sets the limit called `name` (a field name above, e.g. "header_bytes")
 * from a decimal value. MR_EINVAL for an unknown name or a bad value. */
int mr_limits_set(mr_limits *limits, const char *name, const char *value);

/* The limits the server runs with, for bounds checked past the decoder
 * (dicom_out's planes): installed once at start-up, before any session
 * (the pointer is kept); mr_limits_default until then. */
void mr_limits_install(const mr_limits *limits);
const mr_limits *mr_limits_installed(void);

/* Calls fn for each limit's name and value (for --help and logs). */
void mr_limits_each(const mr_limits *limits, void (*fn)(void *ctx, const char *name,
                                                        uint64_t value),
                    void *ctx);

#endif
