/* A harness that runs one gadget (or a short chain) outside a server:
 * messages in, emitted messages collected, on a CPU-only pool. */
#ifndef MR_TEST_GADGET_HARNESS_H
#define MR_TEST_GADGET_HARNESS_H

#include <complex.h>
#include <stdint.h>

#include "chain.h"
#include "error.h"
#include "pool.h"
#include "stream_header.h"

#define MR_HARNESS_MAX_OUT 256

typedef struct mr_harness {
  mr_pipeline_config cfg;
  mr_chain *chain;
  mr_pool *pool;
  mr_device *device;
  mr_stream_header hdr;
  int have_hdr;
  mr_err err;
  mr_message *out[MR_HARNESS_MAX_OUT];
  int nout;
} mr_harness;

/* Builds a chain from `gadgets` (a JSON array of gadget entries) that will
 * be pushed `input` kinds. Returns the chain's error (text in h->err). */
int mr_harness_open(mr_harness *h, const char *gadgets, uint32_t input);
/* Runs the chain as a pipeline of stages, `depth` messages per stage inbox
 * (mr_chain_set_pipelined); call before configure. */
int mr_harness_set_pipelined(mr_harness *h, size_t depth);
/* The chain's cancel flag, as a session's (the client left, the drain
 * deadline): before the first push. */
void mr_harness_set_cancel(mr_harness *h, const atomic_int *cancel);
/* The same on a pool of the given GPUs ("all", "0,1"; "none" as above). */
int mr_harness_open_gpus(mr_harness *h, const char *gadgets, uint32_t input, const char *gpus);
/* The same on a pool made with opts (its cpu_threads set to 2): fake GPUs,
 * say. */
int mr_harness_open_pool(mr_harness *h, const char *gadgets, uint32_t input,
                         const mr_pool_opts *opts);
/* Configures it with a header (XML text); NULL configures header-less. */
int mr_harness_configure(mr_harness *h, const char *header_xml);
/* Pushes msg (takes it). */
int mr_harness_push(mr_harness *h, mr_message *msg);
int mr_harness_flush(mr_harness *h);
/* Frees everything, the collected messages included. */
void mr_harness_close(mr_harness *h);

/* A Cartesian header: encoded nx x ny x nz (fov = matrix mm), recon rx x ry
 * x rz, e1 limits 0..ny-1 centered. Static storage of the calling thread,
 * valid until its next call. */
const char *mr_harness_cartesian_header(int nx, int ny, int nz, int rx, int ry, int rz);
/* The same 2D header (nx x ny, recon the same) with a parallelImaging
 * section: acceleration accel along e1, calibrationMode mode ("embedded",
 * "separate", "interleaved"). Static storage of the calling thread. */
const char *mr_harness_accelerated_header(int nx, int ny, int accel, const char *mode);

/* The installed config configs/<name>.json of the source tree, parsed (the
 * caller frees it with cJSON_Delete); NULL when it cannot be read. */
cJSON *mr_harness_installed_config(const char *name);

/* 1 when a pool on every GPU can be made and has one (GPU test groups
 * exit 77 otherwise). */
int mr_harness_have_gpu(void);

/* Smooth, coil-dependent samples for mr_harness_acquisition (arg: the
 * line's int e1): a point in the middle of the object, so the image is
 * not all zero. */
float complex mr_harness_smooth_line(int c, int s, void *arg);

/* An acquisition of ns samples x nch channels at line (e1, e2) with flags;
 * sample s of channel c is value(c, s, arg) (zeros when value is NULL). */
mr_message *mr_harness_acquisition(int ns, int nch, int e1, int e2, uint64_t flags,
                                   float complex (*value)(int c, int s, void *arg), void *arg);

#endif
