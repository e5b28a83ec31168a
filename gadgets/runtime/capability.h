/* What a scan needs of a chain, against what the chain's gadgets declare
 * they handle (mr_gadget_class.handles, gadget.h): one check, so that no
 * step keeps a list of config names.
 *
 * - A header that says EPI (an encoding's trajectory `epi`, or a
 *   trajectoryDescription `ConventionalEPI`, which is how siemens_to_ismrmrd
 *   marks EPI while its trajectory says `cartesian`) needs a step that
 *   handles EPI: refused otherwise, naming the config `epi` (a chain
 *   without one would return a ghosted, stretched image).
 * - A header whose parallelImaging has a multiband section (factor over 1)
 *   needs a step that splits collapsed slices: refused otherwise, naming
 *   the config `epi_sms`.
 * - A reversed phase-correction line (IS_PHASECORR_DATA and IS_REVERSE:
 *   EPI's middle navigator, whatever the header says) needs the same; a
 *   phase-correction line alone does not (TSE scans have them, and
 *   accumulate keeps them out); readouts flagged IS_REVERSE need a step
 *   that reverses them (accumulate does: bipolar multi-echo scans).
 * - A header acceleration over 1 without a step that handles undersampled
 *   k-space (parallel imaging, compressed sensing) is a warning: a TEXT to
 *   the client (and the server's log), the scan goes on.
 * Chains that end in a sink (raw_dump, discard: nothing reconstructed) are
 * never checked. */
#ifndef MR_GADGETS_CAPABILITY_H
#define MR_GADGETS_CAPABILITY_H

#include "chain.h"

/* After the gadgets' configure: MR_ECONFIG with the line in err for a scan
 * the chain cannot reconstruct; the warning, when there is one, is sent to
 * the end of the chain as a TEXT "WARNING: ...". */
int mr_capability_check_header(mr_chain *chain, const mr_stream_header *hdr, mr_err *err);

/* Before an acquisition enters the chain: MR_EDATA with the line in err
 * for flags no step handles. */
int mr_capability_check_acquisition(const mr_chain *chain, const mr_acquisition *acq,
                                    mr_err *err);

#endif
