#include "capability.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "chain_impl.h"

/* The union of what the chain's gadgets handle; everything for a chain
 * that reconstructs nothing. */
static uint32_t handled(const mr_chain *c) {
  if (mr_chain_ends_in_sink(c))
    return MR_HANDLES_ANY;
  uint32_t h = 0;
  for (int i = 0; i < c->n; i++)
    h |= c->nodes[i].cls->handles;
  return h;
}

/* Why the header says EPI, into why (empty when it does not). */
static void claims_epi(const mr_stream_header *hdr, char *why, size_t size) {
  why[0] = '\0';
  for (int e = 0; e < hdr->nencodings; e++) {
    const mr_encoding *enc = &hdr->encoding[e];
    if (enc->trajectory == MR_TRAJ_EPI) {
      snprintf(why, size, "encoding %d's trajectory is 'epi'", e);
      return;
    }
    if (mr_trajectory_description_is_epi(&enc->description)) {
      snprintf(why, size, "encoding %d's trajectoryDescription is '%s' (its trajectory says "
               "'%s')", e, enc->description.identifier, enc->trajectory_name);
      return;
    }
  }
}

/* The multiband factor of the header's encoding e, 1 when it has none. */
static int multiband_factor(const mr_stream_header *hdr, int e) {
  const mr_multiband *mb = &hdr->encoding[e].parallel.multiband;
  return mb->present && mb->factor > 1 ? mb->factor : 1;
}

static int warn(mr_chain *c, const char *text) {
  mr_message *m = mr_message_new_text(MR_MSG_TEXT, text, strlen(text));
  if (m == NULL)
    return MR_ENOMEM;
  /* from past the last gadget: straight to the sink */
  return mr_chain_deliver(c, &c->stages[0], c->n, m);
}

int mr_capability_check_header(mr_chain *c, const mr_stream_header *hdr, mr_err *err) {
  uint32_t h = handled(c);
  if (h == MR_HANDLES_ANY)
    return 0;
  char why[160];
  claims_epi(hdr, why, sizeof why);
  for (int e = 0; e < hdr->nencodings && !(h & MR_HANDLES_MULTIBAND); e++) {
    int m = multiband_factor(hdr, e);
    if (m > 1)
      return mr_err_set(err, MR_ECONFIG,
                        "config '%s': the scan is simultaneous multi-slice (multiband %d in "
                        "encoding %d's parallelImaging), and no step of this config separates "
                        "its slices: its images would be the slices collapsed; use the config "
                        "'sms' (Cartesian) or 'epi_sms'",
                        c->cfg->name, m, e);
  }
  if (why[0] != '\0' && !(h & MR_HANDLES_EPI))
    return mr_err_set(err, MR_ECONFIG,
                      "config '%s': the scan is EPI (%s), and no step of this config corrects "
                      "EPI echo trains (reversed echoes, navigators, ramp sampling): its image "
                      "would be ghosted; use the config 'epi'",
                      c->cfg->name, why);
  for (int e = 0; e < hdr->nencodings; e++) {
    const mr_parallel_imaging *p = &hdr->encoding[e].parallel;
    if ((p->accel_e1 > 1 || p->accel_e2 > 1) && !(h & MR_HANDLES_ACCELERATION)) {
      char text[480];
      snprintf(text, sizeof text,
               "WARNING: config '%s': the header says acceleration %u x %u, and no step of this "
               "config fills undersampled k-space (parallel imaging or compressed sensing): "
               "the image will be aliased; use a config that does (grappa%s)",
               c->cfg->name, (unsigned)p->accel_e1, (unsigned)p->accel_e2,
               why[0] != '\0' ? ", or epi for EPI" : "");
      return warn(c, text);
    }
  }
  return 0;
}

int mr_capability_check_acquisition(const mr_chain *c, const mr_acquisition *a, mr_err *err) {
  uint64_t f = a->head.flags;
  if (!(f & (MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA) | MR_FLAG(ISMRMRD_ACQ_IS_REVERSE))))
    return 0;
  uint32_t h = handled(c);
  uint64_t epi_navigator = MR_FLAG(ISMRMRD_ACQ_IS_PHASECORR_DATA) | MR_FLAG(ISMRMRD_ACQ_IS_REVERSE);
  if ((f & epi_navigator) == epi_navigator && !(h & MR_HANDLES_EPI))
    return mr_err_set(err, MR_EDATA,
                      "config '%s': acquisition %u is an EPI navigator (IS_PHASECORR_DATA and "
                      "IS_REVERSE), and no step of this config corrects EPI echo trains: its "
                      "image would be ghosted; use the config 'epi'",
                      c->cfg->name, a->head.scan_counter);
  if ((f & MR_FLAG(ISMRMRD_ACQ_IS_REVERSE)) && !(h & (MR_HANDLES_REVERSE | MR_HANDLES_EPI)))
    return mr_err_set(err, MR_EDATA,
                      "config '%s': acquisition %u is flagged IS_REVERSE, and no step of this "
                      "config reverses readouts (for EPI, use the config 'epi')",
                      c->cfg->name, a->head.scan_counter);
  return 0;
}
