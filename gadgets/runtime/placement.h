/* Where a gadget's math runs: the device its "device" parameter asks for,
 * taken from the pool at configure time, and what to fall back on: the CPU
 * when the GPU runs out of memory and the gadget's "fallback" says "cpu";
 * another GPU of the pool, then the CPU, when the GPU runs out of memory or
 * fails and it says "gpu". */
#ifndef MR_GADGETS_PLACEMENT_H
#define MR_GADGETS_PLACEMENT_H

#include "device.h"
#include "gadget.h"

enum { MR_FALLBACK_CPU, MR_FALLBACK_NONE, MR_FALLBACK_GPU };

/* The two parameter-table entries every device-using gadget carries, for a
 * state struct with `int device, fallback` members. */
#define MR_PLACEMENT_PARAMS(type)                                                                \
  MR_PARAM_DEVICE(type, device, "device", "\"auto\"",                                            \
      "where the math runs: \"auto\" (least loaded GPU, else CPU), \"cpu\", or a GPU index"),    \
  MR_PARAM_ENUM(type, fallback, "fallback", "\"cpu\"", "cpu|none|gpu",                            \
      "on GPU out-of-memory: retry on the CPU, or report the error; \"gpu\": on out-of-memory "  \
      "or a GPU failure, retry on another GPU, then on the CPU")

typedef struct mr_placement {
  struct mr_pool *pool;
  mr_device *dev; /* the session's device, or one acquired from pool */
  int owned;      /* dev was acquired here */
  mr_device *cpu; /* acquired on the first fallback */
  mr_device *other; /* another GPU, acquired on the first "gpu" fallback */
  int fallback;
} mr_placement;

/* "auto" uses the session's device (ctx->device); "cpu" or a GPU index
 * takes that device from ctx->pool. Errors (no such GPU) go to ctx->err. */
int mr_placement_acquire(mr_placement *p, mr_gadget_ctx *ctx, int device, int fallback);
/* Gives the devices back (a zeroed placement is fine). */
void mr_placement_release(mr_placement *p);

/* Runs op(dev, arg, err) on the placed device; when that fails with
 * MR_EDEVMEM and the fallback is "cpu", runs it again on the CPU; with
 * "gpu", when it fails with MR_EDEVMEM or MR_EDEVICE, again on another GPU
 * (the least loaded, kept for the next steps' fallbacks), then on the CPU.
 * Each run gets an mr_err of its own; a failure that ends the step goes to
 * ctx->err with the line op's gpu/ calls wrote (mr_gadget_fail()). */
int mr_placement_run(mr_placement *p, mr_gadget_ctx *ctx, mr_device_task op, void *arg);

#endif
