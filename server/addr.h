/* "ADDR:PORT" as the command line gives it (--listen, --http). */
#ifndef MR_SERVER_ADDR_H
#define MR_SERVER_ADDR_H

#include <sys/socket.h>

#include "error.h"

/* "127.0.0.1:9002", "[::1]:9002", "0.0.0.0:9002" -> *ss (port 0: any
 * free one). flag names the option in the error line (MR_EINVAL). */
int mr_addr_parse(const char *flag, const char *spec, struct sockaddr_storage *ss, mr_err *err);

/* "127.0.0.1:9002" or "[::1]:9002" for a bound address. */
void mr_addr_format(const struct sockaddr_storage *ss, char *out, size_t size);

#endif
