/* The encoding's trajectoryDescription of an ISMRMRD header (what the
 * parsed header, stream_header.h, leaves in its XML): an identifier and
 * named integer and real parameters, as Gadgetron's EPI steps read them
 * (identifier ConventionalEPI: rampUpTime, rampDownTime, flatTopTime,
 * acqDelayTime, numSamples, dwellTime). */
#ifndef MR_GADGETS_TRAJECTORY_DESCRIPTION_H
#define MR_GADGETS_TRAJECTORY_DESCRIPTION_H

#include "error.h"
#include "stream_header.h"

#define MR_TRAJ_PARAMS 32

typedef struct mr_trajectory_param {
  char name[64];
  double value; /* userParameterLong values are exact up to 2^53 */
} mr_trajectory_param;

typedef struct mr_trajectory_description {
  int present; /* the encoding has one */
  char identifier[64];
  int nparams;
  mr_trajectory_param params[MR_TRAJ_PARAMS];
} mr_trajectory_description;

/* Reads encoding number `encoding`'s description from hdr->xml into out
 * (present 0 when it has none). MR_EHEADER when the XML does not parse or a
 * value is not a number; parameters past MR_TRAJ_PARAMS are ignored. */
int mr_trajectory_description_read(const mr_stream_header *hdr, int encoding,
                                   mr_trajectory_description *out, mr_err *err);

/* The parameter called name (either kind), or NULL. */
const mr_trajectory_param *mr_trajectory_description_param(const mr_trajectory_description *d,
                                                           const char *name);

/* 1 when the identifier says conventional EPI (Gadgetron's ConventionalEPI,
 * any case). */
int mr_trajectory_description_is_epi(const mr_trajectory_description *d);

#endif
