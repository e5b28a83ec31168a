/* raw_dump: stores the client's stream as it came (Gadgetron's
 * IsmrmrdDumpGadget, `ismrmrd_dump.xml`): the HEADER, every acquisition,
 * waveform and image in wire format, then CLOSE, i.e. an ISMRMRD stream
 * that `ismrmrd_stream_to_hdf5` turns into a dataset. The file goes to
 * dumps/ of the state directory (state_dir.h) as
 * `<UTC time>-<measurementID or "stream">-<pid>-<n>.mrd`, written under a
 * temporary name and renamed at the end (a failed or abandoned session
 * leaves nothing). The dumps' byte limit (--dump-max-mib) bounds all
 * dumps together, those being written included: each message's bytes are
 * reserved before they are written, the oldest stored dumps go to make
 * room, and a dump that would take the limit past what the dumps being
 * written already hold is refused. Nothing is passed on: the client gets
 * CLOSE alone. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "encode.h"
#include "gadget.h"
#include "state_dir.h"

#define SUFFIX ".mrd"

typedef struct raw_dump {
  mr_state_file file;
  int open;
  char name[256];
} raw_dump;

static atomic_uint dump_counter;

static mr_state_bounds bounds(void) {
  return (mr_state_bounds){SUFFIX, 0, 0, mr_state_dir_limits()->dump_max_bytes};
}

static int write_message(raw_dump *s, mr_gadget_ctx *ctx, const mr_message *msg) {
  mr_encoded enc;
  int rc = mr_encode(msg, &enc);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "a %s that cannot be encoded", mr_message_kind_name(msg->kind));
  mr_state_bounds keep = bounds();
  mr_err e = {0};
  if ((rc = mr_state_file_reserve(&s->file, enc.total, &keep, &e)) < 0)
    return mr_gadget_fail(ctx, rc, "dump refused at %llu bytes: %s (--dump-max-mib bounds "
                                   "all dumps together, those being written included)",
                          (unsigned long long)s->file.bytes, e.msg);
  for (int i = 0; i < enc.npieces; i++)
    if ((rc = mr_state_file_write(&s->file, enc.piece[i].base, enc.piece[i].len, &e)) < 0)
      return mr_gadget_fail(ctx, rc, "%s", e.msg);
  return 0;
}

static int configure(void *state, mr_gadget_ctx *ctx) {
  raw_dump *s = state;
  int dirfd = mr_state_dir_fd("dumps");
  if (dirfd < 0)
    return mr_gadget_fail(ctx, MR_ENOTSUP, "no dump folder: reconserver runs without --state-dir");
  char when[32];
  time_t now = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
  const char *id = ctx->hdr->measurement_id;
  snprintf(s->name, sizeof s->name, "%s-%s-%ld-%u" SUFFIX, when,
           mr_state_name_ok(id) ? id : "stream", (long)getpid(),
           atomic_fetch_add(&dump_counter, 1));
  mr_err e = {0};
  int rc = mr_state_file_begin(dirfd, &s->file, &e);
  if (rc < 0)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  s->open = 1;
  mr_message *header = mr_message_new_text(MR_MSG_HEADER, ctx->hdr->xml, ctx->hdr->xml_len);
  rc = header != NULL ? write_message(s, ctx, header)
                      : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  mr_message_unref(header);
  return rc;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  (void)out;
  raw_dump *s = state;
  return s->open ? write_message(s, ctx, msg) : 0;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  (void)out;
  raw_dump *s = state;
  if (!s->open)
    return 0; /* a header-less run: nothing to store */
  mr_message *close_msg = mr_message_new(MR_MSG_CLOSE);
  int rc = close_msg != NULL ? write_message(s, ctx, close_msg)
                             : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  mr_message_unref(close_msg);
  if (rc < 0)
    return rc;
  s->open = 0;
  mr_err e = {0};
  mr_state_bounds keep = bounds();
  if ((rc = mr_state_file_commit(&s->file, s->name, &keep, &e)) < 0)
    return mr_gadget_fail(ctx, rc, "%s", e.msg);
  return 0;
}

static void destroy(void *state) {
  raw_dump *s = state;
  if (s->open)
    mr_state_file_abort(&s->file);
}

const mr_gadget_class mr_gadget_raw_dump = {
    .name = "raw_dump",
    .summary = "stores the stream (header, acquisitions, waveforms, images) as an ISMRMRD "
               "stream file in dumps/ of --state-dir; passes nothing on",
    .state_size = sizeof(raw_dump),
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_WAVEFORM) |
               MR_KIND_BIT(MR_MSG_IMAGE),
    .produces = 0,
    .configure = configure,
    .process = process,
    .flush = flush,
    .destroy = destroy,
};
