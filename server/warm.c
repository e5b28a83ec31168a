#include "warm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "decode.h"
#include "encode.h"
#include "log.h"
#include "metrics.h"
#include "thread_name.h"

/* A recorded session larger than this is not replayed (it is read into
 * memory whole). */
#define WARM_MAX_BYTES ((off_t)2 << 30)
/* A server silent this long during a warm-up session: that session is
 * given up. */
#define WARM_SILENCE_MS 120000
#define WARM_MAX_COPIES 64
#define CHUNK ((size_t)1 << 20)

struct mr_warm {
  char dir[PATH_MAX];
  struct sockaddr_storage addr;
  int copies;
  uv_thread_t thread;
};

/* One copy of one recorded session, on a thread of its own. */
typedef struct replay {
  const uint8_t *bytes;
  size_t len;
  const struct sockaddr_storage *addr;
  uv_thread_t thread;
  int images, closed;
  char error[256];
} replay;

static int on_message(void *ctx, mr_message *m) {
  replay *r = ctx;
  if (m->kind == MR_MSG_IMAGE)
    r->images++;
  else if (m->kind == MR_MSG_TEXT && r->error[0] == '\0' && strstr(m->u.text, "ERROR") != NULL)
    snprintf(r->error, sizeof r->error, "%s", m->u.text);
  else if (m->kind == MR_MSG_CLOSE)
    r->closed = 1;
  mr_message_unref(m);
  return 0;
}

/* Sends the session while reading (and decoding) the answers, so that a
 * server pausing us for its outbox never deadlocks; ends at the server's
 * EOF. */
static void exchange(replay *r, int fd, mr_decoder *dec, uint8_t *buf) {
  size_t sent = 0;
  for (;;) {
    struct pollfd p = {fd, (short)(POLLIN | (sent < r->len ? POLLOUT : 0)), 0};
    int ready = poll(&p, 1, WARM_SILENCE_MS);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      snprintf(r->error, sizeof r->error, "the server was silent for %d ms", WARM_SILENCE_MS);
      return;
    }
    if (p.revents & POLLOUT) {
      size_t want = r->len - sent < CHUNK ? r->len - sent : CHUNK;
      ssize_t n = send(fd, r->bytes + sent, want, MSG_NOSIGNAL);
      if (n > 0 && (sent += (size_t)n) == r->len)
        shutdown(fd, SHUT_WR); /* everything is sent, our CLOSE with it */
      else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        sent = r->len; /* the server stopped reading: what it answered still comes */
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, buf, CHUNK, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return;
      if (n > 0 && mr_decoder_feed(dec, buf, (size_t)n) < 0) {
        snprintf(r->error, sizeof r->error, "undecodable answer: %s", mr_decoder_error(dec));
        return;
      }
    }
  }
}

static void replay_main(void *arg) {
  replay *r = arg;
  mr_thread_name("mr-warm-replay");
  socklen_t len = r->addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in);
  int fd = socket(r->addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)r->addr, len) != 0 ||
      fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
    snprintf(r->error, sizeof r->error, "cannot connect: %s", strerror(errno));
    if (fd >= 0)
      close(fd);
    return;
  }
  mr_decoder *dec = NULL;
  mr_decoder_callbacks cb = {.on_message = on_message, .ctx = r};
  uint8_t *buf = malloc(CHUNK);
  if (buf == NULL || mr_decoder_create(NULL, &cb, &dec) < 0)
    snprintf(r->error, sizeof r->error, "out of memory");
  else
    exchange(r, fd, dec, buf);
  if (r->error[0] == '\0' && !r->closed)
    snprintf(r->error, sizeof r->error, "the server closed the connection without CLOSE");
  mr_decoder_destroy(dec);
  free(buf);
  close(fd);
}

/* The whole file, or NULL (with the reason logged). */
static uint8_t *read_file(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  uint8_t *bytes = NULL;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      close(fd);
    return NULL; /* not a file: a directory, a broken link; skipped quietly */
  }
  if (st.st_size == 0 || st.st_size > WARM_MAX_BYTES)
    mr_log(MR_LOG_WARN, "warm-up: %s: %lld bytes, not replayed (1 byte to %lld)", path,
           (long long)st.st_size, (long long)WARM_MAX_BYTES);
  else if ((bytes = malloc((size_t)st.st_size)) == NULL)
    mr_log(MR_LOG_WARN, "warm-up: %s: out of memory for %lld bytes", path,
           (long long)st.st_size);
  size_t got = 0;
  while (bytes != NULL && got < (size_t)st.st_size) {
    ssize_t n = read(fd, bytes + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      mr_log(MR_LOG_WARN, "warm-up: %s: cannot read it: %s", path,
             n < 0 ? strerror(errno) : "shorter than it was");
      free(bytes);
      bytes = NULL;
    } else {
      got += (size_t)n;
    }
  }
  close(fd);
  *len = got;
  return bytes;
}

/* A dump (ismrmrd_dump's file: HEADER first, no config) gets a
 * CONFIG_FILE in front naming the config its file is named after (NAME.mrd,
 * NAME.anything). A whole session (CONFIG_FILE or CONFIG_SCRIPT first) is
 * left as it is. Returns the bytes to send (bytes itself, or a new buffer
 * replacing it), NULL when out of memory. */
static uint8_t *with_config(uint8_t *bytes, size_t *len, const char *name) {
  uint16_t id = (uint16_t)(bytes[0] | (len[0] > 1 ? bytes[1] << 8 : 0));
  if (id == MR_ID_CONFIG_FILE || id == MR_ID_CONFIG_SCRIPT)
    return bytes;
  char config[256];
  snprintf(config, sizeof config, "%.*s", (int)strcspn(name, "."), name);
  mr_message *m = mr_message_new_config_file(config);
  uint8_t *head = NULL, *whole = NULL;
  size_t n = 0;
  if (m != NULL && mr_encode_flat(m, &head, &n) == 0 && (whole = malloc(n + *len)) != NULL) {
    memcpy(whole, head, n);
    memcpy(whole + n, bytes, *len);
    *len += n;
  }
  mr_message_unref(m);
  free(head);
  free(bytes);
  return whole;
}

/* Replays one file, `copies` at once; 1 when every copy went right. */
static int warm_one(const mr_warm *w, const char *name) {
  char path[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", w->dir, name);
  size_t len = 0;
  uint8_t *bytes = read_file(path, &len);
  if (bytes != NULL && (bytes = with_config(bytes, &len, name)) == NULL)
    mr_log(MR_LOG_WARN, "warm-up: %s: out of memory", name);
  if (bytes == NULL)
    return 0;
  replay r[WARM_MAX_COPIES];
  int started = 0, images = 0;
  uint64_t t0 = mr_now_ns();
  for (int i = 0; i < w->copies; i++) {
    r[i] = (replay){.bytes = bytes, .len = len, .addr = &w->addr};
    if (uv_thread_create(&r[i].thread, replay_main, &r[i]) != 0)
      break;
    started++;
  }
  const char *error = started == 0 ? "cannot start a thread" : NULL;
  for (int i = 0; i < started; i++) {
    uv_thread_join(&r[i].thread);
    images += r[i].images;
    if (error == NULL && r[i].error[0] != '\0')
      error = r[i].error;
  }
  double ms = (double)(mr_now_ns() - t0) / 1e6;
  if (error != NULL)
    mr_log(MR_LOG_WARN, "warm-up: %s: %s", name, error);
  else
    mr_log(MR_LOG_INFO, "warm-up: %s: %d at once, %d images, %.0f ms", name, started, images,
           ms);
  free(bytes);
  return error == NULL;
}

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

static void warm_main(void *arg) {
  mr_warm *w = arg;
  mr_thread_name("mr-warm");
  struct dirent **names = NULL;
  uint64_t t0 = mr_now_ns();
  int n = scandir(w->dir, &names, not_hidden, alphasort), ok = 0;
  if (n < 0)
    mr_log(MR_LOG_WARN, "warm-up: cannot read %s: %s", w->dir, strerror(errno));
  for (int i = 0; i < n; i++) {
    ok += warm_one(w, names[i]->d_name);
    free(names[i]);
  }
  free(names);
  mr_log(MR_LOG_INFO, "warm-up done: %d of %d session(s) from %s in %.0f ms", ok, n > 0 ? n : 0,
         w->dir, (double)(mr_now_ns() - t0) / 1e6);
  mr_metrics_warmed();
}

mr_warm *mr_warm_start(const char *dir, const struct sockaddr_storage *addr, int copies) {
  mr_warm *w = calloc(1, sizeof *w);
  if (w == NULL)
    return NULL;
  snprintf(w->dir, sizeof w->dir, "%s", dir);
  w->addr = *addr;
  w->copies = copies < 1 ? 1 : copies > WARM_MAX_COPIES ? WARM_MAX_COPIES : copies;
  /* A wildcard listener is reached on loopback. */
  if (addr->ss_family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&w->addr;
    if (a->sin_addr.s_addr == htonl(INADDR_ANY))
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (addr->ss_family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&w->addr;
    if (memcmp(&a->sin6_addr, &in6addr_any, sizeof a->sin6_addr) == 0)
      a->sin6_addr = in6addr_loopback;
  }
  if (uv_thread_create(&w->thread, warm_main, w) != 0) {
    free(w);
    return NULL;
  }
  return w;
}

void mr_warm_join(mr_warm *w) {
  if (w == NULL)
    return;
  uv_thread_join(&w->thread);
  free(w);
}
