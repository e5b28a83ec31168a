/* A k-space buffer: the lines of one slice / contrast / phase / repetition
 * / set gathered into an array (accumulate makes them; fft, grappa,
 * gridding consume them). Travels as an MR_MSG_KSPACE message.
 *
 * Where the samples live: in host memory (`data`), on a device (`dev`, an
 * mr_buf from gpu/core/buf.h), or both; host samples may be pinned for a GPU. A GPU gadget that hands the buffer to a
 * gadget which also works on the device (handoff.h) may leave the samples
 * there only; mr_kspace_on() gives them on the device a consumer works on,
 * copying them across once when they live elsewhere. The mask, the
 * trajectory and the calibration part stay on the host. */
#ifndef MR_GADGETS_KSPACE_H
#define MR_GADGETS_KSPACE_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

#include "cfloat.h"
#include "device.h"
#include "error.h"
#include "gadget.h"
#include "message.h"
#include "stream_header.h"

struct mr_buf;

/* Acquisition flags of lines that are no image data (noise, navigators,
 * phase correction, feedback, dummy scans, ...): the gadgets that gather
 * k-space (accumulate, frames) keep them out. */
#define MR_KSPACE_KEPT_OUT                                                                      \
  (MR_FLAG(ISMRMRD_ACQ_IS_NOISE_MEASUREMENT) | MR_FLAG(ISMRMRD_ACQ_IS_NAVIGATION_DATA) |          \
   MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA) | MR_FLAG(ISMRMRD_ACQ_IS_HPFEEDBACK_DATA) |             \
   MR_FLAG(ISMRMRD_ACQ_IS_DUMMYSCAN_DATA) | MR_FLAG(ISMRMRD_ACQ_IS_RTFEEDBACK_DATA) |             \
   MR_FLAG(ISMRMRD_ACQ_IS_SURFACECOILCORRECTIONSCAN_DATA) |                                       \
   MR_FLAG(ISMRMRD_ACQ_IS_PHASE_STABILIZATION_REFERENCE) |                                        \
   MR_FLAG(ISMRMRD_ACQ_IS_PHASE_STABILIZATION))

typedef struct mr_kspace {
  size_t nro, ne1, ne2, nch;
  float complex *data; /* [ch][e2][e1][ro]; NULL while on a device only */
  mr_device *pinned;   /* data is pinned host memory for this GPU (host.h),
                          or NULL: pageable */
  struct mr_buf *dev;  /* the same on a GPU, or NULL. Owned. */
  uint8_t *sampled;    /* [e2][e1]: 1 where a line was acquired */
  /* Non-Cartesian lines keep their sample positions: traj[e2][e1][ro][dims]
   * (NULL for Cartesian data). */
  float *traj;
  int traj_dims;
  /* Geometry of the buffer, and in ref.idx its slice / contrast / phase /
   * repetition / set (from its center line or, lacking that, its first). */
  ISMRMRD_AcquisitionHeader ref;
  int encoding;             /* encoding space index */
  mr_encoding_space recon;  /* the header's recon space for that encoding */
  mr_encoding_space encoded;
  /* Lines flagged IS_PARALLEL_CALIBRATION(_AND_IMAGING), gathered apart
   * (GRAPPA's ACS region); NULL when none came. Owned. Only its sampled
   * lines are defined: a calibration region is a few lines of a full-size
   * buffer, and zeroing the rest cost more than gathering them; readers
   * read sampled lines only. */
  struct mr_kspace *calib;
  /* Changes when the slice's calibration source changes (see
   * image_array.h); 0 unless a gadget says otherwise. */
  uint32_t calib_generation;
} mr_kspace;

/* A zeroed buffer of the given size (data and mask allocated; traj too when
 * traj_dims > 0), counted against the server's memory budget (budget.h).
 * NULL with a line in err (may be NULL) when over the budget or out of
 * memory. */
mr_kspace *mr_kspace_new(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims,
                         mr_err *err);
/* The same without a trajectory, with zeroed samples in host memory pinned
 * for dev (a GPU: uploads go straight to the copy engine), falling back to
 * pageable memory when none can be pinned. */
mr_kspace *mr_kspace_new_pinned(mr_device *dev, size_t nro, size_t ne1, size_t ne2, size_t nch,
                                mr_err *err);
/* The same without a trajectory, with the samples (contents undefined) on
 * dev only when dev is a GPU (the mask is on the host, zeroed). */
mr_kspace *mr_kspace_new_on(mr_device *dev, size_t nro, size_t ne1, size_t ne2, size_t nch,
                            mr_err *err);
/* For a gatherer that fills whole lines: like mr_kspace_new (pinned for
 * pin when it is a GPU, as mr_kspace_new_pinned; pin may be NULL), with
 * the samples left undefined, so that no slice pays for zeroing what it
 * then overwrites. Each line the gatherer marks sampled must have all its
 * samples written, and it calls mr_kspace_zero_unsampled() before the
 * buffer is read. */
mr_kspace *mr_kspace_new_gather(mr_device *pin, size_t nro, size_t ne1, size_t ne2, size_t nch,
                                int traj_dims, mr_err *err);
/* Zeroes the host samples of every line not marked sampled. */
void mr_kspace_zero_unsampled(mr_kspace *k);
void mr_kspace_free(mr_kspace *k);

/* Copies everything but the samples, the mask and the calibration part
 * (geometry, encoding, counters, generation) from src. */
void mr_kspace_copy_meta(mr_kspace *dst, const mr_kspace *src);

/* The samples as a pointer on dev (host memory for the CPU device), copied
 * there once when they live elsewhere (the copy is kept: treat them as read
 * only, or call mr_kspace_changed_on()). NULL with a line in err when over
 * the budget or out of memory. Borrowed from k. */
mr_cfloat *mr_kspace_on(mr_kspace *k, mr_device *dev, mr_err *err);
/* The samples in host memory, downloaded once when they live on a device
 * only. NULL with a line in err on failure. */
float complex *mr_kspace_host(mr_kspace *k, mr_err *err);
/* After a gadget changed the samples on dev: every other copy is dropped. */
void mr_kspace_changed_on(mr_kspace *k, mr_device *dev);
/* Queues a copy of lines [first, first + count) (flattened [e2][e1] index)
 * of every channel from the host samples to k's copy on dev (a GPU),
 * making that copy (zeroed, counted against the budget) on the first call.
 * For a gatherer that uploads a buffer in batches while its lines arrive:
 * the device copy is complete only once every line it changed went up.
 * The copies run while the caller goes on (lines may change meanwhile: a
 * later copy of a line lands after an earlier one); call
 * mr_kspace_wait_uploads() before the host samples are freed or k is
 * passed on. 0, or an error with a line in err (the device copy is dropped
 * then, after its copies finished). */
int mr_kspace_upload_lines(mr_kspace *k, mr_device *dev, size_t first, size_t count,
                           mr_err *err);
/* Waits until the copies queued by mr_kspace_upload_lines() have read the
 * host samples. 0 when none are queued; an error with a line in err (the
 * device copy is dropped then). */
int mr_kspace_wait_uploads(mr_kspace *k, mr_err *err);

/* The sampled lines of k's host samples gathered on dev (a GPU, or the
 * CPU) into a new buffer, [ch][line][ro] with *lines lines in their order
 * (0: none, and *out is NULL), a run of lines of every channel per copy:
 * for per-slice work on a sparse part, such as the calibration lines. The
 * caller takes *out. 0, or an error code with gpu/'s line in err. */
int mr_kspace_gather_sampled(const mr_kspace *k, mr_device *dev, struct mr_buf **out, size_t *lines,
                             mr_err *err);
/* The reverse: the rows of buf, [ch][line][ro] as gathered from a buffer
 * with k's mask and readout length, into the sampled lines of k's host
 * samples. 0, or an error code with its line in err. */
int mr_kspace_scatter_sampled(mr_kspace *k, const struct mr_buf *buf, mr_err *err);

/* Before a gadget passes k on: unless its consumer takes device data
 * (on_device, from handoff.h), the samples are brought to the host and the
 * device copy is dropped. 0, or an error with a line in err. */
int mr_kspace_hand_on(mr_kspace *k, int on_device, mr_err *err);

/* Wraps k in an MR_MSG_KSPACE message (takes k); NULL when out of memory
 * (k is freed then). */
mr_message *mr_kspace_message(mr_kspace *k);

/* Noise lines with no samples or no channels (Pulseq-based tools write
 * them) are skipped by the gadgets that gather lines; at the end of the
 * stream the gadget that skipped `count` of them (> 0) sends the client one
 * TEXT warning through out. Returns what emitting returned (0 for none). */
int mr_emit_empty_noise_warning(mr_gadget_ctx *ctx, mr_emit *out, size_t count);
/* The same for imaging acquisitions with no samples or no channels (flagged
 * sync or navigator lines of converted files): skipped, not a failure. */
int mr_emit_empty_lines_warning(mr_gadget_ctx *ctx, mr_emit *out, size_t count);

/* Elements of one channel. */
static inline size_t mr_kspace_channel_size(const mr_kspace *k) {
  return k->nro * k->ne1 * k->ne2;
}

#endif
