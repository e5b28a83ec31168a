/* reconclient's DICOM output directory (send --dicom DIR): the server's
 * DICOM files (message 1018) saved as Gadgetron's client saves them,
 * `<prefix>_<n, 6 digits>.dcm` numbered from 0 in arrival order, with
 * the meta XML next to each as `<prefix>_<n>_attrib.xml` when there is
 * one; and, with --dicom-images, the server's ordinary images made into
 * DICOM files here (protocol/dicom_image.h; patient, study and series
 * from the dataset's header) as `<prefix>_image_<series>_<index>[_<plane>].dcm`. */
#ifndef MR_CLIENT_DICOM_DIR_H
#define MR_CLIENT_DICOM_DIR_H

#include "dicom_study.h"
#include "error.h"
#include "message.h"

typedef struct mr_dicom_dir {
  char path[4096];
  char prefix[256];
  unsigned count; /* server DICOM files saved */
  int convert;    /* make DICOM from ordinary images */
  mr_dicom_study study;
} mr_dicom_dir;

/* Makes the directory if needed; header (borrowed) is the dataset's XML. */
int mr_dicom_dir_open(mr_dicom_dir *d, const char *path, const char *prefix, int convert,
                      const char *header, mr_err *err);
/* Saves a DICOM message's file (borrows m). */
int mr_dicom_dir_save(mr_dicom_dir *d, const mr_message *m, mr_err *err);
/* Writes an image's planes as DICOM files when converting (borrows m). */
int mr_dicom_dir_convert(mr_dicom_dir *d, const mr_message *m, mr_err *err);

#endif
