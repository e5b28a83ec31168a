#include "http.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "addr.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "thread_name.h"

/* Scrapers and probes are few and quick. A client that sends a request
 * slowly (slowloris: a byte every few seconds never trips an inactivity
 * timeout) must not hold the slots a liveness probe needs, or an
 * orchestrator would restart a healthy server and kill its scans. So:
 * - a request must be complete, and its answer written, within
 *   HTTP_DEADLINE_MS of the connection's start or of its previous request
 *   (a reaper thread shuts the socket down past that);
 * - at most HTTP_CONNECTIONS connections wait that way: a new one closes
 *   the oldest waiting one, so a probe is served at once however many slow
 *   clients there are; HTTP_SOCKETS bounds the descriptors all together. */
#define HTTP_CONNECTIONS 32
#define HTTP_SOCKETS 256
#define HTTP_DEADLINE_MS 2000
#define HTTP_TIMEOUT_S 10
#define HTTP_REAP_MS 100

/* A connection, from MHD's STARTED notice to its CLOSED one (MHD closes
 * the socket only after that notice, so fd is valid while listed). */
typedef struct http_conn {
  struct http_conn *next, *prev;
  int fd;
  uint64_t since_ms; /* its start, or the start of its current request */
  int shut;          /* shut down by us: waiting for MHD to close it */
} http_conn;

struct mr_http {
  struct MHD_Daemon *daemon;
  struct mr_pool *pool;
  char address[80];
  pthread_mutex_t mu;
  int stopping;
  pthread_t reaper;
  int reaper_started;
  http_conn *conns; /* newest first */
};

/* Under mu. MHD sees the EOF and closes the connection itself. */
static void shut(http_conn *c) {
  if (!c->shut)
    shutdown(c->fd, SHUT_RDWR);
  c->shut = 1;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  mr_http *http = cls;
  pthread_mutex_lock(&http->mu);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    http_conn *c = info != NULL ? calloc(1, sizeof *c) : NULL;
    if (c != NULL) {
      int waiting = 0;
      http_conn *oldest = NULL;
      for (http_conn *o = http->conns; o != NULL; o = o->next)
        if (!o->shut) {
          waiting++;
          oldest = o;
        }
      if (waiting >= HTTP_CONNECTIONS)
        shut(oldest);
      c->fd = info->connect_fd;
      c->since_ms = mr_now_ms();
      c->next = http->conns;
      if (c->next != NULL)
        c->next->prev = c;
      http->conns = c;
    }
    *socket_context = c;
  } else if (*socket_context != NULL) {
    http_conn *c = *socket_context;
    if (c->prev != NULL)
      c->prev->next = c->next;
    else
      http->conns = c->next;
    if (c->next != NULL)
      c->next->prev = c->prev;
    free(c);
    *socket_context = NULL;
  }
  pthread_mutex_unlock(&http->mu);
}

/* A request is complete: its answer gets a deadline of its own. */
static void request_complete(mr_http *http, struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  pthread_mutex_lock(&http->mu);
  if (info != NULL && info->socket_context != NULL)
    ((http_conn *)info->socket_context)->since_ms = mr_now_ms();
  pthread_mutex_unlock(&http->mu);
}

static void *reaper_main(void *arg) {
  mr_http *http = arg;
  mr_thread_name("mr-http-reaper");
  for (;;) {
    pthread_mutex_lock(&http->mu);
    int stop = http->stopping;
    uint64_t now = mr_now_ms();
    for (http_conn *c = http->conns; c != NULL && !stop; c = c->next)
      if (now - c->since_ms > HTTP_DEADLINE_MS)
        shut(c);
    pthread_mutex_unlock(&http->mu);
    if (stop)
      return NULL;
    nanosleep(&(struct timespec){0, HTTP_REAP_MS * 1000000L}, NULL);
  }
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char line[300];
  vsnprintf(line, sizeof line, fmt, ap);
  line[strcspn(line, "\n")] = '\0';
  mr_log(MR_LOG_WARN, "http: %s", line);
}

/* Queues a response with body (taken when must_free, else static). */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len, int must_free) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (resp == NULL) {
    if (must_free)
      free(body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  enum MHD_Result rc = MHD_queue_response(conn, status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *fmt,
                                  ...) {
  char *body = malloc(256);
  if (body == NULL)
    return MHD_NO;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(body, 256, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n < 256 ? (size_t)n : 255;
  return reply(conn, status, "text/plain; charset=utf-8", body, len, 1);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  (void)upload_data;
  mr_http *http = cls;
  /* The first call has the headers only; a body (ignored) follows in the
   * next ones; the answer goes out once it is all in. */
  if (*con_cls == NULL) {
    *con_cls = http;
    request_complete(http, conn);
    return MHD_YES;
  }
  if (*upload_data_size != 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
  if (strcmp(url, "/healthz") == 0)
    return reply_text(conn, MHD_HTTP_OK, "ok\n");
  if (strcmp(url, "/readyz") == 0) {
    char why[160];
    int ready = mr_metrics_ready(why, sizeof why);
    return reply_text(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "%s\n", why);
  }
  if (strcmp(url, "/metrics") == 0) {
    char *body;
    size_t len;
    if (mr_metrics_render(http->pool, &body, &len) < 0)
      return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len, 1);
  }
  return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: /healthz, /readyz or /metrics\n");
}

int mr_http_start(const char *spec, struct mr_pool *pool, mr_http **out, mr_err *err) {
  struct sockaddr_storage addr;
  int rc = mr_addr_parse("--http", spec, &addr, err);
  if (rc < 0)
    return rc;
  mr_http *http = calloc(1, sizeof *http);
  if (http == NULL)
    return mr_err_set(err, MR_ENOMEM, "--http: out of memory");
  http->pool = pool;
  pthread_mutex_init(&http->mu, NULL);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
  if (addr.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  http->daemon =
      MHD_start_daemon(flags, 0, NULL, NULL, on_request, http, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
                       NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_SOCKETS,
                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
                       MHD_OPTION_NOTIFY_CONNECTION, on_connection, http, MHD_OPTION_END);
  if (http->daemon == NULL) {
    mr_http_stop(http);
    return mr_err_set(err, MR_EIO, "--http %s: cannot listen there (see the log)", spec);
  }
  if (pthread_create(&http->reaper, NULL, reaper_main, http) != 0) {
    mr_http_stop(http);
    return mr_err_set(err, MR_ENOMEM, "--http %s: cannot start its thread", spec);
  }
  http->reaper_started = 1;
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(http->daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (addr.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&addr)->sin6_port = htons(info != NULL ? info->port : 0);
  else
    ((struct sockaddr_in *)&addr)->sin_port = htons(info != NULL ? info->port : 0);
  mr_addr_format(&addr, http->address, sizeof http->address);
  *out = http;
  return 0;
}

const char *mr_http_address(const mr_http *http) { return http->address; }

void mr_http_stop(mr_http *http) {
  if (http == NULL)
    return;
  if (http->reaper_started) {
    pthread_mutex_lock(&http->mu);
    http->stopping = 1; /* seen within HTTP_REAP_MS */
    pthread_mutex_unlock(&http->mu);
    pthread_join(http->reaper, NULL);
  }
  if (http->daemon != NULL)
    MHD_stop_daemon(http->daemon); /* its CLOSED notices free the list */
  pthread_mutex_destroy(&http->mu);
  free(http);
}
