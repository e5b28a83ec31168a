/* The ISMRMRD XML header, parsed (libxml2) into what gadgets need.
 *
 * The XML text is kept exactly as received (docs/protocol.md rule 9: never
 * re-serialize it). Only the fields below are read; everything else stays
 * in `xml` for whoever needs it. */
#ifndef MR_PROTOCOL_STREAM_HEADER_H
#define MR_PROTOCOL_STREAM_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define MR_MAX_ENCODINGS 8
#define MR_MAX_DEPENDENCIES 8
#define MR_MAX_SEQ_VALUES 8
#define MR_TRAJ_PARAMS 32

typedef struct mr_xyz_u16 {
  uint16_t x, y, z;
} mr_xyz_u16;

typedef struct mr_xyz_f {
  float x, y, z;
} mr_xyz_f;

typedef struct mr_encoding_space {
  mr_xyz_u16 matrix;
  mr_xyz_f fov_mm;
} mr_encoding_space;

/* One encoding counter's range; present = 0 when the header omits it. */
typedef struct mr_limit {
  int present;
  uint16_t minimum, maximum, center;
} mr_limit;

typedef struct mr_encoding_limits {
  mr_limit e0, e1, e2, average, slice, contrast, phase, repetition, set,
      segment;
} mr_encoding_limits;

typedef enum mr_trajectory {
  MR_TRAJ_CARTESIAN,
  MR_TRAJ_EPI,
  MR_TRAJ_RADIAL,
  MR_TRAJ_GOLDENANGLE,
  MR_TRAJ_SPIRAL,
  MR_TRAJ_OTHER,
} mr_trajectory;

typedef enum mr_calibration_mode {
  MR_CALIB_NONE, /* no parallelImaging section, or mode absent */
  MR_CALIB_EMBEDDED,
  MR_CALIB_INTERLEAVED,
  MR_CALIB_SEPARATE,
  MR_CALIB_EXTERNAL,
  MR_CALIB_OTHER,
} mr_calibration_mode;

/* parallelImaging/multiband (ISMRMRD 1.14): simultaneous multi-slice. */
typedef struct mr_multiband {
  int present;
  uint16_t factor;                      /* multiband_factor: slices excited together */
  int nspacing;
  float spacing_mm[MR_MAX_SEQ_VALUES];  /* spacing/dZ: between simultaneous slices */
  float delta_kz;                       /* deltaKz */
  char calibration[32];                 /* "separable2D", "full3D", "other" */
  uint16_t calibration_encoding;        /* encoding space of the reference scan */
} mr_multiband;

typedef struct mr_parallel_imaging {
  int present;
  uint16_t accel_e1, accel_e2; /* 1 when absent */
  mr_calibration_mode calibration;
  char interleaving_dimension[32]; /* "phase", "repetition", ... or "" */
  mr_multiband multiband;
} mr_parallel_imaging;

typedef struct mr_trajectory_param {
  char name[64];
  double value; /* userParameterLong values are exact up to 2^53 */
} mr_trajectory_param;

/* The encoding's trajectoryDescription: an identifier and named integer
 * and real parameters (userParameterLong, userParameterDouble; strings are
 * not kept), as Gadgetron's EPI steps read them (identifier
 * ConventionalEPI: rampUpTime, rampDownTime, flatTopTime, acqDelayTime,
 * numSamples, dwellTime). Parameters past MR_TRAJ_PARAMS are not kept. */
typedef struct mr_trajectory_description {
  int present; /* the encoding has one */
  char identifier[64];
  int nparams;
  mr_trajectory_param params[MR_TRAJ_PARAMS];
} mr_trajectory_description;

typedef struct mr_encoding {
  mr_encoding_space encoded, recon;
  mr_encoding_limits limits;
  mr_trajectory trajectory;
  char trajectory_name[32]; /* as written */
  mr_trajectory_description description;
  mr_parallel_imaging parallel;
  uint16_t echo_train_length; /* 0 when absent */
} mr_encoding;

typedef struct mr_dependency {
  char type[64];            /* e.g. "Noise" */
  char measurement_id[128];
} mr_dependency;

typedef struct mr_stream_header {
  char *xml; /* as received, NUL-terminated; owned */
  size_t xml_len;
  int version; /* <version>, 0 when absent */
  char measurement_id[128];
  int ndependencies;
  mr_dependency dependencies[MR_MAX_DEPENDENCIES];
  uint16_t receiver_channels; /* 0 when absent */
  float relative_noise_bandwidth; /* 0 when absent */
  double h1_resonance_hz;
  int nencodings;
  mr_encoding encoding[MR_MAX_ENCODINGS];
  int ntr, nte, nti, nflip;
  float tr_ms[MR_MAX_SEQ_VALUES], te_ms[MR_MAX_SEQ_VALUES],
      ti_ms[MR_MAX_SEQ_VALUES], flip_deg[MR_MAX_SEQ_VALUES];
} mr_stream_header;

/* Parses len bytes of XML into hdr (which then owns a copy of the text).
 * Fails with MR_EHEADER and a line in err when the text is not XML, not an
 * ismrmrdHeader, lacks an encoding, or has a number that does not parse or
 * fit (a trajectoryDescription parameter without a name or value, or named
 * twice, too). */
int mr_stream_header_parse(const char *xml, size_t len, mr_stream_header *hdr,
                           mr_err *err);
void mr_stream_header_free(mr_stream_header *hdr);

/* A name for a trajectory value ("cartesian", ...). */
const char *mr_trajectory_name(mr_trajectory t);

/* The description's parameter called name (either kind), or NULL. */
const mr_trajectory_param *mr_trajectory_description_param(const mr_trajectory_description *d,
                                                           const char *name);

/* 1 when the identifier says conventional EPI (Gadgetron's ConventionalEPI,
 * any case). */
int mr_trajectory_description_is_epi(const mr_trajectory_description *d);

#endif
