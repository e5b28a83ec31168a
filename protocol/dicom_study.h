/* What a DICOM file says about its patient, study and series, read from
 * the session's ISMRMRD XML header (subjectInformation, studyInformation,
 * measurementInformation, acquisitionSystemInformation,
 * experimentalConditions, sequenceParameters), and the UIDs that tie a
 * session's files together: the study's and the frame of reference's
 * from the header (generated once when absent), one series UID per
 * image_series_index (from seriesInstanceUIDRoot, else generated once).
 *
 * Every string is cleaned for the value representation it goes into
 * (control characters and the value separator `\` dropped, cut to the
 * VR's length between UTF-8 characters); a UID that is not digits and
 * dots of at most 64 as written is replaced by a generated one ("2.25."
 * and 128 random bits), never edited into another. */
#ifndef MR_PROTOCOL_DICOM_STUDY_H
#define MR_PROTOCOL_DICOM_STUDY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define MR_DICOM_UID_MAX 65 /* 64 characters and the NUL */
#define MR_DICOM_SERIES_MAX 64

typedef struct mr_dicom_study {
  /* Patient */
  char patient_name[65], patient_id[65], patient_birth_date[9], patient_sex[17];
  double patient_weight_kg; /* 0 when absent */
  /* Study */
  char study_date[9], study_time[17], study_id[17], accession_number[17];
  char study_description[65], referring_physician[65];
  char study_uid[MR_DICOM_UID_MAX];
  /* Series (per session) */
  char series_date[9], series_time[17], protocol_name[65], series_description[65];
  char patient_position[17], frame_of_reference_uid[MR_DICOM_UID_MAX];
  char series_uid_root[MR_DICOM_UID_MAX]; /* "" when absent */
  /* Equipment and sequence */
  char manufacturer[65], model[65], institution[65], station[17];
  double field_strength_t, frequency_hz, tr_ms, te_ms, ti_ms, flip_deg; /* 0 when absent */
  unsigned echo_train_length; /* the first encoding's; 0 when absent */
  /* The series UIDs handed out so far, by image_series_index. */
  int nseries;
  struct {
    uint16_t index;
    char uid[MR_DICOM_UID_MAX];
  } series[MR_DICOM_SERIES_MAX];
} mr_dicom_study;

/* Reads the header (xml, borrowed; NULL or empty: a study with every
 * field absent). MR_EHEADER with err when the XML does not parse. */
int mr_dicom_study_init(mr_dicom_study *st, const char *xml, mr_err *err);

/* The series UID of image_series_index (the same for every call with the
 * same index while at most MR_DICOM_SERIES_MAX series are in use; past
 * that the last slot is reused). Points into st. */
const char *mr_dicom_series_uid(mr_dicom_study *st, uint16_t series_index);

/* A new UID "2.25.<128 random bits in decimal>" into out (MR_DICOM_UID_MAX). */
void mr_dicom_new_uid(char *out);

#endif
