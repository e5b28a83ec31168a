#include "wire_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "encode.h"
#include "test_support.h"

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    perror("free_port");
    abort();
  }
  close(fd);
  return ntohs(a.sin_port);
}

int mr_test_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void mr_test_server_start(mr_test_server *s, const char *const *extra) {
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = free_port();
    snprintf(s->log, sizeof s->log, "%s/reconserver-%d.log", mr_test_binary_dir(), s->port);
    char bin[512], listen[64], configs[512];
    snprintf(bin, sizeof bin, "%s/bin/reconserver", mr_test_binary_dir());
    snprintf(listen, sizeof listen, "127.0.0.1:%d", s->port);
    snprintf(configs, sizeof configs, "%s/configs", mr_test_source_dir());
    /* CPU only, unless MR_TEST_GPUS says otherwise (the device runs). */
    const char *gpus = getenv("MR_TEST_GPUS") != NULL ? getenv("MR_TEST_GPUS") : "none";
    const char *argv[32] = {bin, "--listen", listen, "--configs", configs, "--gpus", gpus};
    int argc = 7;
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 31; i++)
      argv[argc++] = extra[i];
    argv[argc] = NULL;
    s->pid = fork();
    if (s->pid == 0) {
      FILE *log = freopen(s->log, "w", stderr);
      (void)log;
      execv(bin, (char *const *)argv);
      perror("execv reconserver");
      _exit(127);
    }
    for (int i = 0; i < 200; i++) {
      int fd = mr_test_connect(s->port);
      if (fd >= 0) {
        /* A probe that says nothing; the server logs and drops it. */
        close(fd);
        return;
      }
      if (!mr_test_server_alive(s))
        break;
      usleep(10000);
    }
    mr_test_server_stop(s);
  }
  fprintf(stderr, "reconserver did not start\n");
  abort();
}

int mr_test_server_alive(const mr_test_server *s) {
  int status;
  return waitpid(s->pid, &status, WNOHANG) == 0;
}

long mr_test_server_rss_kib(const mr_test_server *s) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return kib;
}

int mr_test_server_stop(mr_test_server *s) {
  kill(s->pid, SIGTERM);
  return mr_test_server_wait(s);
}

int mr_test_server_wait(mr_test_server *s) {
  for (int i = 0; i < 1000; i++) {
    int status;
    pid_t r = waitpid(s->pid, &status, WNOHANG);
    if (r == s->pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    usleep(10000);
  }
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  return -1;
}

int mr_test_send_bytes(int fd, const void *bytes, size_t len) {
  const char *p = bytes;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int mr_test_logged_port(const char *path, const char *marker) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int port = 0;
  while (f != NULL && port == 0 && fgets(line, sizeof line, f) != NULL) {
    const char *at = strstr(line, marker);
    if (at != NULL)
      port = atoi(at + strlen(marker));
  }
  if (f != NULL)
    fclose(f);
  return port;
}

int mr_test_http(int port, const char *method, const char *path, char *body, size_t size) {
  int fd = mr_test_connect(port);
  if (fd < 0 || size == 0)
    return -1;
  char req[256];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n", method, path);
  size_t len = 0;
  ssize_t got = 0;
  if (mr_test_send_bytes(fd, req, (size_t)n) == 0)
    while (len < size - 1 && (got = recv(fd, body + len, size - 1 - len, 0)) > 0)
      len += (size_t)got;
  close(fd);
  body[len] = '\0';
  int status = -1;
  if (sscanf(body, "HTTP/1.%*d %d", &status) != 1)
    return -1;
  const char *start = strstr(body, "\r\n\r\n"); /* the body moves to the front */
  size_t skip = start != NULL ? (size_t)(start + 4 - body) : len;
  memmove(body, body + skip, len - skip + 1);
  return status;
}

int mr_test_send(int fd, const mr_message *msg) {
  uint8_t *b;
  size_t len;
  if (mr_encode_flat(msg, &b, &len) != 0)
    return -1;
  int rc = mr_test_send_bytes(fd, b, len);
  free(b);
  return rc;
}

static int on_reply(void *ctx, mr_message *m) {
  mr_test_reply *r = ctx;
  if (m->kind == MR_MSG_CLOSE)
    r->got_close = 1;
  if (r->n < (int)(sizeof r->msgs / sizeof *r->msgs))
    r->msgs[r->n++] = m;
  else
    mr_message_unref(m);
  return 0;
}

void mr_test_receive(int fd, mr_test_reply *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  mr_decoder_callbacks cb = {on_reply, NULL, r};
  mr_decoder *d = NULL;
  mr_decoder_create(NULL, &cb, &d);
  char buf[65536];
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0)
      break;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      r->eof = 1;
      break;
    }
    if (mr_decoder_feed(d, buf, (size_t)n) != 0)
      break;
  }
  mr_decoder_destroy(d);
}

typedef struct wanted {
  mr_message_kind kind;
  mr_message *msg;
} wanted;

static int on_wanted(void *ctx, mr_message *m) {
  wanted *w = ctx;
  if (w->msg == NULL && m->kind == w->kind)
    w->msg = m;
  else
    mr_message_unref(m);
  return 0;
}

mr_message *mr_test_receive_kind(int fd, mr_message_kind kind, int timeout_ms) {
  wanted w = {kind, NULL};
  mr_decoder_callbacks cb = {on_wanted, NULL, &w};
  mr_decoder *d = NULL;
  if (mr_decoder_create(NULL, &cb, &d) != 0)
    return NULL;
  while (w.msg == NULL) {
    struct pollfd p = {fd, POLLIN, 0};
    char byte;
    if (poll(&p, 1, timeout_ms) <= 0 || recv(fd, &byte, 1, 0) != 1 ||
        mr_decoder_feed(d, &byte, 1) != 0)
      break;
  }
  mr_decoder_destroy(d);
  return w.msg;
}

int mr_test_reply_count(const mr_test_reply *r, mr_message_kind kind) {
  int n = 0;
  for (int i = 0; i < r->n; i++)
    n += r->msgs[i]->kind == kind;
  return n;
}

const char *mr_test_reply_text(const mr_test_reply *r, const char *needle) {
  for (int i = 0; i < r->n; i++)
    if (r->msgs[i]->kind == MR_MSG_TEXT && strstr(r->msgs[i]->u.text, needle) != NULL)
      return r->msgs[i]->u.text;
  return NULL;
}

void mr_test_reply_free(mr_test_reply *r) {
  for (int i = 0; i < r->n; i++)
    mr_message_unref(r->msgs[i]);
  r->n = 0;
}
