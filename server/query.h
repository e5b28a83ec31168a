/* Answers to QUERY keys (docs/protocol.md rule 5). */
#ifndef MR_SERVER_QUERY_H
#define MR_SERVER_QUERY_H

#include <stddef.h>

#include "session.h"

/* Our own key: the installed configs as JSON. */
#define MR_QUERY_CONFIGS "mrrecon::configs"

/* The answer to `key` (malloc'ed, length in *len); an unknown key gets a
 * sentence saying so and listing the known ones. NULL when out of memory. */
char *mr_query_answer(const mr_server_env *env, const char *key, size_t *len);

#endif
