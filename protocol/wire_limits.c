#include "limits.h"

const mr_limits mr_limits_default = {
    .config_script_bytes = 1u << 20, /* our JSON or a Gadgetron XML chain */
    .header_bytes = 16u << 20,       /* vendor headers carry big user maps */
    .text_bytes = 1u << 20,
    .query_bytes = 64u << 10,
    .channels = MR_MAX_CHANNELS,
    .trajectory_dims = MR_MAX_TRAJECTORY_DIMS,
    .samples = 65535, /* the u16 field's own range */
    /* 65535 samples x 1024 channels x 8 bytes would be 512 MiB: nobody
     * acquires that in one line; 64 MiB covers 16k samples x 512 coils. */
    .acquisition_bytes = 64ull << 20,
    .image_bytes = 1ull << 30,
    .attribute_bytes = 4u << 20,
    .waveform_bytes = 16u << 20,
};
