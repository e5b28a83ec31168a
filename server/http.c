#include "http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>

#include "addr.h"
#include "log.h"
#include "metrics.h"

/* Scrapers and probes are few; a stuck one is dropped after this. */
#define HTTP_CONNECTIONS 32
#define HTTP_TIMEOUT_S 10

struct mr_http {
  struct MHD_Daemon *daemon;
  struct mr_pool *pool;
  char address[80];
};

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
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
  if (addr.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  http->daemon =
      MHD_start_daemon(flags, 0, NULL, NULL, on_request, http, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
                       NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS,
                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_END);
  if (http->daemon == NULL) {
    free(http);
    return mr_err_set(err, MR_EIO, "--http %s: cannot listen there (see the log)", spec);
  }
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
  MHD_stop_daemon(http->daemon);
  free(http);
}
