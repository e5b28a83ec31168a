/* The `send` command: stream one dataset through a server config and keep
 * the images it returns. */
#ifndef MR_CLIENT_SEND_H
#define MR_CLIENT_SEND_H

#include <stdint.h>

#include "error.h"

/* The default bound on the files one send writes (PNGs and DICOM files):
 * a server decides how many planes its images have, and one small image
 * of 1x1x4000 would otherwise be 4000 files. */
#define MR_SEND_MAX_FILES 10000u

typedef struct mr_send_options {
  const char *data_path, *in_group; /* the dataset: file and group */
  const char *config_name;   /* sent as CONFIG_FILE, unless config_script */
  const char *config_script; /* path of a JSON config sent as CONFIG_SCRIPT, or NULL */
  const char *out_path;
  const char *out_group;     /* NULL: the config's name (see mr_send_default_group) */
  const char *png_dir;       /* NULL: no PNGs */
  const char *dicom_dir;     /* the server's DICOM files go here; NULL: "." */
  int dicom_images;          /* also make DICOM files of its ordinary images (dicom_dir) */
  unsigned max_files;        /* files written into png_dir and dicom_dir together; 0:
                                MR_SEND_MAX_FILES */
  const char *host;
  int port;
  int timeout_ms;            /* silence allowed from the server */
} mr_send_options;

typedef struct mr_send_report {
  uint64_t acquisitions, waveforms, acq_bytes, images;
  double acq_seconds; /* first to last acquisition handed to the socket */
  double seconds;     /* connect to the server's CLOSE */
  int server_errors;
  char out_group[256];
} mr_send_report;

/* The output group when none is given: the config name (-c), or the
 * config file's name without directory and ".json" (-C). */
void mr_send_default_group(const mr_send_options *o, char *buf, size_t size);

/* Runs the whole command. Fails, with one line in err, when the dataset
 * cannot be read, the output cannot be written, the connection fails or
 * times out, the server breaks the protocol or reports an error (every
 * server TEXT is also printed on stderr), or no image arrives. Images that
 * did arrive are written either way. *rep is filled as far as it got. */
int mr_send_run(const mr_send_options *o, mr_send_report *rep, mr_err *err);

#endif
