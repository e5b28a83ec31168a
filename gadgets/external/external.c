/* external: a step of the chain done by another process that speaks the
 * MRD (Gadgetron/ISMRMRD) streaming protocol, e.g. Python research code.
 *
 * `connect: "HOST:PORT"` connects to a running MRD server as a client
 * does; `execute: NAME` starts NAME from the server's --external-dir with
 * a connected socket as descriptor 3 (external_program.h). Either way the
 * step sends a CONFIG_FILE (`config`), the session's HEADER, the kinds
 * `send` names as they arrive, and CLOSE at the end of the stream, and
 * emits downstream what the peer sends back (the kinds `expect` names)
 * until its CLOSE. Kinds it does not send pass it untouched.
 *
 * It runs on a stage thread of its own (own_stage) and talks to its peer
 * through external_link.h: a writer and a reader thread with bounded queues
 * both ways. A peer that dies, stops answering (idle_timeout_ms), takes too
 * long (total_timeout_ms), sends garbage or more than max_replies messages
 * fails the session with a line naming this step and the peer; the server
 * and other sessions carry on, and a program is killed and reaped when its
 * session ends. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "external_link.h"
#include "external_program.h"
#include "gadget.h"

enum kinds { KINDS_ACQUISITIONS, KINDS_IMAGES, KINDS_BOTH };
static const char *const kinds_names[] = {"acquisitions", "images", "acquisitions and images"};

typedef struct external {
  char connect[256], execute[128], args[512], config[256];
  int send, expect, queue;
  int connect_timeout_ms, idle_timeout_ms, total_timeout_ms, max_replies;
  mr_link *link;
  mr_gadget_ctx *ctx; /* where the link's channel is registered to close on stop */
  mr_program program;
  int have_program;
  int failed;
  int replies, texts;
  char peer[300];
} external;

static const mr_param params[] = {
    MR_PARAM_TEXT(external, connect, "connect", "\"\"",
        "HOST:PORT of a running MRD server to hand the data to (this or execute)"),
    MR_PARAM_TEXT(external, execute, "execute", "\"\"",
        "NAME of a program in the server's --external-dir to start per session (this or connect)"),
    MR_PARAM_TEXT(external, args, "args", "\"\"", "the program's arguments, separated by spaces"),
    MR_PARAM_TEXT(external, config, "config", "\"default.xml\"",
        "the CONFIG_FILE name sent to the peer"),
    MR_PARAM_ENUM(external, send, "send", "\"acquisitions\"", "acquisitions|images|both",
        "what goes to the peer (the rest passes this step)"),
    MR_PARAM_ENUM(external, expect, "expect", "\"images\"", "acquisitions|images|both",
        "what the peer may send back (TEXT is logged: the first 100, 300 bytes each)"),
    MR_PARAM_INT(external, queue, "queue", "8", 2, 1024,
        "messages held each way between this step and its peer"),
    MR_PARAM_INT(external, connect_timeout_ms, "connect_timeout_ms", "5000", 1, 600000,
        "connecting to the peer"),
    MR_PARAM_INT(external, idle_timeout_ms, "idle_timeout_ms", "30000", 1, 3600000,
        "waiting on the peer with no byte moving either way"),
    MR_PARAM_INT(external, total_timeout_ms, "total_timeout_ms", "600000", 1, 86400000,
        "from the start of the session to the peer's CLOSE"),
    MR_PARAM_INT(external, max_replies, "max_replies", "1000000", 1, 1000000000,
        "messages the peer may send in one session"),
};

static uint32_t kind_mask(int kinds) {
  uint32_t acq = MR_KIND_BIT(MR_MSG_ACQUISITION), img = MR_KIND_BIT(MR_MSG_IMAGE);
  return kinds == KINDS_ACQUISITIONS ? acq : kinds == KINDS_IMAGES ? img : acq | img;
}

/* What the peer's messages are handed to while a step waits on it. */
typedef struct delivery {
  external *s;
  mr_gadget_ctx *ctx;
  mr_emit *out; /* NULL during configure */
  mr_err err;
} delivery;

static int deliver(void *arg, mr_message *msg) {
  delivery *d = arg;
  external *s = d->s;
  int rc = 0;
  if (++s->replies > s->max_replies) {
    rc = mr_err_set(&d->err, MR_ELIMIT, "%s: sent more than %d messages (max_replies)",
                    s->peer, s->max_replies);
  } else if (msg->kind == MR_MSG_TEXT) {
    /* For the log, bounded like a program's stderr. */
    if (s->texts++ < MR_PROGRAM_LOG_LINES) {
      char line[MR_PROGRAM_LINE_BYTES];
      snprintf(line, sizeof line, "%s", msg->u.text);
      mr_external_log(s->peer, line);
    }
    mr_message_unref(msg);
    return 0;
  } else if (!(kind_mask(s->expect) & MR_KIND_BIT(msg->kind))) {
    rc = mr_err_set(&d->err, MR_EPROTO, "%s: sent %s, but this step expects %s", s->peer,
                    mr_message_kind_name(msg->kind), kinds_names[s->expect]);
  } else if (d->out == NULL) {
    rc = mr_err_set(&d->err, MR_EPROTO, "%s: sent %s before it had our HEADER", s->peer,
                    mr_message_kind_name(msg->kind));
  }
  if (rc < 0) {
    mr_message_unref(msg);
    return rc;
  }
  return mr_emit_message(d->out, msg);
}

/* Stops the link (the chain no longer closes its channel). */
static void let_go(external *s) {
  if (s->link == NULL)
    return;
  mr_gadget_close_on_stop(s->ctx, NULL);
  mr_link_stop(s->link);
  s->link = NULL;
}

/* The peer has failed us: report it once, naming the step and the peer
 * (with a program's last stderr line, read after it is gone), and let go
 * of it. */
static int peer_failed(external *s, mr_gadget_ctx *ctx, int rc, const mr_err *why) {
  s->failed = 1;
  let_go(s);
  if (rc == MR_ECANCELED || (ctx->failed != NULL && atomic_load(ctx->failed)))
    return rc; /* the session is over, or failed elsewhere first: nothing to add */
  char tail[MR_PROGRAM_LINE_BYTES + 80] = "";
  if (s->have_program) {
    char last[MR_PROGRAM_LINE_BYTES], how[48] = "";
    int status = mr_program_end(&s->program, 200, last, sizeof last);
    s->have_program = 0;
    if (status >= 0 && WIFEXITED(status))
      snprintf(how, sizeof how, "; it exited with status %d", WEXITSTATUS(status));
    else if (status >= 0 && WIFSIGNALED(status))
      snprintf(how, sizeof how, "; it died of signal %d", WTERMSIG(status));
    snprintf(tail, sizeof tail, "%s%s%s", how, last[0] != '\0' ? "; its last stderr line: " : "",
             last);
  }
  return mr_gadget_fail(ctx, rc, "%s%s", mr_err_text(why, rc), tail);
}

/* Splits "HOST:PORT" or "[V6]:PORT". */
static int split_address(const char *text, char *host, size_t hsize, char *port, size_t psize) {
  const char *colon = strrchr(text, ':');
  if (colon == NULL || colon[1] == '\0')
    return MR_EINVAL;
  const char *h = text, *hend = colon;
  if (*h == '[') {
    if (colon == text || colon[-1] != ']')
      return MR_EINVAL;
    h++, hend--;
  }
  if ((size_t)(hend - h) >= hsize || strlen(colon + 1) >= psize || hend == h)
    return MR_EINVAL;
  memcpy(host, h, (size_t)(hend - h));
  host[hend - h] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

/* A socket connected to s->connect within connect_timeout_ms. */
static int connect_peer(external *s, int *fd_out, mr_err *err) {
  char host[256], port[32];
  if (split_address(s->connect, host, sizeof host, port, sizeof port) < 0)
    return mr_err_set(err, MR_ECONFIG, "connect '%s' is not HOST:PORT", s->connect);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g != 0)
    return mr_err_set(err, MR_ECONN, "%s: %s", s->connect, gai_strerror(g));
  int fd = -1, why = ETIMEDOUT;
  for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = errno;
      continue;
    }
    int ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS) {
      struct pollfd pf = {fd, POLLOUT, 0};
      socklen_t len = sizeof why;
      why = ETIMEDOUT;
      if (poll(&pf, 1, s->connect_timeout_ms) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &why, &len) == 0)
        ok = why == 0;
    } else if (!ok) {
      why = errno;
    }
    if (!ok) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return mr_err_set(err, MR_ECONN, "cannot connect to %s: %s", s->connect, strerror(why));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *fd_out = fd;
  return 0;
}

static void wake_stage(void *ctx) { mr_gadget_wake(ctx); }

static int configure(void *state, mr_gadget_ctx *ctx) {
  external *s = state;
  if ((s->connect[0] != '\0') == (s->execute[0] != '\0'))
    return mr_gadget_fail(ctx, MR_ECONFIG, "give exactly one of connect and execute");
  mr_err e = {0};
  int fd = -1, rc;
  if (s->execute[0] != '\0') {
    if ((rc = mr_program_start(s->execute, s->args, &s->program, &fd, &e)) < 0)
      return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    s->have_program = 1;
    snprintf(s->peer, sizeof s->peer, "%s", s->program.who);
  } else {
    if ((rc = connect_peer(s, &fd, &e)) < 0)
      return mr_gadget_fail(ctx, rc, "%s", mr_err_text(&e, rc));
    snprintf(s->peer, sizeof s->peer, "peer %s", s->connect);
  }
  /* What the peer sends is emitted as it arrives (wake), not only when
   * the next message for it comes. */
  mr_link_opts o = {.depth = (size_t)s->queue, .idle_ms = s->idle_timeout_ms,
                    .total_ms = s->total_timeout_ms, .peer = s->peer,
                    .notify = wake_stage, .notify_ctx = ctx};
  if ((rc = mr_link_start(fd, &o, &s->link, &e)) < 0)
    return peer_failed(s, ctx, rc, &e);
  /* The session's end (its client gone, the drain deadline, another step
   * failed) closes the link's channel: a wait on the peer ends at once. */
  s->ctx = ctx;
  mr_gadget_close_on_stop(ctx, mr_link_channel(s->link));
  delivery d = {.s = s, .ctx = ctx};
  mr_message *config = mr_message_new_config_file(s->config);
  mr_message *header = mr_message_new_text(MR_MSG_HEADER, ctx->hdr->xml, ctx->hdr->xml_len);
  if (config == NULL || header == NULL) {
    mr_message_unref(config);
    mr_message_unref(header);
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  }
  if ((rc = mr_link_send(s->link, config, deliver, &d, &d.err)) < 0)
    mr_message_unref(header);
  else
    rc = mr_link_send(s->link, header, deliver, &d, &d.err);
  return rc < 0 ? peer_failed(s, ctx, rc, &d.err) : 0;
}

static int process(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out) {
  external *s = state;
  if (!(kind_mask(s->send) & MR_KIND_BIT(msg->kind)))
    return mr_emit_message(out, mr_message_ref(msg));
  if (s->link == NULL)
    return s->failed ? MR_ECANCELED
                     : mr_gadget_fail(ctx, MR_ESTATE, "data before the stream's HEADER");
  delivery d = {.s = s, .ctx = ctx, .out = out};
  int rc = mr_link_send(s->link, mr_message_ref(msg), deliver, &d, &d.err);
  return rc < 0 ? peer_failed(s, ctx, rc, &d.err) : 0;
}

static int wake(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  external *s = state;
  if (s->link == NULL)
    return 0;
  delivery d = {.s = s, .ctx = ctx, .out = out};
  int rc = mr_link_poll(s->link, deliver, &d, &d.err);
  return rc < 0 ? peer_failed(s, ctx, rc, &d.err) : 0;
}

static int flush(void *state, mr_gadget_ctx *ctx, mr_emit *out) {
  external *s = state;
  if (s->link == NULL)
    return 0;
  delivery d = {.s = s, .ctx = ctx, .out = out};
  mr_message *close_msg = mr_message_new(MR_MSG_CLOSE);
  if (close_msg == NULL)
    return mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
  int rc = mr_link_send(s->link, close_msg, deliver, &d, &d.err);
  if (rc == 0)
    rc = mr_link_finish(s->link, deliver, &d, &d.err);
  if (rc < 0)
    return peer_failed(s, ctx, rc, &d.err);
  let_go(s);
  return 0;
}

static void destroy(void *state) {
  external *s = state;
  /* After a clean exchange (flush let go of the link) the program has sent
   * its CLOSE and should be on its way out; otherwise it is killed now. */
  int clean = !s->failed && s->link == NULL;
  let_go(s);
  if (s->have_program)
    mr_program_end(&s->program, clean ? 1000 : 0, NULL, 0);
}

const mr_gadget_class mr_gadget_external = {
    .name = "external",
    .summary = "hands acquisitions and/or images to another process that speaks the MRD "
               "protocol (a running server, or a program of --external-dir) and emits what "
               "it sends back",
    .params = params,
    .nparams = sizeof params / sizeof *params,
    .state_size = sizeof(external),
    .handles = MR_HANDLES_ANY,
    .accepts = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_IMAGE),
    .produces = MR_KIND_BIT(MR_MSG_ACQUISITION) | MR_KIND_BIT(MR_MSG_IMAGE),
    .own_stage = 1,
    .configure = configure,
    .process = process,
    .wake = wake,
    .flush = flush,
    .destroy = destroy,
};
