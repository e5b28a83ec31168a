/* Reading an ISMRMRD HDF5 dataset for streaming: the XML header, then the
 * acquisitions and waveforms merged into one sequence by time stamp (as
 * Gadgetron's client sends them). The file is opened read-only and never
 * changed. */
#ifndef MR_CLIENT_DATASET_H
#define MR_CLIENT_DATASET_H

#include <stdint.h>

#include "error.h"
#include "message.h"

typedef struct mr_dataset mr_dataset;

/* Opens group (e.g. "dataset") of the HDF5 file at path. Fails with a line
 * naming the file when it is missing or not HDF5, when the group is missing
 * (listing the groups there are), or when the group has no XML header or
 * no acquisitions. */
int mr_dataset_open(const char *path, const char *group, mr_dataset **out, mr_err *err);

/* The ISMRMRD XML header exactly as stored (borrowed; lives as long as ds). */
const char *mr_dataset_header(const mr_dataset *ds);

uint32_t mr_dataset_acquisitions(const mr_dataset *ds);
uint32_t mr_dataset_waveforms(const mr_dataset *ds);

/* The next ACQUISITION or WAVEFORM message in time order (*out, a new
 * reference for the caller), or *out = NULL after the last one. On equal
 * time stamps the acquisition goes first. */
int mr_dataset_next(mr_dataset *ds, mr_message **out, mr_err *err);

void mr_dataset_close(mr_dataset *ds);

#endif
