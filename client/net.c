#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "clock.h"

int64_t mr_net_now_ms(void) { return (int64_t)mr_now_ms(); }

/* Waits for events on fd until the connection has been silent for
 * timeout_ms. Returns 1 when ready, 0 on timeout, -errno on a poll error.
 * The other thread's traffic moves net->last, which extends the wait. */
static int wait_fd(mr_net *net, short events) {
  for (;;) {
    int wait = -1;
    if (net->timeout_ms > 0) {
      int64_t left = atomic_load(&net->last) + net->timeout_ms - mr_net_now_ms();
      if (left <= 0)
        return 0;
      wait = (int)left;
    }
    struct pollfd p = {.fd = net->fd, .events = events};
    int rc = poll(&p, 1, wait);
    if (rc > 0)
      return 1;
    if (rc < 0 && errno != EINTR)
      return -errno;
  }
}

static int connect_one(const struct addrinfo *ai, int timeout_ms, int *fd_out) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0)
    return errno;
  int err = 0;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    err = errno;
    if (err == EINPROGRESS) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      int rc;
      do
        rc = poll(&p, 1, timeout_ms > 0 ? timeout_ms : -1);
      while (rc < 0 && errno == EINTR);
      socklen_t len = sizeof err;
      if (rc == 0)
        err = ETIMEDOUT;
      else if (rc < 0)
        err = errno;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    }
  }
  if (err != 0) {
    close(fd);
    return err;
  }
  *fd_out = fd;
  return 0;
}

int mr_net_connect(mr_net *net, const char *host, int port, int timeout_ms, mr_err *err) {
  net->fd = -1;
  net->timeout_ms = timeout_ms;
  snprintf(net->peer, sizeof net->peer, "%s:%d", host, port);
  if (port < 1 || port > 65535)
    return mr_err_set(err, MR_EINVAL, "cannot connect to %s: port must be 1..65535", net->peer);
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *list = NULL;
  int rc = getaddrinfo(host, service, &hints, &list);
  if (rc != 0)
    return mr_err_set(err, MR_ECONN, "cannot connect to %s: cannot resolve '%s': %s", net->peer,
                      host, gai_strerror(rc));
  int why = 0;
  for (struct addrinfo *ai = list; ai != NULL && net->fd < 0; ai = ai->ai_next)
    why = connect_one(ai, timeout_ms, &net->fd);
  freeaddrinfo(list);
  if (net->fd < 0) {
    if (why == ETIMEDOUT)
      return mr_err_set(err, MR_ECONN, "cannot connect to %s: no answer within %d ms", net->peer,
                        timeout_ms);
    return mr_err_set(err, MR_ECONN, "cannot connect to %s: %s", net->peer, strerror(why));
  }
  /* Small messages (CONFIG, HEADER, CLOSE) must not wait for Nagle. */
  int one = 1;
  setsockopt(net->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  atomic_store(&net->last, mr_net_now_ms());
  return 0;
}

static int io_error(mr_net *net, int code, const char *what, mr_err *err) {
  if (code == EPIPE || code == ECONNRESET || code == ENOTCONN)
    return mr_err_set(err, MR_ECONN, "the server at %s closed the connection while %s", net->peer,
                      what);
  return mr_err_set(err, MR_ECONN, "%s %s: %s", what, net->peer, strerror(code));
}

static int timed_out(mr_net *net, const char *what, mr_err *err) {
  return mr_err_set(err, MR_ETIMEDOUT, "timed out: the server at %s was silent for %d ms while %s",
                    net->peer, net->timeout_ms, what);
}

/* After a send or recv failed with errno: 0 to try again (interrupted, or
 * the socket became ready in time), or the error. */
static int await(mr_net *net, short events, mr_err *err) {
  int sending = events == POLLOUT;
  const char *doing = sending ? "sending to" : "receiving from";
  if (errno == EINTR)
    return 0;
  if (errno != EAGAIN && errno != EWOULDBLOCK)
    return io_error(net, errno, doing, err);
  int rc = wait_fd(net, events);
  if (rc == 0)
    return timed_out(net, sending ? "sending" : "waiting for its reply", err);
  return rc < 0 ? io_error(net, -rc, doing, err) : 0;
}

int mr_net_write(mr_net *net, const mr_piece *pieces, int n, mr_err *err) {
  struct iovec iov[MR_ENCODE_PIECES];
  int count = 0;
  for (int i = 0; i < n && count < MR_ENCODE_PIECES; i++) {
    if (pieces[i].len == 0)
      continue;
    iov[count].iov_base = (void *)pieces[i].base;
    iov[count].iov_len = pieces[i].len;
    count++;
  }
  struct iovec *v = iov;
  while (count > 0) {
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)count};
    ssize_t sent = sendmsg(net->fd, &mh, MSG_NOSIGNAL);
    if (sent < 0) {
      int rc = await(net, POLLOUT, err);
      if (rc < 0)
        return rc;
      continue;
    }
    atomic_store(&net->last, mr_net_now_ms());
    size_t left = (size_t)sent;
    while (count > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      v++;
      count--;
    }
    if (count > 0) {
      v->iov_base = (char *)v->iov_base + left;
      v->iov_len -= left;
    }
  }
  return 0;
}

int mr_net_read(mr_net *net, void *buf, size_t cap, size_t *got, mr_err *err) {
  for (;;) {
    ssize_t r = recv(net->fd, buf, cap, 0);
    if (r >= 0) {
      if (r > 0)
        atomic_store(&net->last, mr_net_now_ms());
      *got = (size_t)r;
      return 0;
    }
    int rc = await(net, POLLIN, err);
    if (rc < 0)
      return rc;
  }
}

void mr_net_shutdown(mr_net *net) {
  if (net->fd >= 0)
    shutdown(net->fd, SHUT_RDWR);
}

void mr_net_close(mr_net *net) {
  if (net->fd >= 0)
    close(net->fd);
  net->fd = -1;
}
