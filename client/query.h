/* Questions to the server without a scan: QUERY messages answered by
 * RESPONSE (gadgetron::version, gadgetron::info, gadgetron::cuda::devices,
 * mrrecon::configs), and the readable form of the answers. */
#ifndef MR_CLIENT_QUERY_H
#define MR_CLIENT_QUERY_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* Connects to host:port, sends one QUERY per key (correlation id = its
 * index), then CLOSE, and reads until the server's CLOSE. answers[i]
 * receives the text of key i's RESPONSE (malloc'ed: the caller frees each,
 * also on failure; unanswered ones are NULL). Fails when the server
 * reports an error or leaves a key unanswered. */
int mr_query_ask(const char *host, int port, int timeout_ms, const char *const *keys, size_t n,
                 char **answers, mr_err *err);

/* Prints the mrrecon::configs answer (a JSON array of {name, aliases,
 * description, file}) as a readable list. */
int mr_query_print_configs(const char *json, FILE *out, mr_err *err);

#endif
