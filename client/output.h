/* Writing received images into an HDF5 file the way Gadgetron's client
 * does: /<group>/image_<image_series_index>/{header,attributes,data}, one
 * entry per image, appended with libismrmrd's ismrmrd_append_image().
 *
 * Never appends silently: opening refuses a group that already exists in
 * the file, and refuses to touch an existing file that is not HDF5. */
#ifndef MR_CLIENT_OUTPUT_H
#define MR_CLIENT_OUTPUT_H

#include <stdint.h>

#include "error.h"
#include "message.h"

typedef struct mr_output mr_output;

/* Checks now that group can be created in the file at path (a missing
 * file is fine); the file itself is created or opened at the first image,
 * so a run that yields no image leaves no file behind. */
int mr_output_open(const char *path, const char *group, mr_output **out, mr_err *err);

/* Appends im (borrowed) under /<group>/image_<series>; *index (may be
 * NULL) is its position in that series, from 0. */
int mr_output_write(mr_output *out, const mr_image *im, uint32_t *index, mr_err *err);

/* Images written so far. */
uint32_t mr_output_count(const mr_output *out);

/* Closes the file (flushing it) and frees out; NULL is fine. */
int mr_output_close(mr_output *out, mr_err *err);

#endif
