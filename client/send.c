#include "send.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"
#include "dicom_dir.h"
#include "dicom_image.h"
#include "wire_limits.h"
#include "net.h"
#include "output.h"
#include "preview.h"
#include "progress.h"
#include "readahead.h"
#include "stream.h"

/* What the file reader may run ahead of the socket: a few slices. */
#define READ_AHEAD_BYTES ((size_t)64 << 20)

typedef struct sending {
  const mr_send_options *o;
  char *script; /* the CONFIG_SCRIPT text, or NULL */
  mr_dataset *ds;
  mr_output *out;
  mr_dicom_dir dicom;
  int stage;          /* 0: config, 1: header, 2: data */
  unsigned files_left; /* of --max-files */
} sending;

/* Takes n of the files this run may still write; a clear failure when
 * the server's images would pass --max-files. */
static int take_files(sending *s, uint64_t n, const char *what, mr_err *err) {
  if (n > s->files_left)
    return mr_err_set(err, MR_ELIMIT,
                      "%s would pass --max-files %u (files written into the PNG and DICOM "
                      "folders together; %u left): stopped there",
                      what, s->o->max_files > 0 ? s->o->max_files : MR_SEND_MAX_FILES,
                      s->files_left);
  s->files_left -= (unsigned)n;
  return 0;
}

static int next_message(void *ctx, mr_message **out, mr_err *err) {
  sending *s = ctx;
  switch (s->stage++) {
  case 0:
    *out = s->script != NULL
               ? mr_message_new_text(MR_MSG_CONFIG_SCRIPT, s->script, strlen(s->script))
               : mr_message_new_config_file(s->o->config_name);
    break;
  case 1: {
    const char *xml = mr_dataset_header(s->ds);
    *out = mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml));
    break;
  }
  default:
    s->stage = 2;
    return mr_dataset_next(s->ds, out, err);
  }
  return *out != NULL ? 0 : mr_err_set(err, MR_ENOMEM, "out of memory");
}

static int on_image(void *ctx, const mr_message *m, mr_err *err) {
  sending *s = ctx;
  if (m->kind == MR_MSG_DICOM) {
    int rc = take_files(s, m->u.dicom.attributes[0] != '\0' ? 2 : 1, "a DICOM file of the server",
                        err);
    return rc < 0 ? rc : mr_dicom_dir_save(&s->dicom, m, err);
  }
  if (m->kind != MR_MSG_IMAGE)
    return mr_err_set(err, MR_EPROTO, "protocol violation: the server sent %s, never asked for",
                      mr_message_kind_name(m->kind));
  uint32_t index;
  int rc = mr_output_write(s->out, &m->u.image, &index, err);
  const ISMRMRD_ImageHeader *h = &m->u.image.head;
  char stem[64]; /* the index padded: names sort in the order of the HDF5 series */
  snprintf(stem, sizeof stem, "image_%u_%06u", (unsigned)h->image_series_index, (unsigned)index);
  if (rc == 0 && s->o->png_dir != NULL &&
      (rc = take_files(s, (uint64_t)h->matrix_size[2] * h->channels, stem, err)) == 0)
    rc = mr_preview_write(s->o->png_dir, stem, &m->u.image, err);
  if (rc == 0 && s->o->dicom_images &&
      (rc = take_files(s, mr_dicom_planes(&m->u.image), stem, err)) == 0)
    rc = mr_dicom_dir_convert(&s->dicom, m, err);
  return rc;
}

static int read_script(const char *path, char **text, mr_err *err) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return mr_err_set(err, MR_ENOENT, "cannot read config %s: %s", path, strerror(errno));
  size_t cap = mr_limits_default.config_script_bytes;
  char *buf = malloc(cap + 1);
  size_t n = buf != NULL ? fread(buf, 1, cap + 1, f) : 0;
  int rc = 0;
  if (buf == NULL)
    rc = mr_err_set(err, MR_ENOMEM, "out of memory");
  else if (ferror(f))
    rc = mr_err_set(err, MR_EIO, "cannot read config %s: %s", path, strerror(errno));
  else if (n > cap)
    rc = mr_err_set(err, MR_ELIMIT, "config %s is over %zu bytes", path, cap);
  fclose(f);
  if (rc < 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *text = buf;
  return 0;
}

static int make_dir(const char *dir, mr_err *err) {
  struct stat st;
  if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
    return 0;
  return mr_err_set(err, MR_EIO, "cannot use %s as the PNG directory: %s", dir,
                    errno == EEXIST ? "not a directory" : strerror(errno));
}

void mr_send_default_group(const mr_send_options *o, char *buf, size_t size) {
  if (o->config_script == NULL) {
    snprintf(buf, size, "%s", o->config_name);
    return;
  }
  const char *base = strrchr(o->config_script, '/');
  base = base != NULL ? base + 1 : o->config_script;
  size_t n = strlen(base);
  if (n > 5 && strcmp(base + n - 5, ".json") == 0)
    n -= 5;
  snprintf(buf, size, "%.*s", (int)n, base);
}

static void fill_report(mr_send_report *rep, const mr_stream_stats *st, int64_t start) {
  rep->acquisitions = atomic_load(&st->acquisitions);
  rep->waveforms = atomic_load(&st->waveforms);
  rep->acq_bytes = atomic_load(&st->acq_bytes);
  rep->images = atomic_load(&st->images);
  int64_t first = atomic_load(&st->first_acq_ms), last = atomic_load(&st->last_acq_ms);
  rep->acq_seconds = first > 0 ? (double)(last - first) / 1000.0 : 0.0;
  rep->seconds = (double)(mr_net_now_ms() - start) / 1000.0;
}

int mr_send_run(const mr_send_options *o, mr_send_report *rep, mr_err *err) {
  memset(rep, 0, sizeof *rep);
  if (o->out_group != NULL)
    snprintf(rep->out_group, sizeof rep->out_group, "%s", o->out_group);
  else
    mr_send_default_group(o, rep->out_group, sizeof rep->out_group);
  sending s = {.o = o, .files_left = o->max_files > 0 ? o->max_files : MR_SEND_MAX_FILES};
  mr_net net = {.fd = -1};
  int rc = 0;
  /* Everything local is checked before connecting: a bad file or an
   * existing output group costs no server time. */
  if ((o->config_script != NULL && (rc = read_script(o->config_script, &s.script, err)) < 0) ||
      (rc = mr_dataset_open(o->data_path, o->in_group, &s.ds, err)) < 0 ||
      (rc = mr_output_open(o->out_path, rep->out_group, &s.out, err)) < 0 ||
      (o->png_dir != NULL && (rc = make_dir(o->png_dir, err)) < 0) ||
      (rc = mr_dicom_dir_open(&s.dicom, o->dicom_dir != NULL ? o->dicom_dir : ".",
                              rep->out_group, o->dicom_images, mr_dataset_header(s.ds), err)) < 0)
    goto done;
  int64_t start = mr_net_now_ms();
  if ((rc = mr_net_connect(&net, o->host, o->port, o->timeout_ms, err)) < 0)
    goto done;
  mr_stream_stats stats;
  memset(&stats, 0, sizeof stats);
  mr_progress *progress = mr_progress_start(&stats, mr_dataset_acquisitions(s.ds));
  mr_stream_source file = {.next = next_message, .ctx = &s};
  mr_stream_sink sink = {.on_message = on_image, .ctx = &s};
  mr_stream_result res = {0};
  mr_readahead *ahead = NULL;
  if ((rc = mr_readahead_start(&file, READ_AHEAD_BYTES, &ahead)) < 0) {
    mr_err_set(err, rc, "cannot start reading %s: %s", o->data_path, mr_strerror(rc));
  } else {
    mr_stream_source src = mr_readahead_source(ahead);
    rc = mr_stream_run(&net, &src, &sink, &stats, &res, err);
  }
  mr_readahead_stop(ahead);
  mr_progress_stop(progress);
  fill_report(rep, &stats, start);
  rep->server_errors = res.server_errors;
  if (rc < 0)
    goto done;
  if (res.server_errors > 0)
    rc = res.server_errors > 1
             ? mr_err_set(err, MR_EPROTO, "the server reported %d errors (the others above), "
                                          "the first: %s", res.server_errors, res.first_error)
             : mr_err_set(err, MR_EPROTO, "the server reported an error: %s", res.first_error);
  else if (rep->images == 0)
    rc = mr_err_set(err, MR_EDATA, "no image arrived: the server closed after %llu acquisitions",
                    (unsigned long long)rep->acquisitions);
done:
  mr_net_close(&net);
  {
    mr_err close_err = {0};
    int crc = mr_output_close(s.out, &close_err);
    if (crc < 0 && rc == 0) {
      rc = crc;
      *err = close_err;
    }
  }
  mr_dataset_close(s.ds);
  free(s.script);
  return rc;
}
