extern "C" { /* error.h and dicom_study.h are C headers */
#include "dicom_file.h"
}

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcostrmb.h>
#include <dcmtk/dcmdata/dcuid.h>

namespace {

/* A decimal string (VR DS) of at most 16 characters. */
void ds(char *out, double v) {
  for (int digits = 10; digits > 0; digits--) {
    std::snprintf(out, 17, "%.*g", digits, v);
    if (std::strlen(out) <= 16 && std::snprintf(nullptr, 0, "%.*g", digits, v) <= 16)
      return;
  }
}

/* Builds a multi-valued DS string "a\b\c". */
void ds_list(char *out, size_t size, const double *v, int n) {
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    char one[17];
    ds(one, v[i]);
    std::strncat(out, one, size - std::strlen(out) - 1);
    if (i + 1 < n)
      std::strncat(out, "\\", size - std::strlen(out) - 1);
  }
}

struct writer {
  DcmDataset *d;
  OFCondition status = EC_Normal;
  void put(const DcmTagKey &tag, const char *value) {
    if (status.good())
      status = d->putAndInsertString(tag, value);
  }
  void put_ds(const DcmTagKey &tag, double v) {
    char s[17];
    ds(s, v);
    put(tag, s);
  }
  void put_ds_or_empty(const DcmTagKey &tag, double v) {
    if (v > 0)
      put_ds(tag, v);
    else
      put(tag, "");
  }
  void put_u16(const DcmTagKey &tag, unsigned v) {
    if (status.good())
      status = d->putAndInsertUint16(tag, (Uint16)v);
  }
  void put_is(const DcmTagKey &tag, unsigned v) {
    char s[16];
    std::snprintf(s, sizeof s, "%u", v);
    put(tag, s);
  }
};

void fill(writer &w, const mr_dicom_plane *p, const mr_dicom_study *st, const char *sop_uid) {
  char buf[128];
  w.put(DCM_SpecificCharacterSet, "ISO_IR 192"); /* the header's strings are UTF-8 */
  /* Value 3 a defined term of the MR Image module (a phase image is a
   * phase map, the others OTHER); value 4, which the standard leaves open,
   * keeps ISMRMRD's letter (M, P, R, I) as Gadgetron writes it. */
  std::snprintf(buf, sizeof buf, "DERIVED\\PRIMARY\\%s\\%s",
                std::strcmp(p->image_type, "P") == 0 ? "PHASE MAP" : "OTHER", p->image_type);
  w.put(DCM_ImageType, buf);
  w.put(DCM_SOPClassUID, UID_MRImageStorage);
  w.put(DCM_SOPInstanceUID, sop_uid);
  w.put(DCM_StudyDate, st->study_date);
  w.put(DCM_SeriesDate, st->series_date);
  w.put(DCM_ContentDate, st->series_date);
  w.put(DCM_StudyTime, st->study_time);
  w.put(DCM_SeriesTime, st->series_time);
  w.put(DCM_ContentTime, st->series_time);
  w.put(DCM_AccessionNumber, st->accession_number);
  w.put(DCM_Modality, "MR");
  w.put(DCM_Manufacturer, st->manufacturer);
  w.put(DCM_InstitutionName, st->institution);
  w.put(DCM_ReferringPhysicianName, st->referring_physician);
  w.put(DCM_StationName, st->station);
  w.put(DCM_StudyDescription, st->study_description);
  w.put(DCM_SeriesDescription, st->series_description);
  w.put(DCM_ManufacturerModelName, st->model);
  w.put(DCM_PatientName, st->patient_name);
  w.put(DCM_PatientID, st->patient_id);
  w.put(DCM_PatientBirthDate, st->patient_birth_date);
  w.put(DCM_PatientSex, st->patient_sex);
  if (st->patient_weight_kg > 0)
    w.put_ds(DCM_PatientWeight, st->patient_weight_kg);
  /* Research mode; an inversion time in the header is an inversion
   * recovery (InversionTime is written only with IR, as the standard asks). */
  int ir = st->ti_ms > 0;
  w.put(DCM_ScanningSequence, ir ? "RM\\IR" : "RM");
  w.put(DCM_SequenceVariant, "NONE");
  w.put(DCM_ScanOptions, "");
  w.put(DCM_MRAcquisitionType, p->three_d ? "3D" : "2D");
  w.put_ds(DCM_SliceThickness, p->slice_thickness);
  /* Type 2: present, empty when the header does not say. */
  w.put_ds_or_empty(DCM_RepetitionTime, st->tr_ms);
  w.put_ds_or_empty(DCM_EchoTime, st->te_ms);
  if (st->echo_train_length > 0)
    w.put_is(DCM_EchoTrainLength, st->echo_train_length);
  else
    w.put(DCM_EchoTrainLength, "");
  if (ir)
    w.put_ds(DCM_InversionTime, st->ti_ms);
  if (st->frequency_hz > 0)
    w.put_ds(DCM_ImagingFrequency, st->frequency_hz / 1e6);
  if (st->field_strength_t > 0)
    w.put_ds(DCM_MagneticFieldStrength, st->field_strength_t);
  if (st->flip_deg > 0)
    w.put_ds(DCM_FlipAngle, st->flip_deg);
  w.put(DCM_ProtocolName, st->protocol_name);
  w.put(DCM_Laterality, ""); /* Type 2C: none known (the header has no body part) */
  w.put(DCM_PatientPosition, st->patient_position);
  w.put(DCM_StudyInstanceUID, st->study_uid);
  w.put(DCM_SeriesInstanceUID, p->series_uid);
  w.put(DCM_StudyID, st->study_id);
  w.put_is(DCM_SeriesNumber, p->series_number);
  w.put_is(DCM_AcquisitionNumber, p->acquisition_number);
  w.put_is(DCM_InstanceNumber, p->instance_number);
  ds_list(buf, sizeof buf, p->position, 3);
  w.put(DCM_ImagePositionPatient, buf);
  ds_list(buf, sizeof buf, p->orientation, 6);
  w.put(DCM_ImageOrientationPatient, buf);
  w.put(DCM_FrameOfReferenceUID, st->frame_of_reference_uid);
  w.put(DCM_PositionReferenceIndicator, "");
  w.put_ds(DCM_SliceLocation, p->slice_location);
  w.put_u16(DCM_SamplesPerPixel, 1);
  w.put(DCM_PhotometricInterpretation, "MONOCHROME2");
  w.put_u16(DCM_Rows, p->rows);
  w.put_u16(DCM_Columns, p->columns);
  ds_list(buf, sizeof buf, p->pixel_spacing, 2);
  w.put(DCM_PixelSpacing, buf);
  w.put_u16(DCM_BitsAllocated, 16);
  w.put_u16(DCM_BitsStored, 16);
  w.put_u16(DCM_HighBit, 15);
  w.put_u16(DCM_PixelRepresentation, 0);
  w.put_ds(DCM_RescaleIntercept, p->rescale_intercept);
  w.put_ds(DCM_RescaleSlope, p->rescale_slope);
  if (w.status.good())
    w.status = w.d->putAndInsertUint16Array(DCM_PixelData, p->pixels,
                                            (unsigned long)p->rows * p->columns);
}

} // namespace

extern "C" int mr_dicom_ready(mr_err *err) {
  if (dcmDataDict.isDictionaryLoaded())
    return 0;
  const char *path = std::getenv("DCMDICTPATH");
  return mr_err_set(err, MR_EIO,
                    "DICOM: DCMTK's data dictionary is not loaded (DCMDICTPATH=%s; the default "
                    "is %s)",
                    path != nullptr ? path : "unset", DCM_DICT_DEFAULT_PATH);
}

extern "C" int mr_dicom_write(const mr_dicom_plane *p, const mr_dicom_study *st, uint8_t **out,
                              uint32_t *len, mr_err *err) {
  int rc = mr_dicom_ready(err);
  if (rc < 0)
    return rc;
  char sop_uid[MR_DICOM_UID_MAX];
  mr_dicom_new_uid(sop_uid);
  DcmFileFormat file;
  writer w{file.getDataset()};
  fill(w, p, st, sop_uid);
  if (w.status.bad())
    return mr_err_set(err, MR_EIO, "DICOM: %s", w.status.text());
  /* The data set, the meta header DCMTK fills in and the preamble: the
   * element lengths plus ample room for the meta header. */
  E_TransferSyntax xfer = EXS_LittleEndianExplicit;
  file.validateMetaInfo(xfer);
  Uint32 room = file.calcElementLength(xfer, EET_ExplicitLength) + 4096;
  uint8_t *buf = static_cast<uint8_t *>(std::malloc(room));
  if (buf == nullptr)
    return mr_err_set(err, MR_ENOMEM, "out of memory for a DICOM file of %u bytes", room);
  DcmOutputBufferStream stream(buf, room);
  file.transferInit();
  OFCondition c = file.write(stream, xfer, EET_ExplicitLength, nullptr);
  file.transferEnd();
  void *written = nullptr;
  offile_off_t n = 0;
  stream.flushBuffer(written, n);
  if (c.bad() || written != buf || n <= 0) {
    std::free(buf);
    return mr_err_set(err, MR_EIO, "DICOM: writing the file failed: %s",
                      c.bad() ? c.text() : "buffer too small");
  }
  *out = buf;
  *len = (uint32_t)n;
  return 0;
}
