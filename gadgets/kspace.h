/* A k-space buffer: the lines of one slice / contrast / phase / repetition
 * / set gathered into an array (accumulate makes them; fft, grappa,
 * gridding consume them). Travels as an MR_MSG_KSPACE message. */
#ifndef MR_GADGETS_KSPACE_H
#define MR_GADGETS_KSPACE_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "message.h"
#include "stream_header.h"

typedef struct mr_kspace {
  size_t nro, ne1, ne2, nch;
  float complex *data; /* [ch][e2][e1][ro] */
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
   * (GRAPPA's ACS region); NULL when none came. Owned. */
  struct mr_kspace *calib;
} mr_kspace;

/* A zeroed buffer of the given size (data and mask allocated; traj too when
 * traj_dims > 0), counted against the server's memory budget (budget.h).
 * NULL with a line in err (may be NULL) when over the budget or out of
 * memory. */
mr_kspace *mr_kspace_new(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims,
                         mr_err *err);
void mr_kspace_free(mr_kspace *k);

/* Wraps k in an MR_MSG_KSPACE message (takes k); NULL when out of memory
 * (k is freed then). */
mr_message *mr_kspace_message(mr_kspace *k);

/* Elements of one channel. */
static inline size_t mr_kspace_channel_size(const mr_kspace *k) {
  return k->nro * k->ne1 * k->ne2;
}

#endif
