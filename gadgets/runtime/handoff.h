/* Handing data on where it is: whether the gadget that will consume what
 * this gadget emits works on device data (image arrays and k-space buffers
 * whose samples live on a GPU, see image_array.h and kspace.h). A GPU
 * gadget leaves its result on the device only when the consumer takes it
 * there; for any other consumer it brings the result back to the host. */
#ifndef MR_GADGETS_HANDOFF_H
#define MR_GADGETS_HANDOFF_H

#include "gadget.h"

/* 1 when the first later gadget of the chain that accepts `kind` reads it
 * on the device (its class's device_input has the kind: fft,
 * remove_oversampling, noise_adjust and grappa for k-space; coil_combine
 * and image_out for image arrays), else 0 (the end of the chain, or any
 * other gadget). Such a consumer that passes the data on unchanged brings
 * it to the host first when its own consumer does not read it there. */
int mr_handoff_on_device(const mr_gadget_ctx *ctx, mr_message_kind kind);

#endif
