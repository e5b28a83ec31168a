/* mr-bench stream: one session held in memory, ready to replay.
 *
 * The bytes are exactly what `reconclient send DATA.h5 -c CONFIG` writes:
 * CONFIG_FILE, HEADER (the dataset's XML), the acquisitions and waveforms
 * in the dataset's time order, CLOSE. Loading reads the HDF5 file once,
 * before any timing, so no HDF5 work happens while a replay is timed.
 *
 * A "unit" is what one image answers: the acquisitions (noise scans left
 * out) sharing slice, contrast, phase, repetition and set. Its last
 * acquisition is the one whose sending starts the clock for the latency
 * to that image. Loaded by volume (an fMRI series), a unit is a volume:
 * every acquisition of one repetition, answered by a given number of
 * images (its slices), the latency running to the last of them. */
#ifndef MR_BENCH_STREAM_SESSION_H
#define MR_BENCH_STREAM_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* slice, contrast, phase, repetition, set */
typedef struct stream_key {
  uint16_t v[5];
} stream_key;

typedef struct stream_session {
  uint8_t *bytes;   /* the whole session, CLOSE included */
  size_t len;
  size_t close_at;  /* where the final CLOSE starts */
  size_t last_acq_end;
  uint64_t acquisitions;
  int nunits;
  stream_key *keys; /* [nunits], in order of first appearance */
  size_t *unit_end; /* [nunits]: where each unit's last acquisition ends */
  /* Where the sender pauses to note the time: every unit_end, the last
   * acquisition's end and len, ascending, without repeats (by volume also
   * where each run of acquisitions of one slice ends). */
  size_t *cuts;
  int ncuts;
  /* By volume: the images that answer a unit (0: one image per key). */
  int volume_images;
  /* By volume, for paced sending: cut i's bytes are not sent before
   * cut_pace[i] units (volumes) after the start, the runs of a volume
   * (its slices or slice groups) spread evenly over its time, as a
   * scanner acquires them over a TR. NULL: unit u's bytes not before u. */
  double *cut_pace;
} stream_session;

/* Loads group "dataset" of the ISMRMRD file at path as sent with config
 * name. Fails with a line in err when the file cannot be read or holds no
 * imaging acquisition. Free with stream_session_free(). */
int stream_session_load(const char *path, const char *config, stream_session *s, mr_err *err);
/* The same with a unit per volume (repetition), answered by images_per_volume
 * images. */
int stream_session_load_volumes(const char *path, const char *config, int images_per_volume,
                                stream_session *s, mr_err *err);
void stream_session_free(stream_session *s);

/* The unit of key k (by volume, of its repetition), or -1. */
int stream_session_unit(const stream_session *s, const stream_key *k);

/* The index in cuts of offset at (which must be one of them). */
int stream_session_cut(const stream_session *s, size_t at);

#endif
