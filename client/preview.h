/* PNG previews of received images: 8-bit grayscale, one file per 2D plane
 * (each z partition and each channel of an image gets its own file), all
 * planes of one image sharing one window taken from its data: the 1st to
 * the 99.5th percentile of the magnitude. */
#ifndef MR_CLIENT_PREVIEW_H
#define MR_CLIENT_PREVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "message.h"

/* Writes im (borrowed) as dir/<stem>.png, or dir/<stem>_z<k>_c<c>.png
 * (only the suffixes that vary) when it has several planes. */
int mr_preview_write(const char *dir, const char *stem, const mr_image *im, mr_err *err);

#endif
