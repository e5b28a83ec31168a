/* The HTTP listener for load balancers, orchestrators and Prometheus
 * (--http ADDR:PORT, off unless given):
 *
 *   GET /healthz  200 "ok" while the process serves (liveness)
 *   GET /readyz   200 "ready", or 503 and the reason while draining, at
 *                 --max-connections or with the memory budget nearly spent
 *   GET /metrics  Prometheus text format (metrics.h)
 *
 * libmicrohttpd answers on its own thread and reads only atomics and the
 * pool's figures, so it answers while the loop thread and every pipeline
 * are busy. */
#ifndef MR_SERVER_HTTP_H
#define MR_SERVER_HTTP_H

#include <stddef.h>

#include "error.h"

struct mr_pool;
typedef struct mr_http mr_http;

/* Listens on spec ("ADDR:PORT"; port 0: any free one) and serves until
 * mr_http_stop(). Borrows pool (may be NULL) until then. */
int mr_http_start(const char *spec, struct mr_pool *pool, mr_http **out, mr_err *err);
/* "127.0.0.1:PORT": where it listens (the bound port). */
const char *mr_http_address(const mr_http *http);
/* Closes the listener and frees it; NULL is ignored. */
void mr_http_stop(mr_http *http);

#endif
